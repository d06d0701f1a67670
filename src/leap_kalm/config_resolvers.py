"""OmegaConf resolvers for the project's config (registered in ``settings.py``).

* ``${leap_next_iteration:<data_root>}`` — the LEAP iteration after the latest completed
  one: iteration ``i`` is complete once its evaluation report
  ``<data_root>/08_reporting/<env>/iter<i>/eval.json`` exists (0 when none is).
* ``${minus_one:<n>}`` — ``n - 1`` (the previous iteration).
"""

from __future__ import annotations

import re
from pathlib import Path

_ITER = re.compile(r"^iter(\d+)$")


def completed_iterations(data_root: str) -> list[int]:
    """Iterations whose evaluation report exists, for any environment, sorted."""
    found = set()
    for report in Path(data_root).glob("08_reporting/*/iter*/eval.json"):
        match = _ITER.match(report.parent.name)
        if match:
            found.add(int(match.group(1)))
    return sorted(found)


def leap_next_iteration(data_root: str) -> int:
    done = completed_iterations(data_root)
    return done[-1] + 1 if done else 0


def minus_one(value: int | str) -> int:
    return int(value) - 1


RESOLVERS = {"leap_next_iteration": leap_next_iteration, "minus_one": minus_one}

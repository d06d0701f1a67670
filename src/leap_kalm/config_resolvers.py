"""OmegaConf resolvers for the project's config (registered in ``settings.py``).

* ``${leap_next_iteration:<data_root>}`` — the LEAP iteration after the latest completed
  one: iteration ``i`` is complete once its evaluation report
  ``<data_root>/08_reporting/<env>/iter<i>/eval.json`` exists (0 when none is).
* ``${minus_one:<n>}`` — ``n - 1`` (the previous iteration).
"""

from __future__ import annotations

from leap_kalm.pipelines.leap_iteration import next_iteration


def leap_next_iteration(data_root: str) -> int:
    return next_iteration(data_root)


def minus_one(value: int | str) -> int:
    return int(value) - 1


RESOLVERS = {"leap_next_iteration": leap_next_iteration, "minus_one": minus_one}

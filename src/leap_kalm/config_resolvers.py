"""The project's config loader and OmegaConf resolvers (registered in ``settings.py``).

* ``${leap_iteration:<data_root>}`` — the LEAP iteration this run works on: the run's
  ``--params leap_iteration=<i>`` when given, else the one after the latest completed
  (``leap_kalm.pipelines.leap_iteration.next_iteration``). The parameter
  ``leap_iteration`` and the catalog's ``_it`` both call it: the rule lives here once.
  (Kedro resolves globals per environment before merging them and forbids
  ``runtime_params`` there, so the value cannot be computed once in ``globals.yml``.)
* ``${minus_one:<n>}`` — ``n - 1`` (the previous iteration).
"""

from __future__ import annotations

import functools
from typing import Any

from kedro.config import OmegaConfigLoader
from omegaconf import OmegaConf

from leap_kalm.pipelines.leap_iteration import next_iteration


def leap_iteration(override: Any, data_root: str) -> int:
    """``override`` (the run's ``leap_iteration`` runtime parameter) or the next iteration."""
    return int(override) if override not in (None, "") else next_iteration(data_root)


def minus_one(value: int | str) -> int:
    return int(value) - 1


RESOLVERS = {"minus_one": minus_one}


class ProjectConfigLoader(OmegaConfigLoader):
    """Kedro's ``OmegaConfigLoader`` plus the ``leap_iteration`` resolver, which sees this
    run's runtime parameters (``runtime_params`` itself is not allowed in globals)."""

    def __init__(
        self, conf_source: str, env: str | None = None, runtime_params: dict | None = None, **kw
    ) -> None:
        override = (runtime_params or {}).get("leap_iteration")
        OmegaConf.register_resolver(
            "leap_iteration", functools.partial(leap_iteration, override), replace=True
        )
        super().__init__(conf_source, env=env, runtime_params=runtime_params, **kw)

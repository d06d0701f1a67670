"""How stages repeat per world: one Kedro namespace per registered world.

The world lists come from the worlds registry (``leap_kalm.envs.registry``), so a new
world appears in every stage and composition by its registry line alone.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from kedro.pipeline import Pipeline, pipeline

from leap_kalm.envs.registry import world_names

LEAP_WORLDS: tuple[str, ...] = world_names("text")
KALM_WORLDS: tuple[str, ...] = world_names("kalm")

SHARED_PARAMETERS = {"params:model", "params:leap_iteration"}


def per_world(template: Pipeline, worlds: tuple[str, ...]) -> Pipeline:
    """Repeat a stage's nodes for every world, each in its namespace (its datasets, reports
    included, are ``<world>.<name>``); the parameters all worlds share keep their names."""
    parameters = SHARED_PARAMETERS & {i for i in template.inputs() if i.startswith("params:")}
    return sum(
        (pipeline(template, namespace=world, parameters=parameters) for world in worlds),
        Pipeline([]),
    )


def per_leap_world(template: Pipeline) -> Pipeline:
    """A LEAP stage's nodes, once per text world."""
    return per_world(template, LEAP_WORLDS)


def for_world(func: Callable[..., Any], world: str) -> Callable[..., Any]:
    """``func`` with its ``world`` argument bound (a node of one world's namespace); it keeps
    ``func``'s name, docstring and source for kedro-viz."""
    bound = functools.partial(func, world=world)
    return functools.update_wrapper(bound, func)

"""`offline_rl` pipeline: per KALM world, a d3rlpy policy on real data, and (where the
world imagines) one on real + imagined data, the comparison KALM reports."""

from __future__ import annotations

import functools

from kedro.pipeline import Pipeline, node, pipeline

from leap_kalm.pipelines.imagine.pipeline import imagination_levels
from leap_kalm.pipelines.namespaces import KALM_WORLDS
from leap_kalm.pipelines.offline_rl.nodes import train_policy


def _bound(world: str):
    return functools.update_wrapper(functools.partial(train_policy, world=world), train_policy)


def create_world_offline_rl(world: str) -> Pipeline:
    nodes = [
        node(
            _bound(world),
            {"kalm_offline": "kalm_offline", "offline_rl_params": "params:offline_rl"},
            "policy_real",
            name="train_real_policy_node",
            tags=["gpu"],
        )
    ]
    levels = imagination_levels(world)
    if levels:
        nodes.append(
            node(
                _bound(world),
                {
                    "kalm_offline": "kalm_offline",
                    "offline_rl_params": "params:offline_rl",
                    "kalm_imagined": "kalm_imagined",
                    **{level: f"imagined_{level}" for level in levels},
                },
                "policy_kalm",
                name="train_kalm_policy_node",
                tags=["gpu"],
            )
        )
    return pipeline(nodes, namespace=world)


def create_pipeline(**kwargs) -> Pipeline:
    return sum((create_world_offline_rl(w) for w in KALM_WORLDS), Pipeline([]))

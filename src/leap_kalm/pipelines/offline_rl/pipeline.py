"""`offline_rl` pipeline: per KALM world, a d3rlpy policy on real data, and (where the
world imagines) one on real + imagined data, the comparison KALM reports."""

from __future__ import annotations

import functools

from kedro.pipeline import Pipeline, node, pipeline

from leap_kalm.pipelines.imagine.pipeline import imagination_levels
from leap_kalm.pipelines.namespaces import KALM_WORLDS
from leap_kalm.pipelines.offline_rl.nodes import plot_offline_rl_curves, train_policy_logged


def _bound(world: str, function=train_policy_logged):
    return functools.update_wrapper(functools.partial(function, world=world), function)


def create_world_offline_rl(world: str) -> Pipeline:
    nodes = [
        node(
            _bound(world),
            {"kalm_offline": "kalm_offline", "offline_rl_params": "params:offline_rl"},
            ["policy_real", "policy_real_losses"],
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
                ["policy_kalm", "policy_kalm_losses"],
                name="train_kalm_policy_node",
                tags=["gpu"],
            )
        )
    policies = ["real", "kalm"] if levels else ["real"]
    nodes.append(
        node(
            _bound(world, plot_offline_rl_curves),
            {p: f"policy_{p}_losses" for p in policies},
            "offline_rl_learning_curves",
            name="plot_offline_rl_curves_node",
        )
    )
    return pipeline(nodes, namespace=world)


def create_pipeline(**kwargs) -> Pipeline:
    return sum((create_world_offline_rl(w) for w in KALM_WORLDS), Pipeline([]))

"""`offline_rl` pipeline: per KALM world, a d3rlpy policy on real data and, where the
world imagines, policies on real + imagined data, the comparison KALM reports: one per
imagination level on that level's imagined data (``policy_kalm_<level>``, KALM's and
ImagineBench's protocol) and one on every level's together (``policy_kalm``)."""

from __future__ import annotations

import functools

from kedro.pipeline import Pipeline, node, pipeline

from leap_kalm.pipelines.imagine.pipeline import imagination_levels
from leap_kalm.pipelines.namespaces import KALM_WORLDS
from leap_kalm.pipelines.offline_rl.nodes import plot_offline_rl_curves, train_policy_logged


def _bound(world: str, function=train_policy_logged, **fixed):
    return functools.update_wrapper(functools.partial(function, world=world, **fixed), function)


def kalm_policies(levels: tuple[str, ...]) -> list[str]:
    """Names of the real + imagined policies (catalog ``policy_<name>``) of a world with
    these imagination levels: the joint one, then one per level."""
    return ["kalm", *(f"kalm_{level}" for level in levels)] if levels else []


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
        nodes += [
            node(
                _bound(world, level=level),
                {
                    "kalm_offline": "kalm_offline",
                    "offline_rl_params": "params:offline_rl",
                    "kalm_imagined": "kalm_imagined",
                    level: f"imagined_{level}",
                },
                [f"policy_kalm_{level}", f"policy_kalm_{level}_losses"],
                name=f"train_kalm_{level}_policy_node",
                tags=["gpu"],
            )
            for level in levels
        ]
    policies = ["real", *kalm_policies(levels)]
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

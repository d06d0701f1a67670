"""`imagine` pipeline: per KALM world that supports it, one node per novel-goal level
(the grounded LLM's rollouts, labelled by the world) and a summary of their quality."""

from __future__ import annotations

import functools

from kedro.pipeline import Pipeline, node, pipeline

from leap_kalm.envs.registry import get_world
from leap_kalm.pipelines.imagine.nodes import imagine_level, summarize_imagination
from leap_kalm.pipelines.namespaces import KALM_WORLDS


def imagination_levels(world: str) -> tuple[str, ...]:
    """The world's novel-goal levels; empty for a world without imagination yet."""
    return tuple(getattr(get_world(world, "kalm"), "IMAGINATION_LEVELS", ()))


def create_world_imagination(world: str) -> Pipeline:
    levels = imagination_levels(world)
    if not levels:
        return Pipeline([])
    nodes = [
        node(
            functools.update_wrapper(
                functools.partial(imagine_level, world=world, level=level), imagine_level
            ),
            ["grounded_llm", "kalm_prompts", "params:imagine", "params:model"],
            f"imagined_{level}",
            name=f"imagine_{level}_node",
            tags=["gpu"],
        )
        for level in levels
    ]
    nodes.append(
        node(
            summarize_imagination,
            {level: f"imagined_{level}" for level in levels},
            ["imagination_summary", "imagined_transitions"],
            name="summarize_imagination_node",
        )
    )
    return pipeline(nodes, namespace=world, parameters={"params:model"})


def create_pipeline(**kwargs) -> Pipeline:
    return sum((create_world_imagination(w) for w in KALM_WORLDS), Pipeline([]))

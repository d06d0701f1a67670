"""`ground_llm` pipeline: KALM's grounding records, then the grounded LLM, per KALM world."""

from kedro.pipeline import Pipeline, node, pipeline

from leap_kalm.pipelines.ground_llm.nodes import (
    build_grounding_records,
    evaluate_grounding,
    train_grounded_llm,
)
from leap_kalm.pipelines.namespaces import KALM_WORLDS, for_world
from leap_kalm.plots import trainer_curve_node


def create_world_grounding(world: str) -> Pipeline:
    """One world's grounding: records from its offline data, then the grounded model."""
    return pipeline(
        [
            node(
                build_grounding_records,
                ["kalm_offline", "params:ground_llm"],
                ["grounding_records", "grounding_held_out"],
                name="build_grounding_records_node",
            ),
            node(
                for_world(train_grounded_llm, world),
                ["grounding_records", "kalm_offline", "params:ground_llm", "params:model"],
                "grounded_llm",
                name="train_grounded_llm_node",
                tags=["gpu"],
            ),
            node(
                evaluate_grounding,
                [
                    "grounded_llm",
                    "kalm_offline",
                    "grounding_held_out",
                    "params:ground_llm",
                    "params:model",
                ],
                "grounding_report",
                name="evaluate_grounding_node",
            ),
            node(
                trainer_curve_node(f"{world}: grounding loss"),
                "grounded_llm",
                "grounding_learning_curve",
                name="plot_grounding_curve_node",
            ),
        ],
        namespace=world,
        parameters={"params:model"},
    )


def create_pipeline(**kwargs) -> Pipeline:
    return sum((create_world_grounding(w) for w in KALM_WORLDS), Pipeline([]))

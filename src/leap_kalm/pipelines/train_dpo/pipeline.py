"""`train_dpo` pipeline: preference pairs from corrections, then DPO of the student."""

from kedro.pipeline import Pipeline, node

from leap_kalm.pipelines.namespaces import per_leap_world
from leap_kalm.pipelines.train_dpo.nodes import build_dpo_pairs, train_dpo_student
from leap_kalm.plots import trainer_curve_node


def create_pipeline(**kwargs) -> Pipeline:
    return per_leap_world(
        Pipeline(
            [
                node(
                    build_dpo_pairs,
                    ["rollouts", "corrections", "params:leap"],
                    "dpo_pairs",
                    name="build_dpo_pairs_node",
                ),
                node(
                    train_dpo_student,
                    [
                        "dpo_pairs",
                        "previous_student",
                        "params:train_dpo",
                        "params:leap",
                        "params:model",
                        "params:leap_iteration",
                    ],
                    "student_dpo",
                    name="train_dpo_student_node",
                    tags=["gpu"],
                ),
                node(
                    trainer_curve_node("DPO: training loss"),
                    "student_dpo",
                    "dpo_learning_curve",
                    name="plot_dpo_curve_node",
                ),
            ]
        )
    )

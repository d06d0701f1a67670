"""`train_sft` pipeline: DAgger-aggregated SFT records, then LoRA SFT of the student."""

from kedro.pipeline import Pipeline, node

from leap_kalm.pipelines.namespaces import per_leap_world
from leap_kalm.pipelines.train_sft.nodes import build_sft_records, train_sft_student
from leap_kalm.plots import trainer_curve_node


def create_pipeline(**kwargs) -> Pipeline:
    return per_leap_world(
        Pipeline(
            [
                node(
                    build_sft_records,
                    [
                        "annotated_logs",
                        "rollouts",
                        "corrections",
                        "previous_sft_pool",
                        "params:leap",
                        "params:leap_iteration",
                    ],
                    ["sft_records", "sft_pool"],
                    name="build_sft_records_node",
                ),
                node(
                    train_sft_student,
                    [
                        "sft_records",
                        "previous_student",
                        "params:train_sft",
                        "params:leap",
                        "params:model",
                        "params:leap_iteration",
                    ],
                    "student_sft",
                    name="train_sft_student_node",
                    tags=["gpu"],
                ),
                node(
                    trainer_curve_node("SFT: training loss"),
                    "student_sft",
                    "sft_learning_curve",
                    name="plot_sft_curve_node",
                ),
            ]
        )
    )

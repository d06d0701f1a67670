"""`evaluate` pipeline: held-out rollouts of the student, per-iteration and cumulative reports."""

from kedro.pipeline import Pipeline, node

from leap_kalm.pipelines.evaluate.nodes import (
    evaluate_student,
    report_leap_progress,
    select_student,
    summarize_evaluation,
)
from leap_kalm.pipelines.namespaces import per_leap_world


def create_leap_evaluation() -> Pipeline:
    return per_leap_world(
        Pipeline(
            [
                node(
                    select_student,
                    ["student_sft", "student_dpo", "params:leap"],
                    "student",
                    name="select_student_node",
                ),
                node(
                    evaluate_student,
                    ["games", "student", "params:leap", "params:model", "params:leap_iteration"],
                    "eval_rollouts",
                    name="evaluate_student_node",
                ),
                node(
                    summarize_evaluation,
                    ["eval_rollouts", "params:leap", "params:leap_iteration"],
                    "eval",
                    name="summarize_evaluation_node",
                ),
                node(
                    report_leap_progress,
                    ["leap_eval_history", "eval"],
                    ["leap_eval_summary", "leap_eval_history_updated", "leap_success_plot"],
                    name="report_leap_progress_node",
                ),
            ]
        )
    )


def create_pipeline(**kwargs) -> Pipeline:
    return create_leap_evaluation()

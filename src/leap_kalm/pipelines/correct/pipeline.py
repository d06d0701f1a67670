"""`correct` pipeline: roll out the previous student, correct its failed trajectories."""

from kedro.pipeline import Pipeline, node

from leap_kalm.pipelines.correct.nodes import (
    correct_failed_rollouts,
    roll_out_student,
    tabulate_corrections,
)
from leap_kalm.pipelines.namespaces import per_leap_world


def create_pipeline(**kwargs) -> Pipeline:
    return per_leap_world(
        Pipeline(
            [
                node(
                    roll_out_student,
                    [
                        "games",
                        "previous_student",
                        "params:leap",
                        "params:model",
                        "params:leap_iteration",
                    ],
                    "rollouts",
                    name="roll_out_student_node",
                ),
                node(
                    correct_failed_rollouts,
                    ["rollouts", "privileged_states", "games", "params:teacher", "params:leap"],
                    "corrections",
                    name="correct_failed_rollouts_node",
                ),
                node(
                    tabulate_corrections,
                    ["rollouts", "corrections", "params:leap_iteration"],
                    ["rollout_steps", "correction_steps"],
                    name="tabulate_corrections_node",
                ),
            ]
        )
    )

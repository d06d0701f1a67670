"""`evaluate` pipeline: held-out rollouts of the student, per-iteration and cumulative reports."""

import functools

from kedro.pipeline import Pipeline, node, pipeline

from leap_kalm.envs.registry import get_world
from leap_kalm.pipelines.evaluate.kalm_nodes import evaluate_kalm_policies, plot_kalm_evaluation
from leap_kalm.pipelines.evaluate.nodes import (
    compare_iterations,
    evaluate_student,
    report_leap_progress,
    select_student,
    summarize_evaluation,
)
from leap_kalm.pipelines.imagine.pipeline import imagination_levels
from leap_kalm.pipelines.namespaces import KALM_WORLDS, per_leap_world
from leap_kalm.pipelines.offline_rl.pipeline import kalm_policies


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
                    ["eval", "eval_steps"],
                    name="summarize_evaluation_node",
                ),
                node(
                    report_leap_progress,
                    ["leap_eval_history", "eval"],
                    ["leap_eval_summary", "leap_eval_history_updated", "leap_success_plot"],
                    name="report_leap_progress_node",
                ),
                node(
                    compare_iterations,
                    ["leap_game_outcomes", "eval"],
                    ["leap_paired_comparison", "leap_game_outcomes_updated"],
                    name="compare_iterations_node",
                ),
            ]
        )
    )


def create_kalm_evaluation(world: str) -> Pipeline:
    """A KALM world's policies (real data; real + imagined where it imagines) in its real env."""
    if not hasattr(get_world(world, "kalm"), "EVALUATION_LEVELS"):
        return Pipeline([])
    levels = imagination_levels(world)
    policies = {name: f"policy_{name}" for name in ["real", *kalm_policies(levels)]}
    own_levels = {f"kalm_{level}": ["real", level] for level in levels}
    evaluate = functools.update_wrapper(
        functools.partial(evaluate_kalm_policies, world=world, policy_levels=own_levels),
        evaluate_kalm_policies,
    )
    return pipeline(
        [
            node(
                evaluate,
                {"kalm_params": "params:kalm_evaluation", **policies},
                ["kalm_eval_summary", "kalm_eval_episodes"],
                name="evaluate_policies_node",
            ),
            node(
                functools.update_wrapper(
                    functools.partial(plot_kalm_evaluation, world=world), plot_kalm_evaluation
                ),
                "kalm_eval_summary",
                "kalm_eval_plot",
                name="plot_kalm_evaluation_node",
            ),
        ],
        namespace=world,
    )


def create_pipeline(**kwargs) -> Pipeline:
    return sum((create_kalm_evaluation(w) for w in KALM_WORLDS), create_leap_evaluation())

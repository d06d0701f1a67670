"""Namespacing shared by LEAP's stage pipelines: one copy of each stage per text environment."""

from __future__ import annotations

from kedro.pipeline import Pipeline, pipeline

LEAP_ENVS = ("alfworld",)
SHARED_PARAMETERS = {"params:model", "params:leap_iteration"}
SHARED_DATASETS = {
    "leap_eval_history",
    "leap_eval_history_updated",
    "leap_eval_summary",
    "leap_success_plot",
}


def per_leap_env(template: Pipeline) -> Pipeline:
    """Repeat a stage's nodes for every LEAP environment, in its namespace."""
    shared_in = SHARED_DATASETS & template.inputs()
    shared_out = SHARED_DATASETS & template.outputs()
    return sum(
        (
            pipeline(
                template,
                namespace=env,
                parameters=SHARED_PARAMETERS
                & {i for i in template.inputs() if i.startswith("params:")},
                inputs=shared_in or None,
                outputs=shared_out or None,
            )
            for env in LEAP_ENVS
        ),
        Pipeline([]),
    )

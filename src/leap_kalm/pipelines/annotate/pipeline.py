"""`annotate` pipeline: a causal, hint-only reason for every expert step."""

from kedro.pipeline import Pipeline, node

from leap_kalm.pipelines.annotate.nodes import annotate_expert_logs
from leap_kalm.pipelines.namespaces import per_leap_world


def create_pipeline(**kwargs) -> Pipeline:
    return per_leap_world(
        Pipeline(
            [
                node(
                    annotate_expert_logs,
                    ["expert_logs", "privileged_states", "params:teacher", "params:leap"],
                    "annotated_logs",
                    name="annotate_expert_logs_node",
                )
            ]
        )
    )

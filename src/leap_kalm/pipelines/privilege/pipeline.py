"""`privilege` pipeline: the privileged state a teacher sees, per game."""

from kedro.pipeline import Pipeline, node

from leap_kalm.pipelines.namespaces import per_leap_world
from leap_kalm.pipelines.privilege.nodes import compute_privileged_states


def create_pipeline(**kwargs) -> Pipeline:
    return per_leap_world(
        Pipeline(
            [
                node(
                    compute_privileged_states,
                    ["games", "params:leap"],
                    "privileged_states",
                    name="compute_privileged_states_node",
                )
            ]
        )
    )

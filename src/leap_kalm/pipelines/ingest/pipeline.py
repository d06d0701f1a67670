"""`ingest` pipeline: environment data in, expert logs (LEAP) and offline datasets (KALM) out."""

from kedro.pipeline import Pipeline, node, pipeline

from leap_kalm.pipelines.ingest.nodes import (
    collect_alfworld_expert_logs,
    generate_kalm_offline_data,
    prepare_alfworld_games,
    summarize_kalm_offline_data,
)

KALM_ENVS = ("clevr", "metaworld")


def create_kalm_ingest(env: str) -> Pipeline:
    """Scripted-policy offline data in KALM's format (npy and hdf5), validated and summarised."""
    return pipeline(
        [
            node(
                generate_kalm_offline_data,
                "params:ingest",
                ["kalm_offline", "kalm_offline_hdf5"],
                name="generate_offline_data_node",
            ),
            node(
                summarize_kalm_offline_data,
                ["kalm_offline", "params:ingest"],
                "kalm_offline_summary",
                name="summarize_offline_data_node",
            ),
        ],
        namespace=env,
    )


def create_pipeline(**kwargs) -> Pipeline:
    """ALFWorld games and expert logs (LEAP); CLEVR and Meta-World offline data (KALM)."""
    alfworld = pipeline(
        [
            node(prepare_alfworld_games, "params:ingest", "games", name="prepare_games_node"),
            node(
                collect_alfworld_expert_logs,
                ["games", "params:ingest"],
                "expert_logs",
                name="collect_expert_logs_node",
            ),
        ],
        namespace="alfworld",
    )
    return alfworld + sum((create_kalm_ingest(env) for env in KALM_ENVS), Pipeline([]))

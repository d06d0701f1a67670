"""`ingest` pipeline: each world's data in; expert logs (text worlds) and KALM offline data out."""

from kedro.pipeline import Pipeline, node, pipeline

from leap_kalm.pipelines.ingest.nodes import (
    collect_expert_logs,
    generate_kalm_offline_data,
    prepare_games,
    summarize_kalm_offline_data,
)
from leap_kalm.pipelines.namespaces import KALM_WORLDS, LEAP_WORLDS, for_world


def create_text_ingest(world: str) -> Pipeline:
    """A text world's games index and scripted-expert logs (resumable)."""
    return pipeline(
        [
            node(
                for_world(prepare_games, world), "params:ingest", "games", name="prepare_games_node"
            ),
            node(
                for_world(collect_expert_logs, world),
                ["games", "params:ingest"],
                "expert_logs",
                name="collect_expert_logs_node",
            ),
        ],
        namespace=world,
    )


def create_kalm_ingest(world: str) -> Pipeline:
    """Scripted-policy offline data in KALM's format (npy and hdf5), validated and summarised."""
    return pipeline(
        [
            node(
                for_world(generate_kalm_offline_data, world),
                ["params:ingest", "params:kalm_real_data"],
                ["kalm_offline", "kalm_offline_hdf5"],
                name="generate_offline_data_node",
            ),
            node(
                for_world(summarize_kalm_offline_data, world),
                "kalm_offline",
                "kalm_offline_summary",
                name="summarize_offline_data_node",
            ),
        ],
        namespace=world,
        parameters={"params:kalm_real_data"},
    )


def create_pipeline(**kwargs) -> Pipeline:
    """Every registered world's ingest: text worlds (LEAP), then KALM worlds."""
    return sum(
        [create_text_ingest(w) for w in LEAP_WORLDS] + [create_kalm_ingest(w) for w in KALM_WORLDS],
        Pipeline([]),
    )

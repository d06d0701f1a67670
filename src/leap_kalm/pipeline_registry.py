"""Project pipelines: ten stages and the ``leap_iter`` and ``kalm`` compositions."""

from __future__ import annotations

import importlib

from kedro.pipeline import Pipeline

from leap_kalm.envs.registry import world_names
from leap_kalm.pipelines.namespaces import KALM_WORLDS, LEAP_WORLDS

STAGES = (
    "ingest",
    "annotate",
    "privilege",
    "correct",
    "train_sft",
    "train_dpo",
    "ground_llm",
    "imagine",
    "offline_rl",
    "evaluate",
)

LEAP_STAGES = ("ingest", "annotate", "privilege", "correct", "train_sft", "train_dpo", "evaluate")
KALM_STAGES = ("ingest", "ground_llm", "imagine", "offline_rl", "evaluate")
DATA_PREP_STAGES = ("ingest", "annotate", "privilege")


def _compose(
    pipelines: dict[str, Pipeline], names: tuple[str, ...], envs: tuple[str, ...] | None = None
) -> Pipeline:
    """Sum of stage pipelines, keeping only the nodes of the given world namespaces."""
    combined = sum((pipelines[name] for name in names), Pipeline([]))
    if envs is None:
        return combined
    return Pipeline(
        [n for n in combined.nodes if n.namespace and n.namespace.split(".")[0] in envs]
    )


def register_pipelines() -> dict[str, Pipeline]:
    """Register the project's pipelines.

    ``__default__`` is data preparation only (ingest, annotate, privilege): training and
    rollouts run only when asked for by name (``leap_iter``, ``kalm`` or a stage).

    Returns:
        A mapping from pipeline names to ``Pipeline`` objects.
    """
    pipelines = {
        name: importlib.import_module(f"leap_kalm.pipelines.{name}.pipeline").create_pipeline()
        for name in STAGES
    }
    default_text = world_names("text", default_only=True)
    pipelines["leap_iter"] = _compose(pipelines, LEAP_STAGES, default_text)
    for world in LEAP_WORLDS:  # one LEAP iteration on one text world: leap_iter_webshop
        pipelines[f"leap_iter_{world}"] = _compose(pipelines, LEAP_STAGES, (world,))
    pipelines["kalm"] = _compose(pipelines, KALM_STAGES, KALM_WORLDS)
    pipelines["__default__"] = _compose(pipelines, DATA_PREP_STAGES, default_text + KALM_WORLDS)
    return pipelines

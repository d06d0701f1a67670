"""Project pipelines: ten stages and the ``leap_iter`` and ``kalm`` compositions."""

from __future__ import annotations

import importlib

from kedro.pipeline import Pipeline

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


def _compose(pipelines: dict[str, Pipeline], names: tuple[str, ...]) -> Pipeline:
    return sum((pipelines[name] for name in names), Pipeline([]))


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
    pipelines["leap_iter"] = _compose(pipelines, LEAP_STAGES)
    pipelines["kalm"] = _compose(pipelines, KALM_STAGES)
    pipelines["__default__"] = _compose(pipelines, DATA_PREP_STAGES)
    return pipelines

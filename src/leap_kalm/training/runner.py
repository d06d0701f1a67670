"""The trainers registry and the one way to run a trainer.

``TRAINERS`` maps a method name to its parameters dataclass and its train function
(``train(model, tokenizer, records, params, output_dir) -> ModelRef``). ``run_trainer``
owns what every method shares: the seed, a staging directory, loading the model, and
running in this process or under ``accelerate launch`` when ``num_processes > 1`` (the
launcher's workers look trainers up here too). A new method (d3rlpy algorithms, KALM's
grounding) is one module plus one line in ``TRAINERS``.
"""

from __future__ import annotations

import importlib
import logging
import tempfile
from dataclasses import asdict, dataclass
from typing import Any

from leap_kalm.schemas import ModelRef

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainerEntry:
    """Where a method's parameters class and train function live (``module:name``)."""

    params: str
    train: str

    def load(self) -> tuple[Any, Any]:
        """``(params class, train function)``, imported on demand."""
        return _attr(self.params), _attr(self.train)


def _attr(path: str) -> Any:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


TRAINERS: dict[str, TrainerEntry] = {
    "sft": TrainerEntry("leap_kalm.training.sft:SFTParams", "leap_kalm.training.sft:train_sft"),
    "dpo": TrainerEntry("leap_kalm.training.dpo:DPOParams", "leap_kalm.training.dpo:train_dpo"),
    "grounding": TrainerEntry(
        "leap_kalm.training.grounding:GroundingParams",
        "leap_kalm.training.grounding:train_grounding",
    ),
}


def get_trainer(method: str) -> tuple[Any, Any]:
    """``(params class, train function)`` of a registered method.

    Raises:
        ValueError: Naming the unknown method and the known ones.
    """
    if method not in TRAINERS:
        raise ValueError(f"no trainer called {method!r}; known trainers: {', '.join(TRAINERS)}")
    return TRAINERS[method].load()


def train_loaded(
    method: str,
    model: Any,
    tokenizer: Any,
    records: list[dict[str, Any]],
    params: dict[str, Any],
    output_dir: str,
) -> ModelRef:
    """Train an already loaded model with ``method`` (used in-process and by launch workers)."""
    params_class, train = get_trainer(method)
    return train(model, tokenizer, records, params_class.from_dict(params), output_dir)


def staging_dir(prefix: str) -> str:
    """A scratch directory for a trainer's output, moved into the catalog when the node returns."""
    return tempfile.mkdtemp(prefix=f"leap_kalm-{prefix}-")


def run_trainer(
    method: str,
    ref: ModelRef | dict[str, Any],
    records: list[dict[str, Any]],
    params: dict[str, Any],
    num_processes: int = 1,
    load_kwargs: dict[str, Any] | None = None,
    accelerate_config: str | None = None,
) -> ModelRef:
    """Train ``ref`` on ``records`` in this process, or under ``accelerate launch`` when
    ``num_processes > 1`` or an ``accelerate_config`` file (DeepSpeed, FSDP) is given; the
    result lies in a fresh staging directory."""
    params = asdict(get_trainer(method)[0].from_dict(params))  # validated before any work
    output_dir = staging_dir(method)
    load_kwargs = load_kwargs or {}
    if num_processes > 1 or accelerate_config:
        from leap_kalm.training.launch import launch_training

        return launch_training(
            method, ref, records, params, output_dir, num_processes, load_kwargs,
            config_file=accelerate_config,
        )  # fmt: skip
    from leap_kalm.llm.models import load_model

    model, tokenizer = load_model(ref, **load_kwargs)
    return train_loaded(method, model, tokenizer, records, params, output_dir)


def train_student(
    method: str,
    records: list[dict[str, Any]],
    start: ModelRef | dict[str, Any],
    settings: dict[str, Any],
    seed: int,
    load_kwargs: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> ModelRef:
    """Train a student with ``method`` from ``start`` (a saved model or ``model`` parameters).

    ``settings`` are the trainer's parameters plus ``num_processes`` and
    ``accelerate_config`` (an accelerate config file: DeepSpeed, FSDP); ``seed`` is used
    unless the settings name their own. The result records where it started, on how many
    records, and ``meta``; it is staged (the catalog moves it into place).
    """
    from leap_kalm.llm.student import model_id_of

    settings = dict(settings)
    num_processes = int(settings.pop("num_processes", 1))
    accelerate_config = settings.pop("accelerate_config", None)
    result = run_trainer(
        method, start, records, {"seed": seed, **settings}, num_processes, load_kwargs,
        accelerate_config,
    )  # fmt: skip
    return ModelRef(
        path=result.path,
        kind=result.kind,
        meta={
            **result.meta,
            **(meta or {}),
            "started_from": model_id_of(start),
            "n_records": len(records),
            "staged": True,
        },
    )

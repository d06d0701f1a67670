"""Preference training with trl's ``DPOTrainer`` (optionally LoRA via peft).

Pairs arrive shaped as conversational ``{prompt, chosen, rejected}``
(``leap_kalm.schemas.PreferencePair``): chosen is the teacher's correction, rejected the
student's original step.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from leap_kalm.schemas import ModelRef, PreferencePair
from leap_kalm.training.common import (
    TrainParams,
    checkpoint_job_dir,
    fit_and_save,
    trainer_arguments,
)

logger = logging.getLogger(__name__)


@dataclass
class DPOParams(TrainParams):
    """Settings of one DPO run (maps onto ``parameters_train_dpo.yml``); DPO's usual small
    learning rate and batch."""

    learning_rate: float = 1e-6
    per_device_train_batch_size: int = 2
    beta: float = 0.1


def train_dpo(
    model: Any, tokenizer: Any, pairs: list[PreferencePair], params: DPOParams, output_dir: str
) -> ModelRef:
    """Train ``model`` on preference pairs and save it (or its adapter) to ``output_dir``."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    if not pairs:
        raise ValueError("train_dpo: no preference pairs (did the teacher correct any step?)")
    rows = [{k: p[k] for k in ("prompt", "chosen", "rejected")} for p in pairs]
    checkpoints = checkpoint_job_dir(params, model, rows, "dpo")
    config = DPOConfig(
        **trainer_arguments(params, output_dir, model, checkpoints), beta=params.beta
    )
    data = Dataset.from_list(rows)
    # the base may itself be a merged earlier student that exists nowhere on disk:
    # save full weights so the result never depends on an unsaved base
    return fit_and_save(DPOTrainer, config, model, tokenizer, data, params, output_dir, merge=True)

"""Supervised fine-tuning with trl's ``SFTTrainer`` (optionally LoRA via peft).

Data arrives already shaped as conversational ``{prompt, completion}`` records
(``leap_kalm.schemas.SFTRecord``), so trl computes the loss on the completion only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from leap_kalm.schemas import ModelRef, SFTRecord
from leap_kalm.training.common import (
    LoraParams,
    TrainParams,
    fit_and_save,
    trainer_arguments,
)

__all__ = ["LoraParams", "SFTParams", "train_sft"]

logger = logging.getLogger(__name__)


@dataclass
class SFTParams(TrainParams):
    """Settings of one SFT run (maps 1:1 onto ``parameters_train_sft.yml``)."""

    warmup_steps: int = 0


def train_sft(
    model: Any,
    tokenizer: Any,
    records: list[SFTRecord],
    params: SFTParams,
    output_dir: str,
) -> ModelRef:
    """Fine-tune ``model`` on prompt/completion records and save it to ``output_dir``.

    Args:
        model: A causal LM (or a ``PeftModel`` to continue training an adapter).
        tokenizer: Its tokenizer, with a chat template.
        records: Conversational ``{prompt, completion}`` records.
        params: Training settings.
        output_dir: Where the trained model or adapter is saved.

    Returns:
        A ``ModelRef`` to the saved directory, with the training metrics in ``meta``.
    """
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    if not records:
        raise ValueError("train_sft: no records to train on")
    config = SFTConfig(
        **trainer_arguments(params, output_dir, model), warmup_steps=params.warmup_steps
    )
    data = Dataset.from_list(
        [{"prompt": r["prompt"], "completion": r["completion"]} for r in records]
    )
    return fit_and_save(SFTTrainer, config, model, tokenizer, data, params, output_dir, merge=False)

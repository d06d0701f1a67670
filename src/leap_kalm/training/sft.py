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
    checkpoint_job_dir,
    fit_and_save,
    trainer_arguments,
)

__all__ = ["LoraParams", "SFTParams", "train_sft"]

logger = logging.getLogger(__name__)


@dataclass
class SFTParams(TrainParams):
    """Settings of one SFT run (maps 1:1 onto ``parameters_train_sft.yml``)."""

    warmup_steps: int = 0


def _ids(tokenizer: Any, messages: list[dict[str, str]], generation_prompt: bool) -> list[int]:
    text = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=generation_prompt
    )
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def tokenize_conversation(
    tokenizer: Any, messages: list[dict[str, str]], loss_turns: list[int]
) -> dict[str, list[int]]:
    """``input_ids`` of a whole chat and ``assistant_masks`` that are 1 on the tokens of the
    assistant turns in ``loss_turns`` (their text and end-of-turn token), 0 elsewhere.

    The chat template renders turn by turn, so each turn's tokens start where the
    rendering of the turns before it (plus the assistant header) ends; this is checked.

    Raises:
        ValueError: If a listed turn is not an assistant turn, or the template is not
            append-only (a turn's rendering changes the tokens before it).
    """
    ids = _ids(tokenizer, messages, False)
    mask = [0] * len(ids)
    for turn in loss_turns:
        if messages[turn]["role"] != "assistant":
            raise ValueError(f"loss turn {turn} is a {messages[turn]['role']} turn, not assistant")
        start = len(_ids(tokenizer, messages[:turn], True))
        upto = _ids(tokenizer, messages[: turn + 1], False)
        if upto != ids[: len(upto)]:
            raise ValueError(f"the chat template is not append-only at turn {turn}")
        mask[start : len(upto)] = [1] * (len(upto) - start)
    return {"input_ids": ids, "assistant_masks": mask}


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
        records: Conversational ``{prompt, completion}`` records (loss on the completion),
            or whole-episode chats ``{messages, loss_turns}`` (loss on the listed
            assistant turns; see :func:`tokenize_conversation`).
        params: Training settings.
        output_dir: Where the trained model or adapter is saved.

    Returns:
        A ``ModelRef`` to the saved directory, with the training metrics in ``meta``.
    """
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    if not records:
        raise ValueError("train_sft: no records to train on")
    if "messages" in records[0]:
        rows = [tokenize_conversation(tokenizer, r["messages"], r["loss_turns"]) for r in records]
    else:
        rows = [{"prompt": r["prompt"], "completion": r["completion"]} for r in records]
    checkpoints = checkpoint_job_dir(params, model, rows, "sft")
    config = SFTConfig(
        **trainer_arguments(params, output_dir, model, checkpoints),
        warmup_steps=params.warmup_steps,
    )
    data = Dataset.from_list(rows)
    return fit_and_save(SFTTrainer, config, model, tokenizer, data, params, output_dir, merge=False)

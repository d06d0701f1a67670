"""Supervised fine-tuning with trl's ``SFTTrainer`` (optionally LoRA via peft).

Data arrives already shaped as conversational ``{prompt, completion}`` records
(``leap_kalm.schemas.SFTRecord``), so trl computes the loss on the completion only, or as
whole-episode chats ``{messages, loss_turns}``, optionally with ``branches`` (a corrected
answer in place of one assistant turn, seeing only the chat before it; trained in the same
row under a 4-D attention mask, :func:`tokenize_branched` and :class:`BranchCollator`).
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


def tokenize_branched(
    tokenizer: Any,
    messages: list[dict[str, str]],
    loss_turns: list[int],
    branches: list[dict[str, Any]] | None = None,
    max_length: int | None = None,
) -> dict[str, list[int]]:
    """One row for a chat and its ``branches`` (``{turn, message}``): the chat's tokens,
    then per branch a copy of the last token before its turn's answer (same position, same
    view: it predicts the branch's first token) and the branch answer's tokens, at the
    positions the answer would have in the chat.

    Returns ``input_ids``, ``labels`` (-100 outside the trained answers), ``position_ids``,
    and per branch where it starts in the row (``branch_starts``) and how many of the
    chat's tokens it sees (``branch_views``). A row longer than ``max_length`` is cut like
    trl cuts one (keep the start): the chat first, then whole branches, last first.

    Raises:
        ValueError: If a branch replaces a turn that is not an assistant turn, or the
            chat template is not append-only.
    """
    row = tokenize_conversation(tokenizer, messages, loss_turns)
    ids = row["input_ids"]
    labels = [i if m else -100 for i, m in zip(ids, row["assistant_masks"], strict=True)]
    if max_length is not None:
        ids, labels = ids[:max_length], labels[:max_length]
    positions = list(range(len(ids)))
    starts: list[int] = []
    views: list[int] = []
    for branch in branches or []:
        turn, message = branch["turn"], branch["message"]
        if messages[turn]["role"] != "assistant" or message["role"] != "assistant":
            raise ValueError(f"branch at turn {turn} does not replace an assistant turn")
        prefix = _ids(tokenizer, messages[:turn], True)
        answer = _ids(tokenizer, [*messages[:turn], message], False)
        if answer[: len(prefix)] != prefix or row["input_ids"][: len(prefix)] != prefix:
            raise ValueError(f"the chat template is not append-only at branch turn {turn}")
        answer = answer[len(prefix) :]
        if max_length is not None and len(ids) + 1 + len(answer) > max_length:
            break
        starts.append(len(ids))
        views.append(len(prefix) - 1)
        ids = [*ids, prefix[-1], *answer]
        labels = [*labels, -100, *answer]
        positions += range(len(prefix) - 1, len(prefix) + len(answer))
    return {
        "input_ids": ids,
        "labels": labels,
        "position_ids": positions,
        "branch_starts": starts,
        "branch_views": views,
    }


@dataclass
class BranchCollator:
    """Pads rows of :func:`tokenize_branched` into a batch with a 4-D attention mask.

    A chat token sees the chat tokens before it; a branch token sees the first
    ``branch_views`` chat tokens and its own branch up to itself, nothing of other
    branches; padding sees only itself. A batch without branches gets the usual 2-D
    mask (the model's causal fast path).
    """

    pad_token_id: int

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        width = max(len(r["input_ids"]) for r in rows)
        shape = (len(rows), width)
        ids = torch.full(shape, self.pad_token_id, dtype=torch.long)
        labels = torch.full(shape, -100, dtype=torch.long)
        positions = torch.zeros(shape, dtype=torch.long)
        lengths = [len(r["input_ids"]) for r in rows]
        for b, r in enumerate(rows):
            ids[b, : lengths[b]] = torch.tensor(r["input_ids"])
            labels[b, : lengths[b]] = torch.tensor(r["labels"])
            positions[b, : lengths[b]] = torch.tensor(r["position_ids"])
        batch = {"input_ids": ids, "labels": labels, "position_ids": positions}
        if not any(r["branch_starts"] for r in rows):
            batch["attention_mask"] = (
                torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]
            ).long()
            return batch
        mask = torch.eye(width, dtype=torch.bool).repeat(len(rows), 1, 1)
        for b, r in enumerate(rows):
            n = lengths[b]
            mask[b, :n, :n] = torch.ones(n, n, dtype=torch.bool).tril()
            ends = [*r["branch_starts"][1:], n][: len(r["branch_starts"])]
            for start, end, view in zip(r["branch_starts"], ends, r["branch_views"], strict=True):
                mask[b, start:end, :start] = False
                mask[b, start:end, :view] = True
        batch["attention_mask"] = mask[:, None]
        return batch


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
    branched = any(r.get("branches") for r in records)
    collator = None
    extra: dict[str, Any] = {}
    if branched:
        attention = getattr(getattr(model, "config", None), "_attn_implementation", None) or ""
        if attention.startswith("flash"):
            raise ValueError(
                f"SFT records with branches (leap.correction_packing: branches) need a 4-D "
                f"attention mask, which {attention} ignores: load the student with "
                "attn_implementation sdpa or eager, or use correction_packing: segments"
            )
        rows = [
            tokenize_branched(
                tokenizer, r["messages"], r["loss_turns"], r.get("branches"), params.max_length
            )
            for r in records
        ]
        collator = BranchCollator(tokenizer.pad_token_id)
        # the rows are final (labels, positions, branch layout): trl must neither cut
        # them nor drop the layout columns its signature does not name
        extra = {"dataset_kwargs": {"skip_prepare_dataset": True}, "remove_unused_columns": False}
    elif "messages" in records[0]:
        rows = [tokenize_conversation(tokenizer, r["messages"], r["loss_turns"]) for r in records]
    else:
        rows = [{"prompt": r["prompt"], "completion": r["completion"]} for r in records]
    checkpoints = checkpoint_job_dir(params, model, rows, "sft")
    config = SFTConfig(
        **trainer_arguments(params, output_dir, model, checkpoints),
        warmup_steps=params.warmup_steps,
        **extra,
    )
    data = Dataset.from_list(rows)
    return fit_and_save(
        SFTTrainer, config, model, tokenizer, data, params, output_dir, merge=False,
        data_collator=collator,
    )  # fmt: skip

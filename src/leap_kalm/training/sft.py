"""Supervised fine-tuning with trl's ``SFTTrainer`` (optionally LoRA via peft).

Data arrives already shaped as conversational ``{prompt, completion}`` records
(``leap_kalm.schemas.SFTRecord``), so trl computes the loss on the completion only.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from leap_kalm.schemas import ModelRef, SFTRecord

logger = logging.getLogger(__name__)


@dataclass
class LoraParams:
    """peft LoRA settings; ``r: 0`` means full fine-tuning."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: list[str] | str = "all-linear"


@dataclass
class SFTParams:
    """Settings of one SFT run (maps 1:1 onto ``parameters_train_sft.yml``)."""

    max_steps: int = -1
    num_train_epochs: float = 1.0
    learning_rate: float = 2e-4
    per_device_train_batch_size: int = 4
    gradient_accumulation_steps: int = 1
    max_length: int | None = 1024
    gradient_checkpointing: bool = False
    warmup_steps: int = 0
    logging_steps: int = 1
    seed: int = 0
    lora: LoraParams = field(default_factory=LoraParams)

    @classmethod
    def from_dict(cls, params: dict[str, Any]) -> SFTParams:
        """Build from a parameters mapping; unknown keys raise ``ValueError``."""
        params = dict(params)
        known = {f.name for f in fields(cls)}
        unknown = set(params) - known
        if unknown:
            raise ValueError(
                f"SFT parameters: unknown keys {sorted(unknown)}; expected some of {sorted(known)}"
            )
        lora = LoraParams(**params.pop("lora", {}) or {})
        return cls(lora=lora, **params)


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
    import torch
    from datasets import Dataset
    from peft import LoraConfig, PeftModel
    from trl import SFTConfig, SFTTrainer

    if not records:
        raise ValueError("train_sft: no records to train on")
    on_gpu = torch.cuda.is_available() and next(model.parameters()).is_cuda
    config = SFTConfig(
        output_dir=output_dir,
        max_steps=params.max_steps,
        num_train_epochs=params.num_train_epochs,
        learning_rate=params.learning_rate,
        per_device_train_batch_size=params.per_device_train_batch_size,
        gradient_accumulation_steps=params.gradient_accumulation_steps,
        max_length=params.max_length,
        gradient_checkpointing=params.gradient_checkpointing,
        warmup_steps=params.warmup_steps,
        logging_steps=params.logging_steps,
        seed=params.seed,
        use_cpu=not on_gpu,
        bf16=on_gpu and torch.cuda.is_bf16_supported(),
        save_strategy="no",
        report_to=[],
        ddp_find_unused_parameters=False,
    )
    peft_config = None
    if params.lora.r > 0 and not isinstance(model, PeftModel):
        peft_config = LoraConfig(
            r=params.lora.r,
            lora_alpha=params.lora.alpha,
            lora_dropout=params.lora.dropout,
            target_modules=params.lora.target_modules,
            task_type="CAUSAL_LM",
        )
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(
            [{"prompt": r["prompt"], "completion": r["completion"]} for r in records]
        ),
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    result = trainer.train()
    trainer.save_model(output_dir)
    tokenizer.save_pretrained(output_dir)
    metrics = {f"train/{k}": v for k, v in result.metrics.items()}
    kind = "adapter" if os.path.exists(os.path.join(output_dir, "adapter_config.json")) else "model"
    logger.info("SFT finished: %s", metrics)
    return ModelRef(
        path=os.path.abspath(output_dir), kind=kind, meta={"params": asdict(params), **metrics}
    )

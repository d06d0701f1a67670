"""Preference training with trl's ``DPOTrainer`` (optionally LoRA via peft).

Pairs arrive shaped as conversational ``{prompt, chosen, rejected}``
(``leap_kalm.schemas.PreferencePair``): chosen is the teacher's correction, rejected the
student's original step.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from leap_kalm.schemas import ModelRef, PreferencePair
from leap_kalm.training.sft import LoraParams

logger = logging.getLogger(__name__)


@dataclass
class DPOParams:
    """Settings of one DPO run (maps onto ``parameters_train_dpo.yml``)."""

    max_steps: int = -1
    num_train_epochs: float = 1.0
    learning_rate: float = 1e-6
    beta: float = 0.1
    per_device_train_batch_size: int = 2
    gradient_accumulation_steps: int = 1
    max_length: int | None = 1024
    gradient_checkpointing: bool = False
    logging_steps: int = 1
    seed: int = 0
    lora: LoraParams = field(default_factory=LoraParams)

    @classmethod
    def from_dict(cls, params: dict[str, Any]) -> DPOParams:
        params = dict(params)
        known = {f.name for f in fields(cls)}
        unknown = set(params) - known
        if unknown:
            raise ValueError(
                f"DPO parameters: unknown keys {sorted(unknown)}; expected some of {sorted(known)}"
            )
        lora = LoraParams(**params.pop("lora", {}) or {})
        return cls(lora=lora, **params)


def train_dpo(
    model: Any, tokenizer: Any, pairs: list[PreferencePair], params: DPOParams, output_dir: str
) -> ModelRef:
    """Train ``model`` on preference pairs and save it (or its adapter) to ``output_dir``."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig, PeftModel
    from trl import DPOConfig, DPOTrainer

    if not pairs:
        raise ValueError("train_dpo: no preference pairs (did the teacher correct any step?)")
    on_gpu = torch.cuda.is_available() and next(model.parameters()).is_cuda
    config = DPOConfig(
        output_dir=output_dir,
        max_steps=params.max_steps,
        num_train_epochs=params.num_train_epochs,
        learning_rate=params.learning_rate,
        beta=params.beta,
        per_device_train_batch_size=params.per_device_train_batch_size,
        gradient_accumulation_steps=params.gradient_accumulation_steps,
        max_length=params.max_length,
        activation_checkpointing=params.gradient_checkpointing,
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
    data = Dataset.from_list([{k: p[k] for k in ("prompt", "chosen", "rejected")} for p in pairs])
    trainer = DPOTrainer(
        model=model,
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    result = trainer.train()
    trained = trainer.model
    if isinstance(trained, PeftModel):
        # the base may itself be a merged earlier student that exists nowhere on disk:
        # save full weights so the result never depends on an unsaved base
        trained = trained.merge_and_unload()
    trained.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    metrics = {f"train/{k}": v for k, v in result.metrics.items()}
    kind = "adapter" if os.path.exists(os.path.join(output_dir, "adapter_config.json")) else "model"
    logger.info("DPO finished: %s", metrics)
    return ModelRef(
        path=os.path.abspath(output_dir), kind=kind, meta={"params": asdict(params), **metrics}
    )

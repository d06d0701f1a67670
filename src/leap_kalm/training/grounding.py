"""KALM's grounding: train a ``GroundedLM`` on grounding records with transformers' ``Trainer``.

The model's ``forward`` returns the combined loss (tokens + weighted states and actions),
so the stock ``Trainer`` does the loop, and mixed precision, gradient accumulation and
``accelerate launch`` come with it. LoRA (``lora.r > 0``) adapts the LM; the grounding
layers are always trained in full. The result is one model directory
(``llm.grounded.save_grounded``), a LoRA adapter folded in.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from leap_kalm.llm.grounded import GroundingSpec
from leap_kalm.schemas import ModelRef
from leap_kalm.tracking import trainer_callbacks
from leap_kalm.training.common import (
    TrainParams,
    checkpoint_job_dir,
    checkpoint_saving,
    drop_checkpoints,
    is_sharded,
    last_checkpoint,
    lora_config,
    use_bf16,
)
from leap_kalm.training.memory import freed_memory_policy, memory_release_callbacks

logger = logging.getLogger(__name__)


@dataclass
class GroundingParams(TrainParams):
    """One grounding run (``<world>.ground_llm.train``): the shared trainer settings, the
    grounding layers' shape (``spec``, filled from the data by the node) and warm-up."""

    spec: dict[str, Any] = field(default_factory=dict)
    warmup_steps: int = 0

    def grounding_spec(self) -> GroundingSpec:
        if not self.spec:
            raise ValueError(
                "grounding needs spec (obs_dim, action_kind, action_dim); none was given"
            )
        return GroundingSpec.from_dict(self.spec)


def _checkpointing_trainer(trainer_class: Any) -> Any:
    """``trainer_class`` whose checkpoints hold the grounded model's weights once each.

    The grounded model is a plain ``nn.Module`` around the LM, so ``Trainer`` checkpoints
    its state dict with safetensors' ``save_file``, which refuses tensors that share memory
    (the LM's tied input embedding and output head). safetensors' ``save_model`` writes each
    shared tensor once; ``Trainer`` loads the file back with ``strict=False`` on resume,
    and the tie restores the other name.
    """

    class GroundingTrainer(trainer_class):
        def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
            import safetensors.torch

            if not self.args.should_save:
                return
            output_dir = output_dir or self.args.output_dir
            os.makedirs(output_dir, exist_ok=True)
            safetensors.torch.save_model(
                self.accelerator.unwrap_model(self.model),
                os.path.join(output_dir, "model.safetensors"),
                metadata={"format": "pt"},
            )

        def _issue_warnings_after_load(self, load_result: Any) -> None:
            model = self.accelerator.unwrap_model(self.model)
            by_storage: dict[Any, list[str]] = {}
            for name, tensor in model.state_dict(keep_vars=True).items():
                by_storage.setdefault(tensor.data_ptr(), []).append(name)
            aliases = {n for names in by_storage.values() if len(names) > 1 for n in names}
            missing = [k for k in load_result.missing_keys if k not in aliases]
            if missing or load_result.unexpected_keys:
                raise RuntimeError(
                    f"the grounding checkpoint does not fit the model: missing {missing}, "
                    f"unexpected {list(load_result.unexpected_keys)}; remove the job's "
                    f"checkpoint folder ({self.args.output_dir}) to start the job afresh"
                )

    return GroundingTrainer


def train_grounding(
    model: Any,
    tokenizer: Any,
    records: list[dict[str, Any]],
    params: GroundingParams,
    output_dir: str,
) -> ModelRef:
    """Wrap ``model`` with grounding layers, train it on ``records``, save it to ``output_dir``.

    Args:
        model: A causal LM (from ``load_model(..., trainable=True)``).
        tokenizer: Its tokenizer.
        records: Grounding records (``llm.grounding_tasks``).
        params: Training settings and the grounding spec.
        output_dir: Where the grounded model directory is written.

    Returns:
        A ``ModelRef`` of kind ``model`` with the training metrics in ``meta``.
    """
    import torch
    from peft import get_peft_model
    from transformers import Trainer, TrainingArguments, set_seed

    from leap_kalm.llm.grounded import (
        build_grounded,
        collate_grounding,
        save_grounded,
        tokenize_record,
    )

    if not records:
        raise ValueError("train_grounding: no records to train on")
    spec = params.grounding_spec()
    set_seed(params.seed)  # the new layers' first weights (and LoRA's): the same every run
    peft = lora_config(params, model)
    if peft is not None:
        model = get_peft_model(model, peft)
    grounded = build_grounded(model, spec)
    rows = [tokenize_record(tokenizer, r) for r in records]
    if params.max_length:
        too_long = [i for i, r in enumerate(rows) if len(r["input_ids"]) > params.max_length]
        if too_long:
            raise ValueError(
                f"{len(too_long)} grounding records are longer than max_length={params.max_length} "
                f"(the first: record {too_long[0]}, {len(rows[too_long[0]]['input_ids'])} tokens); "
                "raise train.max_length or lower tasks.max_steps"
            )
    on_gpu = torch.cuda.is_available() and next(grounded.parameters()).is_cuda
    checkpoints = checkpoint_job_dir(params, model, records, "grounding")
    args = TrainingArguments(
        output_dir=checkpoints or output_dir,
        max_steps=params.max_steps,
        num_train_epochs=params.num_train_epochs,
        learning_rate=params.learning_rate,
        warmup_steps=params.warmup_steps,
        per_device_train_batch_size=params.per_device_train_batch_size,
        gradient_accumulation_steps=params.gradient_accumulation_steps,
        activation_checkpointing=params.gradient_checkpointing,
        logging_steps=params.logging_steps,
        seed=params.seed,
        use_cpu=not on_gpu,
        bf16=use_bf16(params, on_gpu),
        **checkpoint_saving(params, checkpoints),
        report_to=[],
        remove_unused_columns=False,
        train_sampling_strategy="group_by_length",  # records run 13-125+ tokens: batch alike lengths
        ddp_find_unused_parameters=False,
    )
    pad_id = tokenizer.pad_token_id
    trainer = _checkpointing_trainer(Trainer)(
        model=grounded,
        args=args,
        train_dataset=rows,
        data_collator=lambda batch: collate_grounding(batch, pad_id, spec),
        callbacks=[
            *trainer_callbacks("grounding"),
            *memory_release_callbacks(params.freed_memory, params.freed_memory_ceiling_gb),
        ],
    )
    if is_sharded(trainer):
        raise NotImplementedError(
            "grounding under FSDP or DeepSpeed ZeRO-3 is not supported (the grounding layers "
            "are saved from rank 0); use ZeRO-2 (conf/accelerate/deepspeed_zero2.yaml) or "
            "LoRA (train.lora.r > 0)"
        )
    resume = last_checkpoint(args)
    with freed_memory_policy(params.freed_memory):
        result = trainer.train(resume_from_checkpoint=resume)
    if trainer.is_world_process_zero():
        save_grounded(trainer.model, tokenizer, output_dir)
    trainer.accelerator.wait_for_everyone()
    metrics = {f"train/{k}": v for k, v in result.metrics.items()}
    logger.info("grounding finished: %s", metrics)
    meta = {
        "params": asdict(params),
        "grounded": True,
        **metrics,
        "log_history": trainer.state.log_history,
    }
    if resume is not None:
        meta["resumed_from"] = resume
    drop_checkpoints(trainer, args)
    return ModelRef(path=os.path.abspath(output_dir), kind="model", meta=meta)

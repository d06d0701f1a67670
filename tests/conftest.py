"""Shared fixtures: keep tests on one thread, offline, and on the tiny model."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Tests compare outputs exactly (resumed vs uninterrupted rollouts, cached vs plain
# generation), which bf16 rounding breaks; tests/llm/models/test_hardware.py covers the bf16 choice.
os.environ.setdefault("LEAP_KALM_CPU_BF16", "0")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory) -> str:
    """A model cache shared by the whole test session (the tiny model is built once)."""
    return str(tmp_path_factory.mktemp("model_cache"))


@pytest.fixture(scope="session")
def tiny_model_dir(model_cache) -> str:
    from leap_kalm.llm.models import build_tiny_model

    return str(build_tiny_model(model_cache, seed=0))

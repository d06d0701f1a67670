"""Device and dtype choice, and CPU bf16 detection."""

import os

import pytest

from leap_kalm.llm.models.hardware import select_device, select_dtype
from leap_kalm.llm.models.loading import load_model


def test_device_and_dtype_selection():
    import torch

    assert select_device("cpu") == "cpu"
    assert select_device("auto") in {"cpu", "cuda"}
    assert select_dtype("auto", "cpu") == torch.float32
    assert select_dtype("bfloat16", "cpu") == torch.bfloat16
    with pytest.raises(ValueError, match="dtype must be"):
        select_dtype("int3", "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA device"):
            select_device("cuda")


@pytest.mark.parametrize("native", ["1", "0"])
def test_auto_dtype_uses_bf16_on_cpus_that_have_it(monkeypatch, tiny_model_dir, native):
    """Inference runs in bf16 where the CPU does bf16 natively; training keeps fp32 weights + autocast."""
    import torch

    from leap_kalm.llm.models.hardware import cpu_has_native_bf16
    from leap_kalm.training.common import TrainParams, trainer_arguments, use_bf16

    monkeypatch.setenv("LEAP_KALM_CPU_BF16", native)
    cpu_has_native_bf16.cache_clear()
    try:
        want = torch.bfloat16 if native == "1" else torch.float32
        assert select_dtype("auto", "cpu") == want
        assert select_dtype("auto", "cpu", for_training=True) == torch.float32
        assert select_dtype("float32", "cpu") == torch.float32
        model, _ = load_model(tiny_model_dir, device="cpu")
        assert next(model.parameters()).dtype == want
        trained, _ = load_model(tiny_model_dir, device="cpu", trainable=True)
        assert next(trained.parameters()).dtype == torch.float32
        args = trainer_arguments(TrainParams(), "out", trained)
        assert args["bf16"] is (native == "1") and args["use_cpu"] is True
        assert use_bf16(TrainParams(bf16=False), on_gpu=False) is False
    finally:
        cpu_has_native_bf16.cache_clear()


def test_native_bf16_detection_reads_cpu_flags(monkeypatch):
    from leap_kalm.llm.models.hardware import cpu_has_native_bf16

    monkeypatch.delenv("LEAP_KALM_CPU_BF16", raising=False)
    cpu_has_native_bf16.cache_clear()
    try:
        flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
        expected = " amx_bf16" in flags or " avx512_bf16" in flags
        assert cpu_has_native_bf16() is expected
    finally:
        cpu_has_native_bf16.cache_clear()

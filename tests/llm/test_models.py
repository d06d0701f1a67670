import json
import os

import pytest

from leap_kalm.llm.models import (
    EMBEDDED_MODEL,
    ModelConfig,
    ModelNotAvailableError,
    build_tiny_model,
    load_model,
    resolve_model_path,
    select_device,
    select_dtype,
)


def test_tiny_model_is_small_and_deterministic(model_cache, tiny_model_dir, tmp_path):
    import torch

    model, tokenizer = load_model(tiny_model_dir)
    n_params = sum(p.numel() for p in model.parameters())
    assert 300_000 < n_params < 2_000_000
    other = build_tiny_model(tmp_path, seed=0)
    model2, _ = load_model(str(other))
    for (name, a), (_, b) in zip(
        model.state_dict().items(), model2.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    assert tokenizer.chat_template and "<|im_start|>" in tokenizer.chat_template


def test_tiny_model_generates(tiny_model_dir):
    import torch

    model, tokenizer = load_model(tiny_model_dir, device="cpu")
    messages = [{"role": "user", "content": "Your task is to: put a clean apple in fridge."}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>assistant\n")
    inputs = tokenizer([text, text + " go"], return_tensors="pt", padding=True, padding_side="left")
    torch.manual_seed(0)
    out = model.generate(
        **inputs, max_new_tokens=8, do_sample=True, pad_token_id=tokenizer.pad_token_id
    )
    assert out.shape[0] == 2 and out.shape[1] <= inputs["input_ids"].shape[1] + 8
    assert out.shape[1] > inputs["input_ids"].shape[1]
    decoded = tokenizer.decode(inputs["input_ids"][0], skip_special_tokens=False)
    assert "Your task is to: put a clean apple in fridge." in decoded  # byte-level BPE round-trips


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

    from leap_kalm.llm.models import cpu_has_native_bf16
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
    from leap_kalm.llm.models import cpu_has_native_bf16

    monkeypatch.delenv("LEAP_KALM_CPU_BF16", raising=False)
    cpu_has_native_bf16.cache_clear()
    try:
        flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
        expected = " amx_bf16" in flags or " avx512_bf16" in flags
        assert cpu_has_native_bf16() is expected
    finally:
        cpu_has_native_bf16.cache_clear()


def test_model_config_rejects_unknown_keys():
    assert ModelConfig.from_dict({"name": "tiny-test", "dtype": "float32"}).dtype == "float32"
    assert ModelConfig.from_dict("tiny-test").name == "tiny-test"
    with pytest.raises(ValueError, match="unknown keys \\['temperature'\\]"):
        ModelConfig.from_dict({"name": "x", "temperature": 1.0})


def test_unavailable_models_fail_with_a_way_forward(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(
        ModelNotAvailableError, match="meta-llama/Meta-Llama-3-8B-Instruct.*hf download"
    ):
        resolve_model_path("meta-llama/Meta-Llama-3-8B-Instruct")
    with pytest.raises(ModelNotAvailableError, match="does not exist"):
        resolve_model_path("./no/such/model")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelNotAvailableError, match="no config.json"):
        resolve_model_path(str(empty))


def test_adapter_directory_loads_on_its_base(tiny_model_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    peft_model = get_peft_model(
        base, LoraConfig(r=2, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    peft_model.save_pretrained(tmp_path / "adapter")
    cfg = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert os.path.isabs(cfg["base_model_name_or_path"])
    model, tokenizer = load_model(str(tmp_path / "adapter"))
    assert type(model).__name__ == "PeftModelForCausalLM"
    assert tokenizer.pad_token is not None


@pytest.mark.slow
def test_embedded_model_converts_loads_and_answers(tmp_path):
    import time

    import torch

    from leap_kalm.llm.models import prepare_embedded_model

    start = time.perf_counter()
    directory = prepare_embedded_model(tmp_path)
    converted = time.perf_counter() - start
    config = json.loads((directory / "config.json").read_text())
    assert "quantization_config" not in config
    start = time.perf_counter()
    model, tokenizer = load_model({"name": str(directory)})
    loaded = time.perf_counter() - start
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(134.5e6, rel=0.01)
    messages = [
        {"role": "user", "content": "What is the capital of France? Answer in one sentence."}
    ]
    inputs = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=16, do_sample=False)
    answer = tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    print(f"converted in {converted:.1f}s, loaded in {loaded:.1f}s: {answer!r}")
    assert "Paris" in answer
    assert resolve_model_path(EMBEDDED_MODEL, tmp_path) == str(
        directory
    )  # cached, no second conversion

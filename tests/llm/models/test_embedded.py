"""The embedded SmolLM2: GGUF conversion, loading and a sensible answer (slow)."""

import json

import pytest

from leap_kalm.llm.models.loading import load_model
from leap_kalm.llm.models.registry import EMBEDDED_MODEL, resolve_model_path


@pytest.mark.slow
def test_embedded_model_converts_loads_and_answers(tmp_path):
    import time

    import torch

    from leap_kalm.llm.models.embedded import prepare_embedded_model

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

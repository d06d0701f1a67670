"""The tiny-test model: small, deterministic per seed, and able to generate."""

from leap_kalm.llm.models.loading import load_model
from leap_kalm.llm.models.tiny import build_tiny_model


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

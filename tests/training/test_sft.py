import pytest

from leap_kalm.llm.models import load_model
from leap_kalm.training.sft import SFTParams, train_sft

RECORDS = [
    {
        "prompt": [
            {
                "role": "user",
                "content": f"Task: find apple {i}. Candidate actions: go to fridge 1, look",
            }
        ],
        "completion": [
            {"role": "assistant", "content": "REASON:\nApples are cold.\nACTION:\ngo to fridge 1"}
        ],
    }
    for i in range(8)
]


def _snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_one_full_sft_step_changes_the_weights(tiny_model_dir, tmp_path):
    import torch

    model, tokenizer = load_model(tiny_model_dir)
    before = _snapshot(model)
    params = SFTParams.from_dict(
        {"max_steps": 1, "learning_rate": 1e-2, "per_device_train_batch_size": 4, "lora": {"r": 0}}
    )
    ref = train_sft(model, tokenizer, RECORDS, params, str(tmp_path / "out"))
    assert ref.kind == "model" and ref.meta["train/train_loss"] > 0
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert len(changed) >= len(before) // 2
    reloaded, _ = load_model(ref.path)
    key = "model.layers.0.self_attn.q_proj.weight"
    assert torch.allclose(reloaded.state_dict()[key], model.state_dict()[key])
    assert not torch.equal(reloaded.state_dict()[key], before[key])


def test_one_lora_step_trains_only_the_adapter(tiny_model_dir, tmp_path):
    import torch

    model, tokenizer = load_model(tiny_model_dir)
    base_q = model.state_dict()["model.layers.0.self_attn.q_proj.weight"].clone()
    params = SFTParams.from_dict(
        {"max_steps": 2, "learning_rate": 5e-2, "lora": {"r": 4, "alpha": 8}}
    )
    ref = train_sft(model, tokenizer, RECORDS, params, str(tmp_path / "lora"))
    assert ref.kind == "adapter"
    adapted, _ = load_model(ref.path)
    lora_b = [v for k, v in adapted.state_dict().items() if "lora_B" in k]
    assert lora_b and any(v.abs().sum() > 0 for v in lora_b), (
        "lora_B starts at zero and must have moved"
    )
    assert torch.equal(
        adapted.base_model.model.model.layers[0].self_attn.q_proj.base_layer.weight, base_q
    )


def test_unknown_parameters_are_rejected():
    with pytest.raises(ValueError, match="unknown keys \\['lr'\\]"):
        SFTParams.from_dict({"lr": 1e-3})

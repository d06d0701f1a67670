import pytest

from leap_kalm.llm.models import load_model
from leap_kalm.training.dpo import DPOParams, train_dpo

PAIRS = [
    {
        "prompt": [
            {"role": "user", "content": f"Task: find apple {i}. Candidates: go to fridge 1, look"}
        ],
        "chosen": [
            {"role": "assistant", "content": "REASON:\nApples are cold.\nACTION:\ngo to fridge 1"}
        ],
        "rejected": [{"role": "assistant", "content": "REASON:\nHmm.\nACTION:\nlook"}],
        "game_id": f"g{i}",
    }
    for i in range(4)
]


def _margin(model, tokenizer, pair):
    """log p(chosen | prompt) - log p(rejected | prompt)."""
    import torch

    prompt = tokenizer.apply_chat_template(
        pair["prompt"], add_generation_prompt=True, tokenize=False
    )
    scores = []
    for answer in (pair["chosen"], pair["rejected"]):
        full = tokenizer.apply_chat_template(pair["prompt"] + answer, tokenize=False)
        ids = tokenizer(full, return_tensors="pt", add_special_tokens=False)["input_ids"]
        n_prompt = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, :-1]
        logp = torch.log_softmax(logits, -1).gather(1, ids[0, 1:, None])[:, 0]
        scores.append(float(logp[n_prompt - 1 :].sum()))
    return scores[0] - scores[1]


def test_dpo_steps_move_the_weights_toward_chosen(tiny_model_dir, tmp_path):
    import torch

    model, tokenizer = load_model(tiny_model_dir)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    margin_before = _margin(model, tokenizer, PAIRS[0])
    params = DPOParams.from_dict(
        {"max_steps": 3, "learning_rate": 5e-3, "per_device_train_batch_size": 2, "lora": {"r": 0}}
    )
    ref = train_dpo(model, tokenizer, PAIRS, params, str(tmp_path / "dpo"))
    assert ref.kind == "model"
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert len(changed) >= len(before) // 2
    assert "train/train_loss" in ref.meta
    model.eval()
    assert _margin(model, tokenizer, PAIRS[0]) > margin_before + 0.5


def test_dpo_rejects_empty_and_unknown():
    with pytest.raises(ValueError, match="unknown keys"):
        DPOParams.from_dict({"betta": 0.2})
    with pytest.raises(ValueError, match="no preference pairs"):
        train_dpo(None, None, [], DPOParams(), "/tmp/x")

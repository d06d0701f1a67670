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


def test_completion_only_scoring_gives_the_same_loss_and_gradients(tiny_model_dir, tmp_path):
    """The CPU speed-up (score only labelled positions) must not change what is learnt."""
    import torch
    import trl.trainer.utils as trl_utils
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from leap_kalm.training.common import completion_only_scoring, trainer_arguments

    model, tokenizer = load_model(tiny_model_dir, trainable=True)
    params = SFTParams.from_dict(
        {"max_steps": 1, "per_device_train_batch_size": 4, "lora": {"r": 0}}
    )
    trainer = SFTTrainer(
        model=model,
        args=SFTConfig(**trainer_arguments(params, str(tmp_path / "out"), model)),
        train_dataset=Dataset.from_list(RECORDS),
        processing_class=tokenizer,
    )
    batch = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
    assert (batch["labels"] == -100).float().mean() > 0.5  # most positions are prompt

    def loss_and_grads():
        trainer.model.zero_grad()
        loss = trainer.compute_loss(trainer.model, batch)
        loss.backward()
        return loss.detach(), [
            p.grad.clone() for p in trainer.model.parameters() if p.grad is not None
        ]

    original = trl_utils._use_triton
    full_loss, full_grads = loss_and_grads()
    with completion_only_scoring() as applied:
        assert applied and trl_utils._use_triton(torch.device("cpu")) is True
        compact_loss, compact_grads = loss_and_grads()
    assert trl_utils._use_triton is original  # restored
    assert torch.allclose(full_loss, compact_loss, atol=1e-6)
    assert len(full_grads) == len(compact_grads) > 0
    for a, b in zip(full_grads, compact_grads, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_conversation_masks_cover_exactly_the_trained_answers(tiny_model_dir):
    from leap_kalm.llm.models import load_model
    from leap_kalm.llm.prompts import build_conversation
    from leap_kalm.training.sft import tokenize_conversation

    _, tokenizer = load_model(tiny_model_dir)
    steps = [
        {"observation": "obs 0", "reason": "first", "action": "go to shelf 1"},
        {"observation": "obs 1", "reason": "second", "action": "take mug 1 from shelf 1"},
    ]
    messages = build_conversation("alfworld", "find a mug", steps)
    row = tokenize_conversation(tokenizer, messages, [4])
    trained = tokenizer.decode(
        [i for i, m in zip(row["input_ids"], row["assistant_masks"], strict=True) if m]
    )
    assert trained.startswith("REASON:\nsecond\nACTION:\ntake mug 1 from shelf 1")
    assert "first" not in trained and "obs" not in trained
    both = tokenize_conversation(tokenizer, messages, [2, 4])
    assert both["input_ids"] == row["input_ids"] and sum(both["assistant_masks"]) > sum(
        row["assistant_masks"]
    )
    with pytest.raises(ValueError, match="loss turn 1 is a user turn"):
        tokenize_conversation(tokenizer, messages, [1])


def test_sft_trains_on_conversation_records(tiny_model_dir, tmp_path):
    import torch

    from leap_kalm.llm.records import conversation_records_from_trajectories

    model, tokenizer = load_model(tiny_model_dir)
    before = _snapshot(model)
    trajectory = {
        "game_id": "g",
        "task": "find a mug",
        "steps": [{"observation": f"obs {t}", "reason": "r", "action": "look"} for t in range(3)],
    }
    records = conversation_records_from_trajectories([trajectory] * 2, "alfworld")
    params = SFTParams.from_dict(
        {"max_steps": 1, "learning_rate": 1e-2, "per_device_train_batch_size": 2, "lora": {"r": 0}}
    )
    ref = train_sft(model, tokenizer, records, params, str(tmp_path / "out"))
    assert ref.kind == "model" and ref.meta["train/train_loss"] > 0
    assert any(not torch.equal(before[k], v) for k, v in _snapshot(model).items())


def _corrected_chat():
    from leap_kalm.llm.records import conversation_records_from_corrections
    from tests.llm.test_records import _correction, _trajectory

    trajectory, correction = _trajectory("g", 5), _correction("g", n=5, corrected=(1, 3))

    def records(packing):
        return conversation_records_from_corrections(
            [trajectory], [correction], "alfworld", packing=packing
        )

    return records("segments"), records("branches")


def _trained_nll(model, batch):
    """Summed NLL of the labelled tokens and their number (next-token shift)."""
    import torch

    with torch.no_grad():
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
    labels = batch["labels"][:, 1:]
    logp = torch.log_softmax(logits[:, :-1].float(), -1)
    picked = logp.gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    keep = labels != -100
    return -(picked * keep).sum(), int(keep.sum())


def test_branches_give_the_segments_losses_in_one_row(tiny_model_dir):
    """One row with a 4-D mask scores every trained answer as its own segment does."""
    import torch

    from leap_kalm.training.sft import BranchCollator, tokenize_branched, tokenize_conversation

    model, tokenizer = load_model(tiny_model_dir)
    model.eval()
    segments, (packed,) = _corrected_chat()
    nll, count = torch.tensor(0.0), 0
    for segment in segments:
        row = tokenize_conversation(tokenizer, segment["messages"], segment["loss_turns"])
        ids = torch.tensor([row["input_ids"]])
        labels = torch.where(torch.tensor([row["assistant_masks"]]) == 1, ids, -100)
        part, n = _trained_nll(model, {"input_ids": ids, "labels": labels})
        nll, count = nll + part, count + n
    row = tokenize_branched(tokenizer, packed["messages"], packed["loss_turns"], packed["branches"])
    assert len(row["branch_starts"]) == 2 and len(row["input_ids"]) < sum(
        len(tokenize_conversation(tokenizer, s["messages"], s["loss_turns"])["input_ids"])
        for s in segments
    )
    collator = BranchCollator(tokenizer.pad_token_id)
    batch = collator([row])
    assert batch["attention_mask"].shape == (1, 1, len(row["input_ids"]), len(row["input_ids"]))
    packed_nll, packed_count = _trained_nll(model, batch)
    assert packed_count == count
    assert torch.allclose(packed_nll, nll, rtol=1e-4)
    # a second, shorter row pads without changing the first row's losses
    short = tokenize_branched(tokenizer, segments[0]["messages"], segments[0]["loss_turns"])
    padded = collator([row, short])
    assert padded["attention_mask"].shape[0] == 2
    both, both_count = _trained_nll(model, padded)
    assert collator([short])["attention_mask"].dim() == 2  # no branches: the causal path
    alone, alone_count = _trained_nll(model, collator([short]))
    assert both_count == packed_count + alone_count
    assert torch.allclose(both, packed_nll + alone, rtol=1e-4)


def test_branched_rows_are_cut_to_max_length_branch_by_branch(tiny_model_dir):
    from leap_kalm.training.sft import tokenize_branched

    _, tokenizer = load_model(tiny_model_dir)
    _, (packed,) = _corrected_chat()
    args = (tokenizer, packed["messages"], packed["loss_turns"], packed["branches"])
    full = tokenize_branched(*args)
    chat = full["branch_starts"][0]
    one = tokenize_branched(*args, max_length=full["branch_starts"][1])
    assert one["branch_starts"] == full["branch_starts"][:1]
    assert one["input_ids"] == full["input_ids"][: full["branch_starts"][1]]
    cut = tokenize_branched(*args, max_length=chat - 5)
    assert len(cut["input_ids"]) == chat - 5 and cut["branch_starts"] == []
    assert len(cut["labels"]) == len(cut["position_ids"]) == chat - 5
    bad = [{"turn": 1, "message": {"role": "assistant", "content": "x"}}]
    with pytest.raises(ValueError, match="branch at turn 1 does not replace an assistant turn"):
        tokenize_branched(tokenizer, packed["messages"], [], bad)


def test_sft_trains_on_records_with_branches(tiny_model_dir, tmp_path):
    import torch

    model, tokenizer = load_model(tiny_model_dir)
    before = _snapshot(model)
    _, packed = _corrected_chat()
    params = SFTParams.from_dict(
        {"max_steps": 1, "learning_rate": 1e-2, "per_device_train_batch_size": 2, "lora": {"r": 0}}
    )
    ref = train_sft(model, tokenizer, packed * 2, params, str(tmp_path / "out"))
    assert ref.kind == "model" and ref.meta["train/train_loss"] > 0
    assert any(not torch.equal(before[k], v) for k, v in _snapshot(model).items())

"""Grounding with transformers' Trainer on the tiny model: the new layers and the LoRA
weights move, the result is one grounded model directory, bad settings are named."""

from __future__ import annotations

import numpy as np
import pytest

from leap_kalm.llm import grounded as grounded_module
from leap_kalm.llm.grounded import load_grounded
from leap_kalm.llm.grounding_tasks import GroundingTaskParams, episodes_of, grounding_records
from leap_kalm.llm.models import load_model
from leap_kalm.training.grounding import GroundingParams, train_grounding
from leap_kalm.training.runner import run_trainer
from tests.llm.test_grounded import CONTINUOUS, DISCRETE, kalm_arrays

SPEC = {"obs_dim": 10, "action_kind": "discrete", "action_dim": 40}


def _records(spec=DISCRETE, n=8):
    return grounding_records(episodes_of(kalm_arrays(spec, n=n)), GroundingTaskParams())


def _capture_build(monkeypatch):
    """Keep the grounded model train_grounding builds, and its layers' starting weights."""
    seen = {}
    real = grounded_module.build_grounded

    def build(lm, spec):
        model = real(lm, spec)
        seen["model"] = model
        seen["before"] = {
            name: {k: v.detach().clone() for k, v in layer.state_dict().items()}
            for name, layer in model.grounding_layers().items()
        }
        return model

    monkeypatch.setattr(grounded_module, "build_grounded", build)
    return seen


def test_a_lora_grounding_run_moves_the_new_layers_and_the_adapter_and_saves_one_directory(
    tiny_model_dir, tmp_path, monkeypatch
):
    import torch

    seen = _capture_build(monkeypatch)
    lm, tokenizer = load_model(tiny_model_dir, trainable=True)
    base_q = lm.state_dict()["model.layers.0.self_attn.q_proj.weight"].clone()
    params = GroundingParams.from_dict(
        {
            "max_steps": 3,
            "learning_rate": 5e-2,
            "per_device_train_batch_size": 4,
            "bf16": True,  # autocast: the grounding layers' bf16 outputs meet fp32 embeddings
            "lora": {"r": 4, "alpha": 8},
            "spec": SPEC,
        }
    )
    ref = train_grounding(lm, tokenizer, _records(), params, str(tmp_path / "out"))
    assert ref.kind == "model" and ref.meta["grounded"] and ref.meta["train/train_loss"] > 0
    for name, layer in seen["model"].grounding_layers().items():
        moved = [not torch.equal(v, seen["before"][name][k]) for k, v in layer.state_dict().items()]
        assert all(moved), name
    loaded, _ = load_grounded(ref.path)
    merged_q = loaded.lm.state_dict()["model.layers.0.self_attn.q_proj.weight"]
    assert not torch.allclose(merged_q, base_q), "the LoRA update is folded into the saved weights"
    for name, layer in loaded.grounding_layers().items():
        trained = seen["model"].grounding_layers()[name].state_dict()
        assert all(torch.allclose(v, trained[k]) for k, v in layer.state_dict().items()), name


def test_the_trainer_registry_runs_full_fine_tuning_of_a_continuous_world(tiny_model_dir):
    spec = {"obs_dim": 6, "action_kind": "continuous", "action_dim": 4}
    ref = run_trainer(
        "grounding",
        {"name": tiny_model_dir},
        _records(CONTINUOUS, n=6),
        {
            "max_steps": 2,
            "per_device_train_batch_size": 2,
            "gradient_checkpointing": True,
            "lora": {"r": 0},
            "spec": spec,
        },
        load_kwargs={"trainable": True},
    )
    model, _ = load_grounded(ref.path)
    assert model.spec == CONTINUOUS
    assert np.isfinite(ref.meta["train/train_loss"])


def test_grounding_without_a_spec_or_with_records_too_long_is_named(tiny_model_dir, tmp_path):
    lm, tokenizer = load_model(tiny_model_dir, trainable=True)
    with pytest.raises(ValueError, match="grounding needs spec"):
        train_grounding(lm, tokenizer, _records(), GroundingParams(), str(tmp_path / "a"))
    params = GroundingParams.from_dict({"max_length": 8, "spec": SPEC, "lora": {"r": 0}})
    with pytest.raises(ValueError, match=r"grounding records are longer than max_length=8"):
        train_grounding(lm, tokenizer, _records(), params, str(tmp_path / "b"))


def test_grounding_releases_freed_memory_above_its_ceiling(tiny_model_dir, tmp_path, monkeypatch):
    """``freed_memory_ceiling_gb`` reaches the grounding trainer as it reaches SFT and DPO:
    at a ceiling of 0 GB every optimiser step gives the heap's free memory back."""
    from leap_kalm.training import memory

    trims = []
    monkeypatch.setattr(memory, "release_freed_memory", lambda: trims.append(1) or True)
    lm, tokenizer = load_model(tiny_model_dir, trainable=True)
    params = GroundingParams.from_dict(
        {
            "max_steps": 2,
            "per_device_train_batch_size": 4,
            "lora": {"r": 0},
            "spec": SPEC,
            "freed_memory_ceiling_gb": 0.0,
        }
    )
    train_grounding(lm, tokenizer, _records(), params, str(tmp_path / "out"))
    assert len(trims) == 3  # one per optimiser step, and the keep policy's own at the end

"""Training under `accelerate launch` with 2 CPU processes (gloo)."""

import json

import pytest

from leap_kalm.training.launch import launch_training
from tests.training.test_sft import RECORDS


def test_sft_in_two_cpu_processes(tiny_model_dir, tmp_path):
    import torch

    from leap_kalm.llm.models import load_model

    out = tmp_path / "sft"
    params = {
        "max_steps": 2,
        "learning_rate": 1e-2,
        "per_device_train_batch_size": 2,
        "lora": {"r": 0},
    }
    ref = launch_training(
        "sft", {"name": tiny_model_dir}, RECORDS, params, str(out), num_processes=2, timeout=600
    )
    assert ref.meta["world_size"] == 2 and ref.kind == "model"
    result = json.loads((tmp_path / "sft-job" / "result.json").read_text())
    assert result["world_size"] == 2
    trained, _ = load_model(ref.path)
    base, _ = load_model(tiny_model_dir)
    key = "model.layers.0.mlp.up_proj.weight"
    assert not torch.equal(trained.state_dict()[key], base.state_dict()[key])


def test_bad_method_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="no trainer called"):
        launch_training("ppo", {"name": "x"}, [], {}, str(tmp_path / "o"), 2)


def test_grounding_in_two_cpu_processes(tiny_model_dir, tmp_path):
    """KALM's grounding runs under `accelerate launch` like SFT (the Trainer does the DDP)."""
    import torch

    from leap_kalm.llm.grounded import load_grounded
    from leap_kalm.llm.models import load_model
    from tests.training.test_grounding import SPEC, _records

    params = {
        "max_steps": 2,
        "learning_rate": 1e-2,
        "per_device_train_batch_size": 2,
        "lora": {"r": 0},
        "spec": SPEC,
    }
    ref = launch_training(
        "grounding",
        {"name": tiny_model_dir},
        _records(),
        params,
        str(tmp_path / "g"),
        num_processes=2,
        timeout=600,
    )
    assert ref.meta["world_size"] == 2
    model, _ = load_grounded(ref.path)
    base, _ = load_model(tiny_model_dir)
    key = "model.layers.0.mlp.up_proj.weight"
    assert not torch.equal(model.lm.state_dict()[key], base.state_dict()[key])

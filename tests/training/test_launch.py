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


def test_an_accelerate_config_file_drives_the_launch(tiny_model_dir, tmp_path):
    """`accelerate_config` hands accelerate one of conf/accelerate/'s files (here plain data
    parallel, which runs with gloo on a CPU) and the run trains in the processes asked for."""
    from pathlib import Path

    from leap_kalm.training.launch import _accelerate_command
    from leap_kalm.training.runner import train_student

    config = Path(__file__).parents[2] / "conf" / "accelerate" / "multi_gpu.yaml"
    command = _accelerate_command(Path("job.json"), 2, False, str(config))
    assert command[command.index("--config_file") + 1] == str(config)
    assert "--multi_gpu" not in command  # the file says how to distribute, not a flag
    settings = {"max_steps": 1, "per_device_train_batch_size": 2, "lora": {"r": 0},
                "num_processes": 2, "accelerate_config": str(config)}  # fmt: skip
    ref = train_student("sft", RECORDS, {"name": tiny_model_dir}, settings, seed=0)
    assert ref.meta["world_size"] == 2 and ref.kind == "model"


@pytest.mark.parametrize("name", ["deepspeed_zero3", "deepspeed_zero2", "fsdp", "multi_gpu"])
def test_the_shipped_accelerate_configs_are_valid(name):
    """Each file loads as accelerate's own config class and names files that exist."""
    import json
    from pathlib import Path

    from accelerate.commands.config.config_args import ClusterConfig

    root = Path(__file__).parents[2]
    config = ClusterConfig.from_yaml_file(root / "conf" / "accelerate" / f"{name}.yaml")
    assert config.num_machines == 1
    ds_file = (config.deepspeed_config or {}).get("deepspeed_config_file")
    if ds_file:
        zero = json.loads((root / ds_file).read_text())["zero_optimization"]["stage"]
        assert zero == int(name[-1])


def test_a_bad_accelerate_config_is_named(tmp_path):
    from leap_kalm.training.launch import checked_config_file

    with pytest.raises(FileNotFoundError, match=r"accelerate_config: no file .*nope.yaml"):
        checked_config_file(str(tmp_path / "nope.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("learning_rate: 3\n")
    with pytest.raises(ValueError, match=r"bad.yaml is not an accelerate config file"):
        checked_config_file(str(bad))
    assert checked_config_file(None) is None

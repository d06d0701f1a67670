"""A training run that crashes part-way resumes from its last checkpoint when the same job
runs again (`checkpoint_steps`): it costs the steps since that checkpoint, not the whole
run, and ends with the weights an uninterrupted run gets."""

from __future__ import annotations

import pytest
from transformers import TrainerCallback

from leap_kalm.training import common
from leap_kalm.training.runner import train_student
from tests.training.test_sft import RECORDS


class _PowerCut(TrainerCallback):
    """Fails the run once the optimiser has taken ``at`` steps (after that step's checkpoint)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.at:
            raise KeyboardInterrupt("simulated crash")


class _Steps(TrainerCallback):
    """Records the optimiser steps this run takes."""

    def __init__(self) -> None:
        self.steps: list[int] = []

    def on_step_end(self, args, state, control, **kwargs):
        self.steps.append(state.global_step)


def _settings(tmp_path, **extra):
    return {"max_steps": 4, "learning_rate": 1e-2, "per_device_train_batch_size": 2,
            "lora": {"r": 0}, "checkpoint_dir": str(tmp_path / "checkpoints"), **extra}  # fmt: skip


def _weights(ref):
    from leap_kalm.llm.models import load_model

    model, _ = load_model(ref.path)
    return model.state_dict()


def test_a_crashed_training_resumes_from_its_checkpoint(tiny_model_dir, tmp_path, monkeypatch):
    import torch

    start = {"name": tiny_model_dir}
    plain = train_student("sft", RECORDS, start, _settings(tmp_path / "a"), seed=0)
    settings = _settings(tmp_path / "b", checkpoint_steps=2)
    with monkeypatch.context() as patch:
        patch.setattr(common, "trainer_callbacks", lambda stage: [_PowerCut(at=3)])
        with pytest.raises(KeyboardInterrupt, match="simulated crash"):
            train_student("sft", RECORDS, start, settings, seed=0)
    (job,) = (tmp_path / "b" / "checkpoints").iterdir()
    kept = [p.name for p in job.iterdir() if p.name.startswith("checkpoint-")]
    assert kept == ["checkpoint-2"]  # step 3 was lost, not steps 1-2
    ran = _Steps()
    with monkeypatch.context() as patch:
        patch.setattr(common, "trainer_callbacks", lambda stage: [ran])
        resumed = train_student("sft", RECORDS, start, settings, seed=0)
    assert resumed.meta["resumed_from"].endswith("checkpoint-2")
    assert ran.steps == [3, 4]  # only the steps after the checkpoint ran again
    logged = [row["step"] for row in resumed.meta["log_history"] if "loss" in row]
    assert logged == [1, 2, 3, 4]  # the loss curve is whole
    assert not job.exists()  # a finished job's checkpoints are removed
    expected, got = _weights(plain), _weights(resumed)
    for name, tensor in expected.items():
        torch.testing.assert_close(got[name], tensor, rtol=1e-5, atol=1e-6, msg=name)


def test_a_different_job_never_resumes_from_anothers_checkpoints(tiny_model_dir, tmp_path):
    from leap_kalm.llm.models import load_model
    from leap_kalm.training.sft import SFTParams

    model, _ = load_model(tiny_model_dir)
    params = SFTParams.from_dict(_settings(tmp_path, checkpoint_steps=2))
    one = common.checkpoint_job_dir(params, model, [{"a": 1}], "sft")
    assert one == common.checkpoint_job_dir(params, model, [{"a": 1}], "sft")
    assert one != common.checkpoint_job_dir(params, model, [{"a": 2}], "sft")
    other = SFTParams.from_dict(_settings(tmp_path, checkpoint_steps=2, learning_rate=1e-3))
    assert one != common.checkpoint_job_dir(other, model, [{"a": 1}], "sft")
    off = SFTParams.from_dict(_settings(tmp_path))
    assert common.checkpoint_job_dir(off, model, [{"a": 1}], "sft") is None


def test_a_crashed_grounding_resumes_from_its_checkpoint(tiny_model_dir, tmp_path, monkeypatch):
    """The grounded model (the LM wrapped in an ``nn.Module`` with the grounding layers)
    checkpoints and resumes as SFT does, its new layers included."""
    import torch

    from leap_kalm.llm.grounded import load_grounded
    from leap_kalm.training import grounding
    from tests.training.test_grounding import SPEC, _records

    records, start = _records(), {"name": tiny_model_dir}

    def settings(root, **extra):
        return {**_settings(root, **extra), "spec": SPEC}

    def train(root, callbacks, **extra):
        with monkeypatch.context() as patch:
            patch.setattr(grounding, "trainer_callbacks", lambda stage: callbacks)
            return train_student(
                "grounding", records, start, settings(root, **extra), seed=0,
                load_kwargs={"trainable": True},
            )  # fmt: skip

    plain = train(tmp_path / "a", [])
    with pytest.raises(KeyboardInterrupt, match="simulated crash"):
        train(tmp_path / "b", [_PowerCut(at=3)], checkpoint_steps=2)
    (job,) = (tmp_path / "b" / "checkpoints").iterdir()
    assert job.name.startswith("grounding-")
    assert [p.name for p in job.iterdir() if p.name.startswith("checkpoint-")] == ["checkpoint-2"]
    ran = _Steps()
    resumed = train(tmp_path / "b", [ran], checkpoint_steps=2)
    assert resumed.meta["resumed_from"].endswith("checkpoint-2")
    assert ran.steps == [3, 4]
    assert not job.exists()
    expected, got = load_grounded(plain.path)[0], load_grounded(resumed.path)[0]
    got_weights = got.state_dict()
    for name, tensor in expected.state_dict().items():
        torch.testing.assert_close(got_weights[name], tensor, rtol=1e-5, atol=1e-6, msg=name)

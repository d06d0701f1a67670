"""Training nodes: method dispatch, skipped markers, iteration guards, accelerate launch."""

from __future__ import annotations

import pytest

from leap_kalm.pipelines.evaluate.nodes import select_student
from leap_kalm.pipelines.train_dpo.nodes import train_dpo_student
from leap_kalm.pipelines.train_sft.nodes import train_sft_student
from leap_kalm.schemas import ModelRef
from tests.training.test_sft import RECORDS

SFT_RECORDS = [
    {**r, "game_id": f"g{i}", "split": "train", "iteration": 0} for i, r in enumerate(RECORDS)
]


def test_sft_node_trains_in_two_processes_when_asked(tiny_model_dir):
    params = {
        "max_steps": 1,
        "per_device_train_batch_size": 2,
        "lora": {"r": 2, "alpha": 4},
        "num_processes": 2,
    }
    ref = train_sft_student(
        SFT_RECORDS, None, params, {"train_method": "sft"}, {"name": tiny_model_dir}, 0
    )
    assert ref.kind == "adapter" and ref.meta["staged"] and ref.meta["world_size"] == 2
    assert ref.meta["iteration"] == 0 and ref.meta["n_records"] == len(SFT_RECORDS)


def test_the_method_not_chosen_is_skipped_and_selection_picks_the_trained_one():
    skipped_dpo = train_dpo_student([], None, {}, {"train_method": "sft"}, {"name": "tiny-test"}, 1)
    skipped_sft = train_sft_student([], None, {}, {"train_method": "dpo"}, {"name": "tiny-test"}, 1)
    assert skipped_dpo.kind == skipped_sft.kind == "skipped"
    trained = ModelRef(path="/m", kind="adapter")
    assert select_student(trained, skipped_dpo, {"train_method": "sft"}) is trained
    assert select_student(skipped_sft, trained, {"train_method": "dpo"}) is trained
    with pytest.raises(ValueError, match="no student was trained"):
        select_student(skipped_sft, skipped_dpo, {"train_method": "dpo"})
    with pytest.raises(ValueError, match="train_method must be 'sft' or 'dpo'"):
        train_sft_student([], None, {}, {"train_method": "ppo"}, {}, 0)


def test_iteration_0_is_behaviour_cloning_even_when_dpo_is_chosen(tiny_model_dir):
    params = {"max_steps": 1, "per_device_train_batch_size": 2, "lora": {"r": 2, "alpha": 4}}
    leap = {"train_method": "dpo"}
    sft = train_sft_student(SFT_RECORDS, None, params, leap, {"name": tiny_model_dir}, 0)
    dpo = train_dpo_student([], None, {}, leap, {"name": tiny_model_dir}, 0)
    assert sft.kind == "adapter" and dpo.kind == "skipped"
    assert select_student(sft, dpo, leap) is sft


def test_iteration_one_needs_the_previous_student():
    with pytest.raises(FileNotFoundError, match="needs the student of iteration 0"):
        train_sft_student(
            SFT_RECORDS, None, {"max_steps": 1}, {"train_method": "sft"}, {"name": "tiny-test"}, 1
        )


@pytest.mark.parametrize("stage", ["rollout", "evaluate"])
def test_students_load_with_the_model_parameters_device_and_dtype(monkeypatch, stage):
    """`model.device`/`model.dtype` apply to trained students too, not only to the base model."""
    from leap_kalm.pipelines.correct.nodes import roll_out_student
    from leap_kalm.pipelines.evaluate.nodes import evaluate_student
    from leap_kalm.schemas import ModelRef

    seen = {}

    def fake_load_model(ref, **kwargs):
        seen.update(kwargs, ref=ref)
        raise RuntimeError("loaded")

    monkeypatch.setattr("leap_kalm.llm.models.load_model", fake_load_model)
    student = ModelRef(path="/students/iter0", kind="adapter")
    model_params = {"name": "tiny-test", "device": "cpu", "dtype": "float32"}
    if stage == "rollout":
        produce = roll_out_student([], student, {"env": "alfworld"}, model_params, 1)
    else:
        produce = evaluate_student([], student, {"env": "alfworld"}, model_params, 1)
    with pytest.raises(RuntimeError, match="loaded"):
        list(produce([]))
    assert seen == {"ref": student, "merge_adapter": True, "device": "cpu", "dtype": "float32"}

"""LEAP's iteration rules (``leap_kalm.pipelines.leap_iteration``)."""

from __future__ import annotations

import pytest

from leap_kalm.pipelines import leap_iteration as rules
from leap_kalm.schemas import ModelRef

BASE = {"name": "tiny-test", "dtype": "float32"}
TRAINED = ModelRef(path="/students/iter0", kind="adapter")


def _complete(root, world, *iterations):
    for i in iterations:
        report = root / "08_reporting" / world / f"iter{i}" / "eval.json"
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text("{}")


def test_next_iteration_follows_the_latest_evaluation_report(tmp_path):
    assert rules.completed_iterations(str(tmp_path)) == []
    assert rules.next_iteration(str(tmp_path)) == 0
    assert rules.next_iteration(str(tmp_path / "missing")) == 0
    _complete(tmp_path, "alfworld", 0)
    assert rules.next_iteration(str(tmp_path)) == 1
    _complete(tmp_path, "alfworld", 1, 2)
    _complete(tmp_path, "webshop", 10)
    assert rules.completed_iterations(str(tmp_path)) == [0, 1, 2, 10]
    assert rules.next_iteration(str(tmp_path)) == 11


def test_only_finished_iterations_count(tmp_path):
    _complete(tmp_path, "alfworld", 0)
    (tmp_path / "08_reporting" / "alfworld" / "iter1").mkdir()  # started, not evaluated
    for name in ("iter2_old", "iterx", "latest"):
        folder = tmp_path / "08_reporting" / "alfworld" / name
        folder.mkdir()
        (folder / "eval.json").write_text("{}")
    (tmp_path / "08_reporting" / "alfworld" / "iter3").mkdir()
    (tmp_path / "08_reporting" / "alfworld" / "iter3" / "rollouts.jsonl").write_text("")
    assert rules.completed_iterations(str(tmp_path)) == [0]
    assert rules.next_iteration(str(tmp_path)) == 1


@pytest.mark.parametrize(("iteration", "expected"), [(0, False), (1, True), (7, True)])
def test_only_iterations_after_0_roll_out(iteration, expected):
    assert rules.rolls_out(iteration) is expected


@pytest.mark.parametrize(
    ("train_method", "iteration", "method", "reason"),
    [
        ("sft", 0, "sft", None),
        ("sft", 0, "dpo", "iteration 0 is behaviour cloning"),
        ("dpo", 0, "sft", None),
        ("dpo", 0, "dpo", "iteration 0 is behaviour cloning"),
        ("sft", 1, "sft", None),
        ("sft", 1, "dpo", "train_method is sft"),
        ("dpo", 2, "dpo", None),
        ("dpo", 2, "sft", "train_method is dpo"),
    ],
)
def test_method_and_skip_reason(train_method, iteration, method, reason):
    assert rules.method_for(train_method, iteration) == ("sft" if iteration == 0 else train_method)
    assert rules.skip_reason(method, train_method, iteration) == reason


def test_skipped_is_a_marker_with_its_reason():
    marker = rules.skipped("train_method is sft")
    assert marker == ModelRef(path="", kind="skipped", meta={"reason": "train_method is sft"})


def test_starting_model():
    assert rules.starting_model(None, BASE, 0) is BASE
    assert rules.starting_model(TRAINED, BASE, 0) is BASE  # iteration 0 always starts fresh
    assert rules.starting_model(TRAINED, BASE, 1) is TRAINED
    with pytest.raises(FileNotFoundError) as error:
        rules.starting_model(None, BASE, 3)
    assert "needs the student of iteration 2" in str(error.value)
    assert "--params leap_iteration=2" in str(error.value)
    with pytest.raises(ValueError, match="was skipped, not trained"):
        rules.starting_model(rules.skipped("x"), BASE, 1)


def test_trained_student_picks_the_method_that_trained():
    sft_marker, dpo_marker = rules.skipped("a"), rules.skipped("b")
    dpo = ModelRef(path="/dpo", kind="model")
    assert rules.trained_student(TRAINED, dpo_marker, "sft") is TRAINED
    assert rules.trained_student(sft_marker, dpo, "dpo") is dpo
    assert rules.trained_student(TRAINED, dpo_marker, "dpo") is TRAINED  # iteration 0 with dpo
    with pytest.raises(
        ValueError, match=r"no student was trained this iteration \({'reason': 'a'}\)"
    ):
        rules.trained_student(sft_marker, dpo, "sft")
    with pytest.raises(ValueError, match="no student was trained"):
        rules.trained_student(sft_marker, dpo_marker, "dpo")


def test_train_iteration_student_seeds_and_labels_the_iteration(monkeypatch):
    seen = {}

    def fake_train_student(method, records, start, settings, seed, load_kwargs, meta):
        seen.update(
            method=method,
            records=records,
            start=start,
            settings=settings,
            seed=seed,
            load_kwargs=load_kwargs,
            meta=meta,
        )
        return ModelRef(path="/out", kind="adapter")

    monkeypatch.setattr("leap_kalm.training.runner.train_student", fake_train_student)
    model = {**BASE, "device": "cpu"}
    ref = rules.train_iteration_student(
        "dpo", [{"x": 1}], TRAINED, {"beta": 0.1}, 5, model, 2, {"merge_adapter": True}
    )
    assert ref == ModelRef(path="/out", kind="adapter")
    assert seen == {
        "method": "dpo",
        "records": [{"x": 1}],
        "start": TRAINED,
        "settings": {"beta": 0.1},
        "seed": 7,
        "load_kwargs": {"dtype": "float32", "merge_adapter": True},
        "meta": {"iteration": 2, "start_from": "previous"},
    }
    rules.train_iteration_student("sft", [], None, {}, 5, model, 0, {})
    assert seen["start"] is model and seen["seed"] == 5
    assert seen["meta"] == {"iteration": 0, "start_from": "base"}
    later = {"learning_rate": 1e-4, "later_iterations": {"learning_rate": 3e-5}}
    rules.train_iteration_student("sft", [], TRAINED, later, 5, model, 2, {}, from_base=True)
    assert seen["start"] is model and seen["settings"] == {"learning_rate": 1e-4}
    assert seen["seed"] == 7 and seen["meta"] == {"iteration": 2, "start_from": "base"}

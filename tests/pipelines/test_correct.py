"""`correct` nodes, called directly: the student's (resumable) rollouts on the tiny model,
and the scripted teacher's corrections of failed rollouts."""

from __future__ import annotations

import pytest

from leap_kalm.datasets import JSONLDataset
from leap_kalm.pipelines.correct.nodes import correct_failed_rollouts, roll_out_student
from leap_kalm.schemas import ModelRef
from leap_kalm.teachers import validate_correction
from tests.pipelines.conftest import LEAP, TEACHER, snapshot

MODEL = {"name": "tiny-test"}


@pytest.fixture(scope="module")
def student(tiny_model_dir) -> ModelRef:
    return ModelRef(path=tiny_model_dir, kind="model")


@pytest.fixture(scope="module")
def rollouts(alfworld_games, student) -> list[dict]:
    """Iteration 1's rollouts of the tiny student on every train game, uninterrupted."""
    return list(roll_out_student(alfworld_games, student, LEAP, MODEL, 1)([]))


def _refuse_to_load(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("no model should be loaded")

    monkeypatch.setattr("leap_kalm.llm.models.load_model", fail)


# -- correct_failed_rollouts -------------------------------------------------------------


def test_one_admissible_correction_per_failed_rollout(
    failed_rollouts, privileged_states, alfworld_games, expert_logs
):
    rollouts = [failed_rollouts[0], expert_logs[1], failed_rollouts[2]]  # the expert won
    before = snapshot(rollouts, privileged_states, alfworld_games)
    corrections = correct_failed_rollouts(
        rollouts, privileged_states, alfworld_games, TEACHER, LEAP
    )
    assert [c["game_id"] for c in corrections] == [
        failed_rollouts[0]["game_id"],
        failed_rollouts[2]["game_id"],
    ]
    for correction, trajectory in zip(
        corrections, [failed_rollouts[0], failed_rollouts[2]], strict=True
    ):
        validate_correction(correction, trajectory)  # lengths, keys, admissible actions
        assert correction["teacher"] == "scripted" and correction["teacher_usage"] == {}
        assert trajectory["task"] in correction["summary"]
        assert [s["original_action"] for s in correction["steps"]] == [
            s["action"] for s in trajectory["steps"]
        ]
        for step in correction["steps"]:
            assert step["is_corrected"] == (step["corrected_action"] != step["original_action"])
    assert snapshot(rollouts, privileged_states, alfworld_games) == before


def test_the_first_correction_is_the_first_step_of_the_optimal_plan(corrections, privileged_states):
    """Every rollout starts in the game's initial state, where the planner's plan applies:
    a first step is corrected to the plan's first action or kept as a search step."""
    assert len(corrections) == len(privileged_states) == 3
    for correction, privileged in zip(corrections, privileged_states, strict=True):
        assert correction["game_id"] == privileged["game_id"]
        first, plan = correction["steps"][0], privileged["optimal_actions"]
        if first["is_corrected"]:
            assert first["corrected_action"] == plan[0]
        else:  # kept: on the plan, or a search step while the plan's first step is a search
            assert first["corrected_action"] == first["original_action"]
            assert first["original_action"] == plan[0] or (
                plan[0].startswith("go to ")
                and first["original_action"].startswith(("go to ", "open ", "close ", "look"))
            ), (first, plan[0])
    assert any(s["is_corrected"] for c in corrections for s in c["steps"])


def test_corrections_are_deterministic(
    corrections, failed_rollouts, privileged_states, alfworld_games
):
    again = correct_failed_rollouts(
        failed_rollouts, privileged_states, alfworld_games, TEACHER, LEAP
    )
    assert again == corrections


def test_no_failed_rollouts_no_corrections(expert_logs, privileged_states, alfworld_games):
    assert correct_failed_rollouts([], privileged_states, alfworld_games, TEACHER, LEAP) == []
    assert (
        correct_failed_rollouts(expert_logs, privileged_states, alfworld_games, TEACHER, LEAP) == []
    )


def test_a_failed_rollout_needs_its_privileged_state_and_game(
    failed_rollouts, privileged_states, alfworld_games
):
    game = failed_rollouts[0]["game_id"]
    with pytest.raises(KeyError, match=game):
        correct_failed_rollouts(
            failed_rollouts[:1], privileged_states[1:], alfworld_games, TEACHER, LEAP
        )
    with pytest.raises(KeyError, match="has no game file"):
        correct_failed_rollouts(
            failed_rollouts[:1], privileged_states, alfworld_games[1:], TEACHER, LEAP
        )


# -- roll_out_student ----------------------------------------------------------------------


def test_iteration_0_rolls_nothing_out_and_loads_no_model(monkeypatch, alfworld_games):
    _refuse_to_load(monkeypatch)
    produce = roll_out_student(alfworld_games, None, LEAP, MODEL, 0)
    assert callable(produce) and list(produce([])) == []


def test_a_resumed_run_with_every_game_played_loads_no_model(monkeypatch, alfworld_games):
    _refuse_to_load(monkeypatch)
    student = ModelRef(path="/students/iter0", kind="adapter")
    done = [{"game_id": g["game_id"]} for g in alfworld_games if g["split"] == "train"]
    assert list(roll_out_student(alfworld_games, student, LEAP, MODEL, 1)(done)) == []


def test_a_later_iteration_needs_a_trained_previous_student(monkeypatch, alfworld_games):
    _refuse_to_load(monkeypatch)
    produce = roll_out_student(alfworld_games, None, LEAP, MODEL, 2)  # lazy: fails when played
    with pytest.raises(FileNotFoundError, match="needs the student of iteration 1"):
        list(produce([]))
    skipped = ModelRef(path="", kind="skipped", meta={"reason": "x"})
    with pytest.raises(ValueError, match="was skipped, not trained"):
        list(roll_out_student(alfworld_games, skipped, LEAP, MODEL, 2)([]))


def test_the_student_plays_every_train_game_once(rollouts, train_games, tiny_model_dir):
    assert [t["game_id"] for t in rollouts] == [g["game_id"] for g in train_games]
    for trajectory, game in zip(rollouts, train_games, strict=True):
        assert trajectory["env"] == "alfworld" and trajectory["split"] == "train"
        assert trajectory["task_type"] == game["task_type"] and trajectory["task"]
        assert trajectory["model_id"] == tiny_model_dir
        assert trajectory["iteration"] == 1 and trajectory["seed"] == 1  # seed + iteration
        assert trajectory["sampling"]["temperature"] == 1.0
        assert trajectory["sampling"]["max_new_tokens"] == 12
        assert 1 <= trajectory["num_actions"] == len(trajectory["steps"]) <= 3
        for step in trajectory["steps"]:
            assert step["candidate_actions"] and "action" in step and "repair" in step
        assert trajectory["success"] is False  # a random-init model does not win in 3 steps


def test_a_producer_given_finished_trajectories_plays_only_the_rest(
    alfworld_games, student, rollouts
):
    before = snapshot(alfworld_games)
    produce = roll_out_student(alfworld_games, student, LEAP, MODEL, 1)
    rest = list(produce([rollouts[1]]))
    assert [t["game_id"] for t in rest] == [rollouts[0]["game_id"], rollouts[2]["game_id"]]
    assert rest == [rollouts[0], rollouts[2]]  # same as uninterrupted (per-game seeding)
    assert list(produce(rollouts)) == []
    assert snapshot(alfworld_games) == before


def test_a_resumable_dataset_keeps_what_an_interrupted_run_wrote(
    tmp_path, alfworld_games, student, rollouts
):
    dataset = JSONLDataset(
        filepath=str(tmp_path / "rollouts.jsonl"), save_args={"mode": "resume", "key": "game_id"}
    )
    interrupted = {**rollouts[0], "marker": "written before the interruption"}
    JSONLDataset(filepath=dataset.partial_path).save([interrupted])
    dataset.save(roll_out_student(alfworld_games, student, LEAP, MODEL, 1))
    saved = dataset.load()
    assert saved == [interrupted, rollouts[1], rollouts[2]]


def test_n_rollout_games_samples_a_seeded_subset(alfworld_games, student, train_games):
    leap = {**LEAP, "n_rollout_games": 2}
    first = [t["game_id"] for t in roll_out_student(alfworld_games, student, leap, MODEL, 1)([])]
    again = [t["game_id"] for t in roll_out_student(alfworld_games, student, leap, MODEL, 1)([])]
    assert len(first) == 2 == len(set(first)) and first == again
    assert set(first) <= {g["game_id"] for g in train_games}

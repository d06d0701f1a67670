"""`train_dpo` nodes, called directly: preference pairs from the teacher's corrections, and
DPO of the tiny model on top of the previous (merged) student."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leap_kalm.llm.prompts import format_completion
from leap_kalm.pipelines.train_dpo.nodes import build_dpo_pairs, train_dpo_student
from leap_kalm.pipelines.train_sft.nodes import build_sft_records
from tests.pipelines.conftest import LEAP, TRAIN, snapshot

DPO = {"train_method": "dpo"}


@pytest.fixture(scope="module")
def pairs(failed_rollouts, corrections):
    return build_dpo_pairs(failed_rollouts, corrections, LEAP)


def test_one_pair_per_corrected_step(failed_rollouts, corrections, pairs):
    corrected = [(c["game_id"], s) for c in corrections for s in c["steps"] if s["is_corrected"]]
    assert 0 < len(pairs) == len(corrected) < sum(len(c["steps"]) for c in corrections)
    for pair, (game_id, step) in zip(pairs, corrected, strict=True):
        assert pair["game_id"] == game_id
        assert pair["chosen"] == [
            {
                "role": "assistant",
                "content": format_completion(step["corrected_reason"], step["corrected_action"]),
            }
        ]
        assert pair["rejected"] == [
            {
                "role": "assistant",
                "content": format_completion(step["original_reason"], step["original_action"]),
            }
        ]
        assert pair["chosen"] != pair["rejected"]
        user = pair["prompt"][1]["content"]
        assert step["original_observation"] in user


def test_pairs_share_the_prompts_the_student_saw(failed_rollouts, corrections, pairs):
    """A pair's prompt is the SFT prompt of the same step: what the student saw when acting."""
    records, _ = build_sft_records(
        [], failed_rollouts, corrections, [], {**LEAP, "val_fraction": 0}, 1
    )
    sft_prompts = {json.dumps(r["prompt"]) for r in records}
    assert all(json.dumps(p["prompt"]) in sft_prompts for p in pairs)


def test_inputs_are_not_mutated_and_pairs_are_deterministic(failed_rollouts, corrections, pairs):
    before = snapshot(failed_rollouts, corrections)
    assert build_dpo_pairs(failed_rollouts, corrections, LEAP) == pairs
    assert snapshot(failed_rollouts, corrections) == before


def test_no_corrected_steps_no_pairs(failed_rollouts, corrections):
    assert build_dpo_pairs(failed_rollouts, [], LEAP) == []
    untouched = [
        {**c, "steps": [{**s, "is_corrected": False} for s in c["steps"]]} for c in corrections
    ]
    assert build_dpo_pairs(failed_rollouts, untouched, LEAP) == []


def test_a_correction_of_the_wrong_length_is_named(failed_rollouts, corrections):
    short = {**corrections[0], "steps": corrections[0]["steps"][:-1]}
    with pytest.raises(ValueError, match=f"correction of {corrections[0]['game_id']} has"):
        build_dpo_pairs(failed_rollouts, [short], LEAP)


def test_dpo_is_skipped_at_iteration_0_and_when_sft_is_chosen():
    at_0 = train_dpo_student([], None, {}, DPO, {"name": "tiny-test"}, 0)
    assert at_0.kind == "skipped" and at_0.meta == {"reason": "iteration 0 is behaviour cloning"}
    with_sft = train_dpo_student([], None, {}, {"train_method": "sft"}, {"name": "tiny-test"}, 1)
    assert with_sft.kind == "skipped" and with_sft.meta == {"reason": "train_method is sft"}


def test_dpo_needs_the_previous_student(pairs):
    with pytest.raises(FileNotFoundError, match="needs the student of iteration 2"):
        train_dpo_student(pairs, None, TRAIN, DPO, {"name": "tiny-test"}, 3)


def test_unknown_trainer_settings_fail_before_loading_a_model(monkeypatch, pairs, sft_student):
    def fail(*args, **kwargs):
        raise AssertionError("no model should be loaded")

    monkeypatch.setattr("leap_kalm.llm.models.load_model", fail)
    with pytest.raises(ValueError, match=r"unknown keys \['bta'\]"):
        train_dpo_student(pairs, sft_student, {"bta": 0.5}, DPO, {"name": "tiny-test"}, 1)


def test_dpo_trains_a_new_lora_on_the_merged_previous_student(pairs, sft_student, staging):
    import torch

    from leap_kalm.llm.models import load_model

    before = snapshot(pairs)
    params = {**TRAIN, "learning_rate": 1e-2, "beta": 0.2}
    ref = train_dpo_student(pairs, sft_student, params, DPO, {"name": "tiny-test"}, 1)
    assert Path(ref.path).parent == staging and ref.meta["staged"]
    assert ref.kind == "model"  # the new LoRA is merged into the merged previous student
    assert ref.meta["started_from"] == sft_student.path
    assert ref.meta["n_records"] == len(pairs) and ref.meta["iteration"] == 1
    assert ref.meta["params"]["beta"] == 0.2 and ref.meta["params"]["seed"] == 1
    assert snapshot(pairs) == before
    previous, _ = load_model(sft_student, merge_adapter=True)
    trained, _ = load_model(ref.path)
    old, new = previous.state_dict(), trained.state_dict()
    assert set(new) == set(old)
    assert any(not torch.equal(old[k], new[k]) for k in old), "DPO changed the weights"


def test_contrast_pairs_reject_corrected_actions_at_approved_steps(
    failed_rollouts, corrections, pairs
):
    both = build_dpo_pairs(failed_rollouts, corrections, {**LEAP, "dpo_contrast_ratio": 1.0})
    assert both[: len(pairs)] == pairs
    contrasts = both[len(pairs) :]
    preferred = {
        s["corrected_action"] for c in corrections for s in c["steps"] if s["is_corrected"]
    }
    by_id = {t["game_id"]: t for t in failed_rollouts}
    for pair in contrasts:
        rejected = pair["rejected"][0]["content"].rsplit("ACTION:\n", 1)[1]
        chosen = pair["chosen"][0]["content"].rsplit("ACTION:\n", 1)[1]
        assert rejected in preferred and chosen != rejected
        # chosen is the student's own action at a step of its trajectory where the rejected
        # action was a candidate
        steps = by_id[pair["game_id"]]["steps"]
        assert any(s["action"] == chosen and rejected in s["candidate_actions"] for s in steps)
    assert 0 < len(contrasts) <= len(pairs)
    with pytest.raises(ValueError, match="dpo_contrast_ratio must be >= 0"):
        build_dpo_pairs(failed_rollouts, corrections, {**LEAP, "dpo_contrast_ratio": -0.5})

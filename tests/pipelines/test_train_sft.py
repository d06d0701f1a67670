"""`train_sft` nodes, called directly: DAgger-aggregated SFT records from annotated expert
logs (iteration 0) and corrections (iterations >= 1), and LoRA SFT of the tiny model."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from leap_kalm.llm.prompts import format_completion
from leap_kalm.pipelines.evaluate.nodes import select_student
from leap_kalm.pipelines.train_dpo.nodes import train_dpo_student
from leap_kalm.pipelines.train_sft.nodes import build_sft_records, train_sft_student
from tests.pipelines.conftest import LEAP, TRAIN, snapshot
from tests.training.test_sft import RECORDS

SFT_RECORDS = [
    {**r, "game_id": f"g{i}", "split": "train", "iteration": 0} for i, r in enumerate(RECORDS)
]


def _by_game(records):
    games = {}
    for record in records:
        games.setdefault(record["split"], set()).add(record["game_id"])
    return games


def _adapter_weights(path):
    from safetensors.torch import load_file

    return load_file(str(Path(path) / "adapter_model.safetensors"))


# -- build_sft_records ---------------------------------------------------------------------


def test_iteration_0_learns_every_annotated_expert_step(annotated_logs, sft_records_0):
    records, pool = sft_records_0
    n_steps = sum(len(t["steps"]) for t in annotated_logs)
    assert len(pool) == len(records) == n_steps  # one iteration: nothing is subsampled
    assert {r["iteration"] for r in pool} == {r["iteration"] for r in records} == {0}
    expected = {
        (t["game_id"], format_completion(s["reason"], s["action"]))
        for t in annotated_logs
        for s in t["steps"]
    }
    assert {(r["game_id"], r["completion"][0]["content"]) for r in records} == expected
    for record in records:
        assert [m["role"] for m in record["prompt"]] == ["system", "user"]
        assert record["completion"][0]["role"] == "assistant" and len(record["completion"]) == 1
    first = annotated_logs[0]["steps"][0]
    prompt = next(r for r in records if r["completion"][0]["content"].endswith(first["action"]))
    user = prompt["prompt"][1]["content"]
    assert annotated_logs[0]["task"] in user
    assert all(f"- {a}" in user for a in first["candidate_actions"])


def test_records_split_85_15_by_trajectory(sft_records_0):
    records, _ = sft_records_0
    games = _by_game(records)
    assert set(games) == {"train", "val"}
    assert games["train"].isdisjoint(games["val"]) and len(games["val"]) == 1  # of 3 games
    assert all(r["split"] == "val" for r in records if r["game_id"] in games["val"])


def test_no_validation_split_when_val_fraction_is_0(annotated_logs):
    records, _ = build_sft_records(annotated_logs, [], [], [], {**LEAP, "val_fraction": 0}, 0)
    assert {r["split"] for r in records} == {"train"}


def test_rollouts_and_corrections_are_not_used_at_iteration_0(
    annotated_logs, failed_rollouts, corrections, sft_records_0
):
    before = snapshot(annotated_logs, failed_rollouts, corrections)
    assert build_sft_records(annotated_logs, failed_rollouts, corrections, [], LEAP, 0) == (
        sft_records_0
    )
    assert snapshot(annotated_logs, failed_rollouts, corrections) == before


def test_history_window_hides_older_observations(annotated_logs):
    trajectory = max(annotated_logs, key=lambda t: len(t["steps"]))
    second = trajectory["steps"][1]["observation"]  # what step 0's action led to

    def last_prompt(window):
        records, _ = build_sft_records(
            [trajectory], [], [], [], {**LEAP, "history_window": window, "val_fraction": 0}, 0
        )
        return records[-1]["prompt"][1]["content"]

    assert second in last_prompt(None)
    hidden = last_prompt(0)
    assert second not in hidden and "Earlier actions: " + trajectory["steps"][0]["action"] in hidden


def test_iteration_1_aggregates_corrections_with_the_pool(
    failed_rollouts, corrections, sft_records_0
):
    _, pool_0 = sft_records_0
    stale = [{**pool_0[0], "iteration": 1}]  # a record of an earlier run of iteration 1
    before = snapshot(failed_rollouts, corrections, pool_0)
    records, pool = build_sft_records([], failed_rollouts, corrections, pool_0 + stale, LEAP, 1)
    n_new = sum(len(t["steps"]) for t in failed_rollouts)
    assert Counter(r["iteration"] for r in pool) == {0: len(pool_0), 1: n_new}
    assert [r for r in pool if r["iteration"] == 0] == pool_0
    corrected = {
        (c["game_id"], format_completion(s["corrected_reason"], s["corrected_action"]))
        for c in corrections
        for s in c["steps"]
    }
    assert {
        (r["game_id"], r["completion"][0]["content"]) for r in pool if r["iteration"] == 1
    } == corrected
    # DAgger: each iteration weighs equally, subsampled to the smallest
    smallest = min(len(pool_0), n_new)
    assert Counter(r["iteration"] for r in records) == {0: smallest, 1: smallest}
    assert {r["split"] for r in records} <= {"train", "val"}
    assert snapshot(failed_rollouts, corrections, pool_0) == before
    again = build_sft_records([], failed_rollouts, corrections, pool_0 + stale, LEAP, 1)
    assert again == (records, pool)


def test_iteration_1_can_train_only_the_corrected_steps_beside_a_fixed_expert_share(
    failed_rollouts, corrections, sft_records_0
):
    _, pool_0 = sft_records_0
    params = {**LEAP, "trained_steps": "corrected", "dagger_expert_actions": 3}
    records, pool = build_sft_records([], failed_rollouts, corrections, pool_0, params, 1)
    n_corrected = sum(s["is_corrected"] for c in corrections for s in c["steps"])
    assert 0 < n_corrected < sum(len(t["steps"]) for t in failed_rollouts)
    assert Counter(r["iteration"] for r in pool) == {0: len(pool_0), 1: n_corrected}
    # every corrected step, and 3 expert steps whatever the corrections count
    assert Counter(r["iteration"] for r in records) == {0: 3, 1: n_corrected}


def test_trained_corrections_reaches_the_records_of_iteration_1(
    failed_rollouts, corrections, sft_records_0
):
    """``leap.trained_corrections: 2``: a trajectory the teacher corrected at every step
    trains its first two steps only (per-step format here: one record per trained step)."""
    _, pool_0 = sft_records_0
    every_step = [
        {**c, "steps": [{**s, "is_corrected": True} for s in c["steps"]]} for c in corrections
    ]
    n_steps = sum(len(c["steps"]) for c in corrections)
    assert all(len(c["steps"]) > 2 for c in corrections)
    for cap, expected in ((None, n_steps), (2, 2 * len(corrections))):
        params = {**LEAP, "trained_corrections": cap}
        _, pool = build_sft_records([], failed_rollouts, every_step, pool_0, params, 1)
        assert sum(r["iteration"] == 1 for r in pool) == expected


def test_correction_packing_branches_makes_one_record_per_corrected_trajectory(
    failed_rollouts, corrections, sft_records_0
):
    from leap_kalm.llm.records import supervised_actions

    _, pool_0 = sft_records_0
    params = {**LEAP, "prompt_format": "conversation", "trained_steps": "corrected"}
    n_corrected = sum(s["is_corrected"] for c in corrections for s in c["steps"])
    corrected_games = sum(any(s["is_corrected"] for s in c["steps"]) for c in corrections)
    for packing, n_records in (("segments", n_corrected), ("branches", corrected_games)):
        _, pool = build_sft_records(
            [], failed_rollouts, corrections, pool_0, {**params, "correction_packing": packing}, 1
        )
        new = [r for r in pool if r["iteration"] == 1]
        assert len(new) == n_records
        assert sum(map(supervised_actions, new)) == n_corrected
    assert all(r["loss_turns"] == [] and r["branches"] for r in new)
    with pytest.raises(ValueError, match="leap.correction_packing must be one of"):
        build_sft_records(
            [], failed_rollouts, corrections, pool_0, {**params, "correction_packing": "x"}, 1
        )


def test_untrained_correction_verbs_leave_those_corrections_out_of_iteration_1(
    failed_rollouts, corrections, sft_records_0
):
    from leap_kalm.llm.parsing import action_verb

    _, pool_0 = sft_records_0
    params = {**LEAP, "trained_steps": "corrected"}
    verbs = [
        action_verb(s["corrected_action"])
        for c in corrections
        for s in c["steps"]
        if s["is_corrected"]
    ]
    skipped = Counter(verbs).most_common(1)[0][0]
    assert len(set(verbs)) > 1, verbs  # the fixture corrects more than one kind of action
    _, pool = build_sft_records(
        [],
        failed_rollouts,
        corrections,
        pool_0,
        {**params, "untrained_correction_verbs": [skipped]},
        1,
    )
    trained = [
        r["completion"][0]["content"].split("ACTION:")[-1].strip()
        for r in pool
        if r["iteration"] == 1
    ]
    assert len(trained) == sum(v != skipped for v in verbs)
    assert all(action_verb(a) != skipped for a in trained)
    with pytest.raises(
        ValueError, match="untrained_correction_verbs needs leap.trained_steps: corrected"
    ):
        build_sft_records(
            [],
            failed_rollouts,
            corrections,
            pool_0,
            {**LEAP, "untrained_correction_verbs": ["go"]},
            1,
        )
    with pytest.raises(
        ValueError,
        match=r"LeapParams.untrained_correction_verbs must be a list, got the string 'go'",
    ):
        build_sft_records(
            [],
            failed_rollouts,
            corrections,
            pool_0,
            {**params, "untrained_correction_verbs": "go"},
            1,
        )


def test_capped_correction_verbs_reach_the_records_of_iteration_1(
    failed_rollouts, corrections, sft_records_0
):
    """``capped_correction_verbs: [<verb>]`` with ``trained_corrections: 1``: each
    trajectory trains at most one correction with that verb, and every correction with
    another verb."""
    from leap_kalm.llm.parsing import action_verb

    _, pool_0 = sft_records_0
    every_step = [
        {**c, "steps": [{**s, "is_corrected": True} for s in c["steps"]]} for c in corrections
    ]
    verbs = [[action_verb(s["corrected_action"]) for s in c["steps"]] for c in every_step]
    capped = Counter(v for vs in verbs for v in vs).most_common(1)[0][0]
    assert any(vs.count(capped) > 1 for vs in verbs), verbs  # the cap has something to cut
    params = {**LEAP, "trained_steps": "corrected", "trained_corrections": 1}
    _, pool = build_sft_records(
        [], failed_rollouts, every_step, pool_0, {**params, "capped_correction_verbs": [capped]}, 1
    )
    trained = Counter(
        (r["game_id"], action_verb(r["completion"][0]["content"].split("ACTION:")[-1]))
        for r in pool
        if r["iteration"] == 1
    )
    for c, vs in zip(every_step, verbs, strict=True):
        assert trained[(c["game_id"], capped)] == 1
        for verb in set(vs) - {capped}:
            assert trained[(c["game_id"], verb)] == vs.count(verb)
    with pytest.raises(ValueError, match="capped_correction_verbs needs leap.trained_steps"):
        build_sft_records(
            [], failed_rollouts, every_step, pool_0, {**LEAP, "capped_correction_verbs": ["go"]}, 1
        )


def test_uncapped_invalid_corrections_reach_the_records_of_iteration_1(
    failed_rollouts, corrections, sft_records_0
):
    """``uncapped_invalid_corrections: true`` with ``trained_corrections: 1``: a correction
    of a step whose action was no candidate is trained besides the first correction."""
    _, pool_0 = sft_records_0
    every_step = [
        {**c, "steps": [{**s, "is_corrected": True} for s in c["steps"]]} for c in corrections
    ]
    rollouts = [{**r, "steps": [dict(s) for s in r["steps"]]} for r in failed_rollouts]
    by_id = {r["game_id"]: r for r in rollouts}
    marked = 0
    for c in every_step:
        steps = by_id[c["game_id"]]["steps"]
        if len(steps) > 2 and steps[-1]["candidate_actions"]:
            steps[-1]["action"] = "go to nowhere 9"
            marked += 1
    assert marked, "no rollout long enough to mark a late step invalid"
    params = {**LEAP, "trained_steps": "corrected", "trained_corrections": 1}

    def new_records(extra):
        _, pool = build_sft_records([], rollouts, every_step, pool_0, {**params, **extra}, 1)
        return [r for r in pool if r["iteration"] == 1]

    capped = new_records({})
    uncapped = new_records({"uncapped_invalid_corrections": True})
    assert len(capped) == len(every_step)  # one correction each
    assert len(uncapped) == len(every_step) + marked
    with pytest.raises(ValueError, match="uncapped_invalid_corrections needs leap.trained_steps"):
        build_sft_records(
            [], rollouts, every_step, pool_0, {**LEAP, "uncapped_invalid_corrections": True}, 1
        )


def test_invalid_corrections_as_recovery_reach_the_records_of_iteration_1(
    failed_rollouts, corrections, sft_records_0
):
    """``invalid_corrections_as_recovery: true``: a correction of a step whose action was
    no candidate trains the teacher's answer after the student's action and the
    observation that followed it, in the pipeline's conversation records."""
    _, pool_0 = sft_records_0
    every_step = [
        {**c, "steps": [{**s, "is_corrected": True} for s in c["steps"]]} for c in corrections
    ]
    rollouts = [{**r, "steps": [dict(s) for s in r["steps"]]} for r in failed_rollouts]
    by_id = {r["game_id"]: r for r in rollouts}
    for c in every_step:  # each rollout's first action becomes one the room lacks
        by_id[c["game_id"]]["steps"][0]["action"] = "go to nowhere 9"
        c["steps"][0] = {**c["steps"][0], "original_action": "go to nowhere 9"}
    params = {**LEAP, "prompt_format": "conversation", "trained_steps": "corrected"}

    def first_records(extra):
        _, pool = build_sft_records([], rollouts, every_step, pool_0, {**params, **extra}, 1)
        new = [r for r in pool if r["iteration"] == 1]
        first = {}
        for record in new:  # a trajectory's segments in order: its first correction first
            first.setdefault(record["game_id"], record)
        return first

    replaced = first_records({})
    recovered = first_records({"invalid_corrections_as_recovery": True})
    long_enough = {c["game_id"] for c in every_step if len(by_id[c["game_id"]]["steps"]) > 1}
    assert long_enough and set(recovered) >= long_enough
    for game_id in long_enough:
        assert replaced[game_id]["loss_turns"] == [2]
        record = recovered[game_id]
        assert record["loss_turns"] == [4]
        assert record["messages"][2]["content"].endswith("ACTION:\ngo to nowhere 9")
        assert record["messages"][3]["content"] == by_id[game_id]["steps"][1]["observation"]
        assert record["messages"][4] == replaced[game_id]["messages"][2]


def test_retraining_from_the_base_model_keeps_every_expert_step(
    failed_rollouts, corrections, sft_records_0
):
    """``start_from: base`` is DAgger retrained: all of iteration 0's records, beside the
    corrections (capped among the later iterations as before); an explicit
    ``dagger_expert_actions`` still caps the expert records."""
    _, pool_0 = sft_records_0
    n_new = sum(len(t["steps"]) for t in failed_rollouts)
    params = {**LEAP, "start_from": "base", "dagger_actions_per_iteration": 2}
    records, _ = build_sft_records([], failed_rollouts, corrections, pool_0, params, 1)
    assert len(pool_0) > 2 and n_new > 2
    assert Counter(r["iteration"] for r in records) == {0: len(pool_0), 1: 2}
    capped = {**params, "dagger_expert_actions": 1}
    records, _ = build_sft_records([], failed_rollouts, corrections, pool_0, capped, 1)
    assert Counter(r["iteration"] for r in records) == {0: 1, 1: 2}
    with pytest.raises(
        ValueError, match=r"leap.start_from must be one of \('previous', 'base'\), got 'scratch'"
    ):
        build_sft_records(
            [], failed_rollouts, corrections, pool_0, {**LEAP, "start_from": "scratch"}, 1
        )


def test_corrections_that_do_not_match_their_rollouts_are_named(failed_rollouts, corrections):
    with pytest.raises(ValueError, match="correction for unknown trajectory"):
        build_sft_records([], failed_rollouts[1:], corrections, [], LEAP, 1)
    short = {**corrections[0], "steps": corrections[0]["steps"][:-1]}
    with pytest.raises(ValueError, match="steps, the trajectory"):
        build_sft_records([], failed_rollouts, [short], [], LEAP, 1)


# -- train_sft_student ---------------------------------------------------------------------


def test_sft_node_trains_in_two_processes_when_asked(tiny_model_dir, staging):
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
    assert Path(ref.path).parent == staging


def test_sft_is_skipped_when_the_iteration_trains_with_dpo():
    skipped = train_sft_student([], None, {}, {"train_method": "dpo"}, {"name": "tiny-test"}, 1)
    assert skipped.kind == "skipped" and skipped.meta == {"reason": "train_method is dpo"}
    with pytest.raises(
        ValueError, match=r"leap.train_method must be one of \('sft', 'dpo'\), got 'ppo'"
    ):
        train_sft_student([], None, {}, {"train_method": "ppo"}, {}, 0)


def test_iteration_0_is_behaviour_cloning_even_when_dpo_is_chosen(tiny_model_dir, staging):
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


def test_iteration_0_trains_on_the_train_split_only(sft_student, sft_records_0, tiny_model_dir):
    records, _ = sft_records_0
    assert sft_student.kind == "adapter" and sft_student.meta["staged"]
    assert sft_student.meta["n_records"] == sum(r["split"] == "train" for r in records)
    assert sft_student.meta["n_records"] < len(records)  # val records are held out
    assert sft_student.meta["started_from"] == tiny_model_dir
    assert sft_student.meta["iteration"] == 0 and sft_student.meta["params"]["seed"] == 0
    assert sft_student.meta["params"]["lora"]["r"] == 2
    assert (Path(sft_student.path) / "adapter_config.json").is_file()


def test_iteration_1_continues_training_the_previous_adapter(
    sft_student, failed_rollouts, corrections, sft_records_0, staging
):
    records, _ = build_sft_records([], failed_rollouts, corrections, sft_records_0[1], LEAP, 1)
    before = snapshot(records)
    ref = train_sft_student(records, sft_student, TRAIN, LEAP, {"name": "tiny-test"}, 1)
    assert ref.kind == "adapter" and Path(ref.path).parent == staging
    assert ref.meta["started_from"] == sft_student.path
    assert ref.meta["iteration"] == 1 and ref.meta["params"]["seed"] == 1  # seed + iteration
    old, new = _adapter_weights(sft_student.path), _adapter_weights(ref.path)
    assert old.keys() == new.keys()
    assert any(not (old[k] == new[k]).all() for k in old), "one step changes the adapter"
    assert snapshot(records) == before


def test_iteration_1_can_retrain_the_base_model_with_iteration_0_settings(
    sft_student, failed_rollouts, corrections, sft_records_0, tiny_model_dir, staging
):
    leap = {**LEAP, "start_from": "base"}
    records, _ = build_sft_records([], failed_rollouts, corrections, sft_records_0[1], leap, 1)
    settings = {**TRAIN, "learning_rate": 2e-4, "later_iterations": {"learning_rate": 1e-6}}
    model = {"name": tiny_model_dir}
    for previous in (sft_student, None):  # the previous student is neither used nor needed
        ref = train_sft_student(records, previous, settings, leap, model, 1)
        assert ref.kind == "adapter" and ref.meta["started_from"] == tiny_model_dir
        assert ref.meta["start_from"] == "base" and ref.meta["iteration"] == 1
        assert ref.meta["params"]["learning_rate"] == 2e-4  # not later_iterations'
    refined = train_sft_student(records, sft_student, settings, LEAP, model, 1)
    assert refined.meta["start_from"] == "previous"
    assert refined.meta["params"]["learning_rate"] == 1e-6


def test_unknown_trainer_settings_fail_before_loading_a_model(monkeypatch, sft_records_0):
    def fail(*args, **kwargs):
        raise AssertionError("no model should be loaded")

    monkeypatch.setattr("leap_kalm.llm.models.load_model", fail)
    with pytest.raises(ValueError, match=r"unknown keys \['learning_rat'\]"):
        train_sft_student(
            sft_records_0[0], None, {"learning_rat": 1e-3}, LEAP, {"name": "tiny-test"}, 0
        )

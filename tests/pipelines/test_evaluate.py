"""`evaluate` nodes, called directly: student selection, (resumable) evaluation rollouts of
the tiny student, the per-iteration summary and the cumulative report."""

from __future__ import annotations

import pytest

from leap_kalm.pipelines.evaluate.nodes import (
    PAIRED_COLUMNS,
    SUMMARY_COLUMNS,
    compare_iterations,
    evaluate_student,
    report_leap_progress,
    select_student,
    summarize_evaluation,
)
from leap_kalm.pipelines.train_dpo.nodes import train_dpo_student
from leap_kalm.pipelines.train_sft.nodes import train_sft_student
from leap_kalm.schemas import ModelRef
from tests.pipelines.conftest import LEAP, snapshot

MODEL = {"name": "tiny-test"}


@pytest.fixture(scope="module")
def eval_rollouts(alfworld_games, sft_student):
    return list(evaluate_student(alfworld_games, sft_student, LEAP, MODEL, 0)([]))


def _trajectory(split, task_type, success, num_actions, repairs=()):
    steps = [{"action": "look", "candidate_actions": ["look"], "repair": r} for r in repairs]
    steps += [{"action": "look", "candidate_actions": ["look"]}] * (num_actions - len(steps))
    return {
        "split": split,
        "task_type": task_type,
        "success": success,
        "num_actions": num_actions,
        "steps": steps,
    }


# -- select_student ------------------------------------------------------------------------


def test_the_method_not_chosen_is_skipped_and_selection_picks_the_trained_one():
    skipped_dpo = train_dpo_student([], None, {}, {"train_method": "sft"}, {"name": "tiny-test"}, 1)
    skipped_sft = train_sft_student([], None, {}, {"train_method": "dpo"}, {"name": "tiny-test"}, 1)
    assert skipped_dpo.kind == skipped_sft.kind == "skipped"
    trained = ModelRef(path="/m", kind="adapter")
    assert select_student(trained, skipped_dpo, {"train_method": "sft"}) is trained
    assert select_student(skipped_sft, trained, {"train_method": "dpo"}) is trained
    with pytest.raises(ValueError, match="no student was trained"):
        select_student(skipped_sft, skipped_dpo, {"train_method": "dpo"})
    with pytest.raises(
        ValueError, match=r"leap.train_method must be one of \('sft', 'dpo'\), got 'ppo'"
    ):
        select_student(trained, skipped_dpo, {"train_method": "ppo"})


# -- evaluate_student ----------------------------------------------------------------------


def test_the_student_plays_every_evaluation_game_greedily(
    eval_rollouts, alfworld_games, sft_student
):
    valid = [g for g in alfworld_games if g["split"] in ("valid_seen", "valid_unseen")]
    assert [(t["game_id"], t["split"], t["task_type"]) for t in eval_rollouts] == [
        (g["game_id"], g["split"], g["task_type"]) for g in valid
    ]
    for trajectory in eval_rollouts:
        assert trajectory["model_id"] == sft_student.path and trajectory["iteration"] == 0
        assert trajectory["sampling"]["temperature"] == 0.0 and trajectory["sampling"]["seed"] == 0
        assert 1 <= trajectory["num_actions"] == len(trajectory["steps"]) <= 3


def test_an_evaluation_given_finished_games_plays_only_the_rest(
    eval_rollouts, alfworld_games, sft_student
):
    before = snapshot(alfworld_games)
    produce = evaluate_student(alfworld_games, sft_student, LEAP, MODEL, 0)
    assert list(produce(eval_rollouts[:1])) == eval_rollouts[1:]  # greedy: same as uninterrupted
    assert snapshot(alfworld_games) == before


def test_an_evaluation_in_a_fresh_process_plays_the_same_games_the_same_way(
    eval_rollouts, alfworld_games, sft_student
):
    leap = {**LEAP, "eval_fresh_process": True}
    produce = evaluate_student(alfworld_games, sft_student, leap, MODEL, 0)
    assert list(produce(eval_rollouts[:1])) == eval_rollouts[1:]


def test_eval_splits_choose_the_games(alfworld_games, sft_student):
    leap = {**LEAP, "eval_splits": ["valid_unseen"]}
    played = list(evaluate_student(alfworld_games, sft_student, leap, MODEL, 2)([]))
    assert [t["split"] for t in played] == ["valid_unseen"] and played[0]["iteration"] == 2


def test_an_evaluation_already_complete_loads_no_model(monkeypatch, alfworld_games):
    def refuse(*args, **kwargs):
        raise AssertionError("no model should be loaded")

    monkeypatch.setattr("leap_kalm.llm.models.load_model", refuse)
    student = ModelRef(path="/students/iter0", kind="adapter")
    done = [{"game_id": g["game_id"]} for g in alfworld_games if g["split"] != "train"]
    assert list(evaluate_student(alfworld_games, student, LEAP, MODEL, 0)(done)) == []


@pytest.mark.parametrize("stage", ["rollout", "evaluate"])
def test_students_load_with_the_model_parameters_device_and_dtype(
    monkeypatch, stage, alfworld_games
):
    """`model.device`/`model.dtype` apply to trained students too, not only to the base
    model, in the rollout and the evaluation node alike (both use load_student_policy)."""
    from leap_kalm.pipelines.correct.nodes import roll_out_student

    seen = {}

    def fake_load_model(ref, **kwargs):
        seen.update(kwargs, ref=ref)
        raise RuntimeError("loaded")

    monkeypatch.setattr("leap_kalm.llm.models.load_model", fake_load_model)
    student = ModelRef(path="/students/iter0", kind="adapter")
    model_params = {"name": "tiny-test", "device": "cpu", "dtype": "float32"}
    node = roll_out_student if stage == "rollout" else evaluate_student
    leap = {"env": "alfworld", **({"eval_fresh_process": False} if stage == "evaluate" else {})}
    produce = node(alfworld_games, student, leap, model_params, 1)
    with pytest.raises(RuntimeError, match="loaded"):
        list(produce([]))
    assert seen == {"ref": student, "merge_adapter": True, "device": "cpu", "dtype": "float32"}


# -- summarize_evaluation ------------------------------------------------------------------


def test_summary_rows_per_split_and_task_type_plus_all():
    rollouts = [
        _trajectory("valid_seen", "clean", True, 4, repairs=["exact", "fuzzy"]),
        _trajectory("valid_seen", "clean", False, 10, repairs=["unmatched"]),
        _trajectory("valid_seen", "heat", True, 6),
        _trajectory("valid_unseen", "heat", False, 8, repairs=["empty", "empty"]),
    ]
    before = snapshot(rollouts)
    summary, steps = summarize_evaluation(rollouts, {"env": "alfworld"}, 3)
    assert summary["iteration"] == 3 and summary["env"] == "alfworld"
    assert [
        (r["split"], r["task_type"], r["success_rate"], r["mean_actions"], r["n"])
        for r in summary["rows"]
    ] == [
        ("valid_seen", "all", 2 / 3, 20 / 3, 3),
        ("valid_seen", "clean", 0.5, 7.0, 2),
        ("valid_seen", "heat", 1.0, 6.0, 1),
        ("valid_unseen", "all", 0.0, 8.0, 1),
        ("valid_unseen", "heat", 0.0, 8.0, 1),
    ]
    assert all(list(r) == SUMMARY_COLUMNS and r["iteration"] == 3 for r in summary["rows"])
    # steps without a repair field were taken verbatim ("exact")
    assert summary["action_repairs"] == {"exact": 24, "fuzzy": 1, "unmatched": 1, "empty": 2}
    assert snapshot(rollouts) == before
    # the step table the summary was computed from: one row per step, queryable
    import polars as pl

    from leap_kalm.tables import STEP_COLUMNS

    assert steps.columns == STEP_COLUMNS and steps.height == 28
    assert steps["iteration"].unique().to_list() == [3]
    last = steps.filter(pl.col("done"))
    assert last.height == 4 and last["reward"].to_list() == [1.0, 0.0, 1.0, 0.0]
    assert steps.filter(pl.col("step") > 0)["repeated"].all()  # "look" again and again
    repaired = steps.group_by("repair").len().sort("repair")
    assert dict(repaired.iter_rows()) == {"empty": 2, "exact": 24, "fuzzy": 1, "unmatched": 1}


def test_a_graded_worlds_summary_averages_its_score_and_reward_parts():
    """WebShop's trajectories carry the final reward and its parts; the summary reports
    their means (WebShop's score is mean_score x 100), ALFWorld's leaves the parts null."""
    bought = {"r_type": 1.0, "r_att": 0.5, "r_option": 1.0, "r_price": 1.0}
    rollouts = [
        {**_trajectory("test", "food", False, 3), "score": 0.75, "reward_parts": bought},
        {
            **_trajectory("test", "food", True, 4),
            "score": 1.0,
            "reward_parts": dict.fromkeys(bought, 1.0),
        },  # fmt: skip
        {
            **_trajectory("test", "food", False, 15),
            "score": 0.0,
            "reward_parts": dict.fromkeys(bought, 0.0),
        },  # fmt: skip
    ]
    summary, steps = summarize_evaluation(rollouts, {"env": "webshop"}, 0)
    row = next(r for r in summary["rows"] if r["task_type"] == "all")
    assert row["mean_score"] == pytest.approx(1.75 / 3)
    assert 0.0 <= row["score_ci_low"] < row["mean_score"] < row["score_ci_high"] <= 1.0
    assert row["mean_r_att"] == pytest.approx(0.5) and row["mean_r_type"] == pytest.approx(2 / 3)
    assert row["success_rate"] == pytest.approx(1 / 3)
    assert steps.filter(steps["done"])["r_att"].to_list() == [0.5, 1.0, 0.0]
    plain, _ = summarize_evaluation([_trajectory("valid_seen", "heat", True, 2)], {}, 0)
    assert all(plain["rows"][0][f"mean_{k}"] is None for k in bought)


def test_summary_row_reports_the_interval_and_behaviour_diagnostics():
    from leap_kalm.tables import leap_summary_rows, trajectory_steps

    def success_row(trajectories):  # one split, one task type: its "all" row
        steps = trajectory_steps([{**t, "split": "s", "task_type": "t"} for t in trajectories])
        return leap_summary_rows(steps)[0]

    def step(action):
        return {"action": action, "candidate_actions": ["look", "go to desk 1"]}

    won = {"success": True, "num_actions": 2, "steps": [step("go to desk 1"), step("look")]}
    lost = {"success": False, "num_actions": 3, "steps": [step("look"), step("look"), step("fly")]}
    row = success_row([won, lost, lost, lost])
    assert row["success_rate"] == 0.25 and row["n"] == 4
    assert row["ci_low"] == pytest.approx(0.0456, abs=1e-3)
    assert row["ci_high"] == pytest.approx(0.6994, abs=1e-3)
    assert row["mean_actions"] == 11 / 4 and row["mean_actions_won"] == 2.0
    assert row["invalid_action_rate"] == 3 / 11  # "fly" is no candidate, in 3 episodes
    assert row["repeat_rate"] == 3 / 11  # look, look in each lost episode
    assert success_row([lost])["mean_actions_won"] is None
    assert row["mean_score"] == 0.25
    graded = [{**lost, "score": 0.5}, {**won, "score": 1.0}]  # WebShop's rewards
    assert success_row(graded)["mean_score"] == 0.75


def test_wilson_interval():
    from leap_kalm.stats import wilson_interval

    assert wilson_interval(3, 30) == pytest.approx((0.0346, 0.2562), abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(60, 60)
    assert high == 1.0 and 0.93 < low < 0.95
    with pytest.raises(ValueError, match="within 0..5"):
        wilson_interval(6, 5)


def test_mean_interval():
    import math
    import statistics

    from leap_kalm.stats import mean_interval

    values = [0.2, 0.4, 0.6, 0.8] * 5
    half = 2.0930 * statistics.stdev(values) / math.sqrt(20)  # t(0.975, 19 degrees of freedom)
    assert mean_interval(values) == pytest.approx((0.5 - half, 0.5 + half), abs=1e-4)
    assert mean_interval([0.0, 1.0, 1.0, 0.5]) == (0.0, 1.0)  # clipped to the values' range
    assert mean_interval([0.3] * 4) == (0.3, 0.3)
    low, high = mean_interval([0.0, 1.0, 1.0, 0.5], clip=False)
    assert low < 0.0 and high > 1.0  # differences, say, must not be clipped
    assert all(math.isnan(x) for x in mean_interval([1.0]))


def test_summary_of_real_evaluation_rollouts(eval_rollouts):
    summary, steps = summarize_evaluation(eval_rollouts, LEAP, 0)
    assert steps.height == sum(len(t["steps"]) for t in eval_rollouts)
    overall = {r["split"]: r for r in summary["rows"] if r["task_type"] == "all"}
    assert set(overall) == {"valid_seen", "valid_unseen"}
    assert all(r["n"] == 1 and 0 <= r["success_rate"] <= 1 for r in overall.values())
    assert sum(summary["action_repairs"].values()) == sum(len(t["steps"]) for t in eval_rollouts)
    assert summary["games"] == [
        {"split": t["split"], "game_id": t["game_id"], "success": bool(t["success"]),
         "score": float(t["success"])}
        for t in eval_rollouts
    ]  # fmt: skip


def test_an_empty_evaluation_has_no_rows():
    summary, steps = summarize_evaluation([], LEAP, 0)
    assert summary["rows"] == [] and summary["action_repairs"] == {}
    assert steps.height == 0 and "admissible" in steps.columns


# -- report_leap_progress ------------------------------------------------------------------


def _row(iteration, split, task_type, success_rate, env="alfworld"):
    return {
        "iteration": iteration,
        "env": env,
        "split": split,
        "task_type": task_type,
        "success_rate": success_rate,
        "ci_low": 0.0,
        "ci_high": 1.0,
        "mean_score": success_rate,
        "score_ci_low": 0.0,
        "score_ci_high": 1.0,
        **dict.fromkeys(["mean_r_type", "mean_r_att", "mean_r_option", "mean_r_price"], 0.5),
        "mean_actions": 5.0,
        "mean_actions_won": 4.0,
        "invalid_action_rate": 0.1,
        "repeat_rate": 0.2,
        "n": 2,
    }


def test_the_report_folds_an_iteration_into_the_history():
    import matplotlib.pyplot as plt

    history = [
        _row(1, "valid_seen", "all", 0.9),  # an earlier run of iteration 1: replaced
        _row(0, "valid_unseen", "all", 0.0),
        _row(0, "valid_seen", "all", 0.5),
        _row(1, "valid_seen", "all", 0.7, env="webshop"),  # another world's row stays
    ]
    evaluation = {
        "iteration": 1,
        "env": "alfworld",
        "rows": [_row(1, "valid_seen", "all", 0.25), _row(1, "valid_seen", "heat", 1.0)],
    }
    before = snapshot(history, evaluation)
    table, rows, figure = report_leap_progress(history, evaluation)
    try:
        assert list(table.columns) == SUMMARY_COLUMNS
        assert [(r["env"], r["iteration"], r["split"], r["task_type"]) for r in rows] == [
            ("alfworld", 0, "valid_seen", "all"),
            ("alfworld", 0, "valid_unseen", "all"),
            ("alfworld", 1, "valid_seen", "all"),
            ("alfworld", 1, "valid_seen", "heat"),
            ("webshop", 1, "valid_seen", "all"),
        ]
        assert rows[2]["success_rate"] == 0.25
        assert table.to_dict("records") == rows
        lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
        assert set(lines) == {
            "alfworld valid_seen",
            "alfworld valid_unseen",
            "webshop valid_seen",
        }
        assert list(lines["alfworld valid_seen"].get_xdata()) == [0, 1]
        assert list(lines["alfworld valid_seen"].get_ydata()) == [50.0, 25.0]
        assert snapshot(history, evaluation) == before
    finally:
        plt.close(figure)


def test_a_history_from_before_the_score_interval_and_reward_parts_still_folds():
    import math

    import matplotlib.pyplot as plt

    new = {"score_ci_low", "score_ci_high", "mean_r_type", "mean_r_att", "mean_r_option",
           "mean_r_price"}  # fmt: skip
    old = {k: v for k, v in _row(0, "valid_seen", "all", 0.5).items() if k not in new}
    evaluation = {"iteration": 1, "env": "alfworld", "rows": [_row(1, "valid_seen", "all", 0.7)]}
    table, rows, figure = report_leap_progress([old], evaluation)
    plt.close(figure)
    assert list(table.columns) == SUMMARY_COLUMNS and len(rows) == 2
    assert all(math.isnan(table.iloc[0][k]) for k in new) and table.iloc[1]["mean_r_att"] == 0.5


def test_the_first_report_starts_the_history():
    import matplotlib.pyplot as plt

    evaluation = {"iteration": 0, "env": "alfworld", "rows": [_row(0, "valid_seen", "all", 1.0)]}
    table, rows, figure = report_leap_progress([], evaluation)
    plt.close(figure)
    assert rows == evaluation["rows"] and len(table) == 1


# -- paired comparison of iterations -------------------------------------------------------


def test_paired_comparison_counts_games_and_tests_the_discordant_ones():
    import math
    import statistics

    from leap_kalm.stats import paired_comparison

    # 20 games: 5 won by both, 8 only by the new student, 2 only by the baseline, 5 by neither
    outcome = ["both"] * 5 + ["new"] * 8 + ["base"] * 2 + ["none"] * 5
    base = {f"g{i}": (o in ("both", "base"), 0.5 if o in ("both", "base") else 0.0)
            for i, o in enumerate(outcome)}  # fmt: skip
    new = {f"g{i}": (o in ("both", "new"), 1.0 if o in ("both", "new") else 0.25)
           for i, o in enumerate(outcome)}  # fmt: skip
    new["only-new"] = (True, 1.0)  # a game the baseline never played does not count
    result = paired_comparison(base, new)
    assert (result["n"], result["won_both"], result["won_only_new"], result["won_only_baseline"]) == (
        20, 5, 8, 2,
    )  # fmt: skip
    assert result["success_delta"] == pytest.approx(6 / 20)
    diffs = [1.0] * 8 + [-1.0] * 2 + [0.0] * 10
    half = 2.0930 * statistics.stdev(diffs) / math.sqrt(20)
    assert (result["success_delta_ci_low"], result["success_delta_ci_high"]) == pytest.approx(
        (0.3 - half, 0.3 + half), abs=1e-4
    )
    assert result["mcnemar_p"] == pytest.approx(2 * (1 + 10 + 45) / 1024)  # exact, 8 vs 2 of 10
    assert result["score_delta"] == pytest.approx((5 * 0.5 + 8 * 1.0 + 2 * -0.25 + 5 * 0.25) / 20)
    tied = paired_comparison(
        {"a": (True, 1.0), "b": (False, 0.0)}, {"a": (True, 1.0), "b": (False, 0.0)}
    )
    assert tied["mcnemar_p"] == 1.0 and tied["success_delta"] == 0.0
    with pytest.raises(ValueError, match="share no game_id"):
        paired_comparison({"a": (True, 1.0)}, {"b": (True, 1.0)})


def _games(iteration, won, env="alfworld"):
    """Outcome rows: ``won`` maps ``split/game`` to success."""
    return [
        {"env": env, "iteration": iteration, "split": key.split("/")[0], "game_id": key.split("/")[1],
         "success": w, "score": float(w)}
        for key, w in won.items()
    ]  # fmt: skip


def test_compare_iterations_pairs_each_iteration_with_0_and_the_one_before():
    games = ["s/a", "s/b", "s/c", "u/d", "u/e"]
    it0 = _games(0, dict(zip(games, [True, False, False, False, True], strict=True)))
    it1 = _games(1, dict(zip(games, [True, True, False, False, False], strict=True)))
    stale = _games(
        2, dict(zip(games, [False] * 5, strict=True))
    )  # an earlier run of iteration 2: replaced
    other = _games(0, {"s/a": False}, env="webshop")
    evaluation = {
        "env": "alfworld", "iteration": 2,
        "games": [{k: v for k, v in g.items() if k not in ("env", "iteration")}
                  for g in _games(2, dict(zip(games, [True, True, True, False, True], strict=True)))],
    }  # fmt: skip
    outcomes = it0 + it1 + stale + other
    before = snapshot(outcomes, evaluation)
    table, updated = compare_iterations(outcomes, evaluation)
    assert snapshot(outcomes, evaluation) == before
    assert list(table.columns) == PAIRED_COLUMNS
    keys = [(r.env, r.iteration, r.baseline_iteration, r.split) for r in table.itertuples()]
    assert keys == [
        ("alfworld", 1, 0, "s"), ("alfworld", 1, 0, "u"), ("alfworld", 1, 0, "all"),
        ("alfworld", 2, 0, "s"), ("alfworld", 2, 0, "u"), ("alfworld", 2, 0, "all"),
        ("alfworld", 2, 1, "s"), ("alfworld", 2, 1, "u"), ("alfworld", 2, 1, "all"),
    ]  # fmt: skip
    row = table.set_index(["iteration", "baseline_iteration", "split"]).loc[(2, 0, "all")]
    assert (row.n, row.won_both, row.won_only_new, row.won_only_baseline) == (5, 2, 2, 0)
    assert row.success_delta == pytest.approx(0.4) and row.mcnemar_p == pytest.approx(0.5)
    row = table.set_index(["iteration", "baseline_iteration", "split"]).loc[(2, 1, "u")]
    assert (row.n, row.won_only_new, row.success_delta) == (2, 1, 0.5)
    assert sum(g["iteration"] == 2 for g in updated) == 5
    assert sum(g["success"] for g in updated if g["iteration"] == 2) == 4  # the stale run is gone
    assert other[0] in updated and len(updated) == 16


def test_compare_iterations_on_a_report_without_games_warns_and_compares_nothing(caplog):
    import logging

    with caplog.at_level(logging.WARNING):
        table, updated = compare_iterations(
            _games(0, {"s/a": True}), {"env": "alfworld", "iteration": 1, "rows": []}
        )
    assert table.empty and updated == _games(0, {"s/a": True})
    assert "summarize_evaluation_node" in caplog.text

"""`kedro run --env test --pipeline=leap_iter_webshop` twice: LEAP on WebShop end to end
(expert demonstrations, BC, student rollouts, the scripted teacher's corrections, SFT)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.helpers import copy_project, run_kedro


def test_two_webshop_iterations(tmp_path_factory):
    project = copy_project(tmp_path_factory.mktemp("webshop") / "project")
    runs = []
    for _ in range(2):  # iteration 0, then the next one
        runs.append(
            run_kedro(
                "run",
                "--env",
                "test",
                "--pipeline",
                "leap_iter_webshop",
                cwd=project,
                timeout=600,
                OMP_NUM_THREADS="1",
                CI="true",
            )  # fmt: skip
        )
        assert runs[-1].returncode == 0, runs[-1].stdout[-3000:] + runs[-1].stderr[-3000:]
    root = project / "data" / "test"
    experts = [
        json.loads(line) for line in (root / "02_intermediate/webshop/expert_logs.jsonl").open()
    ]
    assert len(experts) == 4 and all(t["success"] and t["score"] == 1.0 for t in experts)
    corrections = [
        json.loads(line)
        for line in (root / "07_model_output/webshop/iter1/corrections.jsonl").open()
    ]
    rollouts = [
        json.loads(line) for line in (root / "07_model_output/webshop/iter1/rollouts.jsonl").open()
    ]
    assert corrections and len(corrections) == sum(not t["success"] for t in rollouts)
    first = corrections[0]["steps"][0]
    assert first["corrected_action"].startswith("search[") and first["is_corrected"]
    versions = sorted((root / "08_reporting" / "webshop" / "leap_eval_summary.csv").iterdir())
    summary = pd.read_csv(versions[-1] / "leap_eval_summary.csv")
    assert set(summary["iteration"]) == {0, 1} and set(summary["split"]) == {"test"}
    evaluated = [
        json.loads(line)
        for line in (root / "07_model_output/webshop/iter1/eval_rollouts.jsonl").open()
    ]
    # every evaluated episode ends with WebShop's reward and its parts (0s without a purchase)
    assert evaluated and all(
        set(t["reward_parts"]) >= {"r_type", "r_att"} and 0.0 <= t["score"] <= 1.0
        for t in evaluated
    )
    row = summary[(summary["iteration"] == 1) & (summary["task_type"] == "all")].iloc[0]
    assert row["mean_score"] == pytest.approx(sum(t["score"] for t in evaluated) / len(evaluated))
    assert row["mean_r_att"] == pytest.approx(
        sum(t["reward_parts"]["r_att"] for t in evaluated) / len(evaluated)
    )
    assert not (root / "08_reporting" / "alfworld").exists(), "ALFWorld is not run"

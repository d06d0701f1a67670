"""`kedro run --env test --pipeline=leap_iter` twice: iteration 0 (BC) then iteration 1 (LEAP)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.helpers import copy_project, execute_notebook, notebook_text, run_kedro


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return copy_project(tmp_path_factory.mktemp("leap") / "project")


def _run(project: Path, *extra: str) -> subprocess.CompletedProcess:
    return run_kedro(
        "run",
        "--env",
        "test",
        "--pipeline",
        "leap_iter",
        *extra,
        cwd=project,
        timeout=600,
        OMP_NUM_THREADS="1",
        CI="true",
    )


@pytest.fixture(scope="module")
def two_iterations(project):
    """Iteration 0, then a run without ``--params`` (which picks iteration 1), once per module."""
    first = _run(project)
    second = _run(project) if first.returncode == 0 else None
    return project, first, second


def test_iteration_0_then_1(two_iterations):
    project, first, second = two_iterations
    root = project / "data" / "test"
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert (root / "08_reporting" / "alfworld" / "iter0" / "eval.json").exists()
    assert (
        root / "07_model_output" / "alfworld" / "iter0" / "rollouts.jsonl"
    ).read_text() == ""  # BC only
    records = [
        json.loads(line)
        for line in (root / "05_model_input/alfworld/iter0/sft_records.jsonl").open()
    ]
    assert records and {r["iteration"] for r in records} == {0}
    assert {r["split"] for r in records} == {"train", "val"}

    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    for it in (0, 1):  # the SFT loss as a PNG each iteration; DPO's says it was not trained
        for kind in ("sft", "dpo"):
            png = root / "08_reporting" / "alfworld" / f"iter{it}" / f"{kind}_learning_curve.png"
            assert png.read_bytes()[:4] == b"\x89PNG", png
    rollouts = [
        json.loads(line) for line in (root / "07_model_output/alfworld/iter1/rollouts.jsonl").open()
    ]
    assert len(rollouts) == 6 and all(r["iteration"] == 1 for r in rollouts)
    corrections = [
        json.loads(line)
        for line in (root / "07_model_output/alfworld/iter1/corrections.jsonl").open()
    ]
    assert len(corrections) == sum(not r["success"] for r in rollouts)
    by_id = {r["game_id"]: r for r in rollouts}
    for correction in corrections:
        for step, original in zip(
            correction["steps"], by_id[correction["game_id"]]["steps"], strict=True
        ):
            assert step["corrected_action"] in original["candidate_actions"]
    pool = [
        json.loads(line) for line in (root / "05_model_input/alfworld/iter1/sft_pool.jsonl").open()
    ]
    assert {r["iteration"] for r in pool} == {0, 1}
    meta = json.loads(
        next(
            (root / "06_models/alfworld/iter1/student").glob("*/student/leap_kalm_model.json")
        ).read_text()
    )
    # the quick profile's default (`leap.start_from: base`) retrains the base model
    assert meta["meta"]["start_from"] == "base"
    assert "iter0/student" not in meta["meta"]["started_from"]

    versions = sorted((root / "08_reporting" / "alfworld" / "leap_eval_summary.csv").iterdir())
    summary = pd.read_csv(versions[-1] / "leap_eval_summary.csv")
    assert set(summary["iteration"]) == {0, 1}
    assert set(summary["split"]) == {"valid_seen", "valid_unseen"}
    from leap_kalm.pipelines.evaluate.nodes import SUMMARY_COLUMNS

    assert list(summary.columns) == SUMMARY_COLUMNS
    assert (summary["ci_low"] <= summary["success_rate"]).all()
    assert (summary["success_rate"] <= summary["ci_high"]).all()
    overall = summary[summary["task_type"] == "all"]
    assert (overall["n"] == 2).all() and overall["success_rate"].between(0, 1).all()


def test_dpo_iterations(tmp_path):
    """train_method: dpo — iteration 0 is still behaviour cloning, iteration 1 trains on
    preference pairs; both runs with TensorBoard tracking switched on."""
    work = copy_project(tmp_path / "project")
    for _ in range(2):
        result = _run(work, "--params", "alfworld.leap.train_method=dpo,tracking.tensorboard=true")
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    root = work / "data" / "test"
    from tests.test_tracking import read_events

    runs = sorted((root / "09_tracking" / "tensorboard").iterdir())
    assert [r.name.endswith("_leap_iter") for r in runs] == [True, True]
    for run, node in zip(runs, ("train_sft_student_node", "train_dpo_student_node"), strict=True):
        losses = read_events(run / f"alfworld.{node}").scalars["train/loss"]
        assert losses and all(np.isfinite(v) for _, v in losses)
    metrics = read_events(runs[1] / "parameters").scalars
    seen = metrics["metrics/alfworld.leap_eval_summary/alfworld/valid_seen/all/success_rate"]
    assert {step for step, _ in seen} == {0, 1}  # the summary holds both iterations
    pairs = [
        json.loads(line) for line in (root / "05_model_input/alfworld/iter1/dpo_pairs.jsonl").open()
    ]
    assert pairs and all(p["chosen"] != p["rejected"] for p in pairs)
    meta_files = list(
        (root / "06_models/alfworld/iter1/student").glob("*/student/leap_kalm_model.json")
    )
    meta = json.loads(meta_files[0].read_text())["meta"]
    assert "beta" in meta["params"] and meta["n_records"] == len(pairs)
    assert "iter0/student" in meta["started_from"]


def test_a_later_iteration_without_its_predecessor_fails_clearly(project):
    result = _run(project, "--params", "leap_iteration=5")
    assert result.returncode != 0
    assert "needs the student of iteration 4" in result.stdout + result.stderr


def test_results_notebook_runs_on_the_catalog(two_iterations):
    """notebooks/leap_results.ipynb executes against the two iterations of the fixture."""
    project, first, second = two_iterations
    assert second is not None and second.returncode == 0, "the two iterations did not run"
    outputs = notebook_text(execute_notebook(project, "leap_results.ipynb"))
    assert "iteration 1:" in outputs and "rollouts" in outputs
    assert "polars.dataframe.frame" in outputs  # catalog.load gives polars DataFrames
    assert "corrected steps" in outputs and "invalid_steps" in outputs

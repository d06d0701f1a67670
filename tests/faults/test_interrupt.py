"""Interrupted `leap_iter` runs: killed (SIGKILL) in the middle of the student's rollouts
and stopped (SIGINT) in the middle of training, the same command run again finishes and
writes the same records as an uninterrupted run, with no duplicates and nothing lost."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import KEDRO, copy_project, run_kedro

# one game at a time and longer episodes: a window to interrupt the rollouts in
PARAMS = "alfworld.leap.batch_size=1,alfworld.leap.rollout_max_steps=12"


def _run(project: Path, iteration: int) -> subprocess.CompletedProcess:
    return run_kedro(
        "run", "--env", "test", "--pipeline=leap_iter",
        "--params", f"leap_iteration={iteration},{PARAMS}",
        cwd=project, timeout=600, OMP_NUM_THREADS="1", CI="true",
    )  # fmt: skip


def _start(project: Path, iteration: int) -> subprocess.Popen:
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "OMP_NUM_THREADS": "1", "CI": "true"}
    return subprocess.Popen(
        [KEDRO, "run", "--env", "test", "--pipeline=leap_iter",
         "--params", f"leap_iteration={iteration},{PARAMS}"],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip


def _wait_for(predicate, process: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if process.poll() is not None:
            pytest.fail(
                "the run ended before it could be interrupted:\n" + process.stdout.read()[-3000:]
            )
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("timed out waiting for the moment to interrupt")
        time.sleep(0.02)


def _records(path: Path) -> list[dict]:
    """The records, without ``model_id`` (the student's absolute path, which names the copy)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{k: v for k, v in row.items() if k != "model_id"} for row in rows]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Iteration 0, a copy of the project as it stands then, and an uninterrupted iteration 1."""
    base = copy_project(tmp_path_factory.mktemp("interrupt") / "reference")
    first = _run(base, 0)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    after_iteration_0 = tmp_path_factory.mktemp("interrupt") / "after0"
    shutil.copytree(base, after_iteration_0 / "project")
    second = _run(base, 1)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    return base / "data" / "test", after_iteration_0 / "project"


def _fresh_copy(after_iteration_0: Path, dest: Path) -> Path:
    shutil.copytree(after_iteration_0, dest)
    return dest


ITER1 = Path("data/test/07_model_output/alfworld/iter1")


def _stop_at_training(project: Path) -> str:
    """Start iteration 1 and stop it with Ctrl-C (SIGINT) once SFT has started; its output."""
    run = _start(project, 1)
    marker = "Running node: train_sft_student_node"
    seen: list[str] = []

    def training_started() -> bool:
        line = run.stdout.readline()
        seen.append(line)
        return marker in "".join(seen[-3:])

    _wait_for(training_started, run)
    os.killpg(run.pid, signal.SIGINT)  # Ctrl-C
    assert run.wait(timeout=120) != 0
    assert not list((project / "data/test/06_models/alfworld/iter1").glob("student/*/student"))
    return "".join(seen)


def test_killed_during_rollouts_then_stopped_during_training_ends_as_an_uninterrupted_run(
    reference, tmp_path
):
    """One iteration interrupted twice, as a long run can be: SIGKILL in the rollouts (a
    power cut or an OOM kill: no chance to clean up), then Ctrl-C once training started.
    The third start finishes; every record equals an uninterrupted run's."""
    expected_root, after0 = reference
    project = _fresh_copy(after0, tmp_path / "project")
    partial = project / ITER1 / "rollouts.jsonl.partial"
    run = _start(project, 1)
    _wait_for(lambda: partial.exists() and len(partial.read_text().splitlines()) >= 2, run)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    written = _records(partial)
    assert 2 <= len(written) < 6 and not (project / ITER1 / "rollouts.jsonl").exists()

    second = _stop_at_training(project)  # the second start resumes the rollouts, then is stopped
    assert "resuming after" in second
    rollouts = _records(project / ITER1 / "rollouts.jsonl")
    expected = _records(expected_root / "07_model_output/alfworld/iter1/rollouts.jsonl")
    assert [r["game_id"] for r in rollouts] == [r["game_id"] for r in expected]
    assert rollouts == expected  # the kept records and the replayed ones alike
    assert rollouts[: len(written)] == written

    again = _run(project, 1)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert (project / "data/test/08_reporting/alfworld/iter1/eval.json").is_file()
    for name in ("07_model_output/alfworld/iter1/corrections.jsonl",
                 "05_model_input/alfworld/iter1/sft_pool.jsonl"):  # fmt: skip
        assert _records(project / "data/test" / name) == _records(expected_root / name), name

"""Interrupted `leap_iter` runs: killed (SIGKILL) in the middle of the student's rollouts
and stopped (SIGINT) in the middle of training, the same command run again finishes and
writes the same records as an uninterrupted run, with no duplicates and nothing lost."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
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


class _Started:
    """A `kedro run` started in its own process group, its output read as it comes (a thread
    drains the pipe, so the run never blocks on it and a marker is seen when printed)."""

    def __init__(self, project: Path, iteration: int) -> None:
        # unbuffered: a piped stdout is block-buffered, so a marker would arrive kilobytes
        # late, possibly once the run had already finished (and the interrupt came too late)
        env = {
            **os.environ,
            "KEDRO_DISABLE_TELEMETRY": "1",
            "OMP_NUM_THREADS": "1",
            "CI": "true",
            "PYTHONUNBUFFERED": "1",
        }
        # A SIGINT this process ignores would be inherited (tests started from a background
        # shell ignore it) and the run could not be stopped with Ctrl-C; a handled one is
        # reset to the default in the child, as in a terminal.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            self.process = subprocess.Popen(
                [KEDRO, "run", "--env", "test", "--pipeline=leap_iter",
                 "--params", f"leap_iteration={iteration},{PARAMS}"],
                cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, start_new_session=True,
            )  # fmt: skip
        finally:
            signal.signal(signal.SIGINT, previous)
        self.lines: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def interrupt_when(self, predicate, sig: int, timeout: float = 300) -> None:
        """Send ``sig`` to the run's process group as soon as ``predicate()`` holds."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                pytest.fail("no moment to interrupt the run came:\n" + self.output[-3000:])
            time.sleep(0.02)
        if self.process.poll() is not None:
            pytest.fail("the run ended before it could be interrupted:\n" + self.output[-3000:])
        os.killpg(self.process.pid, sig)


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
    run = _Started(project, 1)
    run.interrupt_when(lambda: "Running node: train_sft_student_node" in run.output, signal.SIGINT)
    assert run.process.wait(timeout=120) != 0, run.output[-3000:]
    assert not list((project / "data/test/06_models/alfworld/iter1").glob("student/*/student"))
    return run.output


def test_killed_during_rollouts_then_stopped_during_training_ends_as_an_uninterrupted_run(
    reference, tmp_path
):
    """One iteration interrupted twice, as a long run can be: SIGKILL in the rollouts (a
    power cut or an OOM kill: no chance to clean up), then Ctrl-C once training started.
    The third start finishes; every record equals an uninterrupted run's."""
    expected_root, after0 = reference
    project = _fresh_copy(after0, tmp_path / "project")
    partial = project / ITER1 / "rollouts.jsonl.partial"
    run = _Started(project, 1)
    run.interrupt_when(
        lambda: partial.exists() and len(partial.read_text().splitlines()) >= 2, signal.SIGKILL
    )
    run.process.wait()
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

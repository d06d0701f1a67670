"""Concurrency: the CPU stages under kedro's ThreadRunner and ParallelRunner write the same
JSONL, npy and HDF5 files as under the SequentialRunner, none torn or mixed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from leap_kalm.datasets import HDF5Dataset
from leap_kalm.envs.kalm_format import validate_kalm_dataset
from tests.helpers import copy_project, run_kedro


def _ingest(project: Path, runner: str | None) -> None:
    extra = ["--runner", runner] if runner else []
    result = run_kedro(
        "run", "--env", "test", "--pipeline=ingest", *extra,
        cwd=project, timeout=900, OMP_NUM_THREADS="1", CI="true",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def _outputs(project: Path) -> dict[str, object]:
    root = project / "data" / "test"
    out: dict[str, object] = {}
    for path in sorted(root.rglob("*.jsonl")):
        if path.name == "node_resources.jsonl":  # wall times and memory, different every run
            continue
        text = path.read_text().replace(str(project), "<project>")  # games' absolute paths
        rows = [json.loads(line) for line in text.splitlines()]
        out[str(path.relative_to(root))] = rows
    for path in sorted(root.rglob("*.npy")):
        data = np.load(path, allow_pickle=True).item()
        validate_kalm_dataset(data, source=str(path))
        out[str(path.relative_to(root))] = {
            k: np.asarray(v).tolist() for k, v in sorted(data.items()) if k != "generator"
        }
    for path in sorted(root.rglob("*.hdf5")):
        data = HDF5Dataset(filepath=str(path)).load()
        out[str(path.relative_to(root))] = {
            k: np.asarray(v).tolist() for k, v in sorted(data.items()) if k != "generator"
        }
    return out


@pytest.fixture(scope="module")
def sequential(tmp_path_factory):
    project = copy_project(tmp_path_factory.mktemp("sequential") / "project")
    _ingest(project, None)
    return _outputs(project)


@pytest.mark.parametrize("runner", ["ThreadRunner", "ParallelRunner"])
def test_parallel_runners_write_what_the_sequential_one_writes(sequential, tmp_path, runner):
    project = copy_project(tmp_path / "project")
    _ingest(project, runner)
    outputs = _outputs(project)
    assert set(outputs) == set(sequential) and len(outputs) >= 5
    for name, value in sequential.items():
        assert outputs[name] == value, name

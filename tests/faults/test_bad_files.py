"""Bad files through the catalog: each gives one clear error that names the dataset, the
file and what is wrong (the line, key or field); none is silently skipped or loaded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kedro.io import DatasetError

from tests.helpers import run_kedro


def _path(catalog, name: str) -> Path:
    dataset = catalog.get(name) if hasattr(catalog, "get") else catalog._get_dataset(name)
    return Path(dataset._get_load_path() if dataset._version else dataset._filepath)


def _load_fails(catalog, name: str, *fragments: str) -> str:
    with pytest.raises(DatasetError) as info:
        catalog.load(name)
    message = str(info.value)
    for fragment in (name, *fragments):
        assert fragment in message, message
    return message


@pytest.fixture(scope="module")
def kalm_data():
    from leap_kalm.envs.metaworld.data import generate_metaworld_dataset

    return generate_metaworld_dataset(["reach"], 2, seed=0, horizon=8, progress=False)


def test_jsonl_with_a_bad_line_in_the_middle_names_the_line(catalog):
    catalog.save("alfworld.expert_logs", [{"game_id": "a"}, {"game_id": "b"}, {"game_id": "c"}])
    path = _path(catalog, "alfworld.expert_logs")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[1][:-3], lines[2]]) + "\n")
    _load_fails(catalog, "alfworld.expert_logs", str(path), "line 2: malformed JSON")


def test_an_empty_file_where_records_must_be_is_named(catalog):
    catalog.save("alfworld.annotated_logs", [{"game_id": "a"}])
    path = _path(catalog, "alfworld.annotated_logs")
    path.write_text("")
    _load_fails(catalog, "alfworld.annotated_logs", str(path), "no records")
    # a dataset that may be empty (iteration 0 rolls nothing out) still loads as []
    catalog.save("alfworld.iter0.rollouts", [])
    assert catalog.load("alfworld.iter0.rollouts") == []


@pytest.mark.parametrize("cut", ["half", "empty"])
def test_truncated_npy_is_named(catalog, kalm_data, cut):
    catalog.save("metaworld.kalm_offline", kalm_data)
    path = _path(catalog, "metaworld.kalm_offline")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if cut == "half" else b"")
    _load_fails(catalog, "metaworld.kalm_offline", str(path), "not a readable .npy file")


def test_truncated_hdf5_is_named(catalog, kalm_data):
    catalog.save("metaworld.kalm_offline_hdf5", kalm_data)
    path = _path(catalog, "metaworld.kalm_offline_hdf5")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    _load_fails(catalog, "metaworld.kalm_offline_hdf5", str(path), "not a readable HDF5 file")


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda d: d.pop("rewards"), "missing key(s) ['rewards']"),
        (
            lambda d: d.update(actions=d["actions"][:, :, :2]),
            "metadata action_dim is 4 but key 'actions' holds 2 numbers per step",
        ),
        (
            lambda d: d.update(masks=d["masks"][:, :-1]),
            "key 'masks' has shape",
        ),
        (
            lambda d: d.update(observations=d["observations"].astype(str)),
            "key 'observations' has dtype <U",
        ),
    ],
    ids=["missing-key", "wrong-action-size", "wrong-shape", "wrong-dtype"],
)
def test_a_kalm_file_with_a_bad_key_is_named(catalog, kalm_data, change, expected):
    broken = dict(kalm_data)
    change(broken)
    path = _path(catalog, "metaworld.kalm_offline")
    np.save(path, broken, allow_pickle=True)
    _load_fails(catalog, "metaworld.kalm_offline", str(path), expected)


@pytest.mark.parametrize("fault", ["no-weights", "truncated-weights"])
def test_a_model_directory_without_whole_weights_is_named(catalog, tiny_model_dir, fault):
    from leap_kalm.schemas import ModelRef

    name = "alfworld.iter0.student" if fault == "no-weights" else "alfworld.iter1.student"
    catalog.save(name, ModelRef(path=tiny_model_dir, kind="model"))  # one version per run
    directory = _path(catalog, name)
    weights = directory / "model.safetensors"
    if fault == "no-weights":
        weights.unlink()
        _load_fails(catalog, name, str(directory), "no weights")
    else:
        data = weights.read_bytes()
        weights.write_bytes(data[: len(data) - 100])
        _load_fails(catalog, name, str(weights), "truncated")


def test_a_mistyped_parameter_is_named_before_any_work(project):
    result = run_kedro(
        "run", "--env", "test", "--pipeline=ingest", "--namespaces=clevr",
        "--params", "clevr.ingest.n_episode=3",
        cwd=project, timeout=300, OMP_NUM_THREADS="1",
    )  # fmt: skip
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "n_episode" in output and "unknown" in output.lower(), output[-2000:]

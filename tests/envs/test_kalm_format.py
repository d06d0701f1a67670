"""The KALM offline-dataset contract: validate_kalm_dataset's checks and summary."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from leap_kalm.envs.clevr.data import generate_clevr_dataset
from leap_kalm.envs.kalm_format import validate_kalm_dataset


@pytest.fixture(scope="module")
def clevr() -> dict:
    return generate_clevr_dataset(
        24, seed=0, level="real", horizon=50, n_instructions=5, progress=False
    )


def _copy(data: dict) -> dict:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in data.items()}


def test_summary(clevr: dict) -> None:
    summary = validate_kalm_dataset(clevr, "clevr")
    assert summary == {
        "source": "clevr",
        "n_episodes": 24,
        "horizon": 50,
        "observation_dim": 10,
        "action_type": "discrete",
        "action_dim": int(clevr["actions"].max()) + 1,
        "goal_dim": 6,
        "n_instructions": 5,
        "n_steps": int(clevr["masks"].sum()),
        "n_terminals": int(clevr["terminals"].sum()),
    }


def test_missing_key_is_named(clevr: dict) -> None:
    bad = _copy(clevr)
    del bad["rewards"]
    with pytest.raises(ValueError, match=r"my_file\.npy.*missing key.*rewards"):
        validate_kalm_dataset(bad, "my_file.npy")


@pytest.mark.parametrize(
    ("key", "change", "pattern"),
    [
        ("observations", lambda a: a[..., :9], "next_observations.*shape"),
        ("next_observations", lambda a: a[:, :-1], "next_observations.*shape"),
        ("rewards", lambda a: a[..., 0], "rewards.*shape"),
        ("terminals", lambda a: a.astype(np.float32), "terminals.*dtype"),
        ("masks", lambda a: a[:, :-1], "masks.*shape"),
        ("observations", lambda a: a.astype(np.float64), "observations.*dtype"),
        ("actions", lambda a: a.astype(np.float32), "actions.*shape.*dtype"),
        ("goals", lambda a: a[:, 0], "goals.*shape"),
        ("instructions", lambda a: a[:, 0], "instructions.*shape"),
        ("instructions", lambda a: np.zeros(a.shape), "instructions.*dtype"),
        ("masks", lambda a: a * 2, "masks"),
    ],
)
def test_bad_shapes_and_dtypes_are_named(clevr: dict, key: str, change, pattern: str) -> None:
    bad = _copy(clevr)
    bad[key] = change(bad[key])
    with pytest.raises(ValueError, match=f"src.*{pattern}"):
        validate_kalm_dataset(bad, "src")


def test_inconsistent_episodes_are_rejected(clevr: dict) -> None:
    bad = _copy(clevr)
    i = int(np.flatnonzero(bad["masks"].sum(axis=1) < 50)[0])
    bad["terminals"][i, 0, 0] = True
    bad["terminals"][i, 1:, 0] = False
    with pytest.raises(ValueError, match="terminals"):
        validate_kalm_dataset(bad, "src")
    bad = _copy(clevr)
    bad["next_observations"][0, 0] += 1.0
    with pytest.raises(ValueError, match="chain"):
        validate_kalm_dataset(bad, "src")
    bad = _copy(clevr)
    bad["masks"][0, 0] = 0
    with pytest.raises(ValueError, match="masks"):
        validate_kalm_dataset(bad, "src")
    with pytest.raises(ValueError, match="src.*dict"):
        validate_kalm_dataset([1, 2], "src")


def test_valid_values_are_checked(clevr: dict) -> None:
    bad = _copy(clevr)
    bad["rewards"][0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="src: key 'rewards' holds non-finite"):
        validate_kalm_dataset(bad, "src")
    bad = _copy(clevr)
    bad["actions"][0, 0] = -1
    with pytest.raises(ValueError, match="negative discrete actions"):
        validate_kalm_dataset(bad, "src")
    bad = _copy(clevr)
    bad["instructions"][0, 0] = " "
    with pytest.raises(ValueError, match="empty instruction"):
        validate_kalm_dataset(bad, "src")


def test_contract_does_not_import_torch() -> None:
    code = "import sys, leap_kalm.envs.kalm_format; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

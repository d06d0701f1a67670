"""KALM offline dataset generation and validation."""

from __future__ import annotations

import numpy as np
import pytest

from leap_kalm.envs.kalm_data import (
    generate_clevr_dataset,
    generate_metaworld_dataset,
    validate_kalm_dataset,
)
from leap_kalm.schemas import KALM_KEYS


@pytest.fixture(scope="module")
def clevr() -> dict:
    return generate_clevr_dataset(
        24, seed=0, level="real", horizon=50, n_instructions=5, progress=False
    )


@pytest.fixture(scope="module")
def metaworld() -> dict:
    return generate_metaworld_dataset(
        ["reach", "button-press-v3"], 3, seed=0, horizon=120, noise=(0.0, 0.9), progress=False
    )


def test_clevr_arrays_follow_kalm(clevr: dict) -> None:
    summary = validate_kalm_dataset(clevr, "clevr")
    assert summary["n_episodes"] == 24 and summary["horizon"] == 50
    assert summary["observation_dim"] == 10 and summary["action_type"] == "discrete"
    assert summary["goal_dim"] == 6 and summary["n_instructions"] == 5
    assert clevr["observations"].dtype == np.float32 and clevr["actions"].dtype == np.int32
    assert clevr["rewards"].shape == (24, 50, 1) and clevr["terminals"].dtype == bool
    assert clevr["instructions"].shape == (24, 5) and clevr["instructions"].dtype.kind == "U"
    assert clevr["actions"].max() < 40
    # both successes and failures; successes end on a +100 terminal step
    assert 0 < clevr["success"].sum() < 24
    for i in np.flatnonzero(clevr["success"]):
        last = clevr["masks"][i].sum() - 1
        assert clevr["terminals"][i, last, 0] and clevr["rewards"][i, last, 0] == 100.0
    # goals repeat over time; padding is zero
    assert (clevr["goals"] == clevr["goals"][:, :1]).all()
    pad = clevr["masks"] == 0
    assert (clevr["observations"][pad] == 0).all() and (clevr["actions"][pad] == 0).all()


def test_clevr_generation_is_seeded() -> None:
    a = generate_clevr_dataset(3, seed=4, horizon=10, progress=False)
    b = generate_clevr_dataset(3, seed=4, horizon=10, progress=False)
    for key in KALM_KEYS:
        np.testing.assert_array_equal(a[key], b[key])


@pytest.mark.parametrize("level", ["rephrase", "easy", "hard"])
def test_clevr_other_levels_validate(level: str) -> None:
    data = generate_clevr_dataset(
        4, seed=1, level=level, horizon=20, n_instructions=3, progress=False
    )
    summary = validate_kalm_dataset(data, level)
    assert summary["goal_dim"] == (24 if level == "hard" else 6)
    if level == "easy":
        assert (data["masks"].sum(axis=1) == 1).all()


def test_metaworld_arrays_follow_kalm(metaworld: dict) -> None:
    summary = validate_kalm_dataset(metaworld, "metaworld")
    assert summary["observation_dim"] == 39 and summary["action_type"] == "continuous"
    assert summary["action_dim"] == 4 and summary["goal_dim"] == 3
    assert metaworld["actions"].dtype == np.float32 and metaworld["actions"].shape == (6, 120, 4)
    assert list(metaworld["env_names"]) == ["reach-v3"] * 3 + ["button-press-v3"] * 3
    assert metaworld["success"][metaworld["noise"] == 0.0].all()
    np.testing.assert_allclose(
        metaworld["goals"][:, 0], metaworld["observations"][:, 0, -3:], atol=1e-6
    )


def _copy(data: dict) -> dict:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in data.items()}


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

"""CLEVR-Robot offline data generation in KALM's format."""

from __future__ import annotations

import numpy as np
import pytest

from leap_kalm.envs.clevr.data import generate_clevr_dataset
from leap_kalm.envs.kalm_format import validate_kalm_dataset
from leap_kalm.schemas import KALM_KEYS


@pytest.fixture(scope="module")
def clevr() -> dict:
    return generate_clevr_dataset(
        24, seed=0, level="real", horizon=50, n_instructions=5, progress=False
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


def test_clevr_metadata(clevr: dict) -> None:
    assert clevr["num_trajectories"] == 24 and clevr["number_of_objects"] == 5
    assert clevr["noise"].dtype == np.float32 and clevr["noise"].shape == (24,)
    assert clevr["generator"]["seed"] == 0 and clevr["generator"]["horizon"] == 50


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


def test_clevr_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="positive"):
        generate_clevr_dataset(0, seed=0, progress=False)
    with pytest.raises(ValueError, match="CLEVR noise is a probability"):
        generate_clevr_dataset(2, seed=0, noise=1.5, progress=False)

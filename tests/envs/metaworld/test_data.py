"""Meta-World offline data generation in KALM's format."""

from __future__ import annotations

import numpy as np
import pytest

from leap_kalm.envs.kalm_format import validate_kalm_dataset
from leap_kalm.envs.metaworld.data import generate_metaworld_dataset

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def metaworld() -> dict:
    return generate_metaworld_dataset(
        ["reach", "button-press-v3"], 3, seed=0, horizon=120, noise=(0.0, 0.9), progress=False
    )


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


def test_metaworld_instructions_and_metadata(metaworld: dict) -> None:
    assert metaworld["instructions"].shape == (6, 3)
    assert metaworld["num_trajectories"] == 6
    assert metaworld["generator"]["tasks"] == ["reach", "button-press-v3"]


def test_metaworld_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="at least one task"):
        generate_metaworld_dataset([], 1, seed=0, progress=False)
    with pytest.raises(ValueError, match="Meta-World noise is a probability"):
        generate_metaworld_dataset(["reach"], 1, seed=0, noise=1.2, progress=False)

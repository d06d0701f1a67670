"""The collector loop shared by the KALM worlds, on a toy env."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from leap_kalm.envs import collect
from leap_kalm.envs.collect import Episode, _as_str_array, _noise_levels, collect_episodes
from leap_kalm.envs.kalm_format import validate_kalm_dataset


class CountingEnv:
    """Observation ``[t, 0]``; succeeds on step ``length`` (when ``length <= horizon``)."""

    def __init__(self, length: int) -> None:
        self.length, self.t = length, 0

    def reset(self, seed: int) -> tuple[np.ndarray, dict]:
        self.t = 0
        return np.array([0.0, 0.0], dtype=np.float32), {"goal": np.array([float(self.length)])}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        done = self.t == self.length
        obs = np.array([self.t, 0.0], dtype=np.float32)
        return obs, 1.0 if done else 0.0, done, False, {"success": done}


def _toy_episodes(lengths: list[int], named: bool = True):
    seen: list[float] = []

    def episodes(rng: np.random.Generator, noise: np.ndarray) -> Iterator[Episode]:
        for length, p in zip(lengths, noise, strict=True):
            seen.append(float(p))
            env = CountingEnv(length)
            obs, info = env.reset(seed=0)
            yield Episode(
                env,
                lambda o: 3,
                obs,
                info["goal"],
                [f"go {length}", "go"],
                f"task-{length}" if named else None,
            )

    return episodes, seen


def _collect(lengths: list[int], horizon: int = 4, **kwargs):
    episodes, seen = _toy_episodes(lengths, kwargs.pop("named", True))
    options = dict(
        n=len(lengths),
        horizon=horizon,
        obs_dim=2,
        goal_dim=1,
        action_dim=None,
        levels=np.array([0.0, 0.5]),
        rng=np.random.default_rng(7),
        description="toy",
        progress=False,
    )
    return collect_episodes(episodes, **{**options, **kwargs}), seen


def test_episodes_are_recorded_in_kalm_arrays() -> None:
    rollouts, seen = _collect([2, 9, 4])
    out = rollouts.arrays
    assert list(out) == [
        "observations",
        "next_observations",
        "actions",
        "rewards",
        "terminals",
        "masks",
        "goals",
        "instructions",
    ]
    assert out["masks"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]]
    assert rollouts.success.tolist() == [True, False, True]
    assert out["terminals"][:, :, 0].tolist() == [
        [False, True, False, False],
        [False] * 4,
        [False, False, False, True],
    ]
    assert out["actions"].dtype == np.int32 and out["actions"][0].tolist() == [3, 3, 0, 0]
    assert (out["goals"][:, :, 0] == np.array([[2.0], [9.0], [4.0]])).all()
    assert out["instructions"].dtype == np.dtype("<U4")
    assert rollouts.names == ["task-2", "task-9", "task-4"]
    # the noise levels are the rng's first draw, handed to the factory in order
    expected = np.random.default_rng(7).choice([0.0, 0.5], size=3)
    assert seen == expected.tolist()
    assert rollouts.noise.dtype == np.float32 and rollouts.noise.tolist() == seen
    summary = validate_kalm_dataset(out, "toy")
    assert summary["n_steps"] == 10 and summary["n_terminals"] == 2


def test_continuous_actions_and_unnamed_episodes() -> None:
    rollouts, _ = _collect([1], horizon=2, action_dim=3, named=False)
    assert rollouts.arrays["actions"].shape == (1, 2, 3)
    assert rollouts.arrays["actions"].dtype == np.float32
    assert rollouts.names == []


def test_progress_uses_the_shared_bar_only_when_on(monkeypatch) -> None:
    calls: list[tuple] = []

    def fake_track(items, description, total=None):
        calls.append((description, total))
        yield from items

    monkeypatch.setattr(collect, "track", fake_track)
    _collect([1, 2], progress=False)
    assert calls == []
    on, _ = _collect([1, 2], progress=True, description="toy episodes")
    off, _ = _collect([1, 2], progress=False)
    assert calls == [("toy episodes", 2)]
    for key in on.arrays:
        np.testing.assert_array_equal(on.arrays[key], off.arrays[key])


def test_noise_levels() -> None:
    assert _noise_levels(0.3).tolist() == [0.3]
    assert _noise_levels([0.0, 2.0]).tolist() == [0.0, 2.0]
    with pytest.raises(ValueError, match="non-negative"):
        _noise_levels([])
    with pytest.raises(ValueError, match="non-negative"):
        _noise_levels(-0.1)
    with pytest.raises(ValueError, match="Toy noise is a probability"):
        _noise_levels([0.0, 2.0], "Toy")


def test_as_str_array() -> None:
    assert _as_str_array([["ab", "c"]]).dtype == np.dtype("<U2")
    assert _as_str_array([["", ""]]).dtype == np.dtype("<U1")

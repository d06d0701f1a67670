"""CLEVR-Robot physics and gymnasium API."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from leap_kalm.envs.clevr import ClevrRobotEnv, make_real_goal
from leap_kalm.envs.clevr.physics import N_BALLS, PUSH_DIRECTIONS, ClevrPhysics

# Five balls spread out so that any single push of ball 0 (in the middle) hits nothing.
SPREAD = np.array([[0.0, 0.15], [-0.45, 0.5], [0.45, 0.5], [-0.45, -0.2], [0.45, -0.2]]).reshape(-1)


@pytest.fixture(scope="module")
def physics() -> ClevrPhysics:
    return ClevrPhysics()


@pytest.mark.parametrize("level", ["real", "rephrase", "easy", "hard"])
def test_check_env(level: str) -> None:
    check_env(ClevrRobotEnv(level=level), skip_render_check=True)


def test_spaces_and_obs() -> None:
    env = ClevrRobotEnv()
    obs, info = env.reset(seed=0)
    assert env.action_space.n == 40
    assert obs.shape == (10,) and obs.dtype == np.float32
    assert env.observation_space.contains(obs)
    assert (
        info["goal"].shape == (6,) and isinstance(info["instruction"], str) and info["instruction"]
    )


def test_seeded_determinism() -> None:
    a, b = (
        ClevrRobotEnv(level="real", n_instructions=3),
        ClevrRobotEnv(level="real", n_instructions=3),
    )
    oa, ia = a.reset(seed=123)
    ob, ib = b.reset(seed=123)
    np.testing.assert_array_equal(oa, ob)
    np.testing.assert_array_equal(ia["goal"], ib["goal"])
    assert ia["instructions"] == ib["instructions"]
    for action in [3, 17, 25, 38, 9]:
        ra, rb = a.step(action), b.step(action)
        np.testing.assert_array_equal(ra[0], rb[0])
        assert ra[1] == rb[1]
    oc, _ = a.reset(seed=124)
    assert not np.array_equal(oa, oc)


def test_transition_depends_only_on_positions(physics: ClevrPhysics) -> None:
    first = physics.push(SPREAD, 4)
    physics.push(SPREAD, 30)  # anything in between
    np.testing.assert_array_equal(physics.push(SPREAD, 4), first)


@pytest.mark.parametrize("action", range(40))
def test_every_action_moves_the_intended_ball_in_its_direction(
    physics: ClevrPhysics, action: int
) -> None:
    ball, direction = divmod(action, 8)
    # the chosen ball in the open middle, the others near the corners
    xy = SPREAD.reshape(N_BALLS, 2).copy()
    xy[[0, ball]] = xy[[ball, 0]]
    pos = xy.reshape(-1)
    delta = (physics.push(pos, action) - pos).reshape(N_BALLS, 2)
    unit = PUSH_DIRECTIONS[direction] / np.linalg.norm(PUSH_DIRECTIONS[direction])
    moved = delta[ball]
    assert 0.12 < np.linalg.norm(moved) < 0.25
    assert moved @ unit > 0.97 * np.linalg.norm(moved)  # within ~14 degrees of the push
    assert np.abs(np.delete(delta, ball, axis=0)).max() < 1e-3  # the others stay put


def test_walls_stop_balls(physics: ClevrPhysics) -> None:
    pos = SPREAD.copy()
    for _ in range(6):
        pos = physics.push(pos, 2)  # red to the left, repeatedly
    assert pos[0] > -0.56


def test_reset_options_place_balls_and_goal() -> None:
    env = ClevrRobotEnv()
    goal = make_real_goal(1, 2, 3)
    obs, info = env.reset(
        seed=0, options={"positions": SPREAD, "goal": goal, "instruction": "do it"}
    )
    np.testing.assert_allclose(obs, SPREAD, atol=1e-3)
    np.testing.assert_array_equal(info["goal"], goal)
    assert info["instruction"] == "do it"
    with pytest.raises(ValueError, match="shape"):
        env.reset(options={"goal": np.zeros(24)})


def test_episode_terminates_on_success_with_bonus() -> None:
    env = ClevrRobotEnv()
    # red at (0, 0.15); blue left of it at distance 0.5: push blue right once -> within 0.39, left of red
    pos = SPREAD.copy()
    pos[2:4] = [-0.5, 0.15]
    goal = make_real_goal(1, 0, 1)  # blue to the left of red
    env.reset(seed=0, options={"positions": pos, "goal": goal})
    _, reward, terminated, truncated, info = env.step(1 * 8 + 0)  # blue pushed +x
    assert info["success"] and terminated and not truncated
    assert reward == 100.0


def test_truncation_at_horizon() -> None:
    env = ClevrRobotEnv(max_episode_steps=2)
    env.reset(seed=0, options={"positions": SPREAD, "goal": make_real_goal(3, 4, 0)})
    out = [env.step(a) for a in (8, 16)]
    assert not out[0][3] and out[1][3]


def test_easy_level_is_one_step() -> None:
    env = ClevrRobotEnv(level="easy")
    env.reset(seed=1)
    *_, terminated, truncated, _ = env.step(0)
    assert terminated and not truncated


def test_pushed_ball_shoves_the_ball_in_its_way(physics: ClevrPhysics) -> None:
    pos = SPREAD.copy()
    pos[2:4] = [0.3, 0.15]  # blue just right of red
    delta = (physics.push(pos, 0) - pos).reshape(N_BALLS, 2)  # red pushed right
    assert delta[1, 0] > 0.03  # blue was hit and moved right


def test_simulate_matches_step() -> None:
    env = ClevrRobotEnv()
    obs, _ = env.reset(seed=3)
    predicted = env.simulate(env.positions, 21)
    nxt, *_ = env.step(21)
    np.testing.assert_allclose(nxt, predicted, atol=1e-6)

"""Meta-World v3 adapter, task mapping and scripted policies."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from leap_kalm.envs.metaworld import (
    KALM_EASY_TASKS,
    KALM_HARD_TASKS,
    KALM_TRAIN_TASKS,
    NO_V3_COUNTERPART,
    TASKS_BY_LEVEL,
    MetaWorldTaskEnv,
    ScriptedMetaWorldPolicy,
    instructions_for,
    v3_name,
)
from leap_kalm.envs.metaworld.tasks import HELDOUT_INSTRUCTIONS, TRAIN_INSTRUCTIONS

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def rollout(task: str, seed: int, horizon: int = 200) -> tuple[bool, int]:
    env = MetaWorldTaskEnv(task, max_episode_steps=horizon)
    policy = ScriptedMetaWorldPolicy(task)
    obs, _ = env.reset(seed=seed)
    steps = 0
    while True:
        obs, _, terminated, truncated, info = env.step(policy(obs))
        steps += 1
        if terminated or truncated:
            return info["success"], steps


def test_check_env() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(MetaWorldTaskEnv("push-v3"), skip_render_check=True)


def test_spaces_and_info() -> None:
    env = MetaWorldTaskEnv("reach")
    obs, info = env.reset(seed=0)
    assert env.task == "reach-v3"
    assert obs.shape == (39,) and obs.dtype == np.float32 and env.observation_space.contains(obs)
    assert env.action_space.shape == (4,)
    assert info["instruction"] in TRAIN_INSTRUCTIONS["reach-v3"]
    np.testing.assert_allclose(obs[-3:], info["goal"], atol=1e-6)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert isinstance(info["success"], bool) and isinstance(reward, float)


def test_seeded_determinism_and_variety() -> None:
    a, b = MetaWorldTaskEnv("push-v3"), MetaWorldTaskEnv("push-v3")
    oa, _ = a.reset(seed=5)
    ob, _ = b.reset(seed=5)
    np.testing.assert_array_equal(oa, ob)
    action = np.array([0.5, -0.2, 0.1, 1.0], dtype=np.float32)
    np.testing.assert_array_equal(a.step(action)[0], b.step(action)[0])
    oc, _ = a.reset(seed=6)
    assert not np.allclose(oa, oc)  # a different placement of puck and goal


def test_task_mapping() -> None:
    assert len(KALM_TRAIN_TASKS) == 10 and len(KALM_EASY_TASKS) == 8
    assert TASKS_BY_LEVEL["real"][0] == "reach-v3" and v3_name("pick-place") == "pick-place-v3"
    assert set(NO_V3_COUNTERPART) == {"make-coffee", "locked-door-open"}
    assert TASKS_BY_LEVEL["hard"] == ("hammer-v3", "soccer-v3")
    assert set(NO_V3_COUNTERPART) | {t.removesuffix("-v3") for t in TASKS_BY_LEVEL["hard"]} == set(
        KALM_HARD_TASKS
    )
    with pytest.raises(KeyError, match="no Meta-World v3"):
        v3_name("make-coffee")
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS

    for tasks in TASKS_BY_LEVEL.values():
        for task in tasks:
            assert task in ALL_V3_ENVIRONMENTS
            assert len(instructions_for(task)) >= 3


def test_instruction_sets() -> None:
    for task in TASKS_BY_LEVEL["real"]:
        assert len(TRAIN_INSTRUCTIONS[task]) >= 5
        assert not set(TRAIN_INSTRUCTIONS[task]) & set(HELDOUT_INSTRUCTIONS[task])
        assert instructions_for(task, "rephrase") == HELDOUT_INSTRUCTIONS[task]


@pytest.mark.parametrize("task", TASKS_BY_LEVEL["real"])
def test_scripted_policy_solves_train_task(task: str) -> None:
    success, _ = rollout(task, seed=0)
    assert success


@pytest.mark.parametrize("task", TASKS_BY_LEVEL["easy"] + TASKS_BY_LEVEL["hard"])
def test_scripted_policy_solves_easy_and_hard_tasks(task: str) -> None:
    assert rollout(task, seed=1)[0]


def test_noisy_policy() -> None:
    env = MetaWorldTaskEnv("reach-v3")
    obs, _ = env.reset(seed=0)
    clean = ScriptedMetaWorldPolicy("reach-v3")(obs)
    noisy = ScriptedMetaWorldPolicy("reach-v3", noise_std=0.5, seed=0)(obs)
    assert noisy.shape == (4,) and noisy.dtype == np.float32
    assert np.abs(noisy).max() <= 1.0 and not np.allclose(clean, noisy)
    random = ScriptedMetaWorldPolicy("reach-v3", random_action_prob=1.0, seed=0)
    assert len({tuple(random(obs)) for _ in range(5)}) == 5

"""Observation-only success rules against the simulator's ``info["success"]``."""

from __future__ import annotations

import numpy as np
import pytest

from leap_kalm.envs.metaworld import TASKS_BY_LEVEL, MetaWorldTaskEnv, ScriptedMetaWorldPolicy
from leap_kalm.envs.metaworld.success import SUCCESS_RULES, success_from_obs, success_labels

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

ALL_TASKS = sorted({task for tasks in TASKS_BY_LEVEL.values() for task in tasks})

# Measured on 108,000 steps (20 tasks x 36 episodes x 150 steps; scripted policy clean and
# with random_action_prob 0.3-0.9 plus noise_std 0.1): every rule matched the simulator
# on every step except reach/reach-wall (99.4-99.6%), whose fingertip midpoint is only
# approximated from the hand position, so mismatches sit within ~2 mm of the 5 cm
# radius. The bounds leave room for float32 rounding and a few borderline steps.
MIN_AGREEMENT = {"reach-v3": 0.97, "reach-wall-v3": 0.97}
DEFAULT_MIN_AGREEMENT = 0.99


def rollout(task: str, seed: int, random_action_prob: float) -> tuple[np.ndarray, np.ndarray]:
    """Next observations and ``info["success"]`` of one scripted episode, run past success."""
    env = MetaWorldTaskEnv(task, max_episode_steps=120, terminate_on_success=False)
    policy = ScriptedMetaWorldPolicy(
        task,
        noise_std=0.1 if random_action_prob else 0.0,
        random_action_prob=random_action_prob,
        seed=seed,
    )
    obs, _ = env.reset(seed=seed)
    observations, successes = [], []
    while True:
        obs, _, terminated, truncated, info = env.step(policy(obs))
        observations.append(obs)
        successes.append(info["success"])
        if terminated or truncated:
            return np.stack(observations), np.array(successes, dtype=bool)


def test_every_level_task_has_a_rule() -> None:
    assert {t.removesuffix("-v3") for t in ALL_TASKS} == set(SUCCESS_RULES)


@pytest.mark.parametrize("task", ALL_TASKS)
def test_rule_agrees_with_simulator(task: str) -> None:
    episodes = [rollout(task, seed=1, random_action_prob=0.0)]
    episodes.append(rollout(task, seed=2, random_action_prob=0.3))
    observations = np.concatenate([o for o, _ in episodes])
    truth = np.concatenate([s for _, s in episodes])
    predicted = success_labels(task, observations)
    assert truth.any() and not truth.all()  # both labels occur, so the check has teeth
    agreement = float((predicted == truth).mean())
    assert agreement >= MIN_AGREEMENT.get(task, DEFAULT_MIN_AGREEMENT), (
        f"{task}: {agreement:.3f} agreement, {int((truth & ~predicted).sum())} missed, "
        f"{int((~truth & predicted).sum())} false positives"
    )
    short = task.removesuffix("-v3")
    for obs, label in zip(observations[::10], predicted[::10], strict=True):
        assert success_from_obs(task, obs) is bool(label)
        assert success_from_obs(short, obs) is bool(label)


def test_unknown_task_raises_with_its_name() -> None:
    obs = np.zeros(39, dtype=np.float32)
    with pytest.raises(ValueError, match="no-such-task-v3"):
        success_from_obs("no-such-task-v3", obs)
    with pytest.raises(ValueError, match="make-coffee"):
        success_from_obs("make-coffee", obs)


def test_bad_observation_shape_is_rejected() -> None:
    with pytest.raises(ValueError, match="shape"):
        success_from_obs("push-v3", np.zeros(38))
    with pytest.raises(ValueError, match="shape"):
        success_labels("push-v3", np.zeros((5, 18)))

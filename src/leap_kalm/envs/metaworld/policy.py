"""Scripted Meta-World policies from ``metaworld.policies``, with a noisy variant."""

from __future__ import annotations

import warnings

import numpy as np

from leap_kalm.envs.metaworld.tasks import v3_name


class ScriptedMetaWorldPolicy:
    """Meta-World's hand-written expert for ``task`` plus optional Gaussian action noise.

    Args:
        task: v3 name or KALM name.
        noise_std: Standard deviation of Gaussian noise added to each action (then clipped).
        random_action_prob: Probability of a uniformly random action instead.
        seed: Seed of the policy's own generator.
    """

    def __init__(
        self,
        task: str,
        noise_std: float = 0.0,
        random_action_prob: float = 0.0,
        seed: int | None = None,
    ) -> None:
        from metaworld.policies import ENV_POLICY_MAP

        self.task = task if task.endswith("-v3") else v3_name(task)
        if self.task not in ENV_POLICY_MAP:
            raise KeyError(f"metaworld ships no scripted policy for {self.task!r}")
        self._expert = ENV_POLICY_MAP[self.task]()
        self.noise_std = float(noise_std)
        self.random_action_prob = float(random_action_prob)
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        """Meta-World's experts are stateless; kept for a uniform policy interface."""

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self.act(obs)

    def act(self, obs: np.ndarray) -> np.ndarray:
        if self.random_action_prob > 0 and self.rng.random() < self.random_action_prob:
            return self.rng.uniform(-1.0, 1.0, size=4).astype(np.float32)
        # the experts' gains > 1 are deliberate; metaworld warns each step
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"Constant\(s\) may be too high")
            expert = self._expert.get_action(np.asarray(obs, dtype=np.float64))
        action = np.asarray(expert, dtype=np.float32)
        if self.noise_std > 0:
            action = action + self.rng.normal(0.0, self.noise_std, size=action.shape).astype(
                np.float32
            )
        return np.clip(action, -1.0, 1.0).astype(np.float32)

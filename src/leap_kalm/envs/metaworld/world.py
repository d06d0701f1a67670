"""Meta-World's surface for the worlds registry (a KALM world)."""

from __future__ import annotations

from typing import Any

ACTIONS = {"kind": "continuous", "dim": 4}  # end-effector dx, dy, dz and gripper, in [-1, 1]


def generate_offline_data(settings: Any) -> dict[str, Any]:
    """KALM-format offline data from Meta-World's scripted policies with noise.

    Args:
        settings: ``KalmIngestParams`` (uses ``tasks`` — ``None``: the level's KALM task
            list —, ``n_per_task``, ``seed``, ``level``, ``n_instructions`` and, when set,
            ``horizon`` and ``noise``).
    """
    from .data import generate_metaworld_dataset
    from .tasks import TASKS_BY_LEVEL

    optional = {
        k: getattr(settings, k) for k in ("horizon", "noise") if getattr(settings, k) is not None
    }
    return generate_metaworld_dataset(
        settings.tasks or list(TASKS_BY_LEVEL[settings.level]),
        settings.n_per_task,
        settings.seed,
        level=settings.level,
        n_instructions=settings.n_instructions,
        **optional,
    )


# -- evaluation of KALM policies -----------------------------------------------------------
EVALUATION_LEVELS = ("real", "rephrase", "easy", "hard")


class _LevelEnv:
    """Episodes of one KALM level: ``reset(seed=s)`` plays task ``s mod n`` of the level's
    tasks, with an instruction from the level's wordings."""

    def __init__(self, level: str) -> None:
        from .tasks import TASKS_BY_LEVEL

        self.level, self.tasks, self._env = level, TASKS_BY_LEVEL[level], None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        from .env import MetaWorldTaskEnv

        self._env = MetaWorldTaskEnv(self.tasks[(seed or 0) % len(self.tasks)], level=self.level)
        observation, info = self._env.reset(seed=seed, options=options)
        return observation, {**info, "instructions": [info["instruction"]]}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return self._env.step(action)


def make_env(level: str) -> Any:
    """Meta-World episodes at a KALM level (evaluation of policies)."""
    return _LevelEnv(level)

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


# -- imagination (KALM): novel goals, the goal check on generated states, replay -----------
IMAGINATION_LEVELS = ("rephrase", "easy", "hard")  # KALM's novel-goal levels
IMAGINATION_MAX_STEPS = {"rephrase": 100, "easy": 100, "hard": 100}  # KALM imagined 100 steps
SUCCESS_REWARD = 10.0  # Meta-World v3's reward on success; imagined steps get it or 0


def novel_goals(level: str, n: int, seed: int, n_instructions: int = 1) -> dict[str, Any]:
    """``n`` start states, goals and wordings at ``level``, from the level's own tasks.

    Episode ``i`` plays task ``i mod (tasks of the level)``, reset with seed ``seed + i``
    (as the evaluation's episodes are); its first wording is the one the env drew.

    Returns:
        ``starts`` (n, 39), ``goals`` (n, 3) float32, ``instructions`` (n lists),
        ``env_names`` (n,) and ``reset_seeds`` (n,), which the goal check and the replay
        need (a Meta-World goal is a position; the task says what must reach it).
    """
    import numpy as np

    from .env import MetaWorldTaskEnv
    from .tasks import TASKS_BY_LEVEL

    tasks = TASKS_BY_LEVEL[level]
    envs = {task: MetaWorldTaskEnv(task, level=level) for task in tasks}
    starts, goals, instructions, names, seeds = [], [], [], [], []
    for i in range(n):
        env = envs[tasks[i % len(tasks)]]
        obs, info = env.reset(seed=seed + i)
        pool = [w for w in env.instructions if w != info["instruction"]]
        starts.append(obs)
        goals.append(info["goal"])
        instructions.append([info["instruction"], *pool][: max(1, n_instructions)])
        names.append(env.task)
        seeds.append(seed + i)
    return {
        "starts": np.asarray(starts, dtype=np.float32).reshape(n, -1),
        "goals": np.asarray(goals, dtype=np.float32).reshape(n, -1),
        "instructions": instructions,
        "env_names": np.array(names),
        "reset_seeds": np.array(seeds, dtype=np.int64),
    }


def _task_of(env_name: str | None) -> str:
    if not env_name:
        raise ValueError(
            "a Meta-World goal is only a position: the goal check needs the episode's task "
            "(env_name), which novel_goals and KALM-format data carry as env_names"
        )
    return str(env_name)


def judge_transition(
    level: str, state: Any, next_state: Any, goal: Any, env_name: str | None = None
) -> tuple[float, bool, bool]:
    """``(reward, success, terminated)`` of a (generated) transition: Meta-World v3's
    success rule of the task read off the next observation (``envs.metaworld.success``);
    the reward is the success reward, since the shaped one needs simulator-only state."""
    from .success import success_from_obs

    success = bool(success_from_obs(_task_of(env_name), next_state))
    return (SUCCESS_REWARD if success else 0.0), success, success


def replay(
    level: str,
    start: Any,
    goal: Any,
    actions: Any,
    env_name: str | None = None,
    reset_seed: int | None = None,
) -> bool:
    """Whether the actions, played in the real env from the same reset (task and seed),
    succeed; ``start`` is checked against the reset's observation.

    Raises:
        ValueError: Without the task or the seed, or when the reset does not give ``start``.
    """
    import numpy as np

    from .env import MetaWorldTaskEnv

    if reset_seed is None:
        raise ValueError("replaying a Meta-World rollout needs the reset seed of its start")
    env = MetaWorldTaskEnv(_task_of(env_name), level=level, max_episode_steps=500)
    obs, _ = env.reset(seed=int(reset_seed))
    if not np.allclose(obs, np.asarray(start, dtype=np.float32), atol=1e-5):
        raise ValueError(
            f"{env_name} reset with seed {reset_seed} does not give the rollout's start state"
        )
    for action in actions:
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return bool(info["success"])
    return False

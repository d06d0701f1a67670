"""CLEVR-Robot's surface for the worlds registry (a KALM world)."""

from __future__ import annotations

from typing import Any

from leap_kalm.envs.clevr.physics import N_ACTIONS

ACTIONS = {"kind": "discrete", "dim": N_ACTIONS}  # ball a // 8 pushed in direction a % 8


def generate_offline_data(settings: Any) -> dict[str, Any]:
    """KALM-format offline data from the scripted pusher with noise.

    Args:
        settings: ``KalmIngestParams`` (uses ``n_episodes``, ``seed``, ``level``,
            ``n_instructions`` and, when set, ``horizon`` and ``noise``).
    """
    from .data import generate_clevr_dataset

    optional = {
        k: getattr(settings, k) for k in ("horizon", "noise") if getattr(settings, k) is not None
    }
    return generate_clevr_dataset(
        settings.n_episodes,
        settings.seed,
        level=settings.level,
        n_instructions=settings.n_instructions,
        **optional,
    )


# -- imagination (KALM): novel goals, the goal check on generated states, replay -----------
IMAGINATION_LEVELS = ("rephrase", "easy", "hard")  # KALM's novel-goal levels
IMAGINATION_MAX_STEPS = {"rephrase": 50, "easy": 1, "hard": 50}  # as the env truncates them


EVALUATION_LEVELS = ("real", "rephrase", "easy", "hard")


def make_env(level: str) -> Any:
    """A CLEVR-Robot env with goals at ``level`` (evaluation of policies)."""
    from leap_kalm.envs.clevr.env import ClevrRobotEnv

    return ClevrRobotEnv(level=level)


def novel_goals(level: str, n: int, seed: int, n_instructions: int = 1) -> dict[str, Any]:
    """``n`` start states, goals and wordings at ``level`` from the env's own generator.

    Episode ``i`` is ``ClevrRobotEnv(level).reset(seed=seed + i)``; returns ``starts``
    (n, 10) float32, ``goals`` (n, G) float32, ``instructions`` (n lists of wordings).
    """
    import numpy as np

    from leap_kalm.envs.clevr.env import ClevrRobotEnv

    env = ClevrRobotEnv(level=level, n_instructions=n_instructions)
    starts, goals, instructions = [], [], []
    for i in range(n):
        obs, info = env.reset(seed=seed + i)
        starts.append(obs)
        goals.append(info["goal"])
        instructions.append(list(info["instructions"]))
    return {
        "starts": np.asarray(starts, dtype=np.float32).reshape(n, -1),
        "goals": np.asarray(goals, dtype=np.float32).reshape(n, -1),
        "instructions": instructions,
    }


def judge_transition(
    level: str, state: Any, next_state: Any, goal: Any
) -> tuple[float, bool, bool]:
    """``(reward, success, terminated)`` of a (generated) transition, by the env's own rules."""
    import numpy as np

    from leap_kalm.envs.clevr import goals as G

    prev, nxt = np.asarray(state, dtype=np.float64), np.asarray(next_state, dtype=np.float64)
    success = bool(G.is_success(level, prev, nxt, goal))
    reward = float(G.compute_reward(level, prev, nxt, goal))
    return reward, success, success or level == "easy"


def replay(level: str, start: Any, goal: Any, actions: Any) -> bool:
    """Whether the actions, played in the real env from ``start`` towards ``goal``, succeed."""
    from leap_kalm.envs.clevr.env import ClevrRobotEnv

    env = ClevrRobotEnv(level=level)
    env.reset(seed=0, options={"positions": start, "goal": goal})
    for action in actions:
        _, _, terminated, truncated, info = env.step(int(action))
        if terminated or truncated:
            return bool(info["success"])
    return False

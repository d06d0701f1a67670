"""KALM offline datasets: generate them with scripted policies and validate their arrays.

The format is KALM's ``clevr_robot.npy`` (see ARCHITECTURE.md, "Data contracts"):
a dict of arrays over ``N`` episodes padded to ``T`` steps. Step ``t`` of an episode
holds ``observations[t]`` (state before the action), ``actions[t]``, ``rewards[t]``,
``next_observations[t]``; ``terminals[t]`` is True on the step that reaches success
(KALM's convention; a failed episode has no terminal and runs to the horizon);
``masks`` is 1 on valid steps and 0 on padding, where every array is zero.
``goals[t]`` repeats the episode's goal vector over all ``T`` steps and
``instructions`` holds ``K`` paraphrases per episode.

Generated dicts also carry metadata like KALM's (``num_trajectories``,
``observation_dim`` ...), the per-episode ``success`` flag and noise level, and the
generator's settings (seed, policy, noise) as the project's conventions ask.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from leap_kalm.schemas import KALM_KEYS

logger = logging.getLogger(__name__)

DEFAULT_CLEVR_NOISE: tuple[float, ...] = (0.0, 0.1, 0.3, 0.6, 1.0)
DEFAULT_METAWORLD_NOISE: tuple[float, ...] = (0.0, 0.1, 0.3, 0.6, 0.9)


def _progress(enabled: bool):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        disable=not enabled,
    )


def _noise_levels(noise: float | Sequence[float]) -> np.ndarray:
    levels = np.atleast_1d(np.asarray(noise, dtype=np.float64))
    if levels.size == 0 or np.any(levels < 0):
        raise ValueError(
            f"noise must be a non-negative number or a non-empty list of them, got {noise!r}"
        )
    return levels


def _empty_arrays(
    n: int, horizon: int, obs_dim: int, goal_dim: int, action_dim: int | None
) -> dict[str, np.ndarray]:
    actions = (
        np.zeros((n, horizon), dtype=np.int32)
        if action_dim is None
        else np.zeros((n, horizon, action_dim), dtype=np.float32)
    )
    return {
        "observations": np.zeros((n, horizon, obs_dim), dtype=np.float32),
        "next_observations": np.zeros((n, horizon, obs_dim), dtype=np.float32),
        "actions": actions,
        "rewards": np.zeros((n, horizon, 1), dtype=np.float32),
        "terminals": np.zeros((n, horizon, 1), dtype=bool),
        "masks": np.zeros((n, horizon), dtype=np.int32),
        "goals": np.zeros((n, horizon, goal_dim), dtype=np.float32),
    }


def _record_episode(
    env: Any, act: Any, obs: np.ndarray, out: dict[str, np.ndarray], i: int, horizon: int
) -> bool:
    """Play one episode from ``obs`` into row ``i`` of KALM's arrays; return whether it succeeded."""
    for t in range(horizon):
        action = act(obs)
        next_obs, reward, terminated, truncated, step_info = env.step(action)
        out["observations"][i, t] = obs
        out["next_observations"][i, t] = next_obs
        out["actions"][i, t] = action
        out["rewards"][i, t, 0] = reward
        out["terminals"][i, t, 0] = bool(step_info["success"])
        out["masks"][i, t] = 1
        obs = next_obs
        if terminated or truncated:
            return bool(step_info["success"])
    return False


def _as_str_array(rows: list[list[str]]) -> np.ndarray:
    width = max((len(s) for row in rows for s in row), default=1)
    return np.array(rows, dtype=f"<U{max(width, 1)}")


# --------------------------------------------------------------------------- CLEVR
def generate_clevr_dataset(
    n_episodes: int,
    seed: int,
    level: str = "real",
    horizon: int = 50,
    noise: float | Sequence[float] = DEFAULT_CLEVR_NOISE,
    n_instructions: int = 20,
    progress: bool = True,
) -> dict[str, Any]:
    """Roll out the scripted CLEVR-Robot policy (plus noise) into KALM's arrays.

    Args:
        n_episodes: Number of episodes ``N``.
        seed: Seeds scenes, goals, instructions, noise levels and the policy.
        level: ``"real"``, ``"rephrase"``, ``"easy"`` or ``"hard"``.
        horizon: ``T``; easy episodes last one step and are padded to ``T``.
        noise: Probability of a random action; a list draws one level per episode
            (the default mixes clean and very noisy episodes, so both successes and
            failures are present).
        n_instructions: ``K`` paraphrases per episode.
        progress: Show a rich progress bar.

    Returns:
        KALM's arrays (``actions`` int32 (N, T)) plus metadata, ``success`` (N,) and
        ``noise`` (N,).
    """
    from leap_kalm.envs.clevr import ClevrRobotEnv, ScriptedClevrPolicy
    from leap_kalm.envs.clevr.goals import goal_dim
    from leap_kalm.envs.clevr.physics import N_ACTIONS, N_BALLS

    if n_episodes < 1 or horizon < 1:
        raise ValueError("n_episodes and horizon must be positive")
    levels = _noise_levels(noise)
    if np.any(levels > 1):
        raise ValueError("CLEVR noise is a probability and must be <= 1")
    rng = np.random.default_rng(seed)
    env = ClevrRobotEnv(level=level, max_episode_steps=horizon, n_instructions=n_instructions)
    g_dim = goal_dim(level)
    out = _empty_arrays(n_episodes, horizon, 2 * N_BALLS, g_dim, None)
    instructions: list[list[str]] = []
    success = np.zeros(n_episodes, dtype=bool)
    eps_noise = rng.choice(levels, size=n_episodes)
    env_seeds = rng.integers(2**31 - 1, size=n_episodes)
    policy_seeds = rng.integers(2**31 - 1, size=n_episodes)
    with _progress(progress) as bar:
        task = bar.add_task(f"CLEVR {level} episodes", total=n_episodes)
        for i in range(n_episodes):
            obs, info = env.reset(seed=int(env_seeds[i]))
            policy = ScriptedClevrPolicy(
                level, noise=float(eps_noise[i]), seed=int(policy_seeds[i])
            )
            goal = info["goal"]
            out["goals"][i] = goal
            instructions.append(info["instructions"])
            success[i] = _record_episode(
                env, lambda o, p=policy, g=goal: p(o, g), obs, out, i, horizon
            )
            bar.advance(task)
    out["instructions"] = _as_str_array(instructions)
    logger.info("CLEVR %s: %d episodes, success rate %.3f", level, n_episodes, success.mean())
    out.update(
        num_trajectories=n_episodes,
        observation_type="continuous",
        observation_dim=2 * N_BALLS,
        action_type="discrete",
        action_dim=N_ACTIONS,
        number_of_objects=N_BALLS,
        level=level,
        success=success,
        noise=eps_noise.astype(np.float32),
        generator={
            "env": "clevr_robot",
            "policy": "ScriptedClevrPolicy",
            "seed": int(seed),
            "noise_levels": levels.tolist(),
            "horizon": int(horizon),
            "level": level,
        },
    )
    return out


# --------------------------------------------------------------------------- Meta-World
def generate_metaworld_dataset(
    tasks: Sequence[str],
    n_per_task: int,
    seed: int,
    level: str = "real",
    horizon: int = 150,
    noise: float | Sequence[float] = DEFAULT_METAWORLD_NOISE,
    noise_std: float = 0.1,
    n_instructions: int = 3,
    progress: bool = True,
) -> dict[str, Any]:
    """Roll out Meta-World's scripted experts (plus Gaussian noise) into KALM's arrays.

    Args:
        tasks: v3 or KALM task names.
        n_per_task: Episodes per task; ``N = len(tasks) * n_per_task``.
        seed: Seeds placements, instructions, noise levels and the policies.
        level: Instruction set (``"real"`` train wordings, ``"rephrase"`` held-out ...).
        horizon: ``T``; an episode ends early on success.
        noise: Probability of a uniformly random action per step; a list draws one
            level per episode (the default mixes clean and very noisy episodes, so
            both successes and failures are present).
        noise_std: Std of Gaussian noise added to the expert's actions.
        n_instructions: ``K`` instructions per episode (drawn with replacement when a
            task has fewer).
        progress: Show a rich progress bar.

    Returns:
        KALM's arrays (``actions`` float32 (N, T, 4), ``goals`` the 3-d goal
        position) plus ``env_names`` (N,), ``success`` (N,), ``noise`` (N,) and metadata.
    """
    from leap_kalm.envs.metaworld import (
        ACTION_DIM,
        OBS_DIM,
        MetaWorldTaskEnv,
        ScriptedMetaWorldPolicy,
    )

    if not tasks or n_per_task < 1 or horizon < 1:
        raise ValueError("need at least one task, n_per_task >= 1 and horizon >= 1")
    levels = _noise_levels(noise)
    if np.any(levels > 1):
        raise ValueError("Meta-World noise is a probability and must be <= 1")
    rng = np.random.default_rng(seed)
    n = len(tasks) * n_per_task
    out = _empty_arrays(n, horizon, OBS_DIM, 3, ACTION_DIM)
    instructions: list[list[str]] = []
    names: list[str] = []
    success = np.zeros(n, dtype=bool)
    eps_noise = rng.choice(levels, size=n)
    i = 0
    with _progress(progress) as bar:
        job = bar.add_task("Meta-World episodes", total=n)
        for task in tasks:
            env = MetaWorldTaskEnv(task, level=level, max_episode_steps=horizon)
            pool = env.instructions
            for _ in range(n_per_task):
                policy = ScriptedMetaWorldPolicy(
                    env.task,
                    noise_std=noise_std,
                    random_action_prob=float(eps_noise[i]),
                    seed=int(rng.integers(2**31 - 1)),
                )
                obs, info = env.reset(seed=int(rng.integers(2**31 - 1)))
                picks = rng.choice(
                    len(pool), size=n_instructions, replace=n_instructions > len(pool)
                )
                instructions.append([pool[j] for j in picks])
                names.append(env.task)
                out["goals"][i] = info["goal"]
                success[i] = _record_episode(env, policy, obs, out, i, horizon)
                i += 1
                bar.advance(job)
    out["instructions"] = _as_str_array(instructions)
    logger.info(
        "Meta-World: %d episodes over %d tasks, success rate %.3f", n, len(tasks), success.mean()
    )
    out.update(
        num_trajectories=n,
        observation_type="continuous",
        observation_dim=OBS_DIM,
        action_type="continuous",
        action_dim=ACTION_DIM,
        env_names=np.array(names),
        level=level,
        success=success,
        noise=eps_noise.astype(np.float32),
        generator={
            "env": "metaworld-v3",
            "policy": "metaworld.policies + noise",
            "seed": int(seed),
            "noise_levels": levels.tolist(),
            "noise_std": float(noise_std),
            "horizon": int(horizon),
            "level": level,
            "tasks": [str(t) for t in tasks],
        },
    )
    return out


# --------------------------------------------------------------------------- validation
def _fail(source: str, message: str) -> None:
    raise ValueError(f"{source}: {message}")


def validate_kalm_dataset(data: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Check a KALM offline dataset and summarise it.

    Checks that every key of :data:`leap_kalm.schemas.KALM_KEYS` is present, each
    array's rank, dtype and shape (shared ``N`` and ``T``; ``next_observations``
    like ``observations``), that masks are 0/1 with the valid steps first, that
    terminals fall only on an episode's last valid step, that consecutive valid
    steps chain (``next_observations[t] == observations[t + 1]``) and that valid
    values are finite.

    Args:
        data: The dict (e.g. loaded from KALM's ``.npy``).
        source: Name used in error messages (file path or dataset name).

    Returns:
        A summary: ``n_episodes``, ``horizon``, ``observation_dim``, ``action_type``,
        ``action_dim``, ``goal_dim``, ``n_instructions``, ``n_steps``, ``n_terminals``.

    Raises:
        ValueError: Naming ``source`` and the offending key, shape or dtype.
    """
    if not isinstance(data, Mapping):
        _fail(source, f"expected a dict of arrays, got {type(data).__name__}")
    missing = [k for k in KALM_KEYS if k not in data]
    if missing:
        _fail(source, f"missing key(s) {missing}; a KALM dataset needs {list(KALM_KEYS)}")
    arr = {k: np.asarray(data[k]) for k in KALM_KEYS}

    def want(key: str, ndim: int, layout: str) -> None:
        if arr[key].ndim != ndim:
            _fail(source, f"key {key!r} has shape {arr[key].shape}, expected {layout}")

    want("observations", 3, "(N, T, D)")
    obs = arr["observations"]
    n, horizon, obs_dim = obs.shape
    if obs.dtype != np.float32:
        _fail(source, f"key 'observations' has dtype {obs.dtype}, expected float32")
    if arr["next_observations"].shape != obs.shape:
        _fail(
            source,
            f"key 'next_observations' has shape {arr['next_observations'].shape}, "
            f"expected {obs.shape} like 'observations'",
        )
    if arr["next_observations"].dtype != np.float32:
        _fail(
            source,
            f"key 'next_observations' has dtype {arr['next_observations'].dtype}, expected float32",
        )

    act = arr["actions"]
    if act.ndim == 2 and np.issubdtype(act.dtype, np.integer):
        action_type, action_dim = "discrete", int(act.max(initial=0)) + 1
    elif act.ndim == 3 and np.issubdtype(act.dtype, np.floating):
        action_type, action_dim = "continuous", act.shape[2]
    else:
        _fail(
            source,
            f"key 'actions' has shape {act.shape} and dtype {act.dtype}, expected "
            "(N, T) integer (discrete) or (N, T, A) float (continuous)",
        )
    if act.shape[:2] != (n, horizon):
        _fail(
            source, f"key 'actions' has shape {act.shape}, expected leading (N, T) = {(n, horizon)}"
        )

    expected = {"rewards": (n, horizon, 1), "terminals": (n, horizon, 1), "masks": (n, horizon)}
    for key, shape in expected.items():
        if arr[key].shape != shape:
            _fail(source, f"key {key!r} has shape {arr[key].shape}, expected {shape}")
    if not np.issubdtype(arr["rewards"].dtype, np.floating):
        _fail(source, f"key 'rewards' has dtype {arr['rewards'].dtype}, expected a float dtype")
    if arr["terminals"].dtype != np.bool_:
        _fail(source, f"key 'terminals' has dtype {arr['terminals'].dtype}, expected bool")
    masks = arr["masks"]
    if not (masks.dtype == np.bool_ or np.issubdtype(masks.dtype, np.number)):
        _fail(source, f"key 'masks' has dtype {masks.dtype}, expected int, float or bool")
    if not np.isin(masks, (0, 1)).all():
        _fail(source, "key 'masks' must hold only 0 and 1")

    want("goals", 3, "(N, T, G)")
    if arr["goals"].shape[:2] != (n, horizon):
        _fail(
            source,
            f"key 'goals' has shape {arr['goals'].shape}, expected leading (N, T) = {(n, horizon)}",
        )
    if not np.issubdtype(arr["goals"].dtype, np.number):
        _fail(source, f"key 'goals' has dtype {arr['goals'].dtype}, expected a numeric dtype")

    inst = arr["instructions"]
    if inst.ndim != 2 or inst.shape[0] != n:
        _fail(source, f"key 'instructions' has shape {inst.shape}, expected (N, K) with N = {n}")
    if not (
        inst.dtype.kind == "U"
        or (inst.dtype == object and all(isinstance(s, str) for s in inst.ravel()))
    ):
        _fail(source, f"key 'instructions' has dtype {inst.dtype}, expected strings")
    if inst.shape[1] == 0 or any(not str(s).strip() for s in inst.ravel()):
        _fail(source, "key 'instructions' holds an empty instruction list or string")

    valid = masks.astype(bool)
    lengths = valid.sum(axis=1)
    if (lengths == 0).any():
        _fail(source, f"key 'masks': episode {int(np.argmin(lengths))} has no valid step")
    if (valid != (np.arange(horizon)[None, :] < lengths[:, None])).any():
        bad = int(np.flatnonzero((valid != (np.arange(horizon) < lengths[:, None])).any(axis=1))[0])
        _fail(source, f"key 'masks': episode {bad} has padding before a valid step")
    term = arr["terminals"][..., 0]
    if (term & ~valid).any():
        _fail(source, "key 'terminals' is set on a padded step")
    last = np.zeros_like(valid)
    last[np.arange(n), lengths - 1] = True
    if (term & ~last).any():
        bad = int(np.flatnonzero((term & ~last).any(axis=1))[0])
        _fail(source, f"key 'terminals': episode {bad} continues after a terminal step")
    for key in ("observations", "next_observations", "rewards"):
        if not np.isfinite(arr[key][valid]).all():
            _fail(source, f"key {key!r} holds non-finite values on valid steps")
    chain = valid[:, 1:]
    if chain.any():
        gap = np.abs(arr["next_observations"][:, :-1] - obs[:, 1:]).max(axis=-1)[chain]
        if gap.max() > 1e-4:
            _fail(
                source,
                "keys 'next_observations'/'observations' do not chain: "
                f"next_observations[t] differs from observations[t+1] by {gap.max():.3g}",
            )
    if action_type == "discrete" and (act[valid] < 0).any():
        _fail(source, "key 'actions' holds negative discrete actions")

    return {
        "source": source,
        "n_episodes": int(n),
        "horizon": int(horizon),
        "observation_dim": int(obs_dim),
        "action_type": action_type,
        "action_dim": int(action_dim),
        "goal_dim": int(arr["goals"].shape[2]),
        "n_instructions": int(inst.shape[1]),
        "n_steps": int(lengths.sum()),
        "n_terminals": int(term.sum()),
    }

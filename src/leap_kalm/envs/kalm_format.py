"""The KALM offline-dataset contract: check a dataset's arrays and summarise it.

The format is KALM's ``clevr_robot.npy`` (see ARCHITECTURE.md, "Data contracts"):
a dict of arrays over ``N`` episodes padded to ``T`` steps. Step ``t`` of an episode
holds ``observations[t]`` (state before the action), ``actions[t]``, ``rewards[t]``,
``next_observations[t]``; ``terminals[t]`` is True on the step that reaches success
(KALM's convention; a failed episode has no terminal and runs to the horizon);
``masks`` is 1 on valid steps and 0 on padding, where every array is zero.
``goals[t]`` repeats the episode's goal vector over all ``T`` steps and
``instructions`` holds ``K`` paraphrases per episode.

:func:`validate_kalm_dataset` runs one check per part of the contract, in a fixed
order, so the first problem found is the one reported. The collectors that write
such datasets live in :mod:`leap_kalm.envs.collect` and the worlds' ``data`` modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

import numpy as np

from leap_kalm.schemas import KALM_KEYS

Arrays = dict[str, np.ndarray]


def _fail(source: str, message: str) -> NoReturn:
    raise ValueError(f"{source}: {message}")


def _arrays(data: Any, source: str) -> Arrays:
    """The dataset's KALM keys as arrays; fails on a non-mapping or a missing key."""
    if not isinstance(data, Mapping):
        _fail(source, f"expected a dict of arrays, got {type(data).__name__}")
    missing = [k for k in KALM_KEYS if k not in data]
    if missing:
        _fail(source, f"missing key(s) {missing}; a KALM dataset needs {list(KALM_KEYS)}")
    return {k: np.asarray(data[k]) for k in KALM_KEYS}


def _check_rank(arr: Arrays, key: str, ndim: int, layout: str, source: str) -> None:
    if arr[key].ndim != ndim:
        _fail(source, f"key {key!r} has shape {arr[key].shape}, expected {layout}")


def _check_observations(arr: Arrays, source: str) -> tuple[int, int, int]:
    """``observations`` (N, T, D) float32 and ``next_observations`` alike; return N, T, D."""
    _check_rank(arr, "observations", 3, "(N, T, D)", source)
    obs, next_obs = arr["observations"], arr["next_observations"]
    if obs.dtype != np.float32:
        _fail(source, f"key 'observations' has dtype {obs.dtype}, expected float32")
    if next_obs.shape != obs.shape:
        _fail(
            source,
            f"key 'next_observations' has shape {next_obs.shape}, "
            f"expected {obs.shape} like 'observations'",
        )
    if next_obs.dtype != np.float32:
        _fail(source, f"key 'next_observations' has dtype {next_obs.dtype}, expected float32")
    n, horizon, obs_dim = obs.shape
    return n, horizon, obs_dim


def _check_actions(arr: Arrays, n: int, horizon: int, source: str) -> tuple[str, int]:
    """Discrete (N, T) integer or continuous (N, T, A) float actions; return type and size."""
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
    return action_type, action_dim


def _check_step_arrays(arr: Arrays, n: int, horizon: int, source: str) -> None:
    """``rewards`` (N, T, 1) float, ``terminals`` (N, T, 1) bool, ``masks`` (N, T) of 0/1."""
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


def _check_goals(arr: Arrays, n: int, horizon: int, source: str) -> None:
    """``goals`` (N, T, G) numeric."""
    _check_rank(arr, "goals", 3, "(N, T, G)", source)
    goals = arr["goals"]
    if goals.shape[:2] != (n, horizon):
        _fail(
            source,
            f"key 'goals' has shape {goals.shape}, expected leading (N, T) = {(n, horizon)}",
        )
    if not np.issubdtype(goals.dtype, np.number):
        _fail(source, f"key 'goals' has dtype {goals.dtype}, expected a numeric dtype")


def _check_instructions(arr: Arrays, n: int, source: str) -> None:
    """``instructions`` (N, K) of non-empty strings, ``K >= 1``."""
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


def _episode_lengths(masks: np.ndarray, horizon: int, source: str) -> tuple[np.ndarray, np.ndarray]:
    """Valid-step mask (N, T) bool and lengths (N,); each episode's valid steps come first."""
    valid = masks.astype(bool)
    lengths = valid.sum(axis=1)
    if (lengths == 0).any():
        _fail(source, f"key 'masks': episode {int(np.argmin(lengths))} has no valid step")
    prefix = np.arange(horizon)[None, :] < lengths[:, None]
    if (valid != prefix).any():
        bad = int(np.flatnonzero((valid != prefix).any(axis=1))[0])
        _fail(source, f"key 'masks': episode {bad} has padding before a valid step")
    return valid, lengths


def _check_terminals(term: np.ndarray, valid: np.ndarray, lengths: np.ndarray, source: str) -> None:
    """Terminals only on an episode's last valid step."""
    if (term & ~valid).any():
        _fail(source, "key 'terminals' is set on a padded step")
    last = np.zeros_like(valid)
    last[np.arange(len(lengths)), lengths - 1] = True
    if (term & ~last).any():
        bad = int(np.flatnonzero((term & ~last).any(axis=1))[0])
        _fail(source, f"key 'terminals': episode {bad} continues after a terminal step")


def _check_finite(arr: Arrays, valid: np.ndarray, source: str) -> None:
    for key in ("observations", "next_observations", "rewards"):
        if not np.isfinite(arr[key][valid]).all():
            _fail(source, f"key {key!r} holds non-finite values on valid steps")


def _check_chain(arr: Arrays, valid: np.ndarray, source: str) -> None:
    """``next_observations[t] == observations[t + 1]`` on consecutive valid steps."""
    chain = valid[:, 1:]
    if not chain.any():
        return
    gap = np.abs(arr["next_observations"][:, :-1] - arr["observations"][:, 1:]).max(axis=-1)
    gap = gap[chain]
    if gap.max() > 1e-4:
        _fail(
            source,
            "keys 'next_observations'/'observations' do not chain: "
            f"next_observations[t] differs from observations[t+1] by {gap.max():.3g}",
        )


def _check_discrete_actions(arr: Arrays, valid: np.ndarray, action_type: str, source: str) -> None:
    if action_type == "discrete" and (arr["actions"][valid] < 0).any():
        _fail(source, "key 'actions' holds negative discrete actions")


def summarize_kalm_arrays(
    arr: Arrays, source: str, action_type: str, action_dim: int, lengths: np.ndarray
) -> dict[str, Any]:
    """The summary :func:`validate_kalm_dataset` returns, from already checked arrays."""
    n, horizon, obs_dim = arr["observations"].shape
    return {
        "source": source,
        "n_episodes": int(n),
        "horizon": int(horizon),
        "observation_dim": int(obs_dim),
        "action_type": action_type,
        "action_dim": int(action_dim),
        "goal_dim": int(arr["goals"].shape[2]),
        "n_instructions": int(arr["instructions"].shape[1]),
        "n_steps": int(lengths.sum()),
        "n_terminals": int(arr["terminals"][..., 0].sum()),
    }


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
    arr = _arrays(data, source)
    n, horizon, _ = _check_observations(arr, source)
    action_type, action_dim = _check_actions(arr, n, horizon, source)
    _check_step_arrays(arr, n, horizon, source)
    _check_goals(arr, n, horizon, source)
    _check_instructions(arr, n, source)
    valid, lengths = _episode_lengths(arr["masks"], horizon, source)
    _check_terminals(arr["terminals"][..., 0], valid, lengths, source)
    _check_finite(arr, valid, source)
    _check_chain(arr, valid, source)
    _check_discrete_actions(arr, valid, action_type, source)
    _check_declared_sizes(data, arr, action_type, action_dim, source)
    return summarize_kalm_arrays(arr, source, action_type, action_dim, lengths)


def _check_declared_sizes(
    data: Mapping[str, Any], arr: Arrays, action_type: str, action_dim: int, source: str
) -> None:
    """The arrays agree with the sizes KALM's metadata declares, where the file has them
    (``observation_dim``, ``action_type``, ``action_dim``): a file cut from another world
    or an older layout is named here, not deep inside training."""
    obs_dim = arr["observations"].shape[2]
    declared_obs = data.get("observation_dim")
    if declared_obs is not None and int(declared_obs) != obs_dim:
        _fail(
            source,
            f"metadata observation_dim is {int(declared_obs)} but key 'observations' holds "
            f"{obs_dim} numbers per step",
        )
    declared_type = data.get("action_type")
    if declared_type is not None and str(declared_type) != action_type:
        _fail(
            source,
            f"metadata action_type is {str(declared_type)!r} but key 'actions' holds "
            f"{action_type} actions (shape {arr['actions'].shape}, dtype {arr['actions'].dtype})",
        )
    declared_dim = data.get("action_dim")
    if declared_dim is None:
        return
    if action_type == "continuous" and int(declared_dim) != action_dim:
        _fail(
            source,
            f"metadata action_dim is {int(declared_dim)} but key 'actions' holds "
            f"{action_dim} numbers per step",
        )
    if action_type == "discrete" and action_dim > int(declared_dim):
        _fail(
            source,
            f"key 'actions' holds action {action_dim - 1}, beyond metadata action_dim "
            f"{int(declared_dim)}",
        )


def canonical_kalm_dataset(data: Any, source: str) -> dict[str, Any]:
    """KALM's own file layouts as this project's canonical one, without changing values.

    KALM's ``clevr_robot.npy`` is already canonical. Its ``meta_world.npy`` differs:
    float64 arrays, ``masks`` (N, T, 1) of floats, ``terminals`` of 0./1. floats and
    ``goals`` (N, G) once per episode. These become float32, ``masks`` (N, T) int32,
    ``terminals`` bool and ``goals`` repeated over T. Other keys pass through. The input
    is not modified.

    Raises:
        ValueError: Naming ``source`` and the key whose values cannot be converted.
    """
    if not isinstance(data, Mapping):
        _fail(source, f"expected a dict of arrays, got {type(data).__name__}")
    out = dict(data)
    for key in ("observations", "next_observations", "rewards", "goals"):
        if key in out:
            value = np.asarray(out[key])
            if np.issubdtype(value.dtype, np.floating) and value.dtype != np.float32:
                out[key] = value.astype(np.float32)
    if "masks" in out:
        masks = np.asarray(out["masks"])
        if masks.ndim == 3 and masks.shape[-1] == 1:
            masks = masks[..., 0]
        if masks.dtype != np.bool_ and not np.isin(masks, (0, 1)).all():
            _fail(source, "key 'masks' must hold only 0 and 1")
        out["masks"] = masks.astype(np.int32)
    if "terminals" in out:
        terminals = np.asarray(out["terminals"])
        if terminals.dtype != np.bool_:
            if not np.isin(terminals, (0, 1)).all():
                _fail(source, "key 'terminals' must hold only 0/1 or True/False")
            out["terminals"] = terminals.astype(bool)
    if "actions" in out:
        actions = np.asarray(out["actions"])
        if np.issubdtype(actions.dtype, np.floating) and actions.ndim == 3:
            out["actions"] = actions.astype(np.float32)
    if "goals" in out and "observations" in out:
        goals, horizon = np.asarray(out["goals"]), np.asarray(out["observations"]).shape[1]
        if goals.ndim == 2:
            out["goals"] = np.repeat(goals[:, None, :], horizon, axis=1)
    return out


PROMPT_LEVELS = ("real", "rephrase", "easy", "hard")


def _require_lists(data: Any, source: str, keys: tuple[str, ...], what: str) -> None:
    """``data`` is a dict holding ``keys`` (KALM's prompt and rollout files)."""
    if not isinstance(data, Mapping):
        _fail(source, f"expected a dict of per-trajectory lists, got {type(data).__name__}")
    missing = [k for k in keys if k not in data]
    if missing:
        _fail(source, f"missing key(s) {missing}; {what} hold(s) {', '.join(keys)}")


def _level_in_name(source: str) -> str | None:
    """The one goal level a file's name mentions (``clevr_rephrase_prompt.npy``), else None."""
    named = [name for name in PROMPT_LEVELS if name in str(source).rsplit("/", 1)[-1]]
    return named[0] if len(named) == 1 else None


def kalm_prompt_tasks(data: Any, source: str, level: str | None = None) -> dict[str, Any]:
    """The imagination tasks in KALM's prompt file (as its ``clevr_generate.py`` reads it).

    The file holds ``number_of_objects`` and per-trajectory lists: ``instructions`` (each
    a 1-element string array), ``observations`` (the first row's first
    ``2 * number_of_objects`` numbers are the start state), ``goals``; other lists
    (``actions``, masks, ``terminals``, ``success``, ``rewards``) are not needed. The
    level is ``level`` or else read from the file name (``clevr_rephrase_prompt.npy``).

    Returns:
        ``level``, ``starts`` (n, 2k) float32, ``goals`` (n, G) float32 and
        ``instructions`` (n lists of one wording).

    Raises:
        ValueError: Naming ``source`` and the key, trajectory or level at fault.
    """
    _require_lists(
        data,
        source,
        ("number_of_objects", "instructions", "observations", "goals"),
        "a KALM prompt file",
    )
    level = level or _level_in_name(source)
    if level is None:
        _fail(
            source,
            f"cannot tell the goal level from the file name; pass --params kalm_prompts_level=<{'|'.join(PROMPT_LEVELS)}>",
        )
    if level not in PROMPT_LEVELS:
        _fail(source, f"goal level {level!r} is not one of {PROMPT_LEVELS}")
    n = len(data["instructions"])
    for key in ("observations", "goals"):
        if len(data[key]) != n:
            _fail(source, f"key {key!r} has {len(data[key])} trajectories, 'instructions' has {n}")
    width = 2 * int(data["number_of_objects"])
    starts, instructions = [], []
    for i in range(n):
        observations = np.asarray(data["observations"][i], dtype=np.float32)
        if observations.ndim != 2 or observations.shape[1] < width:
            _fail(
                source,
                f"key 'observations', trajectory {i}: shape {observations.shape}, expected (T, >= {width})",
            )
        starts.append(observations[0, :width])
        words = [str(w) for w in np.asarray(data["instructions"][i]).reshape(-1)]
        if not words or not words[0].strip():
            _fail(source, f"key 'instructions', trajectory {i}: no instruction")
        instructions.append(words[:1])
    goals = (
        np.stack([np.asarray(g, dtype=np.float32).reshape(-1) for g in data["goals"]])
        if n
        else np.zeros((0, 0), np.float32)
    )
    return {
        "level": level,
        "starts": np.stack(starts) if n else np.zeros((0, width), np.float32),
        "goals": goals,
        "instructions": instructions,
    }


def kalm_rollout_lists(data: Any, source: str, level: str | None = None) -> dict[str, Any]:
    """Rollouts in KALM's generated layout (per-trajectory lists, as its ``*_generate.py``
    saves them): ``observations`` (T+1, D), ``actions`` (T,) or (T, A), optional
    ``observation_masks``/``action_masks`` (valid steps first), ``goals``, ``instructions``
    (1-element arrays) and ``number_of_objects`` (the state is the first 2k numbers).

    Returns:
        ``level`` (given, or read from the file name, or ``None``), ``states`` and
        ``actions`` (lists of the valid parts), ``goals`` (n, G) float32 and
        ``instructions`` (n lists of one wording).

    Raises:
        ValueError: Naming ``source`` and the key or trajectory at fault.
    """
    _require_lists(
        data, source, ("observations", "actions", "goals", "instructions"), "KALM's rollout files"
    )
    level = level or _level_in_name(source)
    n = len(data["observations"])
    for key in ("actions", "goals", "instructions"):
        if len(data[key]) != n:
            _fail(source, f"key {key!r} has {len(data[key])} trajectories, 'observations' has {n}")
    width = 2 * int(data["number_of_objects"]) if "number_of_objects" in data else None
    states, actions, instructions = [], [], []
    for i in range(n):
        obs = np.asarray(data["observations"][i], dtype=np.float32)
        act = np.asarray(data["actions"][i])
        steps = (
            int(np.asarray(data["action_masks"][i]).sum()) if "action_masks" in data else len(act)
        )
        if obs.ndim != 2 or len(obs) < steps + 1 or len(act) < steps or steps == 0:
            _fail(
                source,
                f"trajectory {i}: observations {obs.shape} and actions {act.shape} do not hold {steps} valid steps",
            )
        states.append(obs[: steps + 1, :width] if width else obs[: steps + 1])
        actions.append(act[:steps])
        instructions.append([str(np.asarray(data["instructions"][i]).reshape(-1)[0])])
    goals = np.stack([np.asarray(g, dtype=np.float32).reshape(-1) for g in data["goals"]])
    return {
        "level": level,
        "states": states,
        "actions": actions,
        "goals": goals,
        "instructions": instructions,
    }

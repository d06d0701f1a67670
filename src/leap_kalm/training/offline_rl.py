"""Offline RL over upstream d3rlpy 2.7: KALM's datasets in, a d3rlpy learnable out.

The policy observes the state followed by the instruction's sentence embedding
(``llm.encoder.InstructionEncoder``, 384 numbers). Episodes end with a terminal on the
step that reaches the goal, or with a timeout at their last valid step when they never
do. ``algo`` names a d3rlpy algorithm (``DiscreteCQL`` -> ``d3rlpy.algos.DiscreteCQLConfig``)
and ``config`` holds that config class's fields, so d3rlpy validates them. With imagined
data, each batch mixes real and imagined transitions (``imagined_ratio`` of the batch,
d3rlpy's ``MixedReplayBuffer``; KALM mixed 1:1).

``gamma`` is a parameter: KALM's vendored d3rlpy 2.0.2 discounted wrongly (gamma was
effectively 1); upstream fixed it, so results here discount as configured.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leap_kalm.progress import progress_enabled
from leap_kalm.schemas import ConfigMixin
from leap_kalm.tracking import d3rlpy_logger

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class NotTrained:
    """The place of a policy that could not be trained, with why (``D3Dataset`` saves it
    as a small JSON file, and ``evaluate`` reports the policy as not evaluated)."""

    reason: str


IMAGINED_EPISODES = ("all", "goal_consistent")
WORDINGS = ("first", "all")


def select_episodes(data: Mapping[str, Any], keep: Any) -> dict[str, Any]:
    """A KALM-layout dataset restricted to the episodes where ``keep`` (N booleans, or
    episode indices, which may repeat) holds: every array whose first axis is the
    episodes is indexed, the rest is kept as is."""
    keep = np.asarray(keep)
    n = len(np.asarray(data["masks"]))
    if keep.dtype == bool and len(keep) != n:
        raise ValueError(f"select_episodes: {len(keep)} flags for {n} episodes")
    return {
        k: (np.asarray(v)[keep] if isinstance(v, np.ndarray) and v.ndim and len(v) == n else v)
        for k, v in data.items()
    }


def repeat_episodes(data: Mapping[str, Any], times: int) -> dict[str, Any]:
    """A KALM-layout dataset with each episode ``times`` times (``imagined_repeats``)."""
    return select_episodes(data, np.repeat(np.arange(len(np.asarray(data["masks"]))), times))


@dataclass
class OfflineRLParams(ConfigMixin):
    """One offline RL run (``<world>.offline_rl.train``).

    Attributes:
        algo: d3rlpy algorithm name (``DiscreteBC``, ``DiscreteCQL``, ``BC``, ``CQL``,
            ``IQL``, ``TD3PlusBC``, ``AWAC`` ...).
        config: Fields of d3rlpy's ``<algo>Config`` (``batch_size``, ``gamma``,
            learning rates, ...).
        n_steps: Gradient steps (KALM: 500k on GPUs).
        n_steps_per_epoch: Steps between d3rlpy's epoch logs.
        imagined_ratio: Share of each batch drawn from imagined data when there is some
            (KALM: 0.5); 0 trains on real data only.
        imagined_episodes: Which imagined rollouts train: ``all`` (KALM) or
            ``goal_consistent`` (only those whose generated states reach their goal).
        wordings: Which of an episode's recorded instructions the policy sees: ``first``
            (KALM's scripts) or ``all`` (the episode once per wording, so the policy meets
            every paraphrase the data holds).
        imagined_repeats: Level name → how many times each of that level's (kept)
            imagined rollouts appears in the imagined data, e.g. ``{easy: 10}``. d3rlpy
            draws the imagined share of a batch uniformly over imagined transitions, so a
            level of one-step rollouts (CLEVR's easy pushes) is otherwise a few percent of
            it beside multi-step levels (docs/results.md). Default: each once.
        seed: Seed of d3rlpy (sampling and initialisation).
    """

    algo: str = "DiscreteCQL"
    config: dict[str, Any] = field(default_factory=dict)
    n_steps: int = 10_000
    n_steps_per_epoch: int = 1_000
    imagined_ratio: float = 0.5
    imagined_episodes: str = "all"
    wordings: str = "first"
    imagined_repeats: dict[str, int] = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.imagined_ratio < 1.0:
            raise ValueError(
                f"offline_rl imagined_ratio must be in [0, 1), got {self.imagined_ratio}"
            )
        if self.imagined_episodes not in IMAGINED_EPISODES:
            raise ValueError(
                f"offline_rl imagined_episodes must be one of {IMAGINED_EPISODES}, got {self.imagined_episodes!r}"
            )
        if self.wordings not in WORDINGS:
            raise ValueError(
                f"offline_rl wordings must be one of {WORDINGS}, got {self.wordings!r}"
            )
        for level, times in self.imagined_repeats.items():
            if not isinstance(times, int) or isinstance(times, bool) or times < 1:
                raise ValueError(
                    f"offline_rl imagined_repeats.{level} must be a whole number >= 1, got {times!r}"
                )
        if self.n_steps <= 0 or self.n_steps_per_epoch <= 0:
            raise ValueError("offline_rl n_steps and n_steps_per_epoch must be positive")


#: d3rlpy preprocessing a config may name: ``observation_scaler: standard`` builds
#: ``StandardObservationScaler()``, fitted by d3rlpy on the training data.
SCALERS: dict[str, dict[str, str]] = {
    "observation_scaler": {
        "standard": "StandardObservationScaler",
        "min_max": "MinMaxObservationScaler",
    },
    "action_scaler": {"min_max": "MinMaxActionScaler"},
    "reward_scaler": {"standard": "StandardRewardScaler", "min_max": "MinMaxRewardScaler"},
}


def scalers(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with each scaler named by a string (YAML) replaced by d3rlpy's object.

    Raises:
        ValueError: Naming a scaler field and the names it accepts.
    """
    import d3rlpy

    built = dict(config)
    for key, names in SCALERS.items():
        value = built.get(key)
        if isinstance(value, str):
            if value not in names:
                raise ValueError(
                    f"offline_rl config {key}: {value!r} is not one of {sorted(names)}"
                )
            built[key] = getattr(d3rlpy.preprocessing, names[value])()
    return built


def algo_config(name: str, config: Mapping[str, Any], discrete: bool) -> Any:
    """d3rlpy's ``<name>Config(**config)``, checked against the action kind.

    Raises:
        ValueError: Naming an unknown algorithm (and d3rlpy's), one for the wrong action
            kind, or a config field d3rlpy's class does not have.
    """
    import d3rlpy

    known = sorted(n.removesuffix("Config") for n in dir(d3rlpy.algos) if n.endswith("Config"))
    config_class = getattr(d3rlpy.algos, f"{name}Config", None)
    if config_class is None or name not in known:
        raise ValueError(
            f"offline_rl algo {name!r} is not a d3rlpy algorithm; d3rlpy has {', '.join(known)}"
        )
    if name.startswith("Discrete") != discrete:
        kind = "discrete" if discrete else "continuous"
        raise ValueError(
            f"offline_rl algo {name!r} does not fit this world's {kind} actions "
            f"({'use a Discrete* algorithm' if discrete else 'use a continuous-action algorithm'})"
        )
    try:
        return config_class(**scalers(config))
    except TypeError as exc:
        raise ValueError(f"offline_rl config for {name}: {exc}") from exc


def concat_datasets(parts: Sequence[Any]) -> Any:
    """One d3rlpy dataset holding every episode of ``parts`` (``MDPDataset`` objects), its
    transitions included: d3rlpy samples a buffer's transitions, which extending
    ``parts[0].episodes`` would leave out (``train_offline_rl`` rebuilds its buffers from
    the episode list, so training never depended on this; the count and any direct
    sampling do)."""
    if not parts:
        raise ValueError("concat_datasets needs at least one dataset")
    out = parts[0]
    for part in parts[1:]:
        for episode in part.episodes:
            out.append_episode(episode)
    return out


def policy_observations(states: np.ndarray, embeddings: np.ndarray) -> np.ndarray:
    """What the policy sees: each state followed by its instruction's embedding."""
    return np.concatenate(
        [np.asarray(states, dtype=np.float32), np.asarray(embeddings, dtype=np.float32)], axis=-1
    )


def to_mdp_dataset(
    data: Mapping[str, Any],
    encode: Callable[[list[str]], np.ndarray],
    action_size: int | None,
    wordings: str = "first",
) -> Any:
    """A KALM-format dataset as a d3rlpy ``MDPDataset`` of the policy's observations.

    With ``wordings="first"`` each episode's first wording is its instruction; with
    ``"all"`` the episode appears once per non-empty wording. ``action_size`` is the number
    of discrete actions (``None``: continuous actions).
    """
    from d3rlpy import ActionSpace
    from d3rlpy.dataset import MDPDataset

    masks = np.asarray(data["masks"]).reshape(len(data["masks"]), -1).astype(bool)
    lengths = masks.sum(axis=1)
    rows = np.asarray(data["instructions"])
    episodes, instructions = [], []
    for i in np.flatnonzero(lengths > 0):
        texts = [str(t) for t in np.asarray(rows[i]).reshape(-1)]
        chosen = [t for t in texts if t] if wordings == "all" else texts[:1]
        episodes += [i] * len(chosen)
        instructions += chosen
    embeddings = encode(instructions)
    observations, actions, rewards, terminals, timeouts = [], [], [], [], []
    for e, i in enumerate(episodes):
        n = int(lengths[i])
        observations.append(
            policy_observations(data["observations"][i, :n], np.repeat(embeddings[e][None], n, 0))
        )
        actions.append(np.asarray(data["actions"][i, :n]))
        rewards.append(np.asarray(data["rewards"][i, :n], dtype=np.float32).reshape(n, 1))
        done = np.asarray(data["terminals"][i, :n]).reshape(n).astype(bool)
        end = np.zeros(n, dtype=bool)
        end[-1] = not done[-1]
        terminals.append(done.astype(np.float32))
        timeouts.append(end.astype(np.float32))
    discrete = action_size is not None
    return MDPDataset(
        observations=np.concatenate(observations),
        actions=np.concatenate(actions).astype(np.int64 if discrete else np.float32),
        rewards=np.concatenate(rewards),
        terminals=np.concatenate(terminals),
        timeouts=np.concatenate(timeouts),
        action_space=ActionSpace.DISCRETE if discrete else ActionSpace.CONTINUOUS,
        action_size=action_size,
    )


def train_offline_rl(
    real: Any,
    imagined: Any | None,
    params: OfflineRLParams,
    discrete: bool,
    device: str = "cpu:0",
    history: list[dict[str, float]] | None = None,
) -> Any:
    """Fit ``params.algo`` on a real ``MDPDataset`` (mixed with an imagined one when given
    and ``imagined_ratio > 0``); returns the fitted d3rlpy algorithm. No log folders.

    ``history``, when given, receives d3rlpy's metrics of every epoch (``{"epoch": e,
    "loss": ..., ...}``), which ``fit`` returns instead of writing them to a folder."""
    import d3rlpy
    from d3rlpy.dataset import InfiniteBuffer, MixedReplayBuffer, ReplayBuffer

    d3rlpy.seed(params.seed)
    algo = algo_config(params.algo, params.config, discrete).create(device=device)
    algo.build_with_dataset(real)  # shapes from the real data (a mixed buffer cannot say)
    dataset: Any = real
    if imagined is not None and params.imagined_ratio > 0:
        primary = ReplayBuffer(InfiniteBuffer(), episodes=real.episodes)
        secondary = ReplayBuffer(InfiniteBuffer(), episodes=imagined.episodes)
        dataset = MixedReplayBuffer(primary, secondary, secondary_mix_ratio=params.imagined_ratio)
    epochs = algo.fit(
        dataset,
        n_steps=params.n_steps,
        n_steps_per_epoch=min(params.n_steps_per_epoch, params.n_steps),
        logger_adapter=d3rlpy_logger(params.algo),
        show_progress=progress_enabled(),
        save_interval=10**9,
    )
    if history is not None:
        history.extend(
            {"epoch": int(epoch), **{k: float(v) for k, v in m.items()}} for epoch, m in epochs
        )
    return algo


def evaluate_policy(
    algo: Any,
    make_env: Callable[[], Any],
    n: int,
    seed: int,
    encode: Callable[[list[str]], np.ndarray],
) -> list[bool]:
    """Play ``n`` episodes (episode ``i`` from ``reset(seed=seed + i)``, its first wording as
    the instruction) with the policy, batched over episodes; whether each succeeded."""
    envs = [make_env() for _ in range(n)]
    resets = [env.reset(seed=seed + i) for i, env in enumerate(envs)]
    states = [obs for obs, _ in resets]
    embeddings = encode([info["instructions"][0] for _, info in resets])
    success = [False] * n
    live = list(range(n))
    while live:
        observations = policy_observations(np.stack([states[i] for i in live]), embeddings[live])
        actions = algo.predict(observations)
        still = []
        for i, action in zip(live, actions, strict=True):
            states[i], _, terminated, truncated, info = envs[i].step(action)
            if terminated or truncated:
                success[i] = bool(info["success"])
            else:
                still.append(i)
        live = still
    return success

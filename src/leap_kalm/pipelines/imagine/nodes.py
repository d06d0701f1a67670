"""`imagine` nodes: the grounded LLM writes rollouts for novel goals, one KALM dataset per level."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from leap_kalm.envs.registry import get_world
from leap_kalm.schemas import ConfigMixin, ModelRef

logger = logging.getLogger(__name__)


@dataclass
class ImagineParams(ConfigMixin):
    """One world's imagination settings (``<world>.imagine`` in ``parameters_imagine.yml``).

    Attributes:
        n_per_level: Novel goals (each with its start state) imagined per level: one
            number for every level, or a mapping from level to number (levels it omits
            get ``DEFAULT_GOALS``), since a level's rollouts can differ in cost (CLEVR's
            easy goals are one action, its rephrase and hard goals up to 50).
        max_steps: Most actions per imagined rollout: one number for every level, a
            mapping from level to number (levels it omits keep the env's own cap), or
            ``null`` (the env's own cap per level).
        batch_size: Rollouts generated together.
        temperature: 0 takes the most likely discrete action; above 0 samples it.
        n_instructions: Wordings recorded per goal (the first is the prompt's).
        seed: Seed of the goals and start states (episode ``i`` uses ``seed + i``) and of
            sampling; keep it apart from the ingest seed so the goals are new.
    """

    DEFAULT_GOALS: ClassVar[int] = 100

    n_per_level: int | dict[str, int] = DEFAULT_GOALS
    max_steps: int | dict[str, int] | None = None
    batch_size: int = 32
    temperature: float = 0.0
    n_instructions: int = 1
    seed: int = 10_000

    def goals_for(self, level: str, levels: tuple[str, ...]) -> int:
        """How many goals ``level`` imagines.

        Raises:
            ValueError: When the mapping names a level the world does not imagine, or a
                count is not a positive integer.
        """
        n = _per_level(self.n_per_level, "n_per_level", level, levels)
        return self.DEFAULT_GOALS if n is None else n

    def steps_for(self, level: str, levels: tuple[str, ...], env_cap: int) -> int:
        """Most actions per rollout at ``level``; ``env_cap`` (the env's own) when unset.

        Raises:
            ValueError: As ``goals_for``, for ``max_steps``.
        """
        n = _per_level(self.max_steps, "max_steps", level, levels)
        return env_cap if n is None else n


def _per_level(
    value: int | dict[str, int] | None, name: str, level: str, levels: tuple[str, ...]
) -> int | None:
    """``value`` for ``level``: one number for all levels, a mapping from level to number
    (``None`` for a level it omits) or ``None``; checked to be a positive integer."""
    if value is None:
        return None
    counts = value if isinstance(value, dict) else {level: value}
    unknown = sorted(set(counts) - set(levels))
    if unknown:
        raise ValueError(
            f"imagine.{name} names levels {unknown}; this world imagines {list(levels)}"
        )
    n = counts.get(level)
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"imagine.{name} for {level!r} must be a positive integer, got {n!r}")
    return n


def imagination_world(world: str) -> Any:
    """The world's module, checked to support imagination.

    Raises:
        ValueError: Naming the world and what it lacks.
    """
    module = get_world(world, "kalm")
    missing = [
        a
        for a in ("IMAGINATION_LEVELS", "novel_goals", "judge_transition", "replay")
        if not hasattr(module, a)
    ]
    if missing:
        raise ValueError(f"world {world!r} does not support imagination yet: it lacks {missing}")
    return module


def imagine_level(
    grounded_llm: ModelRef,
    kalm_prompts: dict[str, Any] | None,
    imagine_params: dict[str, Any],
    model_params: dict[str, Any],
    world: str,
    level: str,
) -> dict[str, Any]:
    """Imagine rollouts for ``level``'s novel goals and label them with the world's own
    goal check and reward on the generated states. The goals, start states and wordings
    come from the world's generator, or from KALM's prompt file (``kalm_prompts``) when
    that file is for this level.

    Returns:
        A KALM-format dataset (it passes ``validate_kalm_dataset``) plus ``level``,
        ``goal_consistent`` (per rollout: the generated states reach the goal) and
        ``replay_success`` (per rollout: the same actions succeed in the real env).
    """
    from leap_kalm.envs.kalm_format import validate_kalm_dataset
    from leap_kalm.llm.grounded import load_grounded
    from leap_kalm.llm.imagination import imagine
    from leap_kalm.llm.student import model_load_kwargs

    config = ImagineParams.from_dict(imagine_params)
    module = imagination_world(world)
    if kalm_prompts is not None and kalm_prompts["level"] not in module.IMAGINATION_LEVELS:
        raise ValueError(
            f"kalm_prompts is a {kalm_prompts['level']!r} file; {world} imagines {list(module.IMAGINATION_LEVELS)}"
        )
    if kalm_prompts is not None and kalm_prompts["level"] == level:
        tasks = kalm_prompts
        logger.info("%s %s: %d goals from KALM's prompt file", world, level, len(tasks["starts"]))
    else:
        n_goals = config.goals_for(level, tuple(module.IMAGINATION_LEVELS))
        tasks = module.novel_goals(level, n_goals, config.seed, config.n_instructions)
    max_steps = config.steps_for(
        level, tuple(module.IMAGINATION_LEVELS), module.IMAGINATION_MAX_STEPS[level]
    )
    model, tokenizer = load_grounded(grounded_llm.path, **model_load_kwargs(model_params))
    labels = TransitionLabels(module, level, tasks)
    rollouts = imagine(
        model, tokenizer, [w[0] for w in tasks["instructions"]], tasks["starts"], labels,
        max_steps, config.batch_size, config.temperature, config.seed,
    )  # fmt: skip
    data = kalm_arrays(rollouts, tasks, level, module, max_steps, labels)
    data["replay_success"] = np.array(
        [
            module.replay(level, tasks["starts"][i], tasks["goals"][i], r.actions, **episode_keys(tasks, i, "replay"))
            for i, r in enumerate(rollouts)
        ]
    )  # fmt: skip
    validate_kalm_dataset(data, source=f"imagined {world} {level} data")
    logger.info(
        "%s %s: %d imagined rollouts, %.0f%% reach their goal on the generated states, "
        "%.0f%% when replayed in the real env",
        world, level, len(rollouts), 100 * data["goal_consistent"].mean(), 100 * data["replay_success"].mean(),
    )  # fmt: skip
    return data


def episode_keys(tasks: dict[str, Any], i: int, use: str) -> dict[str, Any]:
    """What besides the goal the world's goal check (``use="judge"``) or replay
    (``"replay"``) needs of episode ``i``: its task (``env_name``, a Meta-World goal is only
    a position) and, for a replay, the reset seed of its start; nothing for CLEVR."""
    keys = {}
    if tasks.get("env_names") is not None:
        keys["env_name"] = str(tasks["env_names"][i])
    if use == "replay" and tasks.get("reset_seeds") is not None:
        keys["reset_seed"] = int(tasks["reset_seeds"][i])
    return keys


class TransitionLabels:
    """The judge ``imagine`` calls on each generated transition: it keeps the world's
    ``(reward, success, terminated)`` per episode, in order, so that the KALM arrays reuse
    them instead of judging every transition a second time."""

    def __init__(self, module: Any, level: str, tasks: dict[str, Any]) -> None:
        self.module, self.level, self.tasks = module, level, tasks
        self.labels: dict[int, list[tuple[float, bool, bool]]] = {}

    def judge(self, i: int, state: np.ndarray, next_state: np.ndarray) -> tuple[float, bool, bool]:
        return self.module.judge_transition(
            self.level, state, next_state, self.tasks["goals"][i], **episode_keys(self.tasks, i, "judge")
        )  # fmt: skip

    def __call__(self, i: int, state: np.ndarray, next_state: np.ndarray) -> bool:
        label = self.judge(i, state, next_state)
        self.labels.setdefault(i, []).append(label)
        return label[2]

    def of(self, i: int, rollout: Any) -> list[tuple[float, bool, bool]]:
        """Episode ``i``'s labels: kept ones when they cover the rollout, else judged now."""
        kept = self.labels.get(i, [])
        if len(kept) == len(rollout.actions):
            return kept
        return [
            self.judge(i, rollout.states[t], rollout.states[t + 1])
            for t in range(len(rollout.actions))
        ]


def kalm_arrays(
    rollouts: list[Any],
    tasks: dict[str, Any],
    level: str,
    module: Any,
    horizon: int,
    labels: TransitionLabels | None = None,
) -> dict[str, Any]:
    """Imagined rollouts in KALM's offline layout, rewards and terminals from the world
    (the labels kept while imagining, when given)."""
    labels = labels or TransitionLabels(module, level, tasks)
    n, obs_dim = len(rollouts), tasks["starts"].shape[1]
    first = next((r.actions for r in rollouts if len(r.actions)), np.zeros(0, dtype=np.int64))
    action_shape = first.shape[1:]
    data = {
        "observations": np.zeros((n, horizon, obs_dim), dtype=np.float32),
        "next_observations": np.zeros((n, horizon, obs_dim), dtype=np.float32),
        "actions": np.zeros(
            (n, horizon, *action_shape), dtype=np.int32 if not action_shape else np.float32
        ),
        "rewards": np.zeros((n, horizon, 1), dtype=np.float32),
        "terminals": np.zeros((n, horizon, 1), dtype=bool),
        "masks": np.zeros((n, horizon), dtype=np.int32),
        "goals": np.repeat(tasks["goals"][:, None, :], horizon, axis=1).astype(np.float32),
    }
    consistent = np.zeros(n, dtype=bool)
    for i, rollout in enumerate(rollouts):
        steps = len(rollout.actions)
        data["observations"][i, :steps] = rollout.states[:-1]
        data["next_observations"][i, :steps] = rollout.states[1:]
        data["actions"][i, :steps] = rollout.actions
        data["masks"][i, :steps] = 1
        for t, (reward, success, _) in enumerate(labels.of(i, rollout)):
            data["rewards"][i, t, 0] = reward
            data["terminals"][i, t, 0] = success
            consistent[i] |= success
    width = max(len(w) for ws in tasks["instructions"] for w in ws)
    data["instructions"] = np.array(tasks["instructions"], dtype=f"<U{max(width, 1)}")
    if tasks.get("env_names") is not None:
        data["env_names"] = np.asarray(tasks["env_names"])
    data.update(level=level, imagined=True, goal_consistent=consistent)
    return data


def summarize_imagination(**imagined: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """Per level: rollouts, mean length, and the shares that reach their goal on the
    generated states and when replayed in the real env (KALM's imagination quality);
    and every imagined transition as a table (polars; parquet in the catalog)."""
    from leap_kalm.stats import wilson_interval
    from leap_kalm.tables import kalm_transition_table

    summary = {}
    for data in imagined.values():
        n = len(data["masks"])
        consistent, replayed = int(data["goal_consistent"].sum()), int(data["replay_success"].sum())
        summary[str(data["level"])] = {
            "n": n,
            "mean_steps": float(np.asarray(data["masks"]).sum(axis=1).mean()),
            "goal_consistent": consistent / n,
            "goal_consistent_ci95": list(wilson_interval(consistent, n)),
            "replay_success": replayed / n,
            "replay_success_ci95": list(wilson_interval(replayed, n)),
        }
    return summary, kalm_transition_table(list(imagined.values()))


def labelled_kalm_rollouts(
    rollouts: dict[str, Any], world: str, source: str = "kalm_imagined_data"
) -> dict[str, Any]:
    """KALM's generated rollouts (``KalmRolloutsDataset``) in the offline layout, rewards
    and terminals recomputed by the world's goal check at the file's level, as for the
    rollouts imagined here.

    Raises:
        ValueError: When the level is unknown (name it with ``kalm_imagined_level``).
    """
    from leap_kalm.envs.kalm_format import validate_kalm_dataset
    from leap_kalm.llm.imagination import Imagined

    module = imagination_world(world)
    level = rollouts["level"]
    if level is None:
        raise ValueError(
            f"{source}: cannot tell the goal level from the file name; pass --params kalm_imagined_level=<level>"
        )
    imagined = [
        Imagined(states=np.asarray(s, dtype=np.float32), actions=np.asarray(a), ended=False)
        for s, a in zip(rollouts["states"], rollouts["actions"], strict=True)
    ]
    horizon = max(len(r.actions) for r in imagined)
    tasks = {
        "starts": np.stack([r.states[0] for r in imagined]),
        "goals": rollouts["goals"],
        "instructions": rollouts["instructions"],
        "env_names": rollouts.get("env_names"),
    }
    data = kalm_arrays(imagined, tasks, level, module, horizon)
    for i, rollout in enumerate(imagined):  # a goal reached before the end ends the episode there
        done = np.flatnonzero(data["terminals"][i, : len(rollout.actions), 0])
        if len(done) and done[0] < len(rollout.actions) - 1:
            cut = done[0] + 1
            for key in (
                "observations",
                "next_observations",
                "actions",
                "rewards",
                "terminals",
                "masks",
            ):
                data[key][i, cut:] = 0
    validate_kalm_dataset(data, source=source)
    return data

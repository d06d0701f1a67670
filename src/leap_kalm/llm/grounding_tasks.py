"""KALM's four grounding tasks as records, built from a KALM-format offline dataset.

Each record is a prompt with ``<state>``/``<action>`` placeholders (``llm.grounded``), the
numbers that fill its slots in order, which slots are targets, and for the text task a
completion with token loss:

* ``rollout`` (instruction -> trajectory): every state and action is a target;
* ``dynamics`` (state + action -> next state): the next state is the target;
* ``consequence`` (start state + instruction -> final state): the final state is the target;
* ``explanation`` (trajectory -> instruction): the instruction tokens are the target.

numpy only: records are plain lists, ready for JSONL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leap_kalm.llm.grounded import ACTION, STATE
from leap_kalm.schemas import ConfigMixin

TASKS = ("rollout", "dynamics", "consequence", "explanation")


@dataclass
class GroundingTaskParams(ConfigMixin):
    """How grounding records are drawn (``<world>.ground_llm.tasks``).

    Attributes:
        per_episode: Records per training episode for each task; a fraction draws that
            share of episodes (KALM mixed the four tasks equally).
        max_steps: Steps of an episode shown in rollout and explanation records (the
            first ``max_steps``; ``null``: all).
        held_out_fraction: Share of episodes kept out of training for evaluation.
        seed: Seed of the episode split, instruction wordings and dynamics steps.
    """

    per_episode: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TASKS, 1.0))
    max_steps: int | None = None
    held_out_fraction: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = sorted(set(self.per_episode) - set(TASKS))
        if unknown:
            raise ValueError(
                f"grounding tasks {unknown} do not exist; known tasks: {', '.join(TASKS)}"
            )
        if any(v < 0 for v in self.per_episode.values()):
            raise ValueError(f"grounding per_episode counts must be >= 0, got {self.per_episode}")
        if not 0.0 <= self.held_out_fraction < 1.0:
            raise ValueError(f"held_out_fraction must be in [0, 1), got {self.held_out_fraction}")


@dataclass
class Episode:
    """One valid episode: ``n`` actions between ``n + 1`` states, and its wordings."""

    index: int
    states: np.ndarray  # (n + 1, D)
    actions: np.ndarray  # (n,) or (n, A)
    instructions: list[str]


def episodes_of(data: Mapping[str, np.ndarray]) -> list[Episode]:
    """The valid part of every episode of a KALM dataset (``masks`` marks valid steps)."""
    masks = np.asarray(data["masks"]).reshape(len(data["masks"]), -1)
    out = []
    for i, mask in enumerate(masks):
        n = int(np.asarray(mask).sum())
        if n == 0:
            continue
        observations = np.asarray(data["observations"][i, :n], dtype=np.float32)
        final = np.asarray(data["next_observations"][i, n - 1], dtype=np.float32)
        wordings = [str(w) for w in np.asarray(data["instructions"][i]).reshape(-1) if str(w)]
        out.append(
            Episode(
                index=i,
                states=np.vstack([observations, final[None]]),
                actions=np.asarray(data["actions"][i, :n]),
                instructions=wordings or [""],
            )
        )
    return out


def split_episodes(
    episodes: list[Episode], fraction: float, seed: int
) -> tuple[list[Episode], list[Episode]]:
    """``(train, held_out)``: a seeded ``fraction`` of episodes held out (at least one when > 0)."""
    order = np.random.default_rng(seed).permutation(len(episodes))
    n_held = int(round(fraction * len(episodes)))
    if fraction > 0 and len(episodes) > 1:
        n_held = max(1, n_held)
    held = set(order[:n_held].tolist())
    return (
        [e for k, e in enumerate(episodes) if k not in held],
        [e for k, e in enumerate(episodes) if k in held],
    )


def _trajectory_text(n: int) -> str:
    return f"{STATE}{ACTION}" * n + STATE


def _record(
    task: str,
    episode: Episode,
    text: str,
    states: np.ndarray,
    actions: np.ndarray,
    predict_states: list[bool],
    predict_actions: list[bool],
    completion: str | None = None,
    outcome: bool = False,
) -> dict[str, Any]:
    return {
        "task": task,
        "episode": episode.index,
        "text": text,
        "states": np.asarray(states, dtype=np.float32).tolist(),
        "actions": np.asarray(actions).tolist(),
        "predict_states": predict_states,
        "predict_actions": predict_actions,
        "completion": completion,
        "outcome": outcome,
    }


def dynamics_record(episode: Episode, t: int) -> dict[str, Any]:
    """The dynamics task at step ``t``: state and action in, next state the target."""
    return _record(
        "dynamics", episode, f"State: {STATE} Action: {ACTION} Next state: {STATE}",
        episode.states[t : t + 2], episode.actions[t : t + 1], [False, True], [False],
    )  # fmt: skip


def task_record(
    task: str, episode: Episode, rng: np.random.Generator, max_steps: int | None = None
) -> dict[str, Any]:
    """One record of ``task`` from ``episode`` (wording and dynamics step drawn from ``rng``)."""
    instruction = episode.instructions[int(rng.integers(len(episode.instructions)))]
    n = len(episode.actions)
    if task == "dynamics":
        return dynamics_record(episode, int(rng.integers(n)))
    if task == "consequence":
        return _record(
            task,
            episode,
            f"Start: {STATE} Task: {instruction} End: {STATE}",
            episode.states[[0, n]],
            episode.actions[:0],
            [False, True],
            [],
            outcome=True,  # the target is a whole episode's change: outcome_scale units
        )
    shown = n if max_steps is None else min(n, max_steps)
    states, actions = episode.states[: shown + 1], episode.actions[:shown]
    if task == "rollout":
        return _record(
            task,
            episode,
            f"Task: {instruction}\nTrajectory: {_trajectory_text(shown)}",
            states,
            actions,
            # the first state is given (imagination starts from it), not predicted: from
            # no state shown its target is the whole state, which in change units was
            # ~2,850 per Meta-World record and drowned every other loss
            [False] + [True] * shown,
            [True] * shown,
        )
    if task == "explanation":
        return _record(
            task,
            episode,
            f"Trajectory: {_trajectory_text(shown)}\nTask:",
            states,
            actions,
            [False] * (shown + 1),
            [False] * shown,
            completion=f" {instruction}",
        )
    raise ValueError(f"grounding task {task!r} does not exist; known tasks: {', '.join(TASKS)}")


def grounding_records(episodes: list[Episode], params: GroundingTaskParams) -> list[dict[str, Any]]:
    """The mixed records of every task over ``episodes``, in a seeded shuffled order."""
    rng = np.random.default_rng(params.seed)
    records = []
    for task in TASKS:
        rate = params.per_episode.get(task, 0.0)
        for episode in episodes:
            count = int(rate) + int(rng.random() < rate - int(rate))
            records += [task_record(task, episode, rng, params.max_steps) for _ in range(count)]
    order = rng.permutation(len(records))
    return [records[k] for k in order]

"""Training records from trajectories and corrections (trl's conversational formats).

* SFT: ``{prompt, completion}`` for every step of an annotated expert log (iteration 0,
  behaviour cloning) or of a corrected student trajectory (iterations ≥ 1).
* DPO: ``{prompt, chosen, rejected}`` for every step the teacher corrected: chosen is
  the corrected reason/action, rejected the student's original.
* The prompt holds the task, the student's own earlier observation/action pairs, the
  current observation and the candidates — exactly what the student sees when acting.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from typing import Any

from leap_kalm.llm.prompts import build_student_messages, format_completion
from leap_kalm.schemas import PreferencePair, SFTRecord


def _assistant(reason: str, action: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": format_completion(reason, action)}]


def _prompt(
    env: str, trajectory: dict[str, Any], t: int, history_window: int | None
) -> list[dict[str, str]]:
    steps = trajectory["steps"]
    return build_student_messages(
        env,
        trajectory["task"],
        steps[:t],
        steps[t]["observation"],
        steps[t]["candidate_actions"],
        history_window,
    )


def sft_records_from_trajectories(
    trajectories: Sequence[dict[str, Any]], env: str, history_window: int | None = None
) -> list[SFTRecord]:
    """One record per step, the completion being the step's own reason and action."""
    records: list[SFTRecord] = []
    for trajectory in trajectories:
        for t, step in enumerate(trajectory["steps"]):
            records.append(
                {
                    "prompt": _prompt(env, trajectory, t, history_window),
                    "completion": _assistant(step.get("reason", ""), step["action"]),
                    "game_id": trajectory["game_id"],
                }
            )
    return records


def _checked_pairs(
    trajectory: dict[str, Any], correction: dict[str, Any]
) -> list[tuple[int, dict[str, Any]]]:
    steps = correction["steps"]
    if len(steps) != len(trajectory["steps"]):
        raise ValueError(
            f"correction of {trajectory['game_id']} has {len(steps)} steps, the trajectory {len(trajectory['steps'])}"
        )
    return list(enumerate(steps))


def sft_records_from_corrections(
    trajectories: Sequence[dict[str, Any]],
    corrections: Sequence[dict[str, Any]],
    env: str,
    history_window: int | None = None,
) -> list[SFTRecord]:
    """One record per step of each corrected trajectory: the student's context, the teacher's answer."""
    by_id = {t["game_id"]: t for t in trajectories}
    records: list[SFTRecord] = []
    for correction in corrections:
        trajectory = by_id.get(correction["game_id"])
        if trajectory is None:
            raise ValueError(f"correction for unknown trajectory {correction['game_id']!r}")
        for t, step in _checked_pairs(trajectory, correction):
            records.append(
                {
                    "prompt": _prompt(env, trajectory, t, history_window),
                    "completion": _assistant(step["corrected_reason"], step["corrected_action"]),
                    "game_id": trajectory["game_id"],
                }
            )
    return records


def dpo_pairs_from_corrections(
    trajectories: Sequence[dict[str, Any]],
    corrections: Sequence[dict[str, Any]],
    env: str,
    history_window: int | None = None,
) -> list[PreferencePair]:
    """One pair per corrected step: chosen = teacher's correction, rejected = the student's original."""
    by_id = {t["game_id"]: t for t in trajectories}
    pairs: list[PreferencePair] = []
    for correction in corrections:
        trajectory = by_id[correction["game_id"]]
        for t, step in _checked_pairs(trajectory, correction):
            if not step["is_corrected"]:
                continue
            pairs.append(
                {
                    "prompt": _prompt(env, trajectory, t, history_window),
                    "chosen": _assistant(step["corrected_reason"], step["corrected_action"]),
                    "rejected": _assistant(step["original_reason"], step["original_action"]),
                    "game_id": trajectory["game_id"],
                }
            )
    return pairs


def split_by_trajectory(
    records: Sequence[dict[str, Any]], val_fraction: float = 0.15, seed: int = 0
) -> tuple[list, list]:
    """Train/validation split that keeps every record of one trajectory (``game_id``) together."""
    ids = sorted({r["game_id"] for r in records})
    rng = random.Random(seed)
    rng.shuffle(ids)
    n_val = round(len(ids) * val_fraction)
    if len(ids) > 1:
        n_val = min(max(n_val, 1 if val_fraction > 0 else 0), len(ids) - 1)
    val_ids = set(ids[:n_val])
    train = [r for r in records if r["game_id"] not in val_ids]
    val = [r for r in records if r["game_id"] in val_ids]
    return train, val


def aggregate_dagger(
    per_iteration: Sequence[Sequence[dict[str, Any]]], seed: int = 0
) -> list[dict[str, Any]]:
    """DAgger aggregation: iterations 0..i, each subsampled to the smallest so they weigh equally.

    Subsampling is by trajectory-independent record draws with a per-iteration seed, so
    the result is the same on every run.
    """
    non_empty = [list(records) for records in per_iteration if records]
    if not non_empty:
        return []
    smallest = min(len(records) for records in non_empty)
    out: list[dict[str, Any]] = []
    for index, records in enumerate(non_empty):
        rng = random.Random(zlib.crc32(f"{seed}:{index}".encode()))
        chosen = sorted(rng.sample(range(len(records)), smallest))
        out.extend({**records[i], "iteration_source": index} for i in chosen)
    return out


def dagger_training_set(
    pool: Sequence[dict[str, Any]], iteration: int, seed: int, val_fraction: float
) -> list[dict[str, Any]]:
    """Iteration ``iteration``'s training records from the DAgger pool: iterations
    ``0..iteration`` aggregated (:func:`aggregate_dagger`, seed ``seed + iteration``) and
    split by trajectory (:func:`split_by_trajectory`, seed ``seed``); each record carries
    ``split`` (``train``/``val``)."""
    by_iteration = [[r for r in pool if r["iteration"] == i] for i in range(iteration + 1)]
    merged = aggregate_dagger(by_iteration, seed=seed + iteration)
    train, val = split_by_trajectory(merged, val_fraction, seed=seed)
    return [{**r, "split": "train"} for r in train] + [{**r, "split": "val"} for r in val]

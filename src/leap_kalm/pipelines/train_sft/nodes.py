"""`train_sft` nodes: DAgger-aggregated SFT records, then LoRA SFT of the student."""

from __future__ import annotations

import logging
from typing import Any

from leap_kalm.pipelines.leap_common import LeapParams, train_student
from leap_kalm.schemas import ModelRef

logger = logging.getLogger(__name__)


def build_sft_records(
    annotated_logs: list[dict[str, Any]],
    rollouts: list[dict[str, Any]],
    corrections: list[dict[str, Any]],
    previous_pool: list[dict[str, Any]],
    leap_params: dict[str, Any],
    iteration: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """This iteration's SFT records, aggregated DAgger-style with every earlier iteration.

    Iteration 0 learns from the annotated expert logs; iteration ``i ≥ 1`` from the
    teacher's corrections of its own rollouts. The pool keeps every iteration's records;
    training uses iterations ``0..i`` subsampled to the smallest so each weighs equally,
    split 85/15 by trajectory.

    Returns:
        ``(records, pool)``: records carry ``split`` (train/val) and ``iteration``.
    """
    from leap_kalm.llm.records import (
        aggregate_dagger,
        sft_records_from_corrections,
        sft_records_from_trajectories,
        split_by_trajectory,
    )

    config = LeapParams.from_dict(leap_params)
    if iteration == 0:
        new = sft_records_from_trajectories(annotated_logs, config.env, config.history_window)
    else:
        new = sft_records_from_corrections(rollouts, corrections, config.env, config.history_window)
    pool = [r for r in previous_pool if r["iteration"] < iteration] + [
        {**r, "iteration": iteration} for r in new
    ]
    by_iteration = [[r for r in pool if r["iteration"] == i] for i in range(iteration + 1)]
    merged = aggregate_dagger(by_iteration, seed=config.seed + iteration)
    train, val = split_by_trajectory(merged, config.val_fraction, seed=config.seed)
    logger.info(
        "SFT iteration %d: %d new records, pool %d, aggregated %d (train %d / val %d)",
        iteration,
        len(new),
        len(pool),
        len(merged),
        len(train),
        len(val),
    )
    records = [{**r, "split": "train"} for r in train] + [{**r, "split": "val"} for r in val]
    return records, pool


def train_sft_student(
    sft_records: list[dict[str, Any]],
    previous_student: ModelRef | None,
    sft_params: dict[str, Any],
    leap_params: dict[str, Any],
    model_params: dict[str, Any],
    iteration: int,
) -> ModelRef:
    """LoRA SFT from the previous student (the base model at iteration 0), completion-only loss.

    Returns:
        The trained adapter (moved into the catalog), or a *skipped* marker when this
        iteration trains with DPO instead (iteration 0 is always behaviour cloning with SFT). ``num_processes > 1`` in the SFT parameters
        trains under ``accelerate launch`` (several GPUs, or CPU processes with gloo).
    """
    config = LeapParams.from_dict(leap_params)
    if config.train_method != "sft" and iteration > 0:
        return ModelRef(
            path="", kind="skipped", meta={"reason": f"train_method is {config.train_method}"}
        )
    train = [r for r in sft_records if r["split"] == "train"]
    return train_student(
        "sft",
        train,
        previous_student,
        sft_params,
        config,
        model_params,
        iteration,
        {"trainable": True},
    )

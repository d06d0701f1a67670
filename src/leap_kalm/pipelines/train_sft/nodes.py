"""`train_sft` nodes: DAgger-aggregated SFT records, then LoRA SFT of the student."""

from __future__ import annotations

import logging
from typing import Any

from leap_kalm.pipelines.leap_iteration import skip_reason, skipped, train_iteration_student
from leap_kalm.pipelines.params import LeapParams
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
    training uses iterations ``0..i`` subsampled to the same number of supervised actions
    (the smallest iteration's, and at most ``dagger_actions_per_iteration`` when set) so
    each weighs equally, split 85/15 by trajectory.

    Returns:
        ``(records, pool)``: records carry ``split`` (train/val) and ``iteration``.
    """
    from leap_kalm.llm import records as make

    config = LeapParams.from_dict(leap_params)
    fmt = (config.prompt_format, config.env, config.history_window)
    if iteration == 0:
        new = make.sft_records(*fmt, annotated_logs)
    else:
        if config.untrained_correction_verbs:
            corrections = make.untrain_corrections(corrections, config.untrained_correction_verbs)
        if config.uncapped_invalid_corrections:
            corrections = make.uncap_invalid_corrections(rollouts, corrections)
        if config.invalid_corrections_as_recovery:
            corrections = make.invalid_corrections_as_recovery(rollouts, corrections)
        new = make.sft_records(
            *fmt, rollouts, corrections, config.trained_steps, config.trained_corrections,
            config.correction_packing, config.capped_correction_verbs,
        )  # fmt: skip
    pool = [r for r in previous_pool if r["iteration"] < iteration]
    pool += [{**r, "iteration": iteration} for r in new]
    expert_share = config.dagger_expert_actions
    if config.start_from == "base" and expert_share is None:  # retrained: every expert episode
        expert_share = sum(make.supervised_actions(r) for r in pool if r["iteration"] == 0) or None
    records = make.dagger_training_set(
        pool, iteration, config.seed, config.val_fraction,
        config.dagger_actions_per_iteration, expert_share,
    )  # fmt: skip
    n_train = sum(r["split"] == "train" for r in records)
    logger.info(
        "SFT iteration %d: %d new records, pool %d, training on %d (train %d / val %d)",
        *(iteration, len(new), len(pool), len(records), n_train, len(records) - n_train),
    )
    return records, pool


def train_sft_student(
    sft_records: list[dict[str, Any]],
    previous_student: ModelRef | None,
    sft_params: dict[str, Any],
    leap_params: dict[str, Any],
    model_params: dict[str, Any],
    iteration: int,
) -> ModelRef:
    """SFT from the previous student (the base model at iteration 0, or at every iteration
    with ``leap.start_from: base``), completion-only loss.

    Returns:
        The trained adapter (moved into the catalog), or a *skipped* marker when this
        iteration trains with DPO instead. ``num_processes > 1`` in the SFT parameters
        trains under ``accelerate launch`` (several GPUs, or CPU processes with gloo).
    """
    config = LeapParams.from_dict(leap_params)
    reason = skip_reason("sft", config.train_method, iteration)
    if reason:
        return skipped(reason)
    train = [r for r in sft_records if r["split"] == "train"]
    return train_iteration_student(
        "sft", train, previous_student, sft_params, config.seed, model_params, iteration,
        {"trainable": True}, from_base=config.start_from == "base",
    )  # fmt: skip

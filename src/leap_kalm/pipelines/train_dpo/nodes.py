"""`train_dpo` nodes: preference pairs from corrections, then DPO of the student."""

from __future__ import annotations

import logging
from typing import Any

from leap_kalm.pipelines.leap_iteration import skip_reason, skipped, train_iteration_student
from leap_kalm.pipelines.params import LeapParams
from leap_kalm.schemas import ModelRef

logger = logging.getLogger(__name__)


def build_dpo_pairs(
    rollouts: list[dict[str, Any]], corrections: list[dict[str, Any]], leap_params: dict[str, Any]
) -> list[dict[str, Any]]:
    """``{prompt, chosen: corrected, rejected: original}`` for every corrected step of this
    iteration, and the contrast pairs ``leap.dpo_contrast_ratio`` asks for."""
    from leap_kalm.llm.records import dpo_pairs

    config = LeapParams.from_dict(leap_params)
    fmt = (config.prompt_format, config.env, config.history_window)
    pairs = dpo_pairs(
        *fmt, rollouts, corrections, contrast_ratio=config.dpo_contrast_ratio, seed=config.seed
    )
    n_corrected = sum(s["is_corrected"] for c in corrections for s in c["steps"])
    logger.info(
        "%d preference pairs from %d corrections (%d corrected steps, %d contrast pairs)",
        len(pairs), len(corrections), n_corrected, len(pairs) - n_corrected,
    )  # fmt: skip
    return pairs


def train_dpo_student(
    dpo_pairs: list[dict[str, Any]],
    previous_student: ModelRef | None,
    dpo_params: dict[str, Any],
    leap_params: dict[str, Any],
    model_params: dict[str, Any],
    iteration: int,
) -> ModelRef:
    """DPO from the previous student: its adapter is merged, a new LoRA is trained on top,
    so the reference policy is the previous student itself.

    Returns:
        The trained adapter, or a *skipped* marker when this iteration trains with SFT
        (always at iteration 0, which has no corrections yet).
    """
    config = LeapParams.from_dict(leap_params)
    reason = skip_reason("dpo", config.train_method, iteration)
    if reason:
        return skipped(reason)
    return train_iteration_student(
        "dpo", dpo_pairs, previous_student, dpo_params, config.seed, model_params, iteration,
        {"merge_adapter": True, "trainable": True},
    )  # fmt: skip

"""Shared by the benchmarks: seconds per SFT optimiser step, timed by a callback."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def iteration0_sft_records(data_root: Path, env: str) -> Path:
    """A data root's iteration-0 SFT records of ``env``; exit with the command that makes
    them when they are missing."""
    records = data_root / f"05_model_input/{env}/iter0/sft_records.jsonl"
    if not records.exists():
        raise SystemExit(
            f"need {records}: run `kedro run --pipeline=leap_iter --params leap_iteration=0` "
            f"(env {env}) for that data root first"
        )
    return records


def sft_step_stamps(
    model: Any,
    tokenizer: Any,
    records: list[dict],
    params: Any,
    on_step: Callable[[], None] | None = None,
) -> list[float]:
    """Train ``model`` on ``records`` with ``params``; the time at the end of each optimiser
    step (after the project's own callbacks), calling ``on_step`` there too."""
    import trl
    from transformers import TrainerCallback

    from leap_kalm.training.sft import train_sft

    stamps: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            stamps.append(time.perf_counter())
            if on_step is not None:
                on_step()

    original_init = trl.SFTTrainer.__init__

    def init_with_clock(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        self.add_callback(Clock())

    trl.SFTTrainer.__init__ = init_with_clock
    try:
        with tempfile.TemporaryDirectory() as out:
            train_sft(model, tokenizer, records, params, out)
    finally:
        trl.SFTTrainer.__init__ = original_init
    return stamps


def median_gap(stamps: list[float]) -> float:
    """The median gap between optimiser steps (the first step, which warms up, is not
    counted); NaN with fewer than two steps."""
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    return statistics.median(gaps) if gaps else float("nan")


def median_sft_step(model: Any, tokenizer: Any, records: list[dict], params: Any) -> float:
    """Train ``model`` on ``records`` with ``params``; the median gap between optimiser
    steps (the first step, which warms up, is not counted)."""
    return median_gap(sft_step_stamps(model, tokenizer, records, params))

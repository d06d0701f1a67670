"""LEAP's iteration rules, in one place.

* Iteration ``i`` is complete once ``<data_root>/08_reporting/<world>/iter<i>/eval.json``
  exists; a run without ``--params leap_iteration=<i>`` runs the next one.
* Iteration 0 is behaviour cloning: no rollouts, SFT on annotated expert logs, from the
  base model. Iteration ``i >= 1`` rolls out, corrects and trains the previous student
  with the configured ``train_method``; the other trainer's output is a *skipped* marker.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from leap_kalm.schemas import ModelRef

_ITER = re.compile(r"^iter(\d+)$")


def completed_iterations(data_root: str) -> list[int]:
    """Iterations whose evaluation report exists, for any world, sorted."""
    found = set()
    for report in Path(data_root).glob("08_reporting/*/iter*/eval.json"):
        match = _ITER.match(report.parent.name)
        if match:
            found.add(int(match.group(1)))
    return sorted(found)


def next_iteration(data_root: str) -> int:
    """The iteration after the latest completed one (0 when none is)."""
    done = completed_iterations(data_root)
    return done[-1] + 1 if done else 0


def rolls_out(iteration: int) -> bool:
    """Whether an iteration rolls the previous student out (not at iteration 0)."""
    return iteration > 0


def method_for(train_method: str, iteration: int) -> str:
    """The trainer an iteration uses: SFT at iteration 0, then ``train_method``."""
    return "sft" if iteration == 0 else train_method


def skip_reason(method: str, train_method: str, iteration: int) -> str | None:
    """Why ``method`` does not train this iteration, or ``None`` when it does."""
    if method == method_for(train_method, iteration):
        return None
    return (
        "iteration 0 is behaviour cloning" if iteration == 0 else f"train_method is {train_method}"
    )


def skipped(reason: str) -> ModelRef:
    """The marker a trainer saves when it does not train this iteration."""
    return ModelRef(path="", kind="skipped", meta={"reason": reason})


def starting_model(
    previous: ModelRef | None, model_params: dict[str, Any], iteration: int
) -> ModelRef | dict[str, Any]:
    """The model an iteration starts from: the previous student, or the base model at 0."""
    if iteration > 0 and previous is None:
        raise FileNotFoundError(
            f"LEAP iteration {iteration} needs the student of iteration {iteration - 1}, which does not exist; "
            f"run iteration {iteration - 1} first (kedro run --pipeline=leap_iter --params leap_iteration={iteration - 1})"
        )
    if previous is not None and previous.kind == "skipped":
        raise ValueError(f"the previous student at {previous.path} was skipped, not trained")
    return previous if previous is not None and iteration > 0 else model_params


def trained_student(sft: ModelRef, dpo: ModelRef, train_method: str) -> ModelRef:
    """The student this iteration trained (SFT or DPO); the other one is a skipped marker."""
    chosen = sft if train_method == "sft" or dpo.kind == "skipped" else dpo
    if chosen.kind == "skipped":
        raise ValueError(f"no student was trained this iteration ({chosen.meta})")
    return chosen


def iteration_settings(settings: dict[str, Any], iteration: int) -> dict[str, Any]:
    """The trainer settings of ``iteration``: ``settings`` without its ``later_iterations``
    mapping, which overrides them from iteration 1 on (a student that starts from the
    previous one wants a gentler update than behaviour cloning from the base model)."""
    out = {k: v for k, v in settings.items() if k != "later_iterations"}
    return {**out, **(settings.get("later_iterations") or {})} if iteration > 0 else out


def train_iteration_student(
    method: str,
    records: list[dict[str, Any]],
    previous: ModelRef | None,
    settings: dict[str, Any],
    seed: int,
    model_params: dict[str, Any],
    iteration: int,
    load_kwargs: dict[str, Any],
    from_base: bool = False,
) -> ModelRef:
    """Train this iteration's student with ``method`` from the model the iteration starts
    from (seed ``seed + iteration``, the ``model`` parameters' dtype); the result records
    the iteration and is staged for the catalog. ``from_base`` retrains the base model
    with iteration 0's settings (``leap.start_from: base``) instead of refining
    ``previous`` with the ``later_iterations`` ones."""
    from leap_kalm.llm.student import model_load_kwargs
    from leap_kalm.training.runner import train_student

    trained_as = 0 if from_base else iteration  # retraining from the base is iteration 0's job
    return train_student(
        method,
        records,
        starting_model(previous, model_params, trained_as),
        iteration_settings(settings, trained_as),
        seed=seed + iteration,
        load_kwargs={**model_load_kwargs(model_params, ("dtype",)), **load_kwargs},
        meta={"iteration": iteration, "start_from": "previous" if trained_as else "base"},
    )

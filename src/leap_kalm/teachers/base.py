"""The teacher interface shared by ``annotate`` and ``correct``, and correction checks."""

from __future__ import annotations

from typing import Any, Protocol

from leap_kalm.llm.parsing import is_admissible
from leap_kalm.schemas import Correction

CORRECTED_STEP_KEYS = (
    "timestep",
    "original_observation",
    "original_reason",
    "original_action",
    "corrected_reason",
    "corrected_action",
    "is_corrected",
)


class CorrectionError(ValueError):
    """A correction that breaks LEAP's contract (length, keys, admissible actions)."""


class Teacher(Protocol):
    """What ``annotate`` and ``correct`` need from a teacher; every teacher implements it
    and ``leap_kalm.teachers.make_teacher`` builds them.

    Attributes:
        kind: The registry name it was built under (``scripted``, ``llm``), recorded in
            the annotated logs and corrections.
    """

    kind: str

    def annotate(self, trajectory: dict[str, Any], privileged: dict[str, Any]) -> list[str]:
        """A causal reason for every step of an expert trajectory."""
        ...

    def correct(self, trajectory: dict[str, Any], privileged: dict[str, Any]) -> Correction:
        """Corrected reason and action for every step of a failed student trajectory."""
        ...

    def usage(self) -> dict[str, Any]:
        """Tokens and requests spent so far (empty for teachers that call no model)."""
        ...


def validate_correction(correction: dict[str, Any], trajectory: dict[str, Any]) -> Correction:
    """Check a correction against the trajectory it corrects.

    Raises:
        CorrectionError: Naming the game and step: wrong length, missing keys, or a corrected
            action that is neither one of that step's candidates nor fills one of their
            templates (WebShop's ``search[<query>]``).
    """
    game = trajectory.get("game_id", "?")
    steps = correction.get("steps")
    if not isinstance(steps, list):
        raise CorrectionError(f"{game}: correction has no list of steps")
    if len(steps) != len(trajectory["steps"]):
        raise CorrectionError(
            f"{game}: correction has {len(steps)} steps, trajectory {len(trajectory['steps'])}"
        )
    for t, (step, original) in enumerate(zip(steps, trajectory["steps"], strict=True)):
        missing = [k for k in CORRECTED_STEP_KEYS if k not in step]
        if missing:
            raise CorrectionError(f"{game}, step {t}: missing keys {missing}")
        if not is_admissible(step["corrected_action"], original["candidate_actions"]):
            raise CorrectionError(
                f"{game}, step {t}: corrected action {step['corrected_action']!r} is not among the step's candidates"
            )
    if not isinstance(correction.get("summary"), str):
        raise CorrectionError(f"{game}: correction has no summary text")
    return correction  # type: ignore[return-value]

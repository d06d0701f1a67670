"""The teacher interface shared by ``annotate`` and ``correct``, and correction checks."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
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


CORRECTS = ("mistakes", "plan")


@dataclass
class ScriptedTeacher:
    """What every world's scripted privileged teacher shares: its settings, their checks,
    no token usage, and which corrected reasons may reveal a privileged fact.

    Attributes:
        realizability: Percentage (0-100) of corrected reasons allowed to reveal the
            privileged fact the correction rests on (0 = LEAP's hint-only teacher).
        games: ``game_id`` -> games-index entry of every game it may correct.
        corrects: ``mistakes`` (what the student could have known better) or ``plan``
            (every step off the expert's path).
    """

    realizability: float = 0.0
    games: dict[str, dict[str, Any]] = field(default_factory=dict)
    corrects: str = "mistakes"
    kind: str = "scripted"

    def __post_init__(self) -> None:
        if not 0 <= self.realizability <= 100:
            raise ValueError(f"realizability must be within 0..100, got {self.realizability}")
        if self.corrects not in CORRECTS:
            raise ValueError(f"corrects must be one of {CORRECTS}, got {self.corrects!r}")

    def usage(self) -> dict[str, Any]:
        """A scripted teacher spends no tokens."""
        return {}

    def _reveal(self, game_id: str, t: int) -> bool:
        """Whether step ``t``'s corrected reason may reveal (deterministic per step)."""
        return zlib.crc32(f"{game_id}:{t}".encode()) % 100 < self.realizability

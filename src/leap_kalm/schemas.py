"""Records that cross stage boundaries.

Plain ``TypedDict``s for what travels as JSON (rollouts, corrections, training
records) and small dataclasses for references. Every stage reads and writes these
shapes; ARCHITECTURE.md's "Data contracts" section is the prose version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict


class Step(TypedDict):
    """One decision of an agent in a text environment."""

    observation: str
    candidate_actions: list[str]
    reason: NotRequired[str]
    action: str
    score: NotRequired[float]


class Trajectory(TypedDict):
    """One episode: LEAP rollouts and expert logs share this shape."""

    env: str
    game_id: str
    split: str
    task: str
    task_type: str
    model_id: str
    steps: list[Step]
    success: bool
    score: float
    num_actions: int


class CorrectedStep(TypedDict):
    timestep: int
    original_observation: str
    original_reason: str
    original_action: str
    corrected_reason: str
    corrected_action: str
    is_corrected: bool


class Correction(TypedDict):
    """A privileged teacher's correction of one student trajectory."""

    game_id: str
    summary: str
    steps: list[CorrectedStep]


ChatMessage = dict[str, str]


class SFTRecord(TypedDict):
    """trl's conversational prompt/completion format."""

    prompt: list[ChatMessage]
    completion: list[ChatMessage]


class PreferencePair(TypedDict):
    """trl's conversational preference format (chosen = corrected, rejected = original)."""

    prompt: list[ChatMessage]
    chosen: list[ChatMessage]
    rejected: list[ChatMessage]


KALM_KEYS: tuple[str, ...] = (
    "observations",
    "next_observations",
    "actions",
    "rewards",
    "terminals",
    "masks",
    "instructions",
    "goals",
)
"""Arrays of a KALM offline dataset (N episodes × T steps)."""


@dataclass(frozen=True)
class ModelRef:
    """A model or LoRA adapter saved as a Hugging Face directory.

    This is what a model-directory dataset loads: the consuming node decides device
    and dtype when it actually loads the weights (``leap_kalm.llm.models.load_model``).

    Attributes:
        path: Local directory holding ``config.json`` (model) or ``adapter_config.json``.
        kind: ``"model"`` or ``"adapter"``.
        base_model: For an adapter, the absolute path or id of its base model.
        meta: Free-form provenance (model id, seed, training settings).
    """

    path: str
    kind: str = "model"
    base_model: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

"""Records that cross stage boundaries.

Plain ``TypedDict``s for what travels as JSON (rollouts, corrections, training
records) and small dataclasses for references. Every stage reads and writes these
shapes; ARCHITECTURE.md's "Data contracts" section is the prose version.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, NotRequired, TypedDict


class Step(TypedDict):
    """One decision of an agent in a text environment."""

    observation: str
    candidate_actions: list[str]
    reason: NotRequired[str]
    action: str
    score: NotRequired[float]


# the parts of a graded world's final reward a trajectory may carry (``reward_parts``):
# WebShop's ``get_reward(verbose=True)``; a part the goal does not ask for is left out
REWARD_PARTS = ("r_type", "r_att", "r_option", "r_price")


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
    reward_parts: NotRequired[dict[str, float]]


def make_trajectory(
    *,
    env: str,
    game_id: str,
    split: str,
    task: str,
    task_type: str,
    model_id: str,
    steps: list[Step],
    success: bool,
    score: float | None = None,
    **extra: Any,
) -> Trajectory:
    """The one way a trajectory record is built (expert logs, student rollouts, evaluation).

    ``score`` defaults to 1.0 for a success and 0.0 otherwise (worlds with graded rewards,
    like WebShop, pass their own); ``num_actions`` is the number of steps; ``extra`` fields
    (sampling settings, iteration, an expert's error) follow the contract's keys.
    """
    return {  # type: ignore[typeddict-item]
        "env": env,
        "game_id": game_id,
        "split": split,
        "task": task,
        "task_type": task_type,
        "model_id": model_id,
        "steps": steps,
        "success": bool(success),
        "score": float(score) if score is not None else (1.0 if success else 0.0),
        "num_actions": len(steps),
        **extra,
    }


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
class EpisodeSpec:
    """One episode to play: how to build its environment and how to label its trajectory."""

    game_id: str
    make_env: Callable[[], Any]
    split: str = "train"
    task_type: str = ""


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


class ConfigMixin:
    """``from_dict`` for config dataclasses, d3rlpy-style: a parameters mapping (YAML) maps
    onto the fields, and an unknown key is an error that names it. Nested config fields
    (dataclasses) are built from nested mappings."""

    @classmethod
    def from_dict(cls, params: dict[str, Any] | None) -> Any:
        params = dict(params or {})
        spec = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(params) - set(spec))
        if unknown:
            raise ValueError(
                f"{cls.__name__}: unknown keys {unknown}; expected some of {sorted(spec)}"
            )
        listed = _list_fields(cls)
        for name, value in params.items():
            if name in listed and isinstance(value, str):
                raise ValueError(
                    f"{cls.__name__}.{name} must be a list, got the string {value!r} "
                    f"(one item is written [{value}])"
                )
            nested = (
                spec[name].default_factory if spec[name].default_factory is not MISSING else None
            )
            if isinstance(value, dict) and nested is not None and hasattr(nested, "from_dict"):
                params[name] = nested.from_dict(value)
        return cls(**params)


def _list_fields(cls: type) -> set[str]:
    """The fields of config dataclass ``cls`` declared as lists (``list[str]``,
    ``list[str] | None``; not ``list[str] | str``): a YAML or ``--params`` string there is
    a mistake (``go`` for ``[go]``) that would otherwise be read as its characters."""
    import types
    from typing import Union, get_args, get_origin, get_type_hints

    out = set()
    for name, hint in get_type_hints(cls).items():
        options = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
        lists = any(get_origin(option) is list or option is list for option in options)
        if lists and str not in options:
            out.add(name)
    return out

"""The LLM student as rollouts and evaluation load it: one path from a model to a policy."""

from __future__ import annotations

from typing import Any

from leap_kalm.llm.agent import StudentPolicy, StudentSettings
from leap_kalm.schemas import ModelRef


def model_load_kwargs(
    model_params: dict[str, Any], keys: tuple[str, ...] = ("device", "dtype")
) -> dict[str, Any]:
    """The ``model`` parameters that also apply to trained students (device, dtype)."""
    return {k: model_params[k] for k in keys if model_params.get(k) not in (None, "")}


def model_id_of(ref: ModelRef | dict[str, Any]) -> str:
    """What a trajectory records as its ``model_id``: a directory or a registry name."""
    return ref.path if isinstance(ref, ModelRef) else str(ref.get("name"))


def load_student_policy(
    ref: ModelRef | dict[str, Any],
    model_params: dict[str, Any],
    sampling: dict[str, Any],
    settings: StudentSettings,
) -> StudentPolicy:
    """Load a student (adapter merged, on the ``model`` parameters' device and dtype) as a
    batched policy that samples with ``sampling`` (``SamplingParams`` as a mapping) and
    decodes ``settings.batch_size`` episodes in one batch."""
    from leap_kalm.llm.generation import EpisodeGenerator, SamplingParams
    from leap_kalm.llm.models import load_model

    model, tokenizer = load_model(ref, merge_adapter=True, **model_load_kwargs(model_params))
    model.requires_grad_(False)  # inference only
    generator = EpisodeGenerator(
        model, tokenizer, SamplingParams.from_dict(sampling), max_batch=settings.batch_size
    )
    return StudentPolicy(generator, settings, model_id_of(ref))

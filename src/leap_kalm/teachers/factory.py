"""The teachers registry: one ``make_teacher(world, params, games)`` for every kind.

* ``scripted``: the world's own privileged teacher, looked up in ``SCRIPTED_TEACHERS``
  (a world without one must use ``llm``);
* ``llm``: any OpenAI-compatible chat model, shown the world's rendered privileged state.

A new teacher kind is one builder plus one line in ``TEACHER_KINDS``; a new world's
scripted teacher is one module plus one line in ``SCRIPTED_TEACHERS``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from leap_kalm.schemas import ConfigMixin
from leap_kalm.teachers.base import Teacher

SCRIPTED_TEACHERS: dict[str, str] = {
    "alfworld": "leap_kalm.teachers.alfworld:ScriptedAlfWorldTeacher",
    "webshop": "leap_kalm.teachers.webshop:ScriptedWebShopTeacher",
}


@dataclass
class TeacherParams(ConfigMixin):
    """Which teacher corrects and annotates (``<world>.teacher`` in ``parameters_leap.yml``).

    Attributes:
        kind: ``scripted`` (privileged, per world) or ``llm`` (any OpenAI-compatible model).
        realizability: 0–100, how much privileged information a reason may reveal.
        corrects: What a scripted teacher corrects: ``mistakes`` (what the student could
            have known better) or ``plan`` (every step off the optimal plan).
        searches: ALFWorld's scripted teacher with ``corrects: mistakes``: what a corrected
            search step becomes, ``expert`` (the demonstrations' expert's next search
            action from the student's state) or ``plan`` (where the object really is).
        client: ``ClientParams`` for ``llm`` (base_url, model, ...).
        max_attempts: Replies tried per trajectory by the LLM teacher.
    """

    kind: str = "scripted"
    realizability: float = 0.0
    corrects: str = "mistakes"
    searches: str = "plan"
    client: dict[str, Any] = field(default_factory=dict)
    max_attempts: int = 3

    def __post_init__(self) -> None:
        if self.kind not in TEACHER_KINDS:
            raise ValueError(
                f"teacher.kind must be one of {sorted(TEACHER_KINDS)}, got {self.kind!r}"
            )


def _load(path: str) -> Any:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def _scripted(world: str, config: TeacherParams, games: list[dict[str, Any]]) -> Teacher:
    if world not in SCRIPTED_TEACHERS:
        raise ValueError(
            f"no scripted teacher for world {world!r} (scripted teachers: "
            f"{', '.join(SCRIPTED_TEACHERS)}); use teacher.kind: llm"
        )
    teacher = _load(SCRIPTED_TEACHERS[world])
    options = {"corrects": config.corrects}
    if "searches" in {f.name for f in fields(teacher)}:
        options["searches"] = config.searches
    elif config.searches != "plan":
        raise ValueError(
            f"teacher.searches: {config.searches!r} is not available for {world!r}: its "
            "scripted teacher corrects searches by its plan only (searches: plan)"
        )
    return teacher(config.realizability, games={g["game_id"]: g for g in games}, **options)


def _llm(world: str, config: TeacherParams, games: list[dict[str, Any]]) -> Teacher:
    from leap_kalm.envs.registry import get_world
    from leap_kalm.llm.client import ChatClient, ClientParams
    from leap_kalm.teachers.llm import LLMTeacher

    return LLMTeacher(
        ChatClient(ClientParams.from_dict(config.client)),
        world,
        config.realizability,
        config.max_attempts,
        render=get_world(world, "text").render_privileged,
    )


TEACHER_KINDS: dict[str, Callable[[str, TeacherParams, list[dict[str, Any]]], Teacher]] = {
    "scripted": _scripted,
    "llm": _llm,
}


def make_teacher(
    world: str,
    params: dict[str, Any] | TeacherParams,
    games: list[dict[str, Any]] | None = None,
) -> Teacher:
    """The teacher ``params`` ask for, for ``world``.

    Args:
        world: A registered text world (``alfworld``).
        params: ``TeacherParams`` or its mapping.
        games: The world's games index; scripted teachers that replay games need it.
    """
    config = params if isinstance(params, TeacherParams) else TeacherParams.from_dict(params)
    return TEACHER_KINDS[config.kind](world, config, games or [])

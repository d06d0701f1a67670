"""The teachers registry: one ``make_teacher(world, params, games)`` for every kind.

* ``scripted``: the world's own privileged teacher, looked up in ``SCRIPTED_TEACHERS``
  (a world without one must use ``llm``);
* ``llm``: any OpenAI-compatible chat model, shown the world's rendered privileged state.

A new teacher kind is one builder plus one line in ``TEACHER_KINDS``; a new world's
scripted teacher is one module plus one line in ``SCRIPTED_TEACHERS``.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from leap_kalm.schemas import ConfigMixin
from leap_kalm.teachers.base import Teacher

logger = logging.getLogger(__name__)

ON_FAILURE = ("fallback", "skip", "raise")

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
        critiques: ALFWorld's scripted teacher: whether a corrected reason opens with
            what was wrong with the student's action (LEAP's teacher prompt asks for it;
            trained as the student's reason, it names actions the student never took).
            WebShop's scripted teacher writes none; ``llm`` refuses false (its reasons are
            what its prompt asks for).
        client: ``ClientParams`` for ``llm`` (base_url, model, ...).
        max_attempts: Replies tried per trajectory by the LLM teacher.
        on_failure: What a trajectory gets when the teacher gives no valid reply after
            ``max_attempts``: ``fallback`` (the world's scripted teacher annotates or
            corrects it), ``skip`` (it is left out) or ``raise`` (the node stops). Every
            failure is counted and logged; the run goes on unless ``raise``.
    """

    kind: str = "scripted"
    realizability: float = 0.0
    corrects: str = "mistakes"
    searches: str = "plan"
    critiques: bool = True
    client: dict[str, Any] = field(default_factory=dict)
    max_attempts: int = 3
    on_failure: str = "fallback"

    def __post_init__(self) -> None:
        if self.kind not in TEACHER_KINDS:
            raise ValueError(
                f"teacher.kind must be one of {sorted(TEACHER_KINDS)}, got {self.kind!r}"
            )
        if not isinstance(self.critiques, bool):
            raise ValueError(f"teacher.critiques must be true or false, got {self.critiques!r}")
        if self.kind == "llm" and not self.critiques:
            raise ValueError(
                "teacher.critiques: false applies to scripted teachers only: the llm teacher "
                "writes the reasons its prompt asks for (llm/templates/teacher_correct_system.j2)"
            )
        if self.on_failure not in ON_FAILURE:
            raise ValueError(
                f"teacher.on_failure must be one of {list(ON_FAILURE)}, got {self.on_failure!r}"
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
    options: dict[str, Any] = {"corrects": config.corrects}
    own = {f.name for f in fields(teacher)}
    if "searches" in own:
        options["searches"] = config.searches
    elif config.searches != "plan":
        raise ValueError(
            f"teacher.searches: {config.searches!r} is not available for {world!r}: its "
            "scripted teacher corrects searches by its plan only (searches: plan)"
        )
    if "critiques" in own:  # a teacher without the field writes no critique anyway
        options["critiques"] = config.critiques
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


class TeacherUnavailableError(RuntimeError):
    """The teacher's server kept failing (429s, 5xx, dropped connections, timeouts) after
    the client's retries; the message says where, and what a re-run will reuse."""


class GuardedTeacher:
    """The configured teacher, with ``on_failure`` applied when it cannot handle a trajectory.

    ``annotate`` and ``correct`` return ``(result, by)``: the teacher's result and its
    kind, the scripted teacher's with ``by`` saying it stood in, or ``(None, ...)`` for a
    skipped trajectory. ``failures`` lists every trajectory the teacher gave up on
    (``game_id``, ``task``, ``error``), so a stage can report them; a failure never throws
    away what the node already computed unless ``on_failure: raise``.
    """

    def __init__(self, world: str, config: TeacherParams, games: list[dict[str, Any]]) -> None:
        self.primary = TEACHER_KINDS[config.kind](world, config, games)
        self.world, self.config, self.games = world, config, games
        self.failures: list[dict[str, str]] = []
        self._fallback: Teacher | None = None
        if config.kind != "scripted" and config.on_failure == "fallback":
            if world not in SCRIPTED_TEACHERS:
                raise ValueError(
                    f"teacher.on_failure: fallback needs a scripted teacher, and {world!r} has "
                    "none; use on_failure: skip or raise"
                )

    @property
    def kind(self) -> str:
        return self.primary.kind

    def usage(self) -> dict[str, Any]:
        return self.primary.usage()

    def _fallback_teacher(self) -> Teacher:
        if self._fallback is None:
            scripted = TeacherParams.from_dict({**self.config.__dict__, "kind": "scripted"})
            self._fallback = _scripted(self.world, scripted, self.games)
        return self._fallback

    def _run(self, task: str, trajectory: dict[str, Any], privileged: Any) -> tuple[Any, str]:
        from leap_kalm.teachers.base import CorrectionError

        try:
            return getattr(self.primary, task)(trajectory, privileged), self.kind
        except Exception as error:
            if not isinstance(error, CorrectionError):
                unavailable = self._unavailable(error)
                if unavailable is error:
                    raise
                raise unavailable from error
            if self.config.kind == "scripted" or self.config.on_failure == "raise":
                raise
            self.failures.append(
                {"game_id": str(trajectory["game_id"]), "task": task, "error": str(error)}
            )
            if self.config.on_failure == "skip":
                logger.warning("teacher failed on %s (%s): left out", trajectory["game_id"], error)
                return None, self.kind
            logger.warning(
                "teacher failed on %s (%s): the scripted teacher stands in",
                trajectory["game_id"], error,
            )  # fmt: skip
            by = f"scripted (fallback: {self.kind} failed)"
            return getattr(self._fallback_teacher(), task)(trajectory, privileged), by

    def _unavailable(self, error: Exception) -> Exception:
        """An API error that outlived the client's retries, as one clear message (other
        errors are returned unchanged)."""
        try:
            import openai
        except ImportError:  # pragma: no cover - openai is a dependency
            return error
        if not isinstance(error, openai.APIError):
            return error
        client = getattr(getattr(self.primary, "client", None), "params", None)
        where = getattr(client, "base_url", "the teacher's server")
        retries = getattr(client, "max_retries", "?")
        cache = getattr(client, "cache_dir", None)
        usage = self.usage()
        kept = (
            f"the {usage.get('api_calls', 0):.0f} replies received in this run are cached under "
            f"{cache}, and a re-run reuses them without calling the API"
            if cache
            else "nothing is cached (client.cache_dir is null)"
        )
        return TeacherUnavailableError(
            f"the {self.kind} teacher at {where} failed after {retries} retries "
            f"({type(error).__name__}: {error}); {kept}. Check the server, then re-run."
        )

    def annotate(self, trajectory: dict[str, Any], privileged: Any) -> tuple[Any, str]:
        return self._run("annotate", trajectory, privileged)

    def correct(self, trajectory: dict[str, Any], privileged: Any) -> tuple[Any, str]:
        return self._run("correct", trajectory, privileged)

    def report(self, stage: str, total: int) -> None:
        """Log how many of ``total`` trajectories the teacher failed on, and what was done."""
        if self.failures:
            logger.warning(
                "%s: the %s teacher failed on %d of %d trajectories (on_failure: %s); first: %s",
                stage, self.kind, len(self.failures), total, self.config.on_failure,
                self.failures[0]["error"],
            )  # fmt: skip


def make_guarded_teacher(
    world: str, params: dict[str, Any] | TeacherParams, games: list[dict[str, Any]] | None = None
) -> GuardedTeacher:
    """``make_teacher``'s teacher wrapped in :class:`GuardedTeacher` (what the stages use)."""
    config = params if isinstance(params, TeacherParams) else TeacherParams.from_dict(params)
    return GuardedTeacher(world, config, games or [])

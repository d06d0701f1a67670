"""LLM-backed privileged teacher (LEAP's GPT-4o teacher, or any OpenAI-compatible model).

The prompts give the model the student's trajectory and the rendered privileged state
and ask for JSON. Replies are validated — valid JSON, one entry per timestep, every
corrected action one of that step's candidates (near misses are repaired with the same
matcher the student's parser uses) — and a rejected reply is retried with the reason for
the rejection appended, up to ``max_attempts`` times.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from leap_kalm.llm.parsing import match_candidate
from leap_kalm.llm.prompts import ENV_DESCRIPTIONS, render_template
from leap_kalm.schemas import Correction
from leap_kalm.teachers.base import CorrectionError, validate_correction

logger = logging.getLogger(__name__)


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text`` (tolerates code fences and prose around it)."""
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.DOTALL)
    candidate = fenced.group(1) if fenced else text[text.find("{") : text.rfind("}") + 1]
    if not candidate:
        raise CorrectionError("the reply holds no JSON object")
    try:
        value = json.loads(candidate)
    except json.JSONDecodeError as exc:
        raise CorrectionError(
            f"the reply is not valid JSON ({exc.msg} at character {exc.pos})"
        ) from exc
    if not isinstance(value, dict):
        raise CorrectionError("the reply's JSON is not an object")
    return value


def _corrected_step(t: int, entry: Any, step: dict[str, Any]) -> dict[str, Any]:
    """One reply entry as a corrected step; its action repaired onto the step's candidates."""
    if (
        not isinstance(entry, dict)
        or "corrected_action" not in entry
        or "corrected_reason" not in entry
    ):
        raise CorrectionError(f"entry {t} lacks corrected_reason or corrected_action")
    action, repair, _ = match_candidate(str(entry["corrected_action"]), step["candidate_actions"])
    if repair not in ("exact", "template", "normalized", "fuzzy"):
        raise CorrectionError(
            f"entry {t}: {entry['corrected_action']!r} is not one of its candidate_actions"
        )
    return {
        "timestep": t,
        "original_observation": step["observation"],
        "original_reason": step.get("reason", ""),
        "original_action": step["action"],
        "corrected_reason": str(entry["corrected_reason"]),
        "corrected_action": action,
        "is_corrected": action != step["action"],
    }


def parse_correction(text: str, trajectory: dict[str, Any]) -> Correction:
    """A teacher's JSON reply as a validated correction of ``trajectory``.

    Raises:
        CorrectionError: Saying what is wrong (no JSON, wrong number of entries, an action
            that is not a candidate), so the teacher can be asked again with the reason.
    """
    steps = trajectory["steps"]
    reply = extract_json_object(text)
    entries = reply.get("trajectory")
    if not isinstance(entries, list) or len(entries) != len(steps):
        got = len(entries) if isinstance(entries, list) else "no"
        raise CorrectionError(f"expected {len(steps)} trajectory entries, got {got}")
    correction = {
        "game_id": trajectory["game_id"],
        "summary": str(reply.get("summary", "")),
        "steps": [
            _corrected_step(t, entry, step)
            for t, (entry, step) in enumerate(zip(entries, steps, strict=True))
        ],
    }
    return validate_correction(correction, trajectory)


def _no_rendering(state: dict[str, Any]) -> str:
    return json.dumps(state, indent=1)


@dataclass
class LLMTeacher:
    """Teacher that asks a chat model (through ``leap_kalm.llm.client.ChatClient``).

    Attributes:
        client: A ``ChatClient`` (cached, retried on API errors).
        env: Environment name, for the prompt.
        realizability: Percentage of reasons allowed to reveal privileged facts.
        max_attempts: Replies tried before giving up on a trajectory.
        render: The world's privileged-state renderer (text for the prompt).
    """

    client: Any
    env: str = "alfworld"
    realizability: float = 0.0
    max_attempts: int = 3
    render: Callable[[dict[str, Any]], str] = _no_rendering
    kind: str = "llm"

    def _ask(self, system: str, user_template: str, values: dict[str, Any], parse: Any) -> Any:
        feedback = ""
        for attempt in range(1, self.max_attempts + 1):
            user = render_template(user_template, feedback=feedback, **values)
            retry = {} if attempt == 1 else {"temperature": 0.7, "seed": attempt}
            reply = self.client.complete(  # each retry is a new request (its own seed)
                [{"role": "system", "content": system}, {"role": "user", "content": user}],
                **{"temperature": 0.0, **retry},
            )
            try:
                return parse(reply.text)
            except CorrectionError as exc:
                feedback = str(exc)
                logger.warning(
                    "teacher reply rejected (attempt %d/%d): %s", attempt, self.max_attempts, exc
                )
        raise CorrectionError(
            f"no valid teacher reply after {self.max_attempts} attempts; last problem: {feedback}"
        )

    def usage(self) -> dict[str, Any]:
        """Tokens and requests the client has spent so far."""
        usage = getattr(self.client, "usage", None)
        return usage.as_dict() if usage is not None else {}

    def correct(self, trajectory: dict[str, Any], privileged: dict[str, Any]) -> Correction:
        """LEAP's correction of a failed trajectory, validated."""
        shown = [
            {
                "timestep": t,
                "observation": s["observation"],
                "candidate_actions": s["candidate_actions"],
                "reason": s.get("reason", ""),
                "action": s["action"],
            }
            for t, s in enumerate(trajectory["steps"])
        ]
        system = render_template(
            "teacher_correct_system",
            env_description=ENV_DESCRIPTIONS.get(self.env, self.env),
            realizability=self.realizability,
        )
        values = {
            "trajectory_json": json.dumps(shown, indent=1),
            "privileged_text": self.render(privileged),
        }
        return self._ask(
            system,
            "teacher_correct_user",
            values,
            lambda text: parse_correction(text, trajectory),
        )

    def annotate(
        self, trajectory: dict[str, Any], privileged: dict[str, Any] | None = None
    ) -> list[str]:
        """A reason for every step of an expert trajectory."""
        steps = trajectory["steps"]
        shown = [
            {"timestep": t, "observation": s["observation"], "action": s["action"]}
            for t, s in enumerate(steps)
        ]
        system = render_template(
            "teacher_annotate_system", env_description=ENV_DESCRIPTIONS.get(self.env, self.env)
        )

        def parse(text: str) -> list[str]:
            reasons = extract_json_object(text).get("reasons")
            if not isinstance(reasons, list) or len(reasons) != len(steps):
                got = len(reasons) if isinstance(reasons, list) else "no"
                raise CorrectionError(f"expected {len(steps)} reasons, got {got}")
            return [str(r) for r in reasons]

        values = {"task": trajectory["task"], "trajectory_json": json.dumps(shown, indent=1)}
        return self._ask(system, "teacher_annotate_user", values, parse)

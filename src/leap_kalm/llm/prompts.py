"""Student prompts (jinja2 templates shipped as package data) and the answer format.

The user message is laid out so that, with the full history, the text of step ``t``
up to ``Observation t: ...`` is a prefix of step ``t+1``'s text; the candidate list and
the answer instructions come last. The incremental generator reuses the KV cache of
that prefix, so each step encodes only its new observation and the candidates.

With a ``history_window`` the observations of older steps are dropped but their actions
stay, as one ``Earlier actions: a; b; c`` line: a small student still knows what it
picked up and where it has been, for a few tokens per step, and that line grows
append-only too.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from leap_kalm.schemas import ChatMessage, Step

ENV_DESCRIPTIONS = {
    "alfworld": "a text-based household simulator (ALFWorld)",
    "webshop": "a simulated web shop (WebShop)",
}


@functools.cache
def _environment() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("leap_kalm.llm", "templates"),
        keep_trailing_newline=False,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )


def render_template(name: str, **values: Any) -> str:
    """Render ``templates/<name>.j2`` with strict undefined variables."""
    return _environment().get_template(f"{name}.j2").render(**values).strip("\n")


def build_student_messages(
    env: str,
    task: str,
    history: Sequence[Step],
    observation: str,
    candidate_actions: Sequence[str],
    history_window: int | None = None,
) -> list[ChatMessage]:
    """The chat messages the student sees at one step.

    Args:
        env: Environment name (``alfworld``, ``webshop``...), for the system message.
        task: The task text.
        history: The student's own earlier steps (observation and action are shown).
        observation: The current observation.
        candidate_actions: Admissible actions now.
        history_window: Show the observations of only the last ``k`` earlier steps
            (``None``: all); older steps are listed by their actions alone, so the
            student still knows what it picked up and where it has been.

    Returns:
        ``[system, user]`` messages.
    """
    start = 0 if history_window is None else max(0, len(history) - history_window)
    shown = [
        {"index": i, "observation": step["observation"], "action": step["action"]}
        for i, step in enumerate(history)
        if i >= start
    ]
    system = render_template("student_system", env_description=ENV_DESCRIPTIONS.get(env, env))
    user = render_template(
        "student_user",
        task=task,
        earlier=[step["action"] for step in history[:start]],
        history=shown,
        timestep=len(history),
        observation=observation,
        candidate_actions=list(candidate_actions),
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


PROMPT_FORMATS = ("leap", "conversation")


def build_conversation(
    env: str,
    task: str,
    history: Sequence[Step],
    observation: str | None = None,
    candidate_actions: Sequence[str] | None = None,
) -> list[ChatMessage]:
    """A whole episode as one growing chat: observations as user turns, the student's
    ``REASON/ACTION`` answers as assistant turns.

    Every earlier step is kept (no window) and each step only appends, so the rollout's
    KV cache never re-encodes and a trajectory trains as one sequence.

    Args:
        env: World name, for the system message.
        task: The task text (in the first user turn).
        history: Earlier steps; each contributes its observation and its answer (its
            ``reason`` and ``action``).
        observation: The current observation (``None``: end after the last answer, as a
            training sequence does).
        candidate_actions: Listed under the current observation when given.
    """
    system = render_template(
        "student_conversation_system", env_description=ENV_DESCRIPTIONS.get(env, env)
    )
    messages: list[ChatMessage] = [{"role": "system", "content": system}]
    for t, step in enumerate(history):
        messages.append(_observation_turn(task, step["observation"], t == 0, None))
        answer = format_completion(step.get("reason", ""), step["action"])
        messages.append({"role": "assistant", "content": answer})
    if observation is not None:
        messages.append(_observation_turn(task, observation, not history, candidate_actions))
    return messages


def _observation_turn(
    task: str, observation: str, first: bool, candidate_actions: Sequence[str] | None
) -> ChatMessage:
    content = render_template(
        "student_conversation_user",
        task=task,
        observation=observation,
        first=first,
        candidate_actions=list(candidate_actions or []),
    )
    return {"role": "user", "content": content}


def student_messages(
    prompt_format: str,
    env: str,
    task: str,
    history: Sequence[Step],
    observation: str,
    candidate_actions: Sequence[str],
    history_window: int | None = None,
) -> list[ChatMessage]:
    """What the student sees at one step in ``prompt_format`` (``leap``: LEAP's per-step
    prompt with the candidate list; ``conversation``: the episode so far as one chat)."""
    if prompt_format == "leap":
        return build_student_messages(
            env, task, history, observation, candidate_actions, history_window
        )
    if prompt_format == "conversation":
        return build_conversation(env, task, history, observation)
    raise ValueError(f"prompt_format must be one of {PROMPT_FORMATS}, got {prompt_format!r}")


def format_completion(reason: str, action: str) -> str:
    """The assistant's answer in the ``REASON:/ACTION:`` format."""
    return f"REASON:\n{reason.strip()}\nACTION:\n{action.strip()}"

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
import re
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


PROMPT_FORMATS = (
    "leap",
    "conversation",
    "conversation_places",
    "conversation_compact",
    "conversation_recovery",
)
CONVERSATION_FORMATS = PROMPT_FORMATS[1:]
# conversation_compact: an observation at least this long that already appeared earlier in
# the episode is not written out again (a results page the student goes back to)
COMPACT_MIN_CHARS = 200


def conversation_options(prompt_format: str) -> dict[str, bool]:
    """The :func:`build_conversation` switches of a conversation ``prompt_format``."""
    if prompt_format not in CONVERSATION_FORMATS:
        raise ValueError(
            f"prompt_format must be one of {CONVERSATION_FORMATS}, got {prompt_format!r}"
        )
    return {
        "places": prompt_format == "conversation_places",
        "compact": prompt_format == "conversation_compact",
        "recovery": prompt_format == "conversation_recovery",
    }


def build_conversation(
    env: str,
    task: str,
    history: Sequence[Step],
    observation: str | None = None,
    candidate_actions: Sequence[str] | None = None,
    places: bool = False,
    compact: bool = False,
    recovery: bool = False,
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
        candidate_actions: The current step's admissible actions (their ``go to``
            places make its places line); not listed.
        places: Under every observation, the places the student can go to and has not
            been to yet (from that step's ``go to`` candidates and the ``You arrive at``
            observations so far): the ``conversation_places`` format. A turn depends only
            on the steps up to it, so the chat still only appends.
        compact: An observation of at least ``COMPACT_MIN_CHARS`` characters that was
            already shown in this episode becomes a pointer to the step whose action led
            to it first (``conversation_compact``): WebShop's results page, shown again
            after every ``click[< prev]``, is written once. An observation that repeats
            the one just before it (the action changed nothing: an option the item does
            not offer) stays whole, since the expert's data never shows that context.
        recovery: The observation after an action that was none of its step's
            candidates (in ALFWorld, "Nothing happens.") is followed by the candidate
            actions of the step it starts (``conversation_recovery``), so after a failed
            action the chat shows what the student can do instead. Other turns are as in
            ``conversation``; the expert's data, which never fails, is unchanged.
    """
    system = render_template(
        "student_conversation_system", env_description=ENV_DESCRIPTIONS.get(env, env)
    )
    messages: list[ChatMessage] = [{"role": "system", "content": system}]
    visited: set[str] = set()
    shown: dict[str, int] = {}  # observation -> the step it was first shown at

    def turn(t: int, observation: str, candidates: Sequence[str] | None) -> ChatMessage:
        unvisited = _unvisited(observation, candidates, visited) if places else None
        first_at = shown.setdefault(observation, t)
        # a page that came back after other pages is a pointer; one that did not change
        # (the step before showed it too: an action that did nothing) stays whole
        unchanged = t > 0 and history[t - 1]["observation"] == observation
        if compact and first_at < t and not unchanged and len(observation) >= COMPACT_MIN_CHARS:
            observation = _pointer(history, first_at)
        listed = candidates if recovery and t > 0 and no_candidate(history[t - 1]) else None
        return _observation_turn(task, observation, t == 0, unvisited, listed)

    for t, step in enumerate(history):
        messages.append(turn(t, step["observation"], step.get("candidate_actions")))
        answer = format_completion(step.get("reason", ""), step["action"])
        messages.append({"role": "assistant", "content": answer})
    if observation is not None:
        messages.append(turn(len(history), observation, candidate_actions))
    return messages


def no_candidate(step: Step) -> bool:
    """Whether ``step``'s action was none of its candidates (a step logged without its
    candidates is not judged: ``False``)."""
    candidates = step.get("candidate_actions")
    return bool(candidates) and step["action"] not in candidates


def _pointer(history: Sequence[Step], first_at: int) -> str:
    """What ``conversation_compact`` writes for an observation first shown at step
    ``first_at``: the action that led to it then (the first observation has none)."""
    if first_at == 0:
        return "(The same as your first observation above; not repeated.)"
    action = history[first_at - 1]["action"]
    return f"(The same as the observation after your action {action} above; not repeated.)"


_ARRIVE = re.compile(r"You arrive at (.+?)\.")


def _unvisited(
    observation: str, candidate_actions: Sequence[str] | None, visited: set[str]
) -> list[str]:
    """Record where ``observation`` arrives in ``visited``; the ``go to`` places of
    ``candidate_actions`` not visited so far, in their order."""
    visited.update(_ARRIVE.findall(observation))
    return [
        a[len("go to ") :]
        for a in candidate_actions or ()
        if a.startswith("go to ") and a[len("go to ") :] not in visited
    ]


def _observation_turn(
    task: str,
    observation: str,
    first: bool,
    unvisited: Sequence[str] | None,
    listed: Sequence[str] | None = None,
) -> ChatMessage:
    content = render_template(
        "student_conversation_user",
        task=task,
        observation=observation,
        first=first,
        places=unvisited is not None,
        unvisited=list(unvisited or []),
        listed=list(listed or []),
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
    if prompt_format in CONVERSATION_FORMATS:
        return build_conversation(
            env,
            task,
            history,
            observation,
            candidate_actions,
            **conversation_options(prompt_format),
        )
    raise ValueError(f"prompt_format must be one of {PROMPT_FORMATS}, got {prompt_format!r}")


def format_completion(reason: str, action: str) -> str:
    """The assistant's answer in the ``REASON:/ACTION:`` format."""
    return f"REASON:\n{reason.strip()}\nACTION:\n{action.strip()}"

"""Training records from trajectories and corrections (trl's conversational formats).

* SFT: ``{prompt, completion}`` for every step of an annotated expert log (iteration 0,
  behaviour cloning) or of a corrected student trajectory (iterations ≥ 1).
* DPO: ``{prompt, chosen, rejected}`` for every step the teacher corrected: chosen is
  the corrected reason/action, rejected the student's original.
* The prompt holds the task, the student's own earlier observation/action pairs, the
  current observation and the candidates — exactly what the student sees when acting.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from typing import Any

from leap_kalm.llm.prompts import (
    CONVERSATION_FORMATS,
    build_conversation,
    conversation_options,
    format_completion,
    no_candidate,
    student_messages,
)
from leap_kalm.schemas import PreferencePair, SFTRecord


def _assistant(reason: str, action: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": format_completion(reason, action)}]


def _prompt(
    env: str,
    trajectory: dict[str, Any],
    t: int,
    history_window: int | None,
    prompt_format: str = "leap",
) -> list[dict[str, str]]:
    steps = trajectory["steps"]
    return student_messages(
        prompt_format,
        env,
        trajectory["task"],
        steps[:t],
        steps[t]["observation"],
        steps[t]["candidate_actions"],
        history_window,
    )


def sft_records_from_trajectories(
    trajectories: Sequence[dict[str, Any]], env: str, history_window: int | None = None
) -> list[SFTRecord]:
    """One record per step, the completion being the step's own reason and action."""
    records: list[SFTRecord] = []
    for trajectory in trajectories:
        for t, step in enumerate(trajectory["steps"]):
            records.append(
                {
                    "prompt": _prompt(env, trajectory, t, history_window),
                    "completion": _assistant(step.get("reason", ""), step["action"]),
                    "game_id": trajectory["game_id"],
                }
            )
    return records


def _corrected_trajectory(
    by_id: dict[str, dict[str, Any]], correction: dict[str, Any]
) -> dict[str, Any]:
    trajectory = by_id.get(correction["game_id"])
    if trajectory is None:
        raise ValueError(f"correction for unknown trajectory {correction['game_id']!r}")
    return trajectory


def _checked_pairs(
    trajectory: dict[str, Any], correction: dict[str, Any]
) -> list[tuple[int, dict[str, Any]]]:
    steps = correction["steps"]
    if len(steps) != len(trajectory["steps"]):
        raise ValueError(
            f"correction of {trajectory['game_id']} has {len(steps)} steps, the trajectory {len(trajectory['steps'])}"
        )
    return list(enumerate(steps))


# which steps of a corrected trajectory are trained: all (``trajectory``), the corrected
# ones only (``corrected``; the kept steps are context), or the steps up to and including
# the first correction (``first``: later states were reached off course, by a policy the
# teacher had already corrected)
TRAINED_STEPS = ("trajectory", "corrected", "first")


# how a corrected trajectory's chat records are laid out (conversation formats):
# ``segments`` (one chat per correction, each re-encoding the trajectory up to it) or
# ``branches`` (one chat per trajectory; each corrected answer a branch off its prefix)
CORRECTION_PACKINGS = ("segments", "branches")


def _check_trained_steps(
    trained_steps: str,
    max_corrections: int | None = None,
    packing: str = "segments",
    capped_verbs: Sequence[str] = (),
) -> None:
    if trained_steps not in TRAINED_STEPS:
        raise ValueError(f"trained_steps must be one of {TRAINED_STEPS}, got {trained_steps!r}")
    if packing not in CORRECTION_PACKINGS:
        raise ValueError(
            f"correction_packing must be one of {CORRECTION_PACKINGS}, got {packing!r}"
        )
    if max_corrections is not None and max_corrections < 1:
        raise ValueError(f"trained_corrections must be at least 1 or null, got {max_corrections}")
    if capped_verbs and (trained_steps != "corrected" or max_corrections is None):
        raise ValueError(
            "capped_correction_verbs needs trained_steps: corrected and trained_corrections "
            f"set, got trained_steps {trained_steps!r}, trained_corrections {max_corrections}"
        )


def untrain_corrections(
    corrections: Sequence[dict[str, Any]], verbs: Sequence[str]
) -> list[dict[str, Any]]:
    """The corrections without the corrected steps whose teacher action is one of ``verbs``
    (``go`` for ``go to shelf 1``; :func:`leap_kalm.llm.parsing.action_verb`): such a step
    becomes a kept step showing the student's own answer, which is what the student did
    and what the later observations followed. With ``trained_steps: corrected`` it is
    context, not a loss target, and it no longer counts towards ``trained_corrections``.
    (With ``trajectory`` or ``first`` a kept step is trained, so those would train the
    student's mistake: callers allow ``verbs`` with ``corrected`` only.) The input is
    not changed."""
    from leap_kalm.llm.parsing import action_verb

    skipped = {v.strip().lower() for v in verbs}
    out = []
    for correction in corrections:
        steps = []
        for step in correction["steps"]:
            if step["is_corrected"] and action_verb(step["corrected_action"]) in skipped:
                step = {
                    **step,
                    "is_corrected": False,
                    "corrected_reason": step["original_reason"],
                    "corrected_action": step["original_action"],
                }
            steps.append(step)
        out.append({**correction, "steps": steps})
    return out


def uncap_invalid_corrections(
    trajectories: Sequence[dict[str, Any]], corrections: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The corrections with each corrected step whose student action was not among that
    step's candidates (``go to drawer 4`` in a room with three drawers: "Nothing
    happens.") marked ``uncapped``: :func:`_last_trained` trains it wherever it falls and
    does not count it towards ``trained_corrections``. A step without a candidate list is
    not judged. The input is not changed."""
    return _mark_invalid_corrections(trajectories, corrections, "uncapped")


def _mark_invalid_corrections(
    trajectories: Sequence[dict[str, Any]],
    corrections: Sequence[dict[str, Any]],
    mark: str,
    needs_next_step: bool = False,
) -> list[dict[str, Any]]:
    """The corrections with ``mark: True`` on each corrected step whose student action was
    not among that step's candidates (with ``needs_next_step``: only where the student's
    trajectory goes on after it). A step without a candidate list is not judged; the
    input is not changed."""
    by_id = {t["game_id"]: t for t in trajectories}
    out = []
    for correction in corrections:
        trajectory = _corrected_trajectory(by_id, correction)
        lived_steps = trajectory["steps"]
        steps = []
        for t, step in _checked_pairs(trajectory, correction):
            if (
                step["is_corrected"]
                and no_candidate(lived_steps[t])
                and (not needs_next_step or t + 1 < len(lived_steps))
            ):
                step = {**step, mark: True}
            steps.append(step)
        out.append({**correction, "steps": steps})
    return out


def invalid_corrections_as_recovery(
    trajectories: Sequence[dict[str, Any]], corrections: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The corrections with each corrected step whose student action was not among that
    step's candidates, and after which the student's trajectory goes on, marked
    ``recovery``: its teacher answer is trained *after* the student's action and the
    observation it got (in ALFWorld "Nothing happens.": an action that is no candidate
    changes nothing, so the state is the one the teacher corrected), not in its place.

    The teacher's critique ("'go to drawer 4' is not a candidate, so nothing happens.")
    then names an action the chat shows. Trained in place of that action, it names one the
    student never sees, usually the next in a run of invalid ones (``go to drawer 5``
    after ``go to drawer 4`` got "Nothing happens."), and the student learns to invent
    it: the quick profile's iteration 2 wrote the critique in 252 of 1,177 evaluation
    steps, 210 of them after a real "Nothing happens." yet naming its own last action
    in 5, and 185 of the 252 answers matched no candidate. A step without a candidate
    list, and the last step of a trajectory, are not marked. The input is not changed."""
    return _mark_invalid_corrections(trajectories, corrections, "recovery", needs_next_step=True)


def _after_original(
    lived_steps: Sequence[dict[str, Any]], t: int, answer: tuple[str, str]
) -> dict[str, Any]:
    """Step ``t`` again, as the student met it after its own action there: the next
    observation, step ``t``'s candidates, ``answer`` (a ``recovery`` step)."""
    reason, action = answer
    return {
        **lived_steps[t],
        "observation": lived_steps[t + 1]["observation"],
        "reason": reason,
        "action": action,
    }


def _last_trained(
    steps: Sequence[dict[str, Any]], max_corrections: int | None, capped_verbs: Sequence[str] = ()
) -> tuple[int | None, set[int]]:
    """Where the cap cuts a corrected trajectory: the step of its ``max_corrections``-th
    correction, past which nothing is trained (``None`` where there is no such cut: no cap,
    or fewer corrections), and the later corrected steps trained all the same. Without
    ``capped_verbs`` every correction counts and nothing past the cut is trained; with
    them only corrections whose teacher action has one of these verbs count, and a later
    correction with another verb is still trained. A step marked ``uncapped``
    (:func:`uncap_invalid_corrections`) never counts and is always trained."""
    from leap_kalm.llm.parsing import action_verb

    if max_corrections is None:
        return None, set()
    capped = {v.strip().lower() for v in capped_verbs}
    corrected = [t for t, step in enumerate(steps) if step["is_corrected"]]
    counted = [
        t
        for t in corrected
        if not steps[t].get("uncapped")
        and (not capped or action_verb(steps[t]["corrected_action"]) in capped)
    ]
    if len(counted) <= max_corrections:
        return None, set()
    cut = counted[max_corrections - 1]
    return cut, {t for t in corrected if t > cut and t not in counted}


def sft_records_from_corrections(
    trajectories: Sequence[dict[str, Any]],
    corrections: Sequence[dict[str, Any]],
    env: str,
    history_window: int | None = None,
    trained_steps: str = "trajectory",
    max_corrections: int | None = None,
    capped_verbs: Sequence[str] = (),
) -> list[SFTRecord]:
    """One record per step of each corrected trajectory (``trained_steps: corrected``: per
    corrected step only; ``first``: the steps up to the first correction, none without
    one): the student's context, the teacher's answer. ``max_corrections``: nothing after
    a trajectory's ``max_corrections``-th correction is trained (``capped_verbs``: see
    :func:`_last_trained`)."""
    _check_trained_steps(trained_steps, max_corrections, capped_verbs=capped_verbs)
    by_id = {t["game_id"]: t for t in trajectories}
    records: list[SFTRecord] = []
    for correction in corrections:
        trajectory = _corrected_trajectory(by_id, correction)
        pairs = list(_checked_pairs(trajectory, correction))
        first = next((t for t, step in pairs if step["is_corrected"]), -1)
        cut, past_cut = _last_trained(correction["steps"], max_corrections, capped_verbs)
        for t, step in pairs:
            if trained_steps == "first" and t > first:
                break
            if trained_steps == "corrected" and not step["is_corrected"]:
                continue
            if cut is not None and t > cut and t not in past_cut:
                continue
            if step.get("recovery"):  # after the student's own action and what it got
                lived = trajectory["steps"]
                prompt = student_messages(
                    "leap", env, trajectory["task"], lived[: t + 1], lived[t + 1]["observation"],
                    lived[t]["candidate_actions"], history_window,
                )  # fmt: skip
            else:
                prompt = _prompt(env, trajectory, t, history_window)
            records.append(
                {
                    "prompt": prompt,
                    "completion": _assistant(step["corrected_reason"], step["corrected_action"]),
                    "game_id": trajectory["game_id"],
                }
            )
    return records


def dpo_pairs_from_corrections(
    trajectories: Sequence[dict[str, Any]],
    corrections: Sequence[dict[str, Any]],
    env: str,
    history_window: int | None = None,
    prompt_format: str = "leap",
) -> list[PreferencePair]:
    """One pair per corrected step: chosen = teacher's correction, rejected = the student's
    original; the prompt is what the student saw at that step in ``prompt_format`` (with
    ``conversation``, its own chat up to that step)."""
    by_id = {t["game_id"]: t for t in trajectories}
    pairs: list[PreferencePair] = []
    for correction in corrections:
        trajectory = _corrected_trajectory(by_id, correction)
        for t, step in _checked_pairs(trajectory, correction):
            if not step["is_corrected"]:
                continue
            pairs.append(
                {
                    "prompt": _prompt(env, trajectory, t, history_window, prompt_format),
                    "chosen": _assistant(step["corrected_reason"], step["corrected_action"]),
                    "rejected": _assistant(step["original_reason"], step["original_action"]),
                    "game_id": trajectory["game_id"],
                }
            )
    return pairs


def contrast_pairs_from_kept_steps(
    trajectories: Sequence[dict[str, Any]],
    corrections: Sequence[dict[str, Any]],
    env: str,
    history_window: int | None = None,
    prompt_format: str = "leap",
    ratio: float = 1.0,
    seed: int = 0,
) -> list[PreferencePair]:
    """Pairs that prefer the student's own step over an action the corrections prefer
    elsewhere, so that DPO sees each preferred action on both sides.

    Correction pairs alone are one-sided when the student never took the action the
    teacher keeps asking for (WebShop: 78 of 119 pairs prefer ``click[< prev]``, 6 the
    other way; the student then went back from every item). For each action ``A`` the
    corrections chose ``n`` times, up to ``round(n * ratio)`` contrast pairs take a step the
    teacher approved where ``A`` was a candidate and the student did something else:
    chosen = the student's answer there, rejected = ``A`` with the reason of one of the
    corrections that chose it. Approved steps are every step of a successful rollout and
    the steps of a corrected rollout before its first correction; they are drawn in a
    fixed order from ``seed``.
    """
    if ratio < 0:
        raise ValueError(f"contrast ratio must be >= 0, got {ratio}")
    rejected_answers: dict[str, list[str]] = {}
    for correction in corrections:
        for step in correction["steps"]:
            if step["is_corrected"]:
                rejected_answers.setdefault(step["corrected_action"], []).append(
                    step["corrected_reason"]
                )
    if ratio == 0 or not rejected_answers:
        return []
    corrections_by_id = {c["game_id"]: c for c in corrections}
    approved: list[tuple[dict[str, Any], int]] = []
    for trajectory in trajectories:
        correction = corrections_by_id.get(trajectory["game_id"])
        if correction is None and not trajectory.get("success"):
            continue  # failed and not corrected: nothing says its steps were right
        n_steps = len(trajectory["steps"])
        if correction is not None:  # the steps before its first correction
            pairs = _checked_pairs(trajectory, correction)
            n_steps = next((t for t, step in pairs if step["is_corrected"]), n_steps)
        approved += [(trajectory, t) for t in range(n_steps)]
    rng = random.Random(seed)
    rng.shuffle(approved)
    contrasts: list[PreferencePair] = []
    for action, reasons in sorted(rejected_answers.items()):
        wanted = round(len(reasons) * ratio)
        for trajectory, t in approved:
            if wanted == 0:
                break
            step = trajectory["steps"][t]
            if step["action"] == action or action not in step["candidate_actions"]:
                continue
            contrasts.append(
                {
                    "prompt": _prompt(env, trajectory, t, history_window, prompt_format),
                    "chosen": _assistant(step.get("reason", ""), step["action"]),
                    "rejected": _assistant(reasons[wanted % len(reasons)], action),
                    "game_id": trajectory["game_id"],
                }
            )
            wanted -= 1
    return contrasts


def _with_answers(
    steps: Sequence[dict[str, Any]], answers: Sequence[tuple[str, str]]
) -> list[dict[str, Any]]:
    return [
        {**step, "reason": reason, "action": action}
        for step, (reason, action) in zip(steps, answers, strict=True)
    ]


def _loss_turns(first: int, last: int) -> list[int]:
    """Message indices of the assistant turns of steps ``first..last`` (system is message 0,
    step ``t``'s observation message ``2t + 1`` and its answer ``2t + 2``)."""
    return [2 * t + 2 for t in range(first, last + 1)]


def conversation_records_from_trajectories(
    trajectories: Sequence[dict[str, Any]], env: str, prompt_format: str = "conversation"
) -> list[dict[str, Any]]:
    """One record per trajectory: the whole episode as one chat (``prompt_format``, one of
    the conversation formats), loss on every answer.

    Records are ``{messages, loss_turns, game_id}``; ``loss_turns`` lists the indices of
    the assistant messages that are trained.
    """
    options = conversation_options(prompt_format)
    return [
        {
            "messages": build_conversation(env, trajectory["task"], trajectory["steps"], **options),
            "loss_turns": _loss_turns(0, len(trajectory["steps"]) - 1),
            "game_id": trajectory["game_id"],
        }
        for trajectory in trajectories
        if trajectory["steps"]
    ]


def conversation_records_from_corrections(
    trajectories: Sequence[dict[str, Any]],
    corrections: Sequence[dict[str, Any]],
    env: str,
    trained_steps: str = "trajectory",
    prompt_format: str = "conversation",
    max_corrections: int | None = None,
    packing: str = "segments",
    capped_verbs: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The teacher's answers as chats that stay true to what the student observed.

    Observations after a corrected step followed the student's *original* action, so a
    trajectory is cut into segments ending at each corrected step: a segment's chat holds
    the steps before it as context (the teacher's answers where the action was kept, the
    original answer where it was corrected) and trains on the teacher's answers of its
    own steps, the corrected one last. Steps after the last correction are trained in a
    final segment. Each step is trained exactly once. With ``trained_steps: corrected``
    a segment trains only its corrected step (the kept steps are context), and nothing
    after the last correction is trained; with ``trained_steps: first`` only the first
    segment is trained (a trajectory without a correction gives no record).

    ``max_corrections``: a trajectory with more corrections is trained up to and including
    its ``max_corrections``-th, in that many segments (``capped_verbs``: only corrections
    with these verbs count and are cut, see :func:`_last_trained`). Every segment
    re-encodes the trajectory up to its end, so a student that went off course early
    and was corrected at nearly every later step costs a quadratic number of tokens: on
    the learn profile's iteration 1 (30 corrected rollouts of 20 steps), 281 tokens per
    supervised action with every segment, 124 with the first three (481 of the 600
    actions).

    ``packing: branches`` trains the same answers in the same contexts from one record per
    trajectory (:func:`_branch_record`), so a correction costs its own tokens only.

    A corrected step marked ``recovery`` (:func:`invalid_corrections_as_recovery`) keeps
    the student's answer as context and trains the teacher's after the observation it
    got (segments only).
    """
    _check_trained_steps(trained_steps, max_corrections, packing, capped_verbs)
    options = conversation_options(prompt_format)
    by_id = {t["game_id"]: t for t in trajectories}
    records: list[dict[str, Any]] = []
    for correction in corrections:
        trajectory = _corrected_trajectory(by_id, correction)
        steps = [step for _, step in _checked_pairs(trajectory, correction)]
        teacher = [(s["corrected_reason"], s["corrected_action"]) for s in steps]
        context = [
            (s["original_reason"], s["original_action"]) if s["is_corrected"] else answer
            for s, answer in zip(steps, teacher, strict=True)
        ]
        ends = [t for t, s in enumerate(steps) if s["is_corrected"]]
        cut, past_cut = _last_trained(steps, max_corrections, capped_verbs)
        if packing == "branches":
            if any(s.get("recovery") for s in steps):
                raise ValueError(
                    "invalid_corrections_as_recovery needs correction_packing: segments "
                    f"(a recovery step adds a turn a branch cannot hold), game {trajectory['game_id']!r}"
                )
            trained = ends[:1] if trained_steps == "first" else ends
            trained = [t for t in trained if cut is None or t <= cut or t in past_cut]
            record = _branch_record(
                env, trajectory, teacher, context, trained, cut, trained_steps, options
            )
            records.extend([record] if record else [])
            continue
        if trained_steps == "first":
            ends = ends[:1]
        elif cut is not None:
            ends = [t for t in ends if t <= cut or t in past_cut]
        elif trained_steps == "trajectory" and (not ends or ends[-1] != len(steps) - 1):
            ends.append(len(steps) - 1)
        first = 0
        for end in ends:
            trained_from = end if trained_steps == "corrected" else first
            if steps[end].get("recovery"):  # the student's action stays, the answer follows
                answers = context[:first] + teacher[first:end] + [context[end]]
                shown = _with_answers(trajectory["steps"][: end + 1], answers)
                shown.append(_after_original(trajectory["steps"], end, teacher[end]))
                loss_turns = _loss_turns(trained_from, end - 1) + _loss_turns(end + 1, end + 1)
            else:
                answers = context[:first] + teacher[first : end + 1]
                shown = _with_answers(trajectory["steps"][: end + 1], answers)
                loss_turns = _loss_turns(trained_from, end)
            records.append(
                {
                    "messages": build_conversation(env, trajectory["task"], shown, **options),
                    "loss_turns": loss_turns,
                    "game_id": trajectory["game_id"],
                }
            )
            first = end + 1
    return records


def _branch_record(
    env: str,
    trajectory: dict[str, Any],
    teacher: Sequence[tuple[str, str]],
    context: Sequence[tuple[str, str]],
    corrected: Sequence[int],
    cut: int | None,
    trained_steps: str,
    options: dict[str, Any],
) -> dict[str, Any] | None:
    """One corrected trajectory as one record with branches (``corrected``: the trained
    corrected steps; ``cut``: the last step trained, ``None`` where no cap cuts it).

    The chat is the trajectory as the student lived it (the teacher's answer where it kept
    the student's action, the student's own where it corrected it: a segment's context).
    The kept steps that are trained are ``loss_turns``; each trained correction is a
    ``branches`` entry ``{turn, message}``: the teacher's answer in place of assistant turn
    ``turn``, seeing only the chat before that turn. So it trains what the segments train
    (each answer once, in the same context) for the tokens of one trajectory plus the
    corrections. ``None`` when nothing is trained (no correction, with ``corrected`` or
    ``first``).
    """
    steps = trajectory["steps"]
    if trained_steps == "trajectory":
        last = cut if cut is not None else len(steps) - 1
    elif corrected:
        last = corrected[-1]
    else:
        return None
    kept: list[int] = []
    if trained_steps == "trajectory":
        kept = [t for t in range(last + 1) if t not in corrected]
    elif trained_steps == "first":
        kept = list(range(corrected[0]))
    lived = _with_answers(steps[: last + 1], context[: last + 1])
    taught = _with_answers(steps[: last + 1], teacher[: last + 1])
    messages = build_conversation(env, trajectory["task"], lived, **options)
    teacher_messages = build_conversation(env, trajectory["task"], taught, **options)
    return {
        "messages": messages,
        "loss_turns": [2 * t + 2 for t in kept],
        "branches": [
            {"turn": 2 * t + 2, "message": teacher_messages[2 * t + 2]} for t in corrected
        ],
        "game_id": trajectory["game_id"],
    }


def split_by_trajectory(
    records: Sequence[dict[str, Any]], val_fraction: float = 0.15, seed: int = 0
) -> tuple[list, list]:
    """Train/validation split that keeps every record of one trajectory (``game_id``) together."""
    ids = sorted({r["game_id"] for r in records})
    rng = random.Random(seed)
    rng.shuffle(ids)
    n_val = round(len(ids) * val_fraction)
    if len(ids) > 1:
        n_val = min(max(n_val, 1 if val_fraction > 0 else 0), len(ids) - 1)
    val_ids = set(ids[:n_val])
    train = [r for r in records if r["game_id"] not in val_ids]
    val = [r for r in records if r["game_id"] in val_ids]
    return train, val


def supervised_actions(record: dict[str, Any]) -> int:
    """How many actions a record trains: its ``loss_turns`` and ``branches`` (a
    whole-episode chat), else 1 (a per-step record)."""
    return len(record.get("loss_turns") or ()) + len(record.get("branches") or ()) or 1


def aggregate_dagger(
    per_iteration: Sequence[Sequence[dict[str, Any]]],
    seed: int = 0,
    cap: int | None = None,
    expert_share: int | None = None,
) -> list[dict[str, Any]]:
    """DAgger aggregation: iterations 0..i, each subsampled to the same number of
    *supervised actions* (the smallest iteration's), so that every iteration weighs equally.

    Per-step records train one action each, so this is the same number of records. A
    whole-episode chat trains all its answers, a correction segment only its own, so an
    iteration of expert episodes is balanced against the same number of corrected actions,
    not the same number of records. Records are drawn in a seeded order (per iteration)
    until the share is reached, so the result is the same on every run. ``cap`` (when more
    than one iteration is aggregated) bounds every iteration's share of actions further,
    and so the training cost. ``expert_share`` (when more than one iteration is
    aggregated) decouples iteration 0, the expert episodes: it contributes up to that many
    actions, and the balance (and ``cap``) applies among the later iterations only.
    """
    non_empty = [(i, list(records)) for i, records in enumerate(per_iteration) if records]
    if not non_empty:
        return []
    for name, value in (
        ("dagger_actions_per_iteration", cap),
        ("dagger_expert_actions", expert_share),
    ):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    several = len(non_empty) > 1
    decoupled = several and expert_share is not None and non_empty[0][0] == 0
    balanced = non_empty[1:] if decoupled else non_empty
    share = min(sum(map(supervised_actions, records)) for _, records in balanced)
    if cap is not None and several:
        share = min(share, cap)
    out: list[dict[str, Any]] = []
    for index, records in non_empty:
        quota = expert_share if decoupled and index == 0 else share
        rng = random.Random(zlib.crc32(f"{seed}:{index}".encode()))
        weights = [supervised_actions(r) for r in records]
        if all(w == 1 for w in weights):
            chosen = rng.sample(range(len(records)), min(quota, len(records)))
        else:
            chosen, total = [], 0
            for i in rng.sample(range(len(records)), len(records)):
                if total >= quota:
                    break
                chosen.append(i)
                total += weights[i]
        out.extend({**records[i], "iteration_source": index} for i in sorted(chosen))
    return out


def dagger_training_set(
    pool: Sequence[dict[str, Any]],
    iteration: int,
    seed: int,
    val_fraction: float,
    cap: int | None = None,
    expert_share: int | None = None,
) -> list[dict[str, Any]]:
    """Iteration ``iteration``'s training records from the DAgger pool: iterations
    ``0..iteration`` aggregated (:func:`aggregate_dagger`, seed ``seed + iteration``, at
    most ``cap`` supervised actions each from iteration 1 on) and
    split by trajectory (:func:`split_by_trajectory`, seed ``seed``); each record carries
    ``split`` (``train``/``val``)."""
    by_iteration = [[r for r in pool if r["iteration"] == i] for i in range(iteration + 1)]
    merged = aggregate_dagger(
        by_iteration, seed=seed + iteration, cap=cap, expert_share=expert_share
    )
    train, val = split_by_trajectory(merged, val_fraction, seed=seed)
    return [{**r, "split": "train"} for r in train] + [{**r, "split": "val"} for r in val]


def sft_records(
    prompt_format: str,
    env: str,
    history_window: int | None,
    trajectories: Sequence[dict[str, Any]],
    corrections: Sequence[dict[str, Any]] | None = None,
    trained_steps: str = "trajectory",
    max_corrections: int | None = None,
    packing: str = "segments",
    capped_verbs: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """SFT records in ``prompt_format``: from annotated trajectories (``corrections`` is
    ``None``: behaviour cloning) or from the teacher's corrections of them (every step of
    a corrected trajectory, or with ``trained_steps: corrected`` the corrected ones;
    nothing after the ``max_corrections``-th correction of a trajectory, or with
    ``capped_verbs`` after its ``max_corrections``-th correction with one of these verbs
    except corrections with another verb; ``packing``: how
    a conversation format lays out a corrected chat, see
    :func:`conversation_records_from_corrections`)."""
    if prompt_format in CONVERSATION_FORMATS:
        if corrections is None:
            return conversation_records_from_trajectories(trajectories, env, prompt_format)
        return conversation_records_from_corrections(
            trajectories, corrections, env, trained_steps, prompt_format, max_corrections,
            packing, capped_verbs,
        )  # fmt: skip
    _check_format(prompt_format)
    if corrections is None:
        return sft_records_from_trajectories(trajectories, env, history_window)
    return sft_records_from_corrections(
        trajectories, corrections, env, history_window, trained_steps, max_corrections,
        capped_verbs,
    )  # fmt: skip


def dpo_pairs(
    prompt_format: str,
    env: str,
    history_window: int | None,
    trajectories: Sequence[dict[str, Any]],
    corrections: Sequence[dict[str, Any]],
    contrast_ratio: float = 0.0,
    seed: int = 0,
) -> list[PreferencePair]:
    """Preference pairs (corrected vs original) in ``prompt_format``, and with
    ``contrast_ratio`` > 0 the contrast pairs of :func:`contrast_pairs_from_kept_steps`."""
    _check_format(prompt_format)
    pairs = dpo_pairs_from_corrections(
        trajectories, corrections, env, history_window, prompt_format
    )
    contrasts = contrast_pairs_from_kept_steps(
        trajectories, corrections, env, history_window, prompt_format, contrast_ratio, seed
    )
    return pairs + contrasts


def _check_format(prompt_format: str) -> None:
    from leap_kalm.llm.prompts import PROMPT_FORMATS

    if prompt_format not in PROMPT_FORMATS:
        raise ValueError(f"prompt_format must be one of {PROMPT_FORMATS}, got {prompt_format!r}")

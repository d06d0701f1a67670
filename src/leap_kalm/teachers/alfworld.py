"""Scripted privileged teacher for ALFWorld.

The teacher replays the student's own actions in the engine and asks the planner for the
optimal plan *from the state the student actually reached*. What it corrects depends on
``corrects``:

* ``mistakes`` (default): only actions that are wrong *given what the student could
  know*. An action is kept when it shortens the optimal plan (progress), or when the
  plan's next step is a search the student cannot know to make (going to the place where
  an object it has never seen really is) and the student's own action also explores (goes
  somewhere it has not been, opens something it has not looked into, or closes and looks
  as the expert demonstrations do). Everything else — invalid actions, revisits, loops,
  taking or placing the wrong thing, walking past the object it has seen — is corrected
  to the plan's next action.
  Which action a corrected *search* step gets is ``searches``: ``plan`` gives the plan's
  next action, which is "go to where the object really is"; ``expert`` gives what the
  handcoded expert that recorded the demonstrations would do next from the student's
  own state (its search by object priors, in its fixed order, over places the student
  has not yet checked), so a search correction never rests on where the unseen object
  really is (DAgger's expert labels). Measured on the learning profile, ``plan`` search
  corrections taught the student object-to-place priors it then applied to rooms
  that lack the place (``docs/results.md``).
* ``plan``: every action that differs from the plan's next action. Measured on the
  learning profile, this taught the student to answer ``go to`` everywhere: once off
  course, the plan's next action is nearly always "go where the object really is", which
  no hint-only reason makes learnable (``docs/results.md``).

The reason is hint-only, as LEAP asks: it justifies the action with common sense (what
kind of place holds what kind of object, what an appliance does, why the student's own
action did not help) and never states a privileged fact such as where an unseen object
is. ``realizability`` (0–100) is the ablation knob: the share of corrected reasons that
do reveal the privileged location.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from leap_kalm.llm.parsing import match_candidate
from leap_kalm.schemas import Correction
from leap_kalm.teachers.base import ScriptedTeacher

SEARCHES = ("expert", "plan")

_PURPOSE = {
    "pick_clean_then_place_in_recep": ("clean", "cleaned", "clean it"),
    "pick_heat_then_place_in_recep": ("hot", "heated", "heat it"),
    "pick_cool_then_place_in_recep": ("cool", "cooled", "cool it"),
}


def _kind(name: str) -> str:
    """``cabinet 3`` → ``cabinet``."""
    return re.sub(r"\s+\d+$", "", name.strip())


def replay_plans(game_path: str, actions: list[str]) -> list[list[str]]:
    """The planner's optimal plan before each of ``actions`` and after the last one
    (``len(actions) + 1`` plans), replaying them in the engine."""
    from leap_kalm.envs.alfworld.engine import start_engine
    from leap_kalm.envs.alfworld.env import normalize_command

    engine = start_engine(game_path, policy_commands=True)
    try:
        state = engine.reset()
        plans = []
        for action in actions:
            plans.append(list(state.get("policy_commands") or []))
            state, _, _ = engine.step(normalize_command(action))
        plans.append(list(state.get("policy_commands") or []))
        return plans
    finally:
        engine.close()


_PICK = re.compile(r"You pick up the (.+?) from ")
_PLACE = re.compile(r"You (?:move|put) the (.+?) (?:to|in|on) ")
_PROCESS = re.compile(r"You (?:heat|cool|clean) the (.+?) using ")
_CONTENTS = re.compile(
    r"(?:You arrive at (.+?)\. On the .+?, you see (.+?)\.|You open the (.+?)\. The .+? is open\. In it, you see (.+?)\.)"
)


@dataclass
class _SeenState:
    """What the student itself could know at a step, read from its own observations only."""

    holding: str | None = None
    processed: bool = False
    placed: int = 0
    visited: set[str] = field(default_factory=set)
    contents: dict[str, str] = field(default_factory=dict)

    def observe(self, obs: str) -> None:
        """Update from the next observation of the trajectory."""
        if match := _PICK.search(obs):
            self.holding, self.processed = match.group(1), False
        elif _PLACE.search(obs):
            self.holding, self.placed = None, self.placed + 1
        elif _PROCESS.search(obs):
            self.processed = True
        if match := _CONTENTS.search(obs):
            place = match.group(1) or match.group(3)
            self.visited.add(place)
            self.contents[place] = match.group(2) or match.group(4)
        elif obs.startswith("You arrive at "):
            self.visited.add(obs[len("You arrive at ") :].split(".", 1)[0])

    def seen_at(self, place: str, obj: str) -> bool:
        return re.search(rf"\b{re.escape(obj)} \d+", self.contents.get(place, "")) is not None

    def holds_other(self, obj: str) -> str | None:
        """What the student holds when it is not of the task's kind ``obj`` (None when
        its hand is empty or holds what the task needs, or the kind is unknown)."""
        if (
            not self.holding
            or obj == "object"
            or re.fullmatch(rf"{re.escape(obj)} \d+", self.holding)
        ):
            return None
        return self.holding


@dataclass(frozen=True)
class _TaskView:
    """The parts of the task a reason may use: object kind, purpose, destination and appliance names."""

    obj: str
    purpose: tuple | None
    destinations: set
    appliances: set
    lamp: str | None
    target: dict | None  # privileged: only for the realizability ablation

    @classmethod
    def from_privileged(cls, privileged: dict[str, Any]) -> _TaskView:
        objects = privileged.get("essential_objects", [])
        targets = [e for e in objects if e.get("role") == "target"]
        lamps = [e for e in objects if e.get("role") == "toggle"]
        return cls(
            obj=targets[0]["type"] if targets else "object",
            purpose=_PURPOSE.get(privileged.get("task_type", "")),
            destinations={
                c["name"]
                for c in privileged.get("critical_receptacles", [])
                if c["role"] == "destination"
            },
            appliances=set(privileged.get("appliances", [])),
            lamp=lamps[0]["type"] if lamps else None,
            target=targets[0] if targets else None,
        )


def _why(action: str, task: _TaskView, state: _SeenState) -> str:
    """A short, hint-only reason for ``action`` given what the student has seen so far."""
    obj, purpose = task.obj, task.purpose
    other = state.holds_other(obj)  # a wrong object in hand: it is not "the {obj} in hand"
    if other and action.startswith(("move ", "put ")):
        return f"The {other} is not what the task needs; put it down to free a hand for the {obj}."
    if action.startswith("go to "):
        place = action[len("go to ") :]
        kind = _kind(place)
        if state.holding and not other:
            if purpose and not state.processed and place in task.appliances:
                return (
                    f"The {obj} must be {purpose[0]} first, and a {kind} can make it {purpose[0]}."
                )
            if place in task.destinations:
                return f"With the {obj} in hand, go to {place}, where the task wants it."
            if task.lamp:
                return f"With the {obj} in hand, find a {task.lamp}; a {kind} may have one."
            return f"With the {obj} in hand, {place} is the next place to go."
        if state.seen_at(place, obj):
            return f"A {obj} was seen at {place}, so go back for it."
        if place in state.visited:
            return f"{place} was checked before, but it is worth another look."
        if state.placed and place in task.destinations:
            return f"One {obj} is placed; find another {obj}, starting with {place}."
        return f"The {obj} is not found yet; a {kind} is a likely place for it."
    if action.startswith("take "):
        taken = action[len("take ") :].split(" from ")[0]
        return f"The task needs a {obj}, and {taken} is right here, so take it."
    if action.startswith("open "):
        return f"{action[len('open ') :]} is closed; open it to see inside."
    if action.startswith("close "):
        if state.holding and not other:
            return f"The {obj} is in hand, so close {action[len('close ') :]} and move on."
        return f"Nothing needed is in {action[len('close ') :]}, so close it and move on."
    if action.startswith(("move ", "put ")):
        return f"The {obj} is ready, so put it where the task asks."
    if action.split(" ", 1)[0] in ("heat", "cool", "clean") and purpose:
        return f"The task asks for a {purpose[0]} {obj}, so {purpose[2]} here."
    if action.startswith("use "):
        return f"Turn on the light to look at the {obj} under it."
    if action.startswith("examine "):
        return "Examining it shows what is there."
    if action == "look":
        return "Looking around lists the places still to search."
    if action == "inventory":
        return "Checking the inventory shows what is in hand."
    return f"This is what the task needs next for the {obj}."


def _searching(best: str, task: _TaskView, state: _SeenState) -> bool:
    """Whether the plan's next action ``best`` goes to a place the student has no reason to
    pick: not where the task sends what it holds, not where it saw what it looks for."""
    if not best.startswith("go to "):
        return False
    place = best[len("go to ") :]
    if (
        state.holding
        and not state.holds_other(task.obj)
        and (place in task.destinations or place in task.appliances)
    ):
        return False
    return not any(state.seen_at(place, kind) for kind in (task.obj, task.lamp) if kind)


def _explores(action: str, state: _SeenState) -> bool:
    """Whether ``action`` belongs to a search: a place not visited, a receptacle not looked
    into, or what the expert itself does while searching (closing what it opened, looking)."""
    if action == "look" or action.startswith("close "):
        return True
    if action.startswith("go to "):
        return action[len("go to ") :] not in state.visited
    if action.startswith("open "):
        return action[len("open ") :] not in state.contents
    return False


@dataclass
class ScriptedAlfWorldTeacher(ScriptedTeacher):
    """Privileged teacher for ALFWorld driven by the engine's planner.

    Attributes:
        realizability: Percentage (0–100) of corrected reasons allowed to reveal the
            privileged location of the target object (0 = LEAP's hint-only teacher).
        games: ``game_id`` → games-index entry of every game it may correct (the planner
            replays the student's actions in the entry's ``game.tw-pddl``).
        corrects: ``mistakes`` (what the student could have known better) or ``plan``
            (every step off the optimal plan); see the module docstring.
        searches: What a corrected search step becomes with ``corrects: mistakes``:
            ``expert`` (the demonstrations' expert's next search action from the
            student's state) or ``plan`` (the planner's: where the object really is).
        critiques: Whether a corrected reason opens with what was wrong with the
            student's own action (``'go to drawer 4' is not a candidate, so nothing
            happens.``), as LEAP's teacher prompt asks; false leaves only the reason for
            the corrected action, which is what the student is trained to write.
    """

    searches: str = "plan"
    critiques: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.searches not in SEARCHES:
            raise ValueError(f"searches must be one of {SEARCHES}, got {self.searches!r}")

    # -- interface ---------------------------------------------------------------
    def annotate(self, trajectory: dict[str, Any], privileged: dict[str, Any]) -> list[str]:
        """A hint-only reason for every step of an expert trajectory."""
        steps = trajectory["steps"]
        return self._reasons(
            trajectory, privileged, [s["action"] for s in steps], [None] * len(steps)
        )

    def _keeps(
        self,
        original: str,
        previous: str | None,
        plans: tuple[list[str], list[str]],
        best: str,
        seen: _SeenState,
        task: _TaskView,
    ) -> bool:
        """Whether the student's valid ``original`` stands (``previous``: its action before;
        ``plans``: the optimal plans before and after it; ``best``: the plan's next action)."""
        if original == best:
            return True
        if self.corrects == "plan":
            return False
        before, after = plans
        searching = (
            original != previous and _searching(best, task, seen) and _explores(original, seen)
        )
        return len(after) < len(before) or searching

    def correct(self, trajectory: dict[str, Any], privileged: dict[str, Any]) -> Correction:
        """Correct a failed student trajectory step by step (see module docstring)."""
        game = trajectory["game_id"]
        if game not in self.games:
            raise KeyError(
                f"the scripted ALFWorld teacher has no game file for {game!r}: build it with "
                "the games index that holds the trajectory's game (make_teacher(..., games=...))"
            )
        steps = trajectory["steps"]
        actions = [s["action"] for s in steps]
        plans = replay_plans(self.games[game]["path"], actions)
        searches = self._search_actions(game, actions)
        task, seen = _TaskView.from_privileged(privileged), _SeenState()
        chosen = []
        for t, step in enumerate(steps):
            seen.observe(step["observation"])
            plan, candidates, original = plans[t], step["candidate_actions"], step["action"]
            best = self._admissible(plan[0], candidates) if plan else None
            fix = best
            if best is not None and searches[t] is not None and _searching(best, task, seen):
                fix = searches[t]  # the expert's search, not the unseen object's place
            if original in candidates and (
                best is None
                or original == fix
                or self._keeps(
                    original,
                    steps[t - 1]["action"] if t else None,
                    (plan, plans[t + 1]),
                    best,
                    seen,
                    task,
                )
            ):
                chosen.append((original, False))
            else:  # nothing admissible to suggest: the first candidate
                chosen.append((fix or candidates[0], True))
        reasons = self._reasons(
            trajectory,
            privileged,
            [action for action, _ in chosen],
            [s["action"] if fixed else None for s, (_, fixed) in zip(steps, chosen, strict=True)],
        )
        corrected_steps = [
            {
                "timestep": t,
                "original_observation": step["observation"],
                "original_reason": step.get("reason", ""),
                "original_action": step["action"],
                "corrected_reason": reason,
                "corrected_action": action,
                "is_corrected": bool(is_corrected),
            }
            for t, (step, (action, is_corrected), reason) in enumerate(
                zip(steps, chosen, reasons, strict=True)
            )
        ]
        return {
            "game_id": trajectory["game_id"],
            "summary": self._summary(trajectory, corrected_steps),
            "steps": corrected_steps,
        }

    def _search_actions(self, game: str, actions: list[str]) -> list[str | None]:
        """The expert's proposal before each action (``searches: expert`` with
        ``corrects: mistakes``), else no proposals."""
        if self.searches != "expert" or self.corrects != "mistakes":
            return [None] * len(actions)
        from leap_kalm.envs.alfworld.expert import expert_proposals

        return expert_proposals(self.games[game]["path"], actions, seed=zlib.crc32(game.encode()))

    # -- reasons -----------------------------------------------------------------
    @staticmethod
    def _admissible(action: str, candidates: list[str]) -> str | None:
        matched, repair, _ = match_candidate(action, candidates, fuzzy_cutoff=95)
        return matched if repair in ("exact", "normalized", "fuzzy") else None

    def _reasons(
        self,
        trajectory: dict[str, Any],
        privileged: dict[str, Any],
        actions: list[str],
        originals: list[str | None],
    ) -> list[str]:
        """The reason for each step's ``action``; a step with an ``original`` was corrected.

        The task view is read once and the student's seen-state is updated step by step.
        """
        steps = trajectory["steps"]
        task = _TaskView.from_privileged(privileged)
        state = _SeenState()
        reasons = []
        for t, (step, action, original) in enumerate(zip(steps, actions, originals, strict=True)):
            state.observe(step["observation"])
            parts = []
            if original is not None and self.critiques:
                parts.append(self._why_not(steps, t, original))
            parts.append(_why(action, task, state))
            if original is not None and task.target and self._reveal(trajectory["game_id"], t):
                parts.append(
                    f"(Privileged: the {task.target['name']} is in {task.target['location']}.)"
                )
            reasons.append(" ".join(p for p in parts if p))
        return reasons

    @staticmethod
    def _why_not(steps: list[dict[str, Any]], t: int, original: str) -> str:
        if not original.strip():
            return "An empty answer does nothing; always pick a candidate."
        if t > 0 and steps[t - 1]["action"] == original:
            return f"Repeating '{original}' gives the same result."
        if original not in steps[t]["candidate_actions"]:
            return f"'{original}' is not a candidate, so nothing happens."
        if original.startswith("go to "):
            place = original[len("go to ") :]
            if any(f"You arrive at {place}." in s["observation"] for s in steps[:t]):
                return f"{place} was already checked."
        return ""

    @staticmethod
    def _summary(trajectory: dict[str, Any], corrected: list[dict[str, Any]]) -> str:
        steps = trajectory["steps"]
        repeats = sum(
            1 for t in range(1, len(steps)) if steps[t]["action"] == steps[t - 1]["action"]
        )
        invalid = sum(1 for s in steps if s["action"] not in s["candidate_actions"])
        took = any(s["action"].startswith("take ") for s in steps)
        n_fixed = sum(1 for c in corrected if c["is_corrected"])
        notes = [
            f"{repeats} repeated actions" if repeats else "",
            f"{invalid} invalid actions" if invalid else "",
        ]
        if not took:
            notes.append("it never picked up the object the task needs")
        detail = "; ".join(n for n in notes if n) or "it searched in an unproductive order"
        return (
            f"The student did not finish '{trajectory['task']}' in {len(steps)} steps: {detail}. "
            f"{n_fixed} of {len(steps)} steps were corrected."
        )

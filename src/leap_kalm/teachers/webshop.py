"""Scripted privileged teacher for WebShop.

It replays the student's own actions in the shop and asks the privileged expert
(``envs.webshop.expert.expert_action``) for the next action *from the page the student
actually reached*. With ``corrects: mistakes`` (default) a student action stands when it
is the expert's or when it makes progress the student could see: a search whose results
hold the goal product, paging on towards it, opening it or any item as good (no fault on
its page and WebShop's full reward when bought with the options asked for: the reward
scores what is bought, not which product the goal came from), or choosing an option the
instruction asks for on such an item, in any order. Everything else (an invalid action,
an item that does not match, buying with options missing, reading pages while the goal
is in reach) is corrected to the expert's action. ``corrects: plan`` corrects every step
off the expert's path. ``searches`` is the expert's way of choosing a result: ``plan``
opens the goal product, ``page`` the best result by what the results page shows, going
back when its item page lacks an option (the choice a student can learn from its own
observations).

A kept step that is the expert's own action carries the expert's reason, not the
student's. Reasons are hint-only: they cite the instruction's words and what the page
shows, never the goal product's identifier. ``realizability`` (0-100) is the share of
corrected reasons allowed to name it, as the ALFWorld teacher's knob.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leap_kalm.schemas import Correction
from leap_kalm.teachers.base import ScriptedTeacher


def _progress(env: Any, action: str, best: str) -> bool:
    """Whether a valid student ``action`` moves towards the goal product as far as the
    student could tell (see the module docstring)."""
    from leap_kalm.envs.webshop.env import parse_action
    from leap_kalm.envs.webshop.expert import fits_fully, wanted_options

    parsed = parse_action(action)
    if parsed is None or action == best:
        return action == best
    kind, argument = parsed
    target = env.goal["asin"].lower()
    if kind == "search":
        return env.page == "search" and target in env.shop.search(argument)
    if env.page == "results":
        if argument == "next >":
            return best == "click[next >]"
        return argument in env._page_asins() and fits_fully(env.shop, argument, env.goal)
    if (
        env.page == "item"
        and env._sub is None
        and (env._asin == target or fits_fully(env.shop, env._asin, env.goal))
    ):
        wanted = set(wanted_options(env.shop.by_asin[env._asin], env.goal).values())
        return argument in wanted and argument not in env._options.values()
    return False


def _kept_reason(step: dict[str, Any], original: str, best: str, reason: str) -> str:
    """The reason a kept step trains with: the teacher's own where the student took the
    teacher's action, whatever reason the student gave (a right action for a false reason,
    such as an offered option called missing on an item left for its price, would
    otherwise be taught); the student's where its different action stands as progress."""
    return reason if original == best else step.get("reason", "") or reason


@dataclass
class ScriptedWebShopTeacher(ScriptedTeacher):
    """Privileged teacher for WebShop driven by the expert shopper.

    Attributes:
        realizability: Percentage (0-100) of corrected reasons allowed to name the goal
            product (0 = LEAP's hint-only teacher).
        games: ``game_id`` -> games-index entry of every goal it may correct.
        corrects: ``mistakes`` or ``plan`` (see the module docstring).
        searches: Which result a correction opens: ``plan`` (the goal product) or
            ``page`` (what the pages show; ``envs.webshop.expert``).
    """

    searches: str = "plan"

    def __post_init__(self) -> None:
        super().__post_init__()
        from leap_kalm.envs.webshop.expert import SEARCHES

        if self.searches not in SEARCHES:
            raise ValueError(
                f"the WebShop teacher's searches must be one of {SEARCHES}, got {self.searches!r}"
            )

    def _env(self, trajectory: dict[str, Any]) -> Any:
        from leap_kalm.envs.webshop.world import make_env

        game = trajectory["game_id"]
        if game not in self.games:
            raise KeyError(
                f"the scripted WebShop teacher has no goal {game!r}: build it with the games "
                "index that holds the trajectory's goal (make_teacher(..., games=...))"
            )
        env = make_env(self.games[game], max_steps=len(trajectory["steps"]) + 1)
        env.reset()
        return env

    def annotate(self, trajectory: dict[str, Any], privileged: dict[str, Any]) -> list[str]:
        """A hint-only reason for every step of an expert trajectory: the reasons the expert
        shopper recorded as it acted, or, for steps without one, the expert's on a replay."""
        from leap_kalm.envs.webshop.expert import expert_action

        if all(step.get("reason") for step in trajectory["steps"]):
            return [step["reason"] for step in trajectory["steps"]]
        env, reasons = self._env(trajectory), []
        for step in trajectory["steps"]:
            best, reason = expert_action(env, self.searches)
            reasons.append(
                reason if step["action"] == best else "This step follows the instruction."
            )
            env.step(step["action"])
        return reasons

    def correct(self, trajectory: dict[str, Any], privileged: dict[str, Any]) -> Correction:
        """Correct a failed student trajectory step by step (see the module docstring)."""
        from leap_kalm.envs.webshop.expert import expert_action

        env, steps = self._env(trajectory), []
        for t, step in enumerate(trajectory["steps"]):
            best, reason = expert_action(env, self.searches)
            original = step["action"]
            keep = original == best or (
                self.corrects == "mistakes" and _progress(env, original, best)
            )
            if not keep and self._reveal(trajectory["game_id"], t):
                reason += f" The product to buy is {env.goal['asin']}."
            steps.append(
                {
                    "timestep": t,
                    "original_observation": step["observation"],
                    "original_reason": step.get("reason", ""),
                    "original_action": original,
                    "corrected_reason": _kept_reason(step, original, best, reason)
                    if keep
                    else reason,
                    "corrected_action": original if keep else best,
                    "is_corrected": not keep,
                }
            )
            env.step(original)
        n_fixed = sum(s["is_corrected"] for s in steps)
        return {
            "game_id": trajectory["game_id"],
            "summary": f"{n_fixed} of {len(steps)} steps corrected: search with the instruction's "
            "words, open the item that matches them, choose the options asked for, then buy.",
            "steps": steps,
        }

"""Expert logs from alfworld's handcoded expert, with the 0.4.2 move/put workaround.

alfworld 0.4.2 renamed the placing command to ``move X to Y`` but its handcoded expert still
tracks placements by looking for ``"put"`` in the previous command, so it never forgets the
first object it placed (``pick_two_obj_and_place`` stalls). We drive the expert ourselves and
hand it the previous command spelled ``put X to Y`` whenever it was a ``move``: only its
bookkeeping sees the old verb; the commands sent to the engine are unchanged.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from leap_kalm.schemas import Trajectory, make_trajectory

from .env import AlfWorldEnv

logger = logging.getLogger(__name__)

MODEL_ID = "handcoded_expert"


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Python's global ``random`` (which the expert draws from) seeded for one episode, and
    restored afterwards."""
    saved = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(saved)


def _for_expert_bookkeeping(command: str) -> str:
    """``move X to Y`` → ``put X to Y`` (what the 0.4.2 expert's state tracking looks for)."""
    return "put " + command[len("move ") :] if command.startswith("move ") else command


class HandcodedExpert:
    """alfworld's ``HandCodedTWAgent`` stepped the way ``AlfredExpert`` does, minus its bug.

    Call :meth:`reset` with the game path and the initial observation, then :meth:`act` with
    the engine state after each step. The expert draws from Python's global ``random``; it is
    seeded per episode (and the global state restored afterwards) by
    :func:`run_expert_episode`.
    """

    def __init__(self, expert_type: str = "handcoded", max_steps: int = 200) -> None:
        from alfworld.agents.environment.alfred_tw_env import AlfredExpertType
        from alfworld.agents.expert import HandCodedTWAgent

        if expert_type != AlfredExpertType.HANDCODED:
            raise ValueError(f"only the handcoded expert is wrapped here, got {expert_type!r}")
        self.expert_type = expert_type
        self._agent = HandCodedTWAgent(max_steps=max_steps)
        self._prev = ""

    def reset(self, game_path: str | Path, observation: str) -> str:
        self._agent.reset(str(game_path))
        self._agent.observe(observation)
        self._prev = ""
        return "look"  # AlfredExpert's first move

    def act(self, state: Any, last_command: str) -> str:
        """Next command given the engine state reached by ``last_command``."""
        game_state = {
            "feedback": state["feedback"],
            "admissible_commands": state["admissible_commands"],
            "facts": state["facts"],
            "won": state["won"],
        }
        action = self._agent.act(game_state, 0, state["won"], _for_expert_bookkeeping(last_command))
        # The stock loop compares the expert's action to the previous command to break loops;
        # with the translated spelling a repeated ``move`` must be caught here.
        if action == last_command:
            action = random.choice(list(state["admissible_commands"]))
        return action if action in state["admissible_commands"] else "look"

    def propose(self, state: Any, last_command: str) -> str | None:
        """The expert's own next command after ``last_command``, whoever chose that one;
        ``None`` when it is not admissible. Unlike :meth:`act` it never substitutes a
        random or a ``look`` command: a teacher asks what the expert would do, not what
        keeps an episode going."""
        game_state = {
            "feedback": state["feedback"],
            "admissible_commands": state["admissible_commands"],
            "facts": state["facts"],
            "won": state["won"],
        }
        action = self._agent.policy.act(game_state, _for_expert_bookkeeping(last_command))
        return action if action in state["admissible_commands"] else None


def expert_proposals(game_path: str | Path, actions: list[str], seed: int = 0) -> list[str | None]:
    """What the handcoded expert would do before each of ``actions``, following them.

    DAgger's expert labels: the expert tracks the state from the observations of the
    trajectory that was actually played (someone else's ``actions``), and at every step
    proposes its own next command. Its search is the one the demonstrations show
    (receptacles its priors name for the object first, in a fixed order), so a proposal
    depends only on what the player could have seen, never on where an unseen object
    really is. A command that did nothing ("Nothing happens.") is passed to the
    expert's bookkeeping as ``look``, so an invalid ``go to`` does not move it.

    Returns:
        One entry per action: the proposal, or ``None`` where it is not admissible or the
        expert has given up (it fails or times out; every later entry is ``None`` too).
    """
    from alfworld.agents.expert import HandCodedAgentFailed, HandCodedAgentTimeout

    if not actions:
        return []
    env = AlfWorldEnv(game_path, max_steps=len(actions) + 1, facts=True)
    proposals: list[str | None] = []
    with _seeded(seed), contextlib.closing(env):
        obs, info = env.reset()
        expert = HandcodedExpert(expert_type="handcoded", max_steps=len(actions) + 50)
        first = expert.reset(game_path, obs)
        proposals.append(first if first in info["admissible_commands"] else None)
        for action in actions[:-1]:
            obs, _, terminated, _, _ = env.step(action)
            if terminated:
                break
            last = "look" if obs.startswith("Nothing happens") else action
            try:
                proposals.append(expert.propose(env.engine_state, last))
            except (HandCodedAgentFailed, HandCodedAgentTimeout, IndexError, KeyError):
                break
    return proposals + [None] * (len(actions) - len(proposals))


def run_expert_episode(
    game_path: str | Path, max_steps: int = 50, seed: int = 0, split: str = "train"
) -> Trajectory:
    """Play one game with the handcoded expert; returns a trajectory record (never raises for
    expert failures: those end the episode with ``success`` False and an ``error`` field)."""
    from alfworld.agents.expert import HandCodedAgentFailed, HandCodedAgentTimeout

    env = AlfWorldEnv(game_path, max_steps=max_steps, facts=True)
    steps: list[dict[str, Any]] = []
    error = ""
    won = False
    with _seeded(seed), contextlib.closing(env):
        obs, info = env.reset()
        expert = HandcodedExpert(expert_type="handcoded")
        action = expert.reset(game_path, obs)
        for _ in range(max_steps):
            steps.append(
                {
                    "observation": obs,
                    "candidate_actions": info["admissible_commands"],
                    "action": action,
                }
            )
            obs, _, terminated, truncated, info = env.step(action)
            won = bool(info["won"])
            if terminated or truncated:
                break
            try:
                action = expert.act(env.engine_state, action)
            except (HandCodedAgentFailed, HandCodedAgentTimeout, IndexError, KeyError) as exc:
                error = f"{type(exc).__name__}: {exc}"
                break
    extra = {"error": error} if error else {}
    return make_trajectory(
        env="alfworld",
        game_id=env.game_id,
        split=split,
        task=env.task,
        task_type=env.traj_data["task_type"],
        model_id=MODEL_ID,
        steps=steps,
        success=won,
        **extra,
    )

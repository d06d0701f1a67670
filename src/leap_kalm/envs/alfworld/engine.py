"""Thin layer over TextWorld's PDDL engine, set up the way ALFWorld's own TextWorld env is.

The engine is TextWorld's ``PddlEnv`` wrapped in ALFWorld's ``AlfredDemangler`` (so ids such as
``Cabinet|+00.68|+00.50|-02.20`` read as ``cabinet 1``). Everything heavy is imported inside
functions so that importing this package stays cheap.

Speed-up: about 95% of a stock
step is spent re-deriving the text of every admissible command from its grammar template.
In ALFWorld's grammar a command's text depends only on the action and the entities it binds
(plus static facts such as ``receptacleAtLocation``), so :class:`CachedPddlEnv` memoises
that text per (action name, bound entities). Observations and feedback are still derived
from the live state on every step.

Measured on this 2-core machine (30 generated games, 20 random admissible steps each, shared
CPU so +-20%): stock 36 steps/s (27 ms), cached 82 steps/s (12 ms); with ``facts=True`` (what
the handcoded expert needs) 32 -> 58 steps/s. Outputs are identical (tested). Not tried:
caching tatsu's parse of feedback templates (remaining cost) or dropping the per-step
``deepcopy`` of the grammar context inside textworld.

Disk: TextWorld's ``PddlEnv`` loads a private copy of fast-downward's 33 MB shared library
for every engine (the planner keeps global state), from a temporary file it deletes at
once; the mapping keeps the deleted file's blocks until the process ends. 400 train games
started ~1,400 engines in one ``kedro run`` (games, expert logs, privileged states): tens of
GB of deleted files, and the evaluation after them failed with "No space left on device".
Engines here take their library from a per-process pool (:func:`_take_planner_library`) and
give it back on ``close()`` (or when collected): every engine still has a library of its
own, and a process holds as many copies as engines were open at once.
"""

from __future__ import annotations

import functools
import json
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# loaded copies of fast-downward's library that no open engine uses (this process's)
_FREE_PLANNER_LIBRARIES: list[Any] = []


def _take_planner_library() -> Any:
    """A loaded fast-downward library no open engine uses: a freed one, else a new copy."""
    if _FREE_PLANNER_LIBRARIES:
        return _FREE_PLANNER_LIBRARIES.pop()
    import fast_downward

    return fast_downward.load_lib()


@functools.cache
def _pooled_env_class() -> Any:
    """A ``PddlEnv`` subclass (defined once) whose planner library comes from the pool."""
    import textworld
    from textworld.envs.pddl.pddl import PddlEnv

    class PooledPddlEnv(PddlEnv):
        """``PddlEnv`` that borrows its planner library and returns it on ``close()``.

        Every game loaded into the library (``PddlState``) replaces what the last one
        left, so a library is reused only once its engine is closed or collected; a
        closed engine cannot step any more (its library may be another engine's).
        """

        def __init__(self, infos: Any = None) -> None:
            textworld.Environment.__init__(self, infos)  # PddlEnv's own __init__ copies the library
            self.downward_lib = _take_planner_library()
            self._give_back = weakref.finalize(
                self, _FREE_PLANNER_LIBRARIES.append, self.downward_lib
            )

        def close(self) -> None:
            self._give_back()  # once: later calls do nothing
            self.downward_lib = None
            if getattr(self, "_pddl_state", None) is not None:
                self._pddl_state.downward_lib = None
            super().close()

    return PooledPddlEnv


def _derive_command_text(env: Any, action: Any, names: Mapping[str, str]) -> str:
    """Derive a command's text from its grammar template in ``env``'s live PDDL state."""
    context = {
        "state": env._pddl_state,
        "facts": list(env._pddl_state.facts),
        "variables": {ph.name: env._entity_infos[var.name] for ph, var in action.mapping.items()},
        "mapping": action.mapping,
        "entity_infos": env._entity_infos,
    }
    action.command_template = env._logic.grammar.derive(action.command_template, context)
    return action.format_command(names)


@functools.cache
def _cached_env_class() -> Any:
    """:class:`CachedPddlEnv` (defined once) on top of the pooled ``PddlEnv``."""

    class CachedPddlEnv(_pooled_env_class()):
        """``PddlEnv`` whose admissible-command texts are derived once per game and reused."""

        def load(self, filename_or_data: Any) -> None:
            super().load(filename_or_data)
            self._command_cache: dict[tuple, str] = {}
            self._templates_cache: list[str] | None = None

        def _command_text(self, action: Any, names: Mapping[str, str]) -> str:
            key = (
                action.name,
                tuple(sorted((ph.name, var.name) for ph, var in action.mapping.items())),
            )
            text = self._command_cache.get(key)
            if text is None:
                text = _derive_command_text(self, action, names)
                self._command_cache[key] = text
            return text

        def _gather_infos(self) -> None:  # same keys as PddlEnv._gather_infos
            if self._templates_cache is None:
                self._templates_cache = sorted({a.template for a in self._logic.actions.values()})
            state = self.state
            state["command_templates"] = self._templates_cache
            state["won"] = self._pddl_state.check_goal()
            state["lost"] = False
            state["_entity_infos"] = dict(self._entity_infos)
            state["_facts"] = list(self._pddl_state.facts)
            if self.request_infos.facts:
                state["facts"] = [self._get_human_readable_fact(f) for f in state["_facts"]]
            state["last_action"] = None
            state["_last_action"] = self._last_action
            actions = list(self._pddl_state.all_applicable_actions())
            names = {k: info.name for k, info in self._entity_infos.items()}
            state["_valid_actions"] = actions
            state["_valid_commands"] = [self._command_text(a, names) for a in actions]
            state["admissible_commands"] = sorted(set(state["_valid_commands"]))
            if self.request_infos.moves:
                state["moves"] = self._moves
            if self.request_infos.policy_commands:
                state["policy_commands"] = self._pddl_state.replan(self._entity_infos)

    return CachedPddlEnv


def start_engine(
    game: str | Path | Mapping[str, Any],
    *,
    facts: bool = False,
    walkthrough: bool = False,
    policy_commands: bool = False,
    cache_commands: bool = True,
) -> Any:
    """Load one game into TextWorld's PDDL engine with ALFWorld's name demangler.

    Args:
        game: path of a ``game.tw-pddl`` file, or its already-parsed JSON content.
        facts: also return human-readable facts each step (the handcoded expert needs them).
        walkthrough: put the planner's optimal plan under ``extra.walkthrough`` at reset.
        policy_commands: replan every step (slow; the planner expert needs it).
        cache_commands: use :class:`CachedPddlEnv` (same outputs, faster steps).

    Returns:
        A loaded ``textworld`` environment (call ``reset()`` before ``step``).
    """
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler

    infos = textworld.EnvInfos(
        won=True,
        admissible_commands=True,
        facts=facts,
        policy_commands=policy_commands,
        extras=["walkthrough"] if walkthrough else [],
    )
    base = (_cached_env_class() if cache_commands else _pooled_env_class())(infos)
    env = AlfredDemangler(shuffle=False)(base)
    if isinstance(game, Mapping):
        env.load(dict(game))
    else:
        env.load(str(game))
    return env


def read_game_file(game_path: str | Path) -> dict[str, Any]:
    """Parse a ``game.tw-pddl`` file."""
    return json.loads(Path(game_path).read_text())

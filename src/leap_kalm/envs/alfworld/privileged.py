"""Privileged state of an ALFWorld game: what a teacher knows and the student does not."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .engine import start_engine
from .env import game_id, read_traj_data
from .text import parse_task

# Appliance each task type needs (its receptacle type, as the player reads it).
_APPLIANCE = {
    "pick_clean_then_place_in_recep": "sinkbasin",
    "pick_heat_then_place_in_recep": "microwave",
    "pick_cool_then_place_in_recep": "fridge",
}
_VERB = {
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
}


def privileged_state(game_path: str | Path) -> dict[str, Any]:
    """Ground truth of a game at its start, with receptacles named as the player sees them.

    Returns:
        ``{game_id, task, task_type, pddl_params, essential_objects: [{name, type, location,
        location_closed}], critical_receptacles: [{name, role}], appliances: [names],
        closed_receptacles: [names], receptacles: [names], optimal_actions: [commands]}``.
        ``optimal_actions`` is the engine planner's walkthrough from the initial state.
    """
    traj = read_traj_data(game_path)
    params = traj["pddl_params"]
    task_type = traj["task_type"]
    facts, infos, plan, intro = _initial_state(game_path)
    name = _namer(infos)
    world = _read_facts(facts, name)
    closed = {r for r in world.openable if r not in world.opened}
    essential = _essential_objects(world, name, params, closed)
    appliances = _appliances(world, name, task_type)
    critical = _critical_receptacles(world, name, params, task_type, appliances, essential)
    return {
        "game_id": game_id(game_path),
        "task": parse_task(intro),
        "task_type": task_type,
        "pddl_params": dict(params),
        "essential_objects": essential,
        "critical_receptacles": critical,
        "appliances": appliances,
        "closed_receptacles": sorted(name(r) for r in closed),
        "receptacles": sorted(name(r) for r in world.rec_type),
        "optimal_actions": plan,
    }


@dataclass
class _Facts:
    """What the initial facts say, keyed by raw engine ids (types as the player reads them)."""

    obj_type: dict[str, str] = field(default_factory=dict)
    rec_type: dict[str, str] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)
    openable: set[str] = field(default_factory=set)
    opened: set[str] = field(default_factory=set)


def _initial_state(game_path: str | Path) -> tuple[list[Any], dict[str, Any], list[str], str]:
    """(facts, entity infos, planner walkthrough, intro text) of a game's initial state."""
    env = start_engine(game_path, walkthrough=True)
    try:
        state = env.reset()
        facts = list(state["_facts"])
        infos = state["_entity_infos"]
        plan = list(state.get("extra.walkthrough") or [])
        intro = str(state["feedback"])
    finally:
        env.close()
    return facts, infos, plan, intro


def _namer(infos: dict[str, Any]) -> Callable[[str], str]:
    """A function mapping a raw engine id to the name the player sees (the id if none)."""

    def name(raw: str) -> str:
        info = infos.get(raw)
        return (info.name if info is not None and info.name else raw).strip()

    return name


def _read_facts(facts: list[Any], name: Callable[[str], str]) -> _Facts:
    """Collect object/receptacle types, locations and open/closed state from the facts."""
    world = _Facts()
    for f in facts:
        a = [arg.name for arg in f.arguments]
        if f.name == "objecttype":
            world.obj_type[a[0]] = name(a[1]).removesuffix("type")
        elif f.name == "receptacletype":
            world.rec_type[a[0]] = name(a[1]).removesuffix("type")
        elif f.name == "inreceptacle":
            world.where[a[0]] = a[1]
        elif f.name == "openable":
            world.openable.add(a[0])
        elif f.name == "opened":
            world.opened.add(a[0])
    return world


def _essential_objects(
    world: _Facts, name: Callable[[str], str], params: dict[str, Any], closed: set[str]
) -> list[dict[str, Any]]:
    """The task's target and toggle objects, with where they start, sorted by name."""
    target = params.get("object_target", "").lower()
    toggle = params.get("toggle_target", "").lower()
    essential = []
    for o in sorted(world.obj_type, key=name):
        if world.obj_type[o] in {target, toggle} and world.obj_type[o]:
            loc = world.where.get(o, "")
            essential.append(
                {
                    "name": name(o),
                    "type": world.obj_type[o],
                    "role": "target" if world.obj_type[o] == target else "toggle",
                    "location": name(loc) if loc else "",
                    "location_closed": loc in closed,
                }
            )
    return essential


def _appliances(world: _Facts, name: Callable[[str], str], task_type: str) -> list[str]:
    """Sorted names of the receptacles of the appliance type the task needs (if any)."""
    appliance = _APPLIANCE.get(task_type, "")
    return sorted(name(r) for r in world.rec_type if appliance and world.rec_type[r] == appliance)


def _critical_receptacles(
    world: _Facts,
    name: Callable[[str], str],
    params: dict[str, Any],
    task_type: str,
    appliances: list[str],
    essential: list[dict[str, Any]],
) -> list[dict[str, str]]:
    """Destinations, then appliances, then where the essential objects start, with roles."""
    parent = params.get("parent_target", "").lower()
    critical: list[dict[str, str]] = []
    for r in sorted(world.rec_type, key=name):
        if parent and world.rec_type[r] == parent:
            critical.append({"name": name(r), "role": "destination"})
    for a in appliances:
        critical.append({"name": a, "role": f"{_VERB[task_type]} appliance"})
    for e in essential:
        if e["role"] == "toggle" and e["location"]:
            critical.append({"name": e["location"], "role": "lamp location"})
        elif e["location"] and not any(c["name"] == e["location"] for c in critical):
            critical.append({"name": e["location"], "role": "holds target"})
    return critical


def render_privileged_state(state: dict[str, Any]) -> str:
    """Plain-text rendering of :func:`privileged_state` for a teacher's prompt."""
    lines = [f"Task: {state['task']} ({state['task_type']})"]
    lines.append("Essential objects:")
    for e in state["essential_objects"]:
        closed = " (closed: open it first)" if e["location_closed"] else ""
        lines.append(f"- {e['name']} ({e['role']}) is in/on {e['location']}{closed}")
    if state["critical_receptacles"]:
        lines.append("Critical receptacles:")
        for c in state["critical_receptacles"]:
            lines.append(f"- {c['name']}: {c['role']}")
    if state["closed_receptacles"]:
        lines.append("Closed at start: " + ", ".join(state["closed_receptacles"]))
    lines.append("Optimal actions:")
    lines += [f"{i}. {a}" for i, a in enumerate(state["optimal_actions"], 1)]
    return "\n".join(lines)

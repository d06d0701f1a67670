"""Privileged state of an ALFWorld game: what a teacher knows and the student does not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .engine import start_engine
from .env import game_id, read_traj_data

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
    env = start_engine(game_path, walkthrough=True)
    try:
        state = env.reset()
        facts = list(state["_facts"])
        infos = state["_entity_infos"]
        plan = list(state.get("extra.walkthrough") or [])
        intro = str(state["feedback"])
    finally:
        env.close()

    def name(raw: str) -> str:
        info = infos.get(raw)
        return (info.name if info is not None and info.name else raw).strip()

    def args(f: Any) -> list[str]:
        return [a.name for a in f.arguments]

    obj_type: dict[str, str] = {}
    rec_type: dict[str, str] = {}
    where: dict[str, str] = {}
    openable: set[str] = set()
    opened: set[str] = set()
    for f in facts:
        a = args(f)
        if f.name == "objecttype":
            obj_type[a[0]] = name(a[1]).removesuffix("type")
        elif f.name == "receptacletype":
            rec_type[a[0]] = name(a[1]).removesuffix("type")
        elif f.name == "inreceptacle":
            where[a[0]] = a[1]
        elif f.name == "openable":
            openable.add(a[0])
        elif f.name == "opened":
            opened.add(a[0])

    target = params.get("object_target", "").lower()
    parent = params.get("parent_target", "").lower()
    toggle = params.get("toggle_target", "").lower()
    closed = {r for r in openable if r not in opened}

    essential = []
    for o in sorted(obj_type, key=name):
        if obj_type[o] in {target, toggle} and obj_type[o]:
            loc = where.get(o, "")
            essential.append(
                {
                    "name": name(o),
                    "type": obj_type[o],
                    "role": "target" if obj_type[o] == target else "toggle",
                    "location": name(loc) if loc else "",
                    "location_closed": loc in closed,
                }
            )

    critical: list[dict[str, str]] = []
    for r in sorted(rec_type, key=name):
        if parent and rec_type[r] == parent:
            critical.append({"name": name(r), "role": "destination"})
    appliance = _APPLIANCE.get(task_type, "")
    appliances = sorted(name(r) for r in rec_type if appliance and rec_type[r] == appliance)
    for a in appliances:
        critical.append({"name": a, "role": f"{_VERB[task_type]} appliance"})
    for e in essential:
        if e["role"] == "toggle" and e["location"]:
            critical.append({"name": e["location"], "role": "lamp location"})
        elif e["location"] and not any(c["name"] == e["location"] for c in critical):
            critical.append({"name": e["location"], "role": "holds target"})

    marker = "Your task is to: "
    task = intro.split(marker, 1)[1].strip().rstrip(".") if marker in intro else ""
    return {
        "game_id": game_id(game_path),
        "task": task,
        "task_type": task_type,
        "pddl_params": dict(params),
        "essential_objects": essential,
        "critical_receptacles": critical,
        "appliances": appliances,
        "closed_receptacles": sorted(name(r) for r in closed),
        "receptacles": sorted(name(r) for r in rec_type),
        "optimal_actions": plan,
    }


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

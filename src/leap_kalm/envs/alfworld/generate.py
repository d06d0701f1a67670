"""Generate ALFWorld TextWorld games offline from alfworld's packaged floor-plan layouts.

A game is written the way ALFWorld ships its data::

    <out_dir>/<split>/<task_type>-<Obj>-<MRecep>-<Recep>-<scene>/trial_<id>/
        game.tw-pddl     {pddl_domain, grammar, pddl_problem, solvable}
        traj_data.json   {task_type, pddl_params, scene, turk_annotations.anns[0].task_desc, ...}

Inputs are all alfworld's own: receptacle ids and poses from
``alfworld/gen/layouts/FloorPlanN-openable.json``, the object types present from
``FloorPlanN-objects.json``, the domain ``alfred.pddl`` and grammar ``alfred.twl2``,
which object fits which receptacle (``constants.VAL_RECEPTACLE_OBJECTS``), which objects can be
cleaned/heated/cooled (``constants.VAL_ACTION_OBJECTS``), which room types suit a task
(``constants.GOALS_VALID``), the train/test scene numbers and the goal library
(``gen.goal_library.gdict``: PDDL goals and task templates).

Every game is loaded in the engine and kept only if the planner's walkthrough wins it.
"""

from __future__ import annotations

import json
import logging
import random
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
SPLITS: tuple[str, ...] = ("train", "valid_seen", "valid_unseen")

# The appliance each state-change task needs (types fixed by alfred.pddl's actions).
APPLIANCE = {
    "pick_clean_then_place_in_recep": "SinkBasin",
    "pick_heat_then_place_in_recep": "Microwave",
    "pick_cool_then_place_in_recep": "Fridge",
}
ACTION_PROPERTY = {
    "pick_clean_then_place_in_recep": "Cleanable",
    "pick_heat_then_place_in_recep": "Heatable",
    "pick_cool_then_place_in_recep": "Coolable",
}
ACTION_PREDICATE = {"Cleanable": "cleanable", "Heatable": "heatable", "Coolable": "coolable"}
# alfworld's constants do not say where a desk lamp stands; these are the furniture it stands on
# in ALFRED's bedrooms and living rooms.
LAMP = "DeskLamp"
LAMP_RECEPTACLES = ("Desk", "SideTable", "Dresser")
# Types that alfred.pddl's actions name as constants: they must be declared in every problem.
DOMAIN_RTYPES = ("SinkBasin", "Microwave", "Fridge")
DOMAIN_OTYPES = ("Knife", "ButterKnife")
NOT_TARGETS = {"DeskLamp", "FloorLamp"}
MIN_RECEPTACLES, MAX_RECEPTACLES = 8, 12
MIN_DISTRACTORS, MAX_DISTRACTORS = 3, 5
MAX_ATTEMPTS = 40
GRID = 0.25  # metres per navigation grid step (alfworld's AGENT_STEP_SIZE)


# --------------------------------------------------------------------------- layouts and splits


def _constants() -> Any:
    import alfworld.gen.constants as constants

    return constants


def _layouts_dir() -> Path:
    return Path(_constants().__file__).parent / "layouts"


def split_scenes(split: str) -> list[int]:
    """Scene numbers a split draws from.

    ``train`` and ``valid_seen`` use alfworld's ``TRAIN_SCENE_NUMBERS``; ``valid_unseen`` uses the
    fixed hold-out ``TEST_SCENE_NUMBERS`` (6 of every 30 scenes per room type), so its scenes
    never appear in train.
    """
    c = _constants()
    if split in ("train", "valid_seen"):
        scenes = c.TRAIN_SCENE_NUMBERS
    elif split == "valid_unseen":
        scenes = c.TEST_SCENE_NUMBERS
    else:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return sorted(n for n in scenes if (_layouts_dir() / f"FloorPlan{n}-openable.json").is_file())


def _room_type(scene: int) -> str:
    for room, numbers in _constants().SCENE_TYPE.items():
        if scene in numbers:
            return room
    raise ValueError(f"scene {scene} has no room type")


def receptacle_type(receptacle_id: str) -> str:
    """ALFRED receptacle type of an id (``Sink|…|SinkBasin`` → ``SinkBasin``)."""
    parts = receptacle_id.split("|")
    return parts[-1] if parts[-1].endswith("Basin") else parts[0]


@dataclass(frozen=True)
class Scene:
    number: int
    receptacles: tuple[tuple[str, tuple[float, ...]], ...]  # (id, pose) sorted by id
    object_types: tuple[str, ...]


_SCENES: dict[int, Scene] = {}


def load_scene(number: int) -> Scene:
    """Receptacles (id, pose) and object types of one packaged floor plan."""
    if number not in _SCENES:
        layouts = _layouts_dir()
        openable = json.loads((layouts / f"FloorPlan{number}-openable.json").read_text())
        objects = json.loads((layouts / f"FloorPlan{number}-objects.json").read_text())
        recs = tuple(sorted((rid, tuple(pose)) for rid, pose in openable.items()))
        _SCENES[number] = Scene(number, recs, tuple(sorted(set(objects))))
    return _SCENES[number]


def _placeable_types() -> set[str]:
    c = _constants()
    placeable: set[str] = set()
    for objs in c.VAL_RECEPTACLE_OBJECTS.values():
        placeable |= set(objs)
    return {o for o in placeable if "Sliced" not in o and o in c.OBJECTS and o not in NOT_TARGETS}


def _fits(receptacle: str, obj: str) -> bool:
    return obj in _constants().VAL_RECEPTACLE_OBJECTS.get(receptacle, ())


# --------------------------------------------------------------------------- sampling a game


@dataclass
class _Placed:
    id: str
    type: str
    receptacle: str  # receptacle id


@dataclass
class GameSpec:
    """Everything needed to write one game (internal; exposed for tests and debugging)."""

    task_type: str
    scene: int
    object_target: str
    parent_target: str
    toggle_target: str
    receptacles: list[tuple[str, tuple[float, ...]]]
    objects: list[_Placed]
    agent_location: str
    task_desc: str
    extra: dict[str, Any] = field(default_factory=dict)


def _loc(pose: Sequence[float]) -> str:
    x, z, rot, horizon = pose
    return f"loc|{round(x / GRID)}|{round(z / GRID)}|{round(rot / 90) % 4}|{round(horizon)}"


def _object_id(obj_type: str, receptacle_id: str, rng: random.Random, taken: set[str]) -> str:
    coords = [p for p in receptacle_id.split("|")[1:4]]
    while True:
        vals = []
        for p in coords:
            v = float(p) + rng.uniform(-0.3, 0.3)
            vals.append(f"{v:+06.2f}")
        oid = "|".join([obj_type, *vals])
        if oid not in taken:
            taken.add(oid)
            return oid


def _unique_pose_receptacles(
    scene: Scene, rng: random.Random
) -> list[tuple[str, tuple[float, ...]]]:
    """One receptacle per pose: receptacles sharing a pose cannot be told apart by ``go to``."""
    by_pose: dict[tuple[float, ...], list[str]] = {}
    for rid, pose in scene.receptacles:
        by_pose.setdefault(pose, []).append(rid)
    chosen = [(rng.choice(ids), pose) for pose, ids in sorted(by_pose.items())]
    return sorted(chosen)


def _sample_spec(task_type: str, scene: Scene, rng: random.Random) -> GameSpec | None:
    """Sample one task in one scene, or None when the scene cannot host it."""
    c = _constants()
    recs = _unique_pose_receptacles(scene, rng)
    rtypes = {receptacle_type(r) for r, _ in recs}
    present = [o for o in scene.object_types if o in _placeable_types()]
    needs = APPLIANCE.get(task_type)
    if needs and needs not in rtypes:
        return None
    prop = ACTION_PROPERTY.get(task_type)
    candidates = [o for o in present if prop is None or o in c.VAL_ACTION_OBJECTS[prop]]
    rng.shuffle(candidates)

    for obj in candidates:
        starts = [r for r, _ in recs if _fits(receptacle_type(r), obj)]
        if not starts:
            continue
        toggle, parent, lamp_rec = "", "", None
        if task_type == "look_at_obj_in_light":
            if LAMP not in scene.object_types:
                return None
            lamp_recs = [r for r, _ in recs if receptacle_type(r) in LAMP_RECEPTACLES]
            if not lamp_recs:
                return None
            lamp_rec = rng.choice(lamp_recs)
            starts = [r for r in starts if r != lamp_rec]
            toggle = LAMP
        else:
            parents = sorted(
                t
                for t in rtypes
                if _fits(t, obj) and t != needs and any(receptacle_type(s) != t for s in starts)
            )
            if not parents:
                continue
            parent = rng.choice(parents)
            starts = [r for r in starts if receptacle_type(r) != parent]
        if not starts:
            continue
        # Prefer starting inside a closed container half of the time, so opening is needed.
        openable = [r for r in starts if receptacle_type(r) in c.OPENABLE_CLASS_SET]
        pool = openable if openable and rng.random() < 0.5 else starts
        n_targets = 2 if task_type == "pick_two_obj_and_place" else 1
        target_recs = [rng.choice(pool) for _ in range(n_targets)]
        return _complete_spec(
            task_type, scene, rng, recs, obj, parent, toggle, target_recs, lamp_rec
        )
    return None


def _complete_spec(
    task_type: str,
    scene: Scene,
    rng: random.Random,
    recs: list[tuple[str, tuple[float, ...]]],
    obj: str,
    parent: str,
    toggle: str,
    target_recs: list[str],
    lamp_rec: str | None,
) -> GameSpec:
    """Finish a sampled task: pick the receptacles, place the objects, the agent and the text."""
    pose = dict(recs)
    chosen = _choose_receptacles(task_type, rng, recs, parent, target_recs, lamp_rec)
    objects = _place_objects(scene, rng, obj, target_recs, lamp_rec, chosen)
    agent = _agent_location([pose[r] for r in chosen])
    desc = _task_description(task_type, rng, obj, parent, toggle)
    return GameSpec(
        task_type=task_type,
        scene=scene.number,
        object_target=obj,
        parent_target=parent,
        toggle_target=toggle,
        receptacles=[(r, pose[r]) for r in chosen],
        objects=objects,
        agent_location=agent,
        task_desc=desc,
        extra={"room_type": _room_type(scene.number)},
    )


def _choose_receptacles(
    task_type: str,
    rng: random.Random,
    recs: list[tuple[str, tuple[float, ...]]],
    parent: str,
    target_recs: list[str],
    lamp_rec: str | None,
) -> list[str]:
    """The game's receptacle ids, sorted: those the task needs plus random others."""
    needed: list[str] = list(dict.fromkeys(target_recs))
    if lamp_rec:
        needed.append(lamp_rec)
    if parent:
        needed.append(rng.choice([r for r, _ in recs if receptacle_type(r) == parent]))
    if task_type in APPLIANCE:
        needed.append(
            rng.choice([r for r, _ in recs if receptacle_type(r) == APPLIANCE[task_type]])
        )
    needed = list(dict.fromkeys(needed))
    rest = [r for r, _ in recs if r not in needed]
    rng.shuffle(rest)
    k = rng.randint(MIN_RECEPTACLES, MAX_RECEPTACLES)
    return sorted(needed + rest[: max(0, k - len(needed))])


def _place_objects(
    scene: Scene,
    rng: random.Random,
    obj: str,
    target_recs: list[str],
    lamp_rec: str | None,
    chosen: list[str],
) -> list[_Placed]:
    """The target objects, the lamp (if any), then distractors in the chosen receptacles."""
    taken: set[str] = set()
    objects = [_Placed(_object_id(obj, r, rng, taken), obj, r) for r in target_recs]
    if lamp_rec:
        objects.append(_Placed(_object_id(LAMP, lamp_rec, rng, taken), LAMP, lamp_rec))
    _add_distractors(objects, _distractor_types(scene, obj), obj, chosen, rng, taken)
    return objects


def _distractor_types(scene: Scene, obj: str) -> list[str]:
    """Other object types of the scene that may serve as distractors for target ``obj``.

    Types whose name starts with the target's (pen/pencil, pot/potato) would confuse the
    expert's substring tests, so they are left out.
    """
    low = obj.lower()
    return [
        o
        for o in scene.object_types
        if o in _placeable_types()
        and o != obj
        and not o.lower().startswith(low)
        and not low.startswith(o.lower())
    ]


def _add_distractors(
    objects: list[_Placed],
    dtypes: list[str],
    obj: str,
    chosen: list[str],
    rng: random.Random,
    taken: set[str],
) -> None:
    """Append distractors to ``objects``, each where it plausibly belongs (bounded tries)."""
    n_distractors = rng.randint(MIN_DISTRACTORS, MAX_DISTRACTORS)
    tries = 0
    while dtypes and sum(1 for p in objects if p.type not in (obj, LAMP)) < n_distractors:
        tries += 1
        if tries > 200:
            break
        d = rng.choice(dtypes)
        homes = [r for r in chosen if _fits(receptacle_type(r), d)]
        if not homes:
            continue
        home = rng.choice(homes)
        objects.append(_Placed(_object_id(d, home, rng, taken), d, home))


def _agent_location(poses: list[tuple[float, ...]]) -> str:
    """A free grid location near the centre of the receptacles' poses."""
    used = {_loc(p) for p in poses}
    xs = [p[0] for p in poses]
    zs = [p[1] for p in poses]
    cx, cz = sum(xs) / len(xs), sum(zs) / len(zs)
    agent = _loc((cx, cz, 0, 30))
    step = 0
    while agent in used:
        step += 1
        agent = _loc((cx + GRID * step, cz, 0, 30))
    return agent


def _task_description(
    task_type: str, rng: random.Random, obj: str, parent: str, toggle: str
) -> str:
    """The task sentence, from a random template of alfworld's goal library."""
    from alfworld.gen import goal_library

    template = rng.choice(goal_library.gdict[task_type]["templates"])
    return template.format(obj=obj.lower(), recep=parent.lower(), toggle=toggle.lower(), mrecep="")


# --------------------------------------------------------------------------- writing PDDL


_MANGLE = (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_"))


def mangle(name: str) -> str:
    """PDDL-safe spelling of an ALFRED id (the same scheme ALFWorld uses)."""
    for a, b in _MANGLE:
        name = name.replace(a, b)
    return name


def problem_pddl(spec: GameSpec, name: str) -> str:
    """The PDDL problem of a game spec."""
    from alfworld.gen import goal_library

    rlocs = {r: _loc(p) for r, p in spec.receptacles}
    goal = goal_library.gdict[spec.task_type]["pddl"].format(
        obj=spec.object_target, recep=spec.parent_target, toggle=spec.toggle_target, mrecep=""
    )
    goal = goal.replace("#", "-")
    lines = [f"(define (problem {name})", "    (:domain alfred)", "    (:objects"]
    lines += [f"        {o}" for o in _problem_objects(spec, rlocs)]
    lines += ["    )", "    (:init"]
    lines += [f"        {f}" for f in _problem_init(spec, rlocs)]
    lines += ["    )"]
    return "\n".join(lines) + "\n" + textwrap.dedent(goal).strip() + "\n"


def _problem_objects(spec: GameSpec, rlocs: dict[str, str]) -> list[str]:
    """The ``:objects`` entries: agent, locations, receptacles, objects and their types."""
    pose = dict(spec.receptacles)
    locations = sorted(set(rlocs.values()) | {spec.agent_location})
    rtypes = sorted({receptacle_type(r) for r in pose} | set(DOMAIN_RTYPES))
    otypes = sorted({o.type for o in spec.objects} | set(DOMAIN_OTYPES))
    objects = ["agent1 - agent"]
    objects += [f"{mangle(loc)} - location" for loc in locations]
    objects += [f"{mangle(r)} - receptacle" for r in sorted(pose)]
    objects += [f"{mangle(o.id)} - object" for o in sorted(spec.objects, key=lambda p: p.id)]
    objects += [f"{t}Type - otype" for t in otypes]
    objects += [f"{t}Type - rtype" for t in rtypes if t not in otypes]
    return objects


def _problem_init(spec: GameSpec, rlocs: dict[str, str]) -> list[str]:
    """The ``:init`` facts: agent, receptacles, objects, then which types fit where."""
    c = _constants()
    pose = dict(spec.receptacles)
    init = [f"(atLocation agent1 {mangle(spec.agent_location)})"]
    for r in sorted(pose):
        rt = receptacle_type(r)
        init.append(f"(receptacleType {mangle(r)} {rt}Type)")
        init.append(f"(receptacleAtLocation {mangle(r)} {mangle(rlocs[r])})")
        if rt in c.OPENABLE_CLASS_SET:
            init.append(f"(openable {mangle(r)})")
    for o in sorted(spec.objects, key=lambda p: p.id):
        oid = mangle(o.id)
        init.append(f"(objectType {oid} {o.type}Type)")
        init.append(f"(inReceptacle {oid} {mangle(o.receptacle)})")
        init.append(f"(objectAtLocation {oid} {mangle(rlocs[o.receptacle])})")
        if o.type == LAMP:
            init.append(f"(toggleable {oid})")
            continue
        init.append(f"(pickupable {oid})")
        for prop, pred in ACTION_PREDICATE.items():
            if o.type in c.VAL_ACTION_OBJECTS[prop]:
                init.append(f"({pred} {oid})")
    present_rtypes = sorted({receptacle_type(r) for r in pose})
    for rt in present_rtypes:
        for ot in sorted({o.type for o in spec.objects if o.type != LAMP}):
            if _fits(rt, ot):
                init.append(f"(canContain {rt}Type {ot}Type)")
    return init


def _builtin(name: str) -> str:
    from alfworld.info import BUILTIN_DATA_PATH

    return (Path(BUILTIN_DATA_PATH) / name).read_text()


def game_files(spec: GameSpec, trial_id: str, meta: dict[str, Any]) -> tuple[dict, dict]:
    """(game.tw-pddl content, traj_data.json content) for a spec."""
    grammar = _builtin("alfred.twl2").replace("UNKNOWN GOAL", spec.task_desc)
    game = {
        "pddl_domain": _builtin("alfred.pddl"),
        "grammar": grammar,
        "pddl_problem": problem_pddl(spec, re.sub(r"\W", "_", trial_id)),
        "solvable": True,
    }
    traj = {
        "task_id": trial_id,
        "task_type": spec.task_type,
        "pddl_params": {
            "object_target": spec.object_target,
            "parent_target": spec.parent_target,
            "toggle_target": spec.toggle_target,
            "mrecep_target": "",
            "object_sliced": False,
        },
        "scene": {
            "floor_plan": f"FloorPlan{spec.scene}",
            "scene_num": spec.scene,
            "room_type": spec.extra.get("room_type", ""),
        },
        "turk_annotations": {
            "anns": [{"task_desc": spec.task_desc, "high_descs": [], "votes": []}]
        },
        "generator": meta,
    }
    return game, traj


def game_dir_name(spec: GameSpec) -> str:
    recep = spec.parent_target or spec.toggle_target
    return f"{spec.task_type}-{spec.object_target}-None-{recep}-{spec.scene}"


# --------------------------------------------------------------------------- solvability


def walkthrough_wins(game: dict[str, Any] | str | Path) -> list[str] | None:
    """Load a game, run the planner's walkthrough; return it if it wins, else None."""
    from .engine import start_engine

    try:
        env = start_engine(game, walkthrough=True)
        state = env.reset()
        plan = list(state.get("extra.walkthrough") or [])
        if not plan:
            return None
        for command in plan:
            state, _, done = env.step(command)
        won = bool(state["won"])
        env.close()
    except Exception as exc:  # unsolvable problems raise inside textworld's PDDL logic
        logger.debug("game rejected: %r", exc)
        return None
    return plan if won else None


# --------------------------------------------------------------------------- public API


def _dump(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def generate_games(
    split: str,
    n: int,
    seed: int,
    out_dir: str | Path,
    task_types: Sequence[str] = TASK_TYPES,
) -> list[Path]:
    """Generate ``n`` solvable ALFWorld games for a split and write them under ``out_dir/split``.

    Task types go round-robin over ``task_types``; game ``i`` is drawn from a random generator
    seeded by ``(seed, split, i, attempt)``, so the same arguments always write the same files
    byte for byte. A candidate whose planner walkthrough does not win is redrawn.

    Args:
        split: ``train``, ``valid_seen`` (train scenes, other games) or ``valid_unseen``
            (hold-out scenes, see :func:`split_scenes`).
        n: number of games.
        seed: base seed.
        out_dir: root folder; games go to ``out_dir/<split>/<task dir>/trial_<id>/``.
        task_types: task types to cycle through (default: all six).

    Returns:
        Paths of the written ``game.tw-pddl`` files, in generation order.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    unknown = set(task_types) - set(TASK_TYPES)
    if unknown:
        raise ValueError(f"unknown task types {sorted(unknown)}")
    root = Path(out_dir) / split
    scenes = split_scenes(split)
    paths: list[Path] = []
    for i in range(n):
        task_type = task_types[i % len(task_types)]
        paths.append(_generate_game(split, i, seed, task_type, scenes, root))
    logger.info("generated %d %s games under %s", len(paths), split, root)
    return paths


def _generate_game(
    split: str, i: int, seed: int, task_type: str, scenes: list[int], root: Path
) -> Path:
    """Draw game ``i`` of a split until its walkthrough wins; write it and return its path."""
    rooms = _constants().GOALS_VALID[task_type]
    eligible = [s for s in scenes if _room_type(s) in rooms]
    for attempt in range(MAX_ATTEMPTS):
        rng = random.Random(f"leap_kalm-alfworld|{seed}|{split}|{i}|{attempt}")
        spec = _sample_spec(task_type, load_scene(rng.choice(eligible)), rng)
        if spec is None:
            continue
        trial_id = f"trial_T{seed:04d}_{split}_{i:05d}"
        meta = {
            "name": "leap_kalm.envs.alfworld",
            "seed": seed,
            "split": split,
            "index": i,
            "attempt": attempt,
        }
        game, traj = game_files(spec, trial_id, meta)
        plan = walkthrough_wins(game)
        if plan is None:
            continue
        traj["plan"] = {"walkthrough": plan}
        return _write_game(root / game_dir_name(spec) / trial_id, game, traj)
    raise RuntimeError(f"no solvable {task_type} game after {MAX_ATTEMPTS} attempts ({split}, {i})")


def _write_game(folder: Path, game: dict[str, Any], traj: dict[str, Any]) -> Path:
    """Write ``game.tw-pddl`` and ``traj_data.json`` into ``folder``; return the game's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "game.tw-pddl").write_text(_dump(game))
    (folder / "traj_data.json").write_text(_dump(traj))
    return folder / "game.tw-pddl"

"""Natural-language instructions for CLEVR-Robot goals.

Each goal renders into many paraphrases: a sentence frame times a wording of the
direction. The real level draws from the *train* wordings; the rephrase level draws
from *held-out* wordings whose frames and relation phrases never occur in the train
set (checked by the tests), so a model grounded on real-level text meets unseen
sentences with the same meaning, as in KALM's rephrase level. Easy and hard levels
have their own frames.

All templates were written for this project.
"""

from __future__ import annotations

import itertools

import numpy as np

from leap_kalm.envs.clevr import goals as G
from leap_kalm.envs.clevr.physics import COLORS

# --------------------------------------------------------------------------- relations
TRAIN_RELATION_PHRASES: dict[int, tuple[str, ...]] = {
    G.BEHIND: ("behind", "to the rear of", "in back of"),
    G.LEFT: ("to the left of", "left of", "on the left side of"),
    G.FRONT: ("in front of", "to the front of", "before"),
    G.RIGHT: ("to the right of", "right of", "on the right side of"),
}
HELDOUT_RELATION_PHRASES: dict[int, tuple[str, ...]] = {
    G.BEHIND: ("at the back of", "farther back than"),
    G.LEFT: ("on the left-hand side of", "leftward of"),
    G.FRONT: ("ahead of", "nearer the front than"),
    G.RIGHT: ("on the right-hand side of", "rightward of"),
}

TRAIN_RELATION_FRAMES: tuple[str, ...] = (
    "Push the {src} ball {rel} the {dst} ball",
    "Move the {src} ball {rel} the {dst} ball",
    "Can you push the {src} ball {rel} the {dst} ball",
    "Please move the {src} ball {rel} the {dst} ball",
    "Put the {src} ball {rel} the {dst} ball",
    "Place the {src} ball {rel} the {dst} ball",
    "Get the {src} ball {rel} the {dst} ball",
    "The {src} ball should be {rel} the {dst} ball",
    "Make the {src} ball sit {rel} the {dst} ball",
    "Slide the {src} ball {rel} the {dst} ball",
    "Shift the {src} ball {rel} the {dst} ball",
    "I want the {src} ball {rel} the {dst} ball",
    "Bring the {src} ball {rel} the {dst} ball",
    "Could you help me move the {src} ball {rel} the {dst} ball",
    "Keep the {src} ball {rel} the {dst} ball",
    "Roll the {src} ball {rel} the {dst} ball",
    "Nudge the {src} ball until it is {rel} the {dst} ball",
    "Push the {src} ball so that it ends up {rel} the {dst} ball",
)
HELDOUT_RELATION_FRAMES: tuple[str, ...] = (
    "I'd like the {src} ball to finish {rel} the {dst} one.",
    "Could you arrange things so the {src} sphere is {rel} the {dst} sphere?",
    "The {src} ball belongs {rel} the {dst} ball, please sort that out.",
    "Your job: get the {src} sphere {rel} the {dst} sphere.",
    "Rearrange the table so that the {src} ball lies {rel} the {dst} ball.",
    "Let's have the {src} ball resting {rel} the {dst} ball.",
    "It would be great if the {src} ball were {rel} the {dst} ball.",
    "Relocate the {src} ball so it sits {rel} the {dst} ball.",
    "Make sure the {src} ball winds up {rel} the {dst} ball.",
    "Go ahead and reposition the {src} ball {rel} the {dst} ball.",
    "See to it that the {src} ball comes to rest {rel} the {dst} ball.",
    "Right now the {src} ball is not {rel} the {dst} ball; change that.",
    "Would you mind steering the {src} orb {rel} the {dst} orb?",
    "Aim to leave the {src} ball {rel} the {dst} ball.",
)

# --------------------------------------------------------------------------- easy
EASY_DIRECTION_PHRASES: dict[int, tuple[str, ...]] = {
    G.BEHIND: ("to the back", "backward", "further back"),
    G.LEFT: ("to the left", "leftward", "toward the left side"),
    G.FRONT: ("to the front", "forward", "toward the front"),
    G.RIGHT: ("to the right", "rightward", "toward the right side"),
}
EASY_MOVE_FRAMES: tuple[str, ...] = (
    "Push the {ball} ball {dir}",
    "Move the {ball} ball {dir}",
    "Nudge the {ball} ball {dir}",
    "Shift the {ball} ball {dir}",
    "Slide the {ball} ball {dir}",
    "Can you push the {ball} ball {dir}",
    "Roll the {ball} ball {dir} once",
    "Give the {ball} ball one push {dir}",
)
EASY_STILL_PHRASES: tuple[str, ...] = ("still", "in place", "where they are")
EASY_STILL_FRAMES: tuple[str, ...] = (
    "Keep the {ball} ball and all the others {still}",
    "Leave every ball, the {ball} one included, {still}",
    "Make a move that keeps the {ball} ball and the rest {still}",
    "Do not disturb the balls: the {ball} ball and the others stay {still}",
    "Touch the table but keep the {ball} ball and its neighbours {still}",
    "Let the {ball} ball and every other ball remain {still}",
    "The {ball} ball and the other balls should all stay {still}",
)

# --------------------------------------------------------------------------- hard
HARD_RELATION_FRAMES: tuple[str, ...] = (
    "Arrange the balls so that {clauses}",
    "Push the balls until {clauses}",
    "Make sure that {clauses}",
    "Rearrange the table: {clauses}",
    "Set up the scene so that {clauses}",
    "Move balls around until {clauses}",
    "I need a layout where {clauses}",
)
HARD_CLAUSE = "the {src} ball is {rel} the {dst} ball"
HARD_LINE_FRAMES: tuple[str, ...] = (
    "Line up the balls {shape} from left to right: {order}",
    "Arrange the balls {shape}, ordered left to right as {order}",
    "Put the five balls {shape}; from the left: {order}",
    "Push the balls into place {shape}, left to right {order}",
    "Make the balls stand {shape} in the order {order}, starting on the left",
    "Order the balls {shape} from left to right like this: {order}",
    "Sort the balls {shape}, going left to right: {order}",
)
HARD_LINE_SHAPES: tuple[str, ...] = ("in a line", "in a row", "in a horizontal line")
HARD_GATHER_FRAMES: tuple[str, ...] = (
    "Gather all the balls around the {ball} ball",
    "Bring every other ball {near} the {ball} ball",
    "Cluster the balls together around the {ball} one",
    "Push all the other balls {near} the {ball} ball",
    "Collect the balls {near} the {ball} ball",
    "Group the remaining balls {near} the {ball} ball",
    "Make the balls huddle around the {ball} ball",
)
HARD_GATHER_NEAR: tuple[str, ...] = ("close to", "next to", "near")


def _relation_wordings(goal: np.ndarray, split: str) -> list[str]:
    src, dst, direction = G.parse_real_goal(goal)
    if split == "train":
        frames, phrases = TRAIN_RELATION_FRAMES, TRAIN_RELATION_PHRASES[direction]
    elif split == "heldout":
        frames, phrases = HELDOUT_RELATION_FRAMES, HELDOUT_RELATION_PHRASES[direction]
    else:
        raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
    return [f.format(src=COLORS[src], dst=COLORS[dst], rel=r) for f in frames for r in phrases]


def _easy_wordings(goal: np.ndarray) -> list[str]:
    ball, direction = G.parse_easy_goal(goal)
    name = COLORS[ball]
    if direction == G.STILL:
        return [f.format(ball=name, still=s) for f in EASY_STILL_FRAMES for s in EASY_STILL_PHRASES]
    return [
        f.format(ball=name, dir=d)
        for f in EASY_MOVE_FRAMES
        for d in EASY_DIRECTION_PHRASES[direction]
    ]


def _join(clauses: list[str]) -> str:
    return clauses[0] if len(clauses) == 1 else ", ".join(clauses[:-1]) + " and " + clauses[-1]


def _hard_wordings(goal: np.ndarray) -> list[str]:
    kind = G.hard_kind(goal)
    if kind in (G.TWO_RELATIONS, G.THREE_RELATIONS):
        rels = G.hard_relations(goal)
        choices = [TRAIN_RELATION_PHRASES[r] for _, _, r in rels]
        out = []
        for combo in itertools.product(*choices):
            clauses = [
                HARD_CLAUSE.format(src=COLORS[s], dst=COLORS[d], rel=p)
                for (s, d, _), p in zip(rels, combo, strict=True)
            ]
            out.extend(f.format(clauses=_join(clauses)) for f in HARD_RELATION_FRAMES)
        return out
    if kind == G.LINE:
        order = ", ".join(COLORS[b] for b in G.line_order(goal))
        return [f.format(shape=s, order=order) for f in HARD_LINE_FRAMES for s in HARD_LINE_SHAPES]
    ball = COLORS[G.gather_center(goal)]
    out = []
    for f in HARD_GATHER_FRAMES:
        nears = HARD_GATHER_NEAR if "{near}" in f else ("",)
        out.extend(f.format(ball=ball, near=n) for n in nears)
    out.extend([s.replace("balls", "spheres") for s in out if "balls" in s])
    return list(dict.fromkeys(out))


def all_wordings(level: str, goal: np.ndarray) -> list[str]:
    """Every paraphrase of ``goal`` at ``level`` (train wordings for real, held-out for rephrase)."""
    if level == "real":
        return _relation_wordings(goal, "train")
    if level == "rephrase":
        return _relation_wordings(goal, "heldout")
    if level == "easy":
        return _easy_wordings(goal)
    if level == "hard":
        return _hard_wordings(goal)
    raise ValueError(f"unknown CLEVR level {level!r}")


def sample_instructions(
    level: str, goal: np.ndarray, k: int, rng: np.random.Generator
) -> list[str]:
    """``k`` paraphrases of ``goal``: without repetition when there are enough."""
    pool = all_wordings(level, goal)
    idx = rng.choice(len(pool), size=k, replace=k > len(pool))
    return [pool[i] for i in idx]

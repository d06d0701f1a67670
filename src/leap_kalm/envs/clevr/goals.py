"""Goals of CLEVR-Robot at KALM's levels: vectors, success rules, rewards, sampling.

Positions are the 10-d state ``(x, y)`` of red, blue, green, purple, cyan. Directions
(relations) are KALM's: 0 behind (+y), 1 left (-x), 2 front (-y), 3 right (+x), and,
for the easy level only, 4 still.

Goal vectors (float32):

- real / rephrase, G = 6: ``[5 ball slots (1 source, 2 destination), direction]``.
  Success (KALM ``_success``): the angle of ``source - destination`` lies in the
  direction's 90 degree sector ``[90 d + 45, 90 d + 135)`` and the distance is below
  ``0.13 * 3 = 0.39``.
- easy, G = 6: ``[5 slots (1 on the ball to move), direction or 4 = still]``; one step.
  Goals are drawn so that the walls allow them (:func:`easy_feasible`; *still* is only
  possible by pushing a ball that already touches a wall). KALM judges easy goals by
  the action (right ball, one of the three push directions with a component along
  the direction); here success is judged on states so that generated data can be
  labelled: the ball moved at least ``EASY_MIN_MOVE`` along the direction and its
  displacement is within 60 degrees of it; *still* means no ball moved more than
  0.05 (KALM's threshold). :func:`easy_action_success` gives KALM's action rule.
- hard, G = 24: ``[5 slots, kind] + 3 x [5 slots, direction]`` with kind 0 = two
  relations, 1 = three relations (sub-goals are real-level goals, unused rows zero),
  2 = balls in a line (slots hold each ball's rank 1..5 from left to right;
  consecutive balls' offsets within 30 degrees of +x, as KALM's ``ORDER``), 3 = balls
  gathered (slot 2 marks the centre ball; all others within 0.325, as KALM's
  ``SORT``, which always used green as the centre).

Rewards (KALM's ``Lang1Env`` with the still penalty off, which matches the rewards in
KALM's ``clevr_robot.npy`` to 1e-6): ``10 * (d_prev - d_next)`` where ``d`` is the
distance from the source ball to ``destination + 0.195 * direction``, and ``100`` on
the step that reaches success. Hard level (ImagineBench's task reward): ``10 *``
change in the number of completed sub-goals, ``100`` on success. Easy level: ``100``
on success, else 0 (ImagineBench uses 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from leap_kalm.envs.clevr.physics import (
    BALL_RADIUS,
    MIN_SPAWN_DISTANCE,
    N_BALLS,
    PUSH_DIRECTIONS,
    REACHABLE_X,
    REACHABLE_Y,
    SPAWN_X,
    SPAWN_Y,
)

LEVELS: tuple[str, ...] = ("real", "rephrase", "easy", "hard")

BEHIND, LEFT, FRONT, RIGHT, STILL = 0, 1, 2, 3, 4
DIRECTION_NAMES: tuple[str, ...] = ("behind", "left", "front", "right", "still")
#: Unit vector of each relation direction.
DIRECTION_VECTORS = np.array([[0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [1.0, 0.0]])
#: Push directions (indices into PUSH_DIRECTIONS) with a component along each direction.
DIRECTION_TO_PUSHES: dict[int, tuple[int, ...]] = {
    BEHIND: (1, 4, 5),
    LEFT: (2, 5, 7),
    FRONT: (3, 6, 7),
    RIGHT: (0, 4, 6),
}

SOURCE, DESTINATION, SELECTED = 1, 2, 1
SUCCESS_DISTANCE = BALL_RADIUS * 3  # 0.39
TARGET_OFFSET = SUCCESS_DISTANCE / 2  # 0.195: the reward's target point
EPS = 1e-3
SUCCESS_REWARD = 100.0
DISTANCE_SCALE = 10.0
SUBGOAL_REWARD = 10.0
STILL_THRESHOLD = 0.05
EASY_MIN_MOVE = 0.1
EASY_MAX_ANGLE = 60.0

TWO_RELATIONS, THREE_RELATIONS, LINE, GATHER = 0, 1, 2, 3
HARD_KINDS: tuple[str, ...] = ("two_relations", "three_relations", "line", "gather")
LINE_MAX_ANGLE = 30.0
GATHER_RADIUS = BALL_RADIUS * 2.5  # 0.325

REAL_GOAL_DIM = N_BALLS + 1
HARD_GOAL_DIM = (N_BALLS + 1) * 4


def goal_dim(level: str) -> int:
    """Length of the goal vector at ``level``."""
    _check_level(level)
    return HARD_GOAL_DIM if level == "hard" else REAL_GOAL_DIM


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise ValueError(f"unknown CLEVR level {level!r}; expected one of {LEVELS}")


def _xy(positions: np.ndarray) -> np.ndarray:
    return np.asarray(positions, dtype=np.float64).reshape(N_BALLS, 2)


# ----------------------------------------------------------------------------- real
def make_real_goal(source: int, destination: int, direction: int) -> np.ndarray:
    """Goal "push ball ``source`` ``direction`` of ball ``destination``"."""
    if source == destination:
        raise ValueError("source and destination balls must differ")
    if direction not in (BEHIND, LEFT, FRONT, RIGHT):
        raise ValueError(f"relation direction must be 0..3, got {direction}")
    goal = np.zeros(REAL_GOAL_DIM, dtype=np.float32)
    goal[source], goal[destination], goal[N_BALLS] = SOURCE, DESTINATION, direction
    return goal


def parse_real_goal(goal: np.ndarray) -> tuple[int, int, int]:
    """Return ``(source, destination, direction)`` of a real-level goal vector."""
    g = np.asarray(goal)
    src = np.flatnonzero(g[:N_BALLS] == SOURCE)
    dst = np.flatnonzero(g[:N_BALLS] == DESTINATION)
    if len(src) != 1 or len(dst) != 1:
        raise ValueError(f"not a relation goal: {g[:REAL_GOAL_DIM]}")
    return int(src[0]), int(dst[0]), int(g[N_BALLS])


def relation_angle(source_xy: np.ndarray, destination_xy: np.ndarray) -> float:
    """Angle in degrees, [0, 360), of ``source - destination`` (KALM's convention)."""
    delta = np.asarray(source_xy, dtype=np.float64) - np.asarray(destination_xy, dtype=np.float64)
    delta = np.where(np.abs(delta) >= EPS, delta, 0.0)
    return float(np.degrees(np.arctan2(delta[1], delta[0])) % 360.0)


def in_sector(angle: float, direction: int) -> bool:
    """Whether ``angle`` lies in ``[90 d + 45, 90 d + 135)`` (mod 360)."""
    low = (90.0 * direction + 45.0) % 360.0
    return (angle - low) % 360.0 < 90.0


def relation_holds(positions: np.ndarray, source: int, destination: int, direction: int) -> bool:
    """KALM's success rule for "``source`` is ``direction`` of ``destination``"."""
    xy = _xy(positions)
    dist = float(np.linalg.norm(xy[source] - xy[destination]))
    return in_sector(relation_angle(xy[source], xy[destination]), direction) and (
        dist < SUCCESS_DISTANCE + EPS
    )


def real_success(positions: np.ndarray, goal: np.ndarray) -> bool:
    return relation_holds(positions, *parse_real_goal(goal))


def target_point(positions: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """Point ``destination + 0.195 * direction`` the reward pulls the source ball to."""
    _, dst, direction = parse_real_goal(goal)
    return _xy(positions)[dst] + TARGET_OFFSET * DIRECTION_VECTORS[direction]


def target_distance(positions: np.ndarray, goal: np.ndarray) -> float:
    src, _, _ = parse_real_goal(goal)
    return float(np.linalg.norm(_xy(positions)[src] - target_point(positions, goal)))


def real_reward(prev_positions: np.ndarray, next_positions: np.ndarray, goal: np.ndarray) -> float:
    if real_success(next_positions, goal):
        return SUCCESS_REWARD
    return DISTANCE_SCALE * (
        target_distance(prev_positions, goal) - target_distance(next_positions, goal)
    )


# ----------------------------------------------------------------------------- easy
def make_easy_goal(ball: int, direction: int) -> np.ndarray:
    """Goal "move ball ``ball`` one push towards ``direction``" (4 = keep still)."""
    if direction not in (BEHIND, LEFT, FRONT, RIGHT, STILL):
        raise ValueError(f"easy direction must be 0..4, got {direction}")
    goal = np.zeros(REAL_GOAL_DIM, dtype=np.float32)
    goal[ball], goal[N_BALLS] = SELECTED, direction
    return goal


def parse_easy_goal(goal: np.ndarray) -> tuple[int, int]:
    g = np.asarray(goal)
    sel = np.flatnonzero(g[:N_BALLS] == SELECTED)
    if len(sel) != 1:
        raise ValueError(f"not an easy goal: {g[:REAL_GOAL_DIM]}")
    return int(sel[0]), int(g[N_BALLS])


def easy_success(prev_positions: np.ndarray, next_positions: np.ndarray, goal: np.ndarray) -> bool:
    ball, direction = parse_easy_goal(goal)
    delta = _xy(next_positions) - _xy(prev_positions)
    if direction == STILL:
        return bool(np.abs(delta).max() < STILL_THRESHOLD)
    move = delta[ball]
    along = float(move @ DIRECTION_VECTORS[direction])
    norm = float(np.linalg.norm(move))
    return along >= EASY_MIN_MOVE and along >= norm * np.cos(np.radians(EASY_MAX_ANGLE))


def easy_action_success(action: int, goal: np.ndarray) -> bool:
    """KALM's action-based easy judge (``step_level_a``); *still* cannot be judged by it."""
    ball, direction = parse_easy_goal(goal)
    if direction == STILL:
        raise ValueError("the action rule does not define 'still'; use easy_success")
    sel_ball, sel_dir = divmod(int(action), len(PUSH_DIRECTIONS))
    return sel_ball == ball and sel_dir in DIRECTION_TO_PUSHES[direction]


def room_to_wall(positions: np.ndarray, ball: int, direction: int) -> float:
    """Free distance ball ``ball`` has before a wall along relation ``direction``."""
    x, y = _xy(positions)[ball]
    return float(
        {
            BEHIND: REACHABLE_Y[1] - y,
            LEFT: x - REACHABLE_X[0],
            FRONT: y - REACHABLE_Y[0],
            RIGHT: REACHABLE_X[1] - x,
        }[direction]
    )


def easy_feasible(positions: np.ndarray, goal: np.ndarray) -> bool:
    """Whether one push can reach an easy goal, judged against the walls only.

    Moving needs ``EASY_MIN_MOVE + 0.05`` of room; keeping still needs some ball
    with less than half the still threshold of room (pushing it into the wall).
    """
    ball, direction = parse_easy_goal(goal)
    if direction == STILL:
        return any(
            room_to_wall(positions, b, d) < STILL_THRESHOLD / 2
            for b in range(N_BALLS)
            for d in range(4)
        )
    return room_to_wall(positions, ball, direction) >= EASY_MIN_MOVE + 0.05


def easy_reward(prev_positions: np.ndarray, next_positions: np.ndarray, goal: np.ndarray) -> float:
    return SUCCESS_REWARD if easy_success(prev_positions, next_positions, goal) else 0.0


# ----------------------------------------------------------------------------- hard
def make_hard_goal(
    kind: int,
    relations: list[tuple[int, int, int]] | None = None,
    order: list[int] | None = None,
    center: int | None = None,
) -> np.ndarray:
    """Hard goal vector (24,).

    Args:
        kind: ``TWO_RELATIONS``, ``THREE_RELATIONS``, ``LINE`` or ``GATHER``.
        relations: ``(source, destination, direction)`` triples for the relation kinds.
        order: For ``LINE``: ball indices from left to right.
        center: For ``GATHER``: the ball the others gather around.
    """
    goal = np.zeros(HARD_GOAL_DIM, dtype=np.float32)
    goal[N_BALLS] = kind
    if kind in (TWO_RELATIONS, THREE_RELATIONS):
        n = 2 if kind == TWO_RELATIONS else 3
        if relations is None or len(relations) != n:
            raise ValueError(f"{HARD_KINDS[kind]} needs {n} relations")
        for i, rel in enumerate(relations):
            start = REAL_GOAL_DIM * (i + 1)
            goal[start : start + REAL_GOAL_DIM] = make_real_goal(*rel)
    elif kind == LINE:
        if order is None or sorted(order) != list(range(N_BALLS)):
            raise ValueError("line needs an order: a permutation of the five balls")
        for rank, ball in enumerate(order):
            goal[ball] = rank + 1
    elif kind == GATHER:
        if center is None:
            raise ValueError("gather needs a center ball")
        goal[center] = DESTINATION
    else:
        raise ValueError(f"unknown hard kind {kind}")
    return goal


def hard_kind(goal: np.ndarray) -> int:
    return int(np.asarray(goal)[N_BALLS])


def hard_relations(goal: np.ndarray) -> list[tuple[int, int, int]]:
    g = np.asarray(goal)
    n = {TWO_RELATIONS: 2, THREE_RELATIONS: 3}.get(hard_kind(g), 0)
    return [parse_real_goal(g[REAL_GOAL_DIM * (i + 1) : REAL_GOAL_DIM * (i + 2)]) for i in range(n)]


def line_order(goal: np.ndarray) -> list[int]:
    ranks = np.asarray(goal)[:N_BALLS]
    return [int(b) for b in np.argsort(ranks)]


def gather_center(goal: np.ndarray) -> int:
    return int(np.flatnonzero(np.asarray(goal)[:N_BALLS] == DESTINATION)[0])


def hard_progress(positions: np.ndarray, goal: np.ndarray) -> tuple[int, int]:
    """``(completed, total)`` sub-goals of a hard goal."""
    kind, xy = hard_kind(goal), _xy(positions)
    if kind in (TWO_RELATIONS, THREE_RELATIONS):
        rels = hard_relations(goal)
        return sum(relation_holds(positions, *r) for r in rels), len(rels)
    if kind == LINE:
        order = line_order(goal)
        diffs = np.diff(xy[order], axis=0)
        cos = diffs[:, 0] / (np.linalg.norm(diffs, axis=1) + 1e-9)
        return int(np.sum(cos >= np.cos(np.radians(LINE_MAX_ANGLE)))), N_BALLS - 1
    if kind == GATHER:
        center = gather_center(goal)
        others = [i for i in range(N_BALLS) if i != center]
        dist = np.linalg.norm(xy[others] - xy[center], axis=1)
        return int(np.sum(dist < GATHER_RADIUS)), N_BALLS - 1
    raise ValueError(f"unknown hard kind {kind}")


def hard_success(positions: np.ndarray, goal: np.ndarray) -> bool:
    done, total = hard_progress(positions, goal)
    return done == total


def hard_reward(prev_positions: np.ndarray, next_positions: np.ndarray, goal: np.ndarray) -> float:
    if hard_success(next_positions, goal):
        return SUCCESS_REWARD
    return SUBGOAL_REWARD * (
        hard_progress(next_positions, goal)[0] - hard_progress(prev_positions, goal)[0]
    )


# ----------------------------------------------------------------------------- level dispatch
def is_success(
    level: str, prev_positions: np.ndarray, next_positions: np.ndarray, goal: np.ndarray
) -> bool:
    """Success after a transition at ``level`` (easy needs the previous state)."""
    _check_level(level)
    if level == "easy":
        return easy_success(prev_positions, next_positions, goal)
    if level == "hard":
        return hard_success(next_positions, goal)
    return real_success(next_positions, goal)


def compute_reward(
    level: str, prev_positions: np.ndarray, next_positions: np.ndarray, goal: np.ndarray
) -> float:
    _check_level(level)
    if level == "easy":
        return easy_reward(prev_positions, next_positions, goal)
    if level == "hard":
        return hard_reward(prev_positions, next_positions, goal)
    return real_reward(prev_positions, next_positions, goal)


def state_satisfies(level: str, positions: np.ndarray, goal: np.ndarray) -> bool:
    """Whether a state already satisfies a (state-judged) goal; False for easy."""
    if level == "easy":
        return False
    if level == "hard":
        return hard_success(positions, goal)
    return real_success(positions, goal)


# ----------------------------------------------------------------------------- sampling
def sample_positions(rng: np.random.Generator, max_tries: int = 1000) -> np.ndarray:
    """Five non-overlapping ball positions, as clevr_robot_env's scene generator draws them."""
    for _ in range(max_tries):
        xy: list[np.ndarray] = []
        for _ball in range(N_BALLS):
            for _try in range(50):
                p = np.array([rng.uniform(*SPAWN_X), rng.uniform(*SPAWN_Y)])
                if all(np.linalg.norm(p - q) >= MIN_SPAWN_DISTANCE for q in xy):
                    xy.append(p)
                    break
            else:
                break
        if len(xy) == N_BALLS:
            return np.concatenate(xy)
    raise RuntimeError("could not place five balls")


def _acyclic(relations: list[tuple[int, int, int]]) -> bool:
    edges = {(s, d) for s, d, _ in relations}
    nodes = {n for e in edges for n in e}
    # tiny graphs: repeatedly strip sinks
    while nodes:
        sinks = {n for n in nodes if not any(s == n and d in nodes for s, d in edges)}
        if not sinks:
            return False
        nodes -= sinks
    return True


def sample_relations(rng: np.random.Generator, n: int) -> list[tuple[int, int, int]]:
    """``n`` relations with distinct sources, no repeated pair and no cycle."""
    while True:
        rels: list[tuple[int, int, int]] = []
        sources = rng.permutation(N_BALLS)[:n]
        for s in sources:
            d = int(rng.choice([b for b in range(N_BALLS) if b != s]))
            rels.append((int(s), d, int(rng.integers(4))))
        pairs = [frozenset((s, d)) for s, d, _ in rels]
        if len(set(pairs)) == n and _acyclic(rels):
            return rels


def sample_goal(
    level: str, rng: np.random.Generator, positions: np.ndarray | None = None, max_tries: int = 100
) -> np.ndarray:
    """Draw a goal at ``level``; with ``positions``, one not already satisfied there."""
    _check_level(level)
    for _ in range(max_tries):
        if level in ("real", "rephrase"):
            src, dst = (int(b) for b in rng.choice(N_BALLS, size=2, replace=False))
            goal = make_real_goal(src, dst, int(rng.integers(4)))
        elif level == "easy":
            goal = make_easy_goal(int(rng.integers(N_BALLS)), int(rng.integers(5)))
            if positions is not None and not easy_feasible(positions, goal):
                continue
        else:
            kind = int(rng.integers(4))
            if kind in (TWO_RELATIONS, THREE_RELATIONS):
                goal = make_hard_goal(kind, relations=sample_relations(rng, 2 if kind == 0 else 3))
            elif kind == LINE:
                goal = make_hard_goal(kind, order=[int(b) for b in rng.permutation(N_BALLS)])
            else:
                goal = make_hard_goal(kind, center=int(rng.integers(N_BALLS)))
        if positions is None or not state_satisfies(level, positions, goal):
            return goal
    raise RuntimeError(f"could not sample a {level} goal for these positions")


def describe_goal(level: str, goal: np.ndarray) -> dict[str, Any]:
    """A readable dict of a goal vector (for logs and instruction rendering)."""
    from leap_kalm.envs.clevr.physics import COLORS

    if level in ("real", "rephrase"):
        s, d, r = parse_real_goal(goal)
        return {"source": COLORS[s], "destination": COLORS[d], "direction": DIRECTION_NAMES[r]}
    if level == "easy":
        b, r = parse_easy_goal(goal)
        return {"ball": COLORS[b], "direction": DIRECTION_NAMES[r]}
    kind = hard_kind(goal)
    out: dict[str, Any] = {"kind": HARD_KINDS[kind]}
    if kind in (TWO_RELATIONS, THREE_RELATIONS):
        out["relations"] = [
            (COLORS[s], DIRECTION_NAMES[r], COLORS[d]) for s, d, r in hard_relations(goal)
        ]
    elif kind == LINE:
        out["order"] = [COLORS[b] for b in line_order(goal)]
    else:
        out["center"] = COLORS[gather_center(goal)]
    return out

"""Scripted (privileged) policies for CLEVR-Robot goals, and their noisy variants.

The policy scores every candidate action by predicting where the balls go: by
default with a cheap geometric model (the pushed ball moves
``NOMINAL_PUSH_DISTANCE`` along the push, clipped to the arena; balls it would run
into are shoved along), or, when ``model`` is given (e.g. ``env.simulate``), with the
exact simulator. The score prefers predicted success, then more completed
sub-goals, then a shaping distance:

- real / rephrase: distance from the source ball to the reward's target point
  ``destination + 0.195 * direction`` (clipped to where balls can be), plus how far
  that target lies outside the arena (so it pushes the destination ball off a wall).
- easy: the push along the asked direction, or, for *still*, the push that moves a
  ball least (into a wall).
- hard: the first unmet relation as above; line: each ball to its slot on a row;
  gather: the other balls to within reach of the centre ball.

If the last action left the state unchanged, the policy picks at random among its
three best candidates, which breaks loops against walls. ``noise`` is the
probability of a uniformly random action instead (the noisy variant).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from leap_kalm.envs.clevr import goals as G
from leap_kalm.envs.clevr.physics import (
    BALL_RADIUS,
    N_ACTIONS,
    N_BALLS,
    NOMINAL_PUSH_DISTANCE,
    PUSH_DIRECTIONS,
    REACHABLE_X,
    REACHABLE_Y,
)

Model = Callable[[np.ndarray, int], np.ndarray]
_UNIT = PUSH_DIRECTIONS / np.linalg.norm(PUSH_DIRECTIONS, axis=1, keepdims=True)
_LO = np.array([REACHABLE_X[0], REACHABLE_Y[0]])
_HI = np.array([REACHABLE_X[1], REACHABLE_Y[1]])
_CARDINAL_PUSH = {G.RIGHT: 0, G.BEHIND: 1, G.LEFT: 2, G.FRONT: 3}
_LINE_SPACING = 2 * BALL_RADIUS + 0.01


def predict_push(positions: np.ndarray, action: int) -> np.ndarray:
    """Cheap geometric guess of the positions after ``action`` (no physics)."""
    xy = np.asarray(positions, dtype=np.float64).reshape(N_BALLS, 2).copy()
    ball, direction = divmod(int(action), len(PUSH_DIRECTIONS))
    xy[ball] = np.clip(xy[ball] + NOMINAL_PUSH_DISTANCE * _UNIT[direction], _LO, _HI)
    for j in range(N_BALLS):  # shove balls the pushed ball lands on
        if j == ball:
            continue
        gap = xy[j] - xy[ball]
        dist = float(np.linalg.norm(gap))
        if dist < 2 * BALL_RADIUS:
            push = gap / (dist + 1e-9) if dist > 1e-6 else _UNIT[direction]
            xy[j] = np.clip(xy[j] + push * (2 * BALL_RADIUS - dist), _LO, _HI)
    return xy.reshape(-1)


def _relation_shaping(xy: np.ndarray, src: int, dst: int, direction: int) -> float:
    target = xy[dst] + G.TARGET_OFFSET * G.DIRECTION_VECTORS[direction]
    reachable = np.clip(target, _LO, _HI)
    return float(np.linalg.norm(xy[src] - reachable) + 2.0 * np.linalg.norm(target - reachable))


def _line_targets(xy: np.ndarray, order: list[int]) -> np.ndarray:
    y = float(np.clip(np.mean(xy[:, 1]), _LO[1] + 0.05, _HI[1] - 0.05))
    xs = (np.arange(N_BALLS) - (N_BALLS - 1) / 2) * _LINE_SPACING
    targets = np.zeros((N_BALLS, 2))
    for rank, ball in enumerate(order):
        targets[ball] = (xs[rank], y)
    return targets


def score_state(
    level: str, goal: np.ndarray, positions: np.ndarray, anchor: np.ndarray | None = None
) -> float:
    """Lower is better: how far ``positions`` are from satisfying ``goal``.

    ``anchor`` (the current positions) fixes moving references such as line slots.
    """
    xy = np.asarray(positions, dtype=np.float64).reshape(N_BALLS, 2)
    if level in ("real", "rephrase"):
        src, dst, direction = G.parse_real_goal(goal)
        if G.relation_holds(positions, src, dst, direction):
            return -1e3
        return _relation_shaping(xy, src, dst, direction)
    if level == "hard":
        done, total = G.hard_progress(positions, goal)
        if done == total:
            return -1e3
        kind = G.hard_kind(goal)
        if kind in (G.TWO_RELATIONS, G.THREE_RELATIONS):
            rels = G.hard_relations(goal)
            todo = next(r for r in rels if not G.relation_holds(positions, *r))
            return -float(done) + _relation_shaping(xy, *todo)
        ref = xy if anchor is None else np.asarray(anchor, dtype=np.float64).reshape(N_BALLS, 2)
        if kind == G.LINE:
            targets = _line_targets(ref, G.line_order(goal))
            return -float(done) + float(np.sum(np.linalg.norm(xy - targets, axis=1)))
        center = G.gather_center(goal)
        dist = np.linalg.norm(xy - xy[center], axis=1)
        dist[center] = 0.0
        return -float(done) + float(np.sum(np.maximum(dist - 0.29, 0.0)))
    raise ValueError(f"score_state does not handle level {level!r}")


class ScriptedClevrPolicy:
    """Privileged policy ``act(obs, goal) -> action`` for one level.

    Args:
        level: ``"real"``, ``"rephrase"``, ``"easy"`` or ``"hard"``.
        noise: Probability of a uniformly random action at each step.
        seed: Seed of the policy's own generator (noise and tie-breaking).
        model: Optional exact transition ``model(positions, action) -> positions``.
    """

    def __init__(
        self,
        level: str = "real",
        noise: float = 0.0,
        seed: int | None = None,
        model: Model | None = None,
    ) -> None:
        if level not in G.LEVELS:
            raise ValueError(f"unknown CLEVR level {level!r}")
        if not 0.0 <= noise <= 1.0:
            raise ValueError("noise must be in [0, 1]")
        self.level, self.noise, self.model = level, float(noise), model
        self.rng = np.random.default_rng(seed)
        self._last_obs: np.ndarray | None = None

    def reset(self) -> None:
        self._last_obs = None

    def __call__(self, obs: np.ndarray, goal: np.ndarray) -> int:
        return self.act(obs, goal)

    def act(self, obs: np.ndarray, goal: np.ndarray) -> int:
        obs = np.asarray(obs, dtype=np.float64).reshape(-1)[: 2 * N_BALLS]
        stuck = self._last_obs is not None and np.allclose(obs, self._last_obs, atol=0.02)
        self._last_obs = obs.copy()
        if self.noise > 0 and self.rng.random() < self.noise:
            return int(self.rng.integers(N_ACTIONS))
        if self.level == "easy":
            return self._act_easy(obs, goal)
        predict = self.model or predict_push
        candidates = self._candidates(goal)
        scores = np.array(
            [score_state(self.level, goal, predict(obs, a), anchor=obs) for a in candidates]
        )
        order = np.argsort(scores, kind="stable")
        if stuck:
            return int(candidates[order[self.rng.integers(min(3, len(order)))]])
        return int(candidates[order[0]])

    def _candidates(self, goal: np.ndarray) -> np.ndarray:
        if self.level in ("real", "rephrase"):
            src, dst, _ = G.parse_real_goal(goal)
            return np.array([b * 8 + d for b in (src, dst) for d in range(8)])
        return np.arange(N_ACTIONS)

    def _act_easy(self, obs: np.ndarray, goal: np.ndarray) -> int:
        ball, direction = G.parse_easy_goal(goal)
        if direction != G.STILL:
            return ball * 8 + _CARDINAL_PUSH[direction]
        xy = obs.reshape(N_BALLS, 2)
        best, best_room = 0, np.inf
        for b in range(N_BALLS):  # push the ball with least room before a wall
            for d, push in _CARDINAL_PUSH.items():
                v = G.DIRECTION_VECTORS[d]
                room = float(
                    np.max(np.where(v > 0, _HI - xy[b], np.where(v < 0, xy[b] - _LO, -np.inf)))
                )
                if room < best_room:
                    best, best_room = b * 8 + push, room
        return best

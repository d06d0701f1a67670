"""Success rules, rewards and instructions of CLEVR-Robot goals."""

from __future__ import annotations

import numpy as np
import pytest

from leap_kalm.envs.clevr import goals as G
from leap_kalm.envs.clevr.instructions import (
    EASY_MOVE_FRAMES,
    HELDOUT_RELATION_FRAMES,
    HELDOUT_RELATION_PHRASES,
    TRAIN_RELATION_FRAMES,
    TRAIN_RELATION_PHRASES,
    all_wordings,
    sample_instructions,
)


def place(src_xy, dst_xy, src=0, dst=1) -> np.ndarray:
    """Balls ``src``/``dst`` at the given points, the others far away in a corner row."""
    xy = np.array([[-0.5, -0.3], [-0.2, -0.3], [0.1, -0.3], [0.4, -0.3], [0.5, 0.55]])
    xy[src], xy[dst] = src_xy, dst_xy
    return xy.reshape(-1)


# direction -> a unit vector pointing into its sector, and one just outside it
SECTORS = {G.BEHIND: 90, G.LEFT: 180, G.FRONT: 270, G.RIGHT: 0}


@pytest.mark.parametrize("direction", [G.BEHIND, G.LEFT, G.FRONT, G.RIGHT])
@pytest.mark.parametrize(
    ("offset_deg", "dist", "expected"),
    [
        (0, 0.3, True),
        (40, 0.3, True),
        (-44, 0.3, True),
        (50, 0.3, False),
        (-50, 0.3, False),
        (180, 0.3, False),
        (0, 0.385, True),
        (0, 0.40, False),
        (0, 0.6, False),
    ],
)
def test_relation_sector_and_distance(
    direction: int, offset_deg: float, dist: float, expected: bool
) -> None:
    angle = np.radians(SECTORS[direction] + offset_deg)
    dst = np.array([0.0, 0.15])
    src = dst + dist * np.array([np.cos(angle), np.sin(angle)])
    goal = G.make_real_goal(0, 1, direction)
    assert G.real_success(place(src, dst), goal) is expected


def test_sector_boundaries_follow_kalm() -> None:
    # [45, 135) is behind; 135 belongs to left; right wraps around 0
    assert G.in_sector(45.0, G.BEHIND) and not G.in_sector(135.0, G.BEHIND)
    assert G.in_sector(135.0, G.LEFT)
    assert (
        G.in_sector(350.0, G.RIGHT)
        and G.in_sector(10.0, G.RIGHT)
        and not G.in_sector(45.0, G.RIGHT)
    )
    assert G.relation_angle([0.0, 1.0], [0.0, 0.0]) == pytest.approx(90.0)


def test_goal_vector_layout() -> None:
    goal = G.make_real_goal(3, 4, G.BEHIND)
    np.testing.assert_array_equal(goal, [0, 0, 0, 1, 2, 0])
    assert goal.dtype == np.float32
    assert G.parse_real_goal(goal) == (3, 4, 0)
    with pytest.raises(ValueError):
        G.make_real_goal(2, 2, 0)


def test_real_reward_is_progress_times_ten_plus_success() -> None:
    goal = G.make_real_goal(0, 1, G.RIGHT)  # red right of blue: target = blue + (0.195, 0)
    dst = np.array([0.0, 0.15])
    far, nearer = place([0.5, 0.15 + 0.5], dst), place([0.5, 0.15 + 0.4], dst)
    d_far, d_near = G.target_distance(far, goal), G.target_distance(nearer, goal)
    assert G.real_reward(far, nearer, goal) == pytest.approx(10 * (d_far - d_near))
    assert G.real_reward(far, place([0.3, 0.15], dst), goal) == 100.0


def test_easy_success_moves_and_still() -> None:
    prev = place([0.0, 0.15], [0.4, 0.4])
    moved_left = prev.copy()
    moved_left[0] -= 0.16
    assert G.easy_success(prev, moved_left, G.make_easy_goal(0, G.LEFT))
    assert not G.easy_success(prev, moved_left, G.make_easy_goal(0, G.RIGHT))
    assert not G.easy_success(prev, moved_left, G.make_easy_goal(1, G.LEFT))  # wrong ball
    diagonal = prev.copy()
    diagonal[0:2] += [-0.12, 0.12]
    assert G.easy_success(prev, diagonal, G.make_easy_goal(0, G.LEFT))
    assert G.easy_success(prev, diagonal, G.make_easy_goal(0, G.BEHIND))
    nudged = prev.copy()
    nudged[4] += 0.03
    assert G.easy_success(prev, nudged, G.make_easy_goal(2, G.STILL))
    assert not G.easy_success(prev, moved_left, G.make_easy_goal(2, G.STILL))
    assert G.easy_action_success(0 * 8 + 5, G.make_easy_goal(0, G.LEFT))  # KALM's action rule
    assert not G.easy_action_success(0 * 8 + 0, G.make_easy_goal(0, G.LEFT))
    assert G.easy_reward(prev, moved_left, G.make_easy_goal(0, G.LEFT)) == 100.0


def test_hard_relations() -> None:
    goal = G.make_hard_goal(G.TWO_RELATIONS, relations=[(0, 1, G.RIGHT), (2, 3, G.BEHIND)])
    assert goal.shape == (24,) and G.hard_relations(goal) == [(0, 1, 3), (2, 3, 0)]
    xy = np.array([[0.3, 0.0], [0.0, 0.0], [-0.4, 0.5], [-0.4, 0.2], [0.5, 0.55]])
    assert G.hard_progress(xy.reshape(-1), goal) == (2, 2) and G.hard_success(xy.reshape(-1), goal)
    xy[2] = [-0.4, -0.1]  # green now in front of purple
    assert G.hard_progress(xy.reshape(-1), goal) == (1, 2)
    three = G.make_hard_goal(G.THREE_RELATIONS, relations=[(0, 1, 3), (2, 3, 0), (4, 1, 0)])
    assert len(G.hard_relations(three)) == 3


def test_hard_line_and_gather() -> None:
    line = G.make_hard_goal(G.LINE, order=[4, 3, 2, 1, 0])
    row = np.array([[0.54, 0.1], [0.27, 0.12], [0.0, 0.1], [-0.27, 0.05], [-0.54, 0.1]])
    assert G.hard_success(row.reshape(-1), line)
    assert not G.hard_success(row[::-1].reshape(-1), line)
    bent = row.copy()
    bent[2] = [0.0, 0.4]  # a 45 degree kink
    assert G.hard_progress(bent.reshape(-1), line)[0] < 4
    gather = G.make_hard_goal(G.GATHER, center=2)
    ring = np.array([[0.3, 0.0], [0.0, 0.3], [0.0, 0.0], [-0.3, 0.0], [0.0, -0.3]])
    assert G.hard_success(ring.reshape(-1), gather)
    ring[4] = [0.0, -0.4]
    assert G.hard_progress(ring.reshape(-1), gather) == (3, 4)
    assert G.hard_reward(ring.reshape(-1), (ring * 0.8).reshape(-1), gather) == 100.0


def test_sampled_goals_are_valid_and_unsatisfied() -> None:
    rng = np.random.default_rng(0)
    for level in G.LEVELS:
        for _ in range(30):
            pos = G.sample_positions(rng)
            xy = pos.reshape(5, 2)
            dists = np.linalg.norm(xy[:, None] - xy[None], axis=-1) + np.eye(5)
            assert dists.min() >= G.MIN_SPAWN_DISTANCE - 1e-9
            goal = G.sample_goal(level, rng, pos)
            assert goal.shape == (G.goal_dim(level),)
            assert not G.state_satisfies(level, pos, goal)
            if level == "easy":
                assert G.easy_feasible(pos, goal)


def test_relation_sampler_is_acyclic() -> None:
    rng = np.random.default_rng(1)
    for _ in range(200):
        rels = G.sample_relations(rng, 3)
        assert len({s for s, _, _ in rels}) == 3 and G._acyclic(rels)
    assert not G._acyclic([(0, 1, 0), (1, 2, 0), (2, 0, 0)])


def test_train_and_heldout_wordings_are_disjoint() -> None:
    assert not set(TRAIN_RELATION_FRAMES) & set(HELDOUT_RELATION_FRAMES)
    for d in range(4):
        assert not set(TRAIN_RELATION_PHRASES[d]) & set(HELDOUT_RELATION_PHRASES[d])
    train, heldout = set(), set()
    for s in range(5):
        for t in range(5):
            if s != t:
                for d in range(4):
                    goal = G.make_real_goal(s, t, d)
                    train |= set(all_wordings("real", goal))
                    heldout |= set(all_wordings("rephrase", goal))
    assert train and heldout and not train & heldout


def test_instructions_name_the_goal() -> None:
    rng = np.random.default_rng(0)
    texts = sample_instructions("real", G.make_real_goal(3, 4, G.LEFT), 20, rng)
    assert len(texts) == len(set(texts)) == 20
    assert all("purple" in t and "cyan" in t for t in texts)
    assert len(all_wordings("real", G.make_real_goal(0, 1, 0))) >= 50
    assert len(all_wordings("easy", G.make_easy_goal(2, G.RIGHT))) == 3 * len(EASY_MOVE_FRAMES)
    for level, goal in [
        ("easy", G.make_easy_goal(1, G.STILL)),
        ("hard", G.make_hard_goal(G.LINE, order=[0, 1, 2, 3, 4])),
        ("hard", G.make_hard_goal(G.GATHER, center=1)),
        ("hard", G.make_hard_goal(G.TWO_RELATIONS, relations=[(0, 1, 0), (2, 3, 1)])),
    ]:
        assert len(all_wordings(level, goal)) >= 20, (level, goal)

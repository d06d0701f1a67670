"""Shared fixtures: a few generated games, made once per test session."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

GAMES_PER_TYPE = 3


@pytest.fixture(scope="session")
def train_games(tmp_path_factory):
    """3 games of each of the 6 task types (18), train split, seed 0."""
    from leap_kalm.envs.alfworld import TASK_TYPES, generate_games

    root = tmp_path_factory.mktemp("alfworld_train")
    paths = generate_games("train", GAMES_PER_TYPE * len(TASK_TYPES), seed=0, out_dir=root)
    return root, paths


@pytest.fixture(scope="session")
def games_by_type(train_games):
    from leap_kalm.envs.alfworld.env import read_traj_data

    out: dict[str, list] = {}
    for p in train_games[1]:
        out.setdefault(read_traj_data(p)["task_type"], []).append(p)
    return out

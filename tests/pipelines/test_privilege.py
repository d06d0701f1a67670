"""`privilege` nodes, called directly on a small generated games index."""

from __future__ import annotations

from pathlib import Path

import pytest

from leap_kalm.pipelines.privilege.nodes import compute_privileged_states as producer
from tests.pipelines.conftest import LEAP, snapshot


def compute_privileged_states(games, params):
    """Every record the node's producer makes from scratch."""
    return list(producer(games, params)([]))


def test_one_privileged_state_per_train_game_in_index_order(alfworld_games, train_games):
    before = snapshot(alfworld_games)
    states = compute_privileged_states(alfworld_games, LEAP)
    assert [s["game_id"] for s in states] == [g["game_id"] for g in train_games]
    assert len(states) == 3 and len(alfworld_games) == 5  # the evaluation games are left out
    for state, game in zip(states, train_games, strict=True):
        assert state["task_type"] == game["task_type"]
        assert state["optimal_actions"] and state["receptacles"]
        targets = [e for e in state["essential_objects"] if e["role"] == "target"]
        assert targets and all(t["location"] in state["receptacles"] for t in targets)
    assert snapshot(alfworld_games) == before


def test_the_optimal_plan_wins_its_game(alfworld_games, train_games):
    """The plan a teacher is shown is correct: played in the game, it wins."""
    from leap_kalm.envs.alfworld import AlfWorldEnv

    state = compute_privileged_states(alfworld_games[:1], LEAP)[0]
    env = AlfWorldEnv(train_games[0]["path"], max_steps=50)
    _, info = env.reset()
    for action in state["optimal_actions"]:
        assert action in info["admissible_commands"], action
        _, _, terminated, _, info = env.step(action)
    env.close()
    assert terminated and info["won"]


def test_no_train_games_gives_no_states(alfworld_games):
    valid = [g for g in alfworld_games if g["split"] != "train"]
    assert compute_privileged_states(valid, LEAP) == []
    assert compute_privileged_states([], {}) == []


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"env": "nethack"}, "leap.env must be a text world .*got 'nethack'"),
        ({"env": "clevr"}, "leap.env must be a text world .*got 'clevr'"),
        ({"enviroment": "alfworld"}, r"unknown keys \['enviroment'\]"),
    ],
)
def test_bad_parameters_are_named(alfworld_games, params, message):
    with pytest.raises(ValueError, match=message):
        producer(alfworld_games, params)


def test_a_finished_state_is_reused_only_while_its_game_is_unchanged(
    tmp_path, alfworld_games, train_games
):
    """A later iteration computes privileged states only for games whose files changed."""
    import shutil

    games = []
    for game in alfworld_games:
        folder = tmp_path / game["game_id"]
        shutil.copytree(Path(game["path"]).parent, folder)
        games.append({**game, "path": str(folder / Path(game["path"]).name)})
    make = producer(games, LEAP)
    states = list(make([]))
    assert all(make.reusable(s) for s in states)
    assert not make.reusable({k: v for k, v in states[0].items() if k != "game_fingerprint"})
    assert not make.reusable({**states[0], "game_id": "not-a-train-game"})
    changed = Path(games[0]["path"])
    changed.write_text(changed.read_text() + "\n; edited\n")
    again = producer(games, LEAP)
    assert [again.reusable(s) for s in states] == [False] + [True] * (len(states) - 1)


def test_a_games_fingerprint_follows_its_content_not_its_location(tmp_path, alfworld_games):
    """Two copies of the same game in different folders fingerprint alike (a project moved
    or copied keeps its reuse and writes the same records); an edit changes it."""
    import shutil

    from leap_kalm.envs.fingerprint import game_fingerprint

    game = alfworld_games[0]
    copies = []
    for name in ("a", "b"):
        folder = tmp_path / name
        shutil.copytree(Path(game["path"]).parent, folder)
        copies.append({**game, "path": str(folder / Path(game["path"]).name)})
    assert game_fingerprint(copies[0]) == game_fingerprint(copies[1]) == game_fingerprint(game)
    assert game_fingerprint({**copies[0], "split": "valid_seen"}) != game_fingerprint(copies[0])
    edited = Path(copies[1]["path"])
    edited.write_text(edited.read_text() + "\n")
    assert game_fingerprint(copies[1]) != game_fingerprint(copies[0])
    shop = tmp_path / "shop"
    shop.mkdir()
    (shop / "items.json").write_text("[]")
    other = tmp_path / "shop2"
    shutil.copytree(shop, other)
    entry = {"game_id": "w-1", "catalog": str(shop)}
    assert game_fingerprint(entry) == game_fingerprint({**entry, "catalog": str(other)})

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from leap_kalm.envs.alfworld import (
    TASK_TYPES,
    AlfWorldDataNotFoundError,
    generate_games,
    load_games,
    resolve_alfworld_data,
    split_scenes,
)
from leap_kalm.envs.alfworld.generate import walkthrough_wins

DIR_RE = re.compile(
    r"^(?P<task>[a-z_]+)-(?P<obj>[A-Za-z]+)-(?P<mrecep>None)-(?P<recep>[A-Za-z]+)-(?P<scene>\d+)$"
)


def test_files_in_alfworld_format(train_games):
    from alfworld.info import ALFRED_PDDL_PATH

    root, paths = train_games
    assert len(paths) == 18
    domain = Path(ALFRED_PDDL_PATH).read_text()
    for p in paths:
        assert p.name == "game.tw-pddl" and p.parent.name.startswith("trial_")
        m = DIR_RE.match(p.parent.parent.name)
        assert m, p.parent.parent.name
        assert p.parent.parent.parent == root / "train"
        game = json.loads(p.read_text())
        assert set(game) >= {"pddl_domain", "grammar", "pddl_problem", "solvable"}
        assert game["solvable"] is True and game["pddl_domain"] == domain
        assert "UNKNOWN GOAL" not in game["grammar"]
        traj = json.loads((p.parent / "traj_data.json").read_text())
        assert traj["task_type"] == m["task"] in TASK_TYPES
        params = traj["pddl_params"]
        assert params["object_target"] == m["obj"]
        assert m["recep"] in (params["parent_target"], params["toggle_target"])
        assert traj["scene"]["scene_num"] == int(m["scene"])
        desc = traj["turk_annotations"]["anns"][0]["task_desc"]
        assert f"Your task is to: {desc}." in game["grammar"]
        if traj["task_type"] == "look_at_obj_in_light":
            assert params["toggle_target"] == "DeskLamp"


def test_round_robin_over_all_task_types(train_games):
    types = [
        json.loads((p.parent / "traj_data.json").read_text())["task_type"] for p in train_games[1]
    ]
    assert types == [TASK_TYPES[i % 6] for i in range(len(types))]


def test_modest_rooms_and_distractors(train_games):
    for p in train_games[1]:
        problem = json.loads(p.read_text())["pddl_problem"]
        target = json.loads((p.parent / "traj_data.json").read_text())["pddl_params"][
            "object_target"
        ]
        recs = re.findall(r"^\s+(\S+) - receptacle$", problem, flags=re.M)
        objs = re.findall(r"^\s+(\S+) - object$", problem, flags=re.M)
        assert 5 <= len(recs) <= 12, recs  # small scenes have fewer than 8 distinct spots
        distractors = [o for o in objs if not o.startswith((target + "_bar_", "DeskLamp_bar_"))]
        assert 3 <= len(distractors) <= 5, objs
        assert "(opened" not in problem  # openable receptacles start closed


def test_deterministic_by_seed(tmp_path):
    a = generate_games("valid_seen", 2, seed=7, out_dir=tmp_path / "a")
    b = generate_games("valid_seen", 2, seed=7, out_dir=tmp_path / "b")
    c = generate_games("valid_seen", 2, seed=8, out_dir=tmp_path / "c")
    files_a = sorted(
        f.relative_to(tmp_path / "a") for f in (tmp_path / "a").rglob("*") if f.is_file()
    )
    files_b = sorted(
        f.relative_to(tmp_path / "b") for f in (tmp_path / "b").rglob("*") if f.is_file()
    )
    assert files_a == files_b and len(files_a) == 4
    for f in files_a:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    assert [p.read_bytes() for p in a] != [p.read_bytes() for p in c]


def test_valid_unseen_scenes_disjoint_from_train(tmp_path):
    train, seen, unseen = (set(split_scenes(s)) for s in ("train", "valid_seen", "valid_unseen"))
    assert train == seen and unseen and not (train & unseen)
    paths = generate_games("valid_unseen", 3, seed=0, out_dir=tmp_path)
    for p in paths:
        scene = json.loads((p.parent / "traj_data.json").read_text())["scene"]["scene_num"]
        assert scene in unseen and scene not in train


def test_every_generated_game_solved_by_planner_walkthrough(train_games):
    for p in train_games[1]:
        plan = walkthrough_wins(p)
        assert plan, p
        stored = json.loads((p.parent / "traj_data.json").read_text())["plan"]["walkthrough"]
        assert plan == stored


def test_load_games_finds_games_and_skips_unsolvable(train_games, tmp_path):
    root, paths = train_games
    assert load_games(root) == sorted(paths)
    assert load_games(root, split="train") == sorted(paths)
    bad = tmp_path / "train" / "x-Apple-None-Fridge-1" / "trial_1"
    bad.mkdir(parents=True)
    (bad / "game.tw-pddl").write_text(json.dumps({"solvable": False}))
    (bad / "traj_data.json").write_text("{}")
    assert load_games(tmp_path) == []


def test_unknown_split_rejected(tmp_path):
    with pytest.raises(ValueError):
        generate_games("test", 1, seed=0, out_dir=tmp_path)


def test_missing_data_error_message(tmp_path, monkeypatch):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(AlfWorldDataNotFoundError) as err:
        resolve_alfworld_data(None)
    assert isinstance(err.value, FileNotFoundError)
    msg = str(err.value)
    for needle in ("ALFWORLD_DATA", "alfworld-download", "generate_games", "json_2.1.1"):
        assert needle in msg
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=str(empty)):
        resolve_alfworld_data(empty)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(AlfWorldDataNotFoundError, match="nowhere"):
        resolve_alfworld_data()
    with pytest.raises(AlfWorldDataNotFoundError):
        load_games(tmp_path / "nowhere")


def test_resolve_official_layout(train_games, tmp_path, monkeypatch):
    import shutil

    src = train_games[1][0].parent
    official = tmp_path / "data" / "json_2.1.1" / "train" / src.parent.name / src.name
    shutil.copytree(src, official)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "data"))
    split_dir = resolve_alfworld_data()
    assert split_dir == tmp_path / "data" / "json_2.1.1" / "train"
    assert resolve_alfworld_data(split_dir) == split_dir  # the split folder itself
    assert load_games(split_dir) == [official / "game.tw-pddl"]

"""The ingest pipeline, run as slices with SequentialRunner on a DataCatalog of tmp files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner
from kedro_datasets.json import JSONDataset

from leap_kalm.datasets import HDF5Dataset, JSONLDataset, NpyDataset
from leap_kalm.envs.kalm_format import validate_kalm_dataset
from leap_kalm.pipelines.ingest.nodes import prepare_games, summarize_kalm_offline_data
from leap_kalm.pipelines.ingest.pipeline import create_pipeline
from leap_kalm.pipelines.params import KalmIngestParams, TextIngestParams


def _catalog(tmp_path, params: dict) -> DataCatalog:
    datasets = {
        "alfworld.games": JSONDataset(filepath=str(tmp_path / "games.json")),
        "alfworld.expert_logs": JSONLDataset(
            filepath=str(tmp_path / "expert_logs.jsonl"),
            save_args={"mode": "resume", "key": "game_id", "reuse": True},
        ),
    }
    for env in ("clevr", "metaworld"):
        datasets[f"{env}.kalm_offline"] = NpyDataset(
            filepath=str(tmp_path / f"{env}.npy"), allow_pickle=True
        )
        datasets[f"{env}.kalm_offline_hdf5"] = HDF5Dataset(filepath=str(tmp_path / f"{env}.hdf5"))
        datasets[f"{env}.kalm_offline_summary"] = JSONDataset(
            filepath=str(tmp_path / f"{env}_summary.json")
        )
    for name, value in {"kalm_real_data": None, **params}.items():
        datasets[f"params:{name}"] = MemoryDataset(value)
    return DataCatalog(datasets=datasets)


def test_alfworld_ingest_writes_expert_logs_for_the_train_split(tmp_path):
    params = {
        "alfworld.ingest": {
            "games_dir": str(tmp_path / "games"),
            "n_games": {"train": 6, "valid_seen": 1, "valid_unseen": 1},
            "seed": 3,
        }
    }
    catalog = _catalog(tmp_path, params)
    pipe = create_pipeline().only_nodes_with_namespaces(["alfworld"])
    SequentialRunner().run(pipe, catalog)
    games = catalog.load("alfworld.games")
    assert [g["split"] for g in games].count("train") == 6 and len(games) == 8
    logs = catalog.load("alfworld.expert_logs")
    assert sorted(t["game_id"] for t in logs) == sorted(
        g["game_id"] for g in games if g["split"] == "train"
    )
    assert sum(t["success"] for t in logs) >= 5
    assert all(t["model_id"] == "handcoded_expert" and t["steps"] for t in logs)
    # a second run reuses the generated games rather than regenerating them
    mtime = (tmp_path / "games" / "train" / "manifest.json").stat().st_mtime
    SequentialRunner().run(create_pipeline().only_nodes("alfworld.prepare_games_node"), catalog)
    assert (tmp_path / "games" / "train" / "manifest.json").stat().st_mtime == mtime


def test_a_later_run_replays_the_expert_only_where_its_game_or_parameters_changed(
    tmp_path, monkeypatch
):
    """The next LEAP iteration runs ingest again: the finished logs are kept (the expert is
    not called), except for a game whose file changed; new parameters replay every game."""
    from leap_kalm.envs.alfworld import world

    ingest = {
        "games_dir": str(tmp_path / "games"),
        "n_games": {"train": 3, "valid_seen": 1, "valid_unseen": 1},
    }
    catalog = _catalog(tmp_path, {"alfworld.ingest": ingest})
    pipe = create_pipeline().only_nodes_with_namespaces(["alfworld"])
    SequentialRunner().run(pipe, catalog)
    first = catalog.load("alfworld.expert_logs")
    played = []
    real = world.run_expert
    monkeypatch.setattr(
        world,
        "run_expert",
        lambda game, *a, **k: played.append(game["game_id"]) or real(game, *a, **k),
    )
    SequentialRunner().run(pipe, catalog)
    assert played == [] and catalog.load("alfworld.expert_logs") == first
    games = [g for g in catalog.load("alfworld.games") if g["split"] == "train"]
    edited = Path(games[1]["path"])
    edited.write_text(edited.read_text() + "\n")
    SequentialRunner().run(pipe, catalog)
    assert played == [games[1]["game_id"]]
    assert sorted(t["game_id"] for t in catalog.load("alfworld.expert_logs")) == sorted(
        g["game_id"] for g in games
    )
    played.clear()
    changed = _catalog(tmp_path, {"alfworld.ingest": {**ingest, "expert_max_steps": 40}})
    SequentialRunner().run(pipe, changed)
    assert sorted(played) == sorted(g["game_id"] for g in games)


def test_real_source_without_data_says_how_to_get_it(tmp_path, monkeypatch):
    from leap_kalm.envs.alfworld import AlfWorldDataNotFoundError

    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(AlfWorldDataNotFoundError, match="ALFWORLD_DATA"):
        prepare_games({"source": "real"}, world="alfworld")
    with pytest.raises(ValueError, match="source must be"):
        TextIngestParams.from_dict({"source": "download"})
    with pytest.raises(ValueError, match="unknown keys"):
        TextIngestParams.from_dict({"n_game": 3})
    with pytest.raises(ValueError, match="unknown keys.*'env'"):
        KalmIngestParams.from_dict({"env": "clevr"})


def test_ingest_nodes_refuse_a_world_of_the_wrong_kind():
    from leap_kalm.pipelines.ingest.nodes import generate_kalm_offline_data

    with pytest.raises(ValueError, match="'clevr' is a kalm world, not a text world"):
        prepare_games({}, world="clevr")
    with pytest.raises(ValueError, match="'webshop' is a text world, not a kalm world"):
        generate_kalm_offline_data({}, None, world="webshop")
    with pytest.raises(ValueError, match="no world called 'minecraft'"):
        generate_kalm_offline_data({}, None, world="minecraft")


def test_kalm_ingest_round_trips_npy_and_hdf5(tmp_path):
    params = {
        "clevr.ingest": {"n_episodes": 8, "seed": 1, "n_instructions": 2},
        "metaworld.ingest": {
            "tasks": ["reach"],
            "n_per_task": 2,
            "horizon": 40,
        },
    }
    catalog = _catalog(tmp_path, params)
    SequentialRunner().run(
        create_pipeline().only_nodes_with_namespaces(["clevr", "metaworld"]), catalog
    )
    for env, action_shape in (("clevr", (8, 50)), ("metaworld", (2, 40, 4))):
        from_npy = catalog.load(f"{env}.kalm_offline")
        from_h5 = catalog.load(f"{env}.kalm_offline_hdf5")
        assert from_npy["actions"].shape == action_shape
        for key in (
            "observations",
            "next_observations",
            "actions",
            "rewards",
            "terminals",
            "masks",
            "goals",
        ):
            np.testing.assert_array_equal(from_npy[key], from_h5[key])
            assert from_npy[key].dtype == from_h5[key].dtype
        assert from_h5["instructions"].tolist() == from_npy["instructions"].tolist()
        validate_kalm_dataset(from_h5, source=f"{env} hdf5")
        assert catalog.load(f"{env}.kalm_offline_summary")
    data = catalog.load("clevr.kalm_offline")
    assert data["success"].any() and not data["success"].all(), (
        "both successes and failures are present"
    )


def test_a_users_file_with_a_bad_shape_is_named(tmp_path):
    data = NpyDataset(filepath=str(tmp_path / "clevr.npy"), allow_pickle=True)
    from leap_kalm.envs.clevr.data import generate_clevr_dataset

    good = generate_clevr_dataset(3, seed=0, progress=False)
    bad = {**good, "rewards": good["rewards"][:, :, 0]}
    data.save(bad)
    with pytest.raises(ValueError, match="clevr.kalm_offline.*rewards"):
        summarize_kalm_offline_data(data.load(), world="clevr")
    missing = {k: v for k, v in good.items() if k != "masks"}
    with pytest.raises(ValueError, match="masks"):
        summarize_kalm_offline_data(missing, world="clevr")


def test_kalm_real_data_replaces_generation_and_is_never_written(tmp_path):
    """`--params kalm_real_data=PATH`: the world's offline data is the user's KALM file
    (here in KALM's Meta-World layout), in the canonical layout, in both catalog copies."""
    from tests.datasets.test_kalm_dataset import _write, metaworld_layout

    user = _write(tmp_path, "meta_world.npy", metaworld_layout())
    before = Path(user).read_bytes()
    catalog = _catalog(tmp_path, {"metaworld.ingest": {"n_per_task": 1}, "kalm_real_data": user})
    SequentialRunner().run(create_pipeline().only_nodes_with_namespaces(["metaworld"]), catalog)
    data, summary = (
        catalog.load("metaworld.kalm_offline"),
        catalog.load("metaworld.kalm_offline_summary"),
    )
    assert data["observations"].shape == (4, 6, 91) and data["masks"].dtype == np.int32
    assert summary["n_episodes"] == 4 and summary["observation_dim"] == 91
    np.testing.assert_allclose(catalog.load("metaworld.kalm_offline_hdf5")["goals"], data["goals"])
    assert Path(user).read_bytes() == before


def test_expert_searches_reaches_the_webshop_expert_and_alfworld_refuses_it(tmp_path):
    from leap_kalm.pipelines.ingest.nodes import collect_expert_logs

    params = {"games_dir": str(tmp_path / "shop"), "n_games": {"train": 6, "eval": 1, "test": 1}}
    games = prepare_games(params, "webshop")
    plan = list(collect_expert_logs(games, params, "webshop")([]))
    page = list(collect_expert_logs(games, {**params, "expert_searches": "page"}, "webshop")([]))
    assert len(plan) == len(page) == 6 and all(t["success"] for t in plan)
    assert page[0]["ingest_params"]["expert_searches"] == "page"
    assert [t["steps"] for t in plan] != [t["steps"] for t in page]
    with pytest.raises(ValueError, match="alfworld.ingest.expert_searches"):
        collect_expert_logs([], {"expert_searches": "page"}, "alfworld")


def test_expert_games_records_the_first_train_games_and_rollouts_still_draw_from_all(tmp_path):
    """`ingest.expert_games: 2` of 6 train games: two expert logs (the first two games),
    while the student's rollouts keep every train game to draw from (DAgger's setting)."""
    from leap_kalm.pipelines.correct.nodes import _rollout_games
    from leap_kalm.pipelines.ingest.nodes import collect_expert_logs
    from leap_kalm.pipelines.params import LeapParams, TextIngestParams

    params = {"games_dir": str(tmp_path / "shop"), "n_games": {"train": 6, "eval": 1, "test": 1}}
    games = prepare_games(params, "webshop")
    train = [g["game_id"] for g in games if g["split"] == "train"]
    logs = list(collect_expert_logs(games, {**params, "expert_games": 2}, "webshop")([]))
    assert [t["game_id"] for t in logs] == train[:2]
    assert logs[0]["ingest_params"]["expert_games"] == 2
    # more than there are: every train game
    every = list(collect_expert_logs(games, {**params, "expert_games": 50}, "webshop")([]))
    assert [t["game_id"] for t in every] == train
    rollouts = _rollout_games(LeapParams.from_dict({"env": "webshop"}), games, 1)
    assert sorted(s.game_id for s in rollouts) == sorted(train)
    for bad in (0, -3, "ten", True):
        with pytest.raises(ValueError, match="expert_games must be a positive number"):
            TextIngestParams.from_dict({"expert_games": bad})

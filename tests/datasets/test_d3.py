import numpy as np
import pytest
from kedro.io.core import DatasetError, Version

from leap_kalm.datasets import D3Dataset


def _built_algo(seed=0):
    import d3rlpy

    d3rlpy.seed(seed)
    observations = np.random.default_rng(seed).normal(size=(20, 10)).astype(np.float32)
    actions = np.random.default_rng(seed).integers(0, 40, size=(20, 1))
    rewards = np.zeros((20, 1), np.float32)
    terminals = np.zeros(20)
    terminals[-1] = 1
    dataset = d3rlpy.dataset.MDPDataset(
        observations,
        actions,
        rewards,
        terminals,
        action_space=d3rlpy.ActionSpace.DISCRETE,
        action_size=40,
    )
    algo = d3rlpy.algos.DiscreteCQLConfig(batch_size=4).create(device="cpu:0")
    algo.build_with_dataset(dataset)
    return algo, observations


def test_round_trip_preserves_predictions(tmp_path):
    algo, observations = _built_algo()
    ds = D3Dataset(filepath=str(tmp_path / "policy.d3"), device="cpu:0")
    ds.save(algo)
    loaded = ds.load()
    np.testing.assert_array_equal(loaded.predict(observations), algo.predict(observations))
    assert type(loaded).__name__ == "DiscreteCQL"


def test_versioning(tmp_path):
    path = str(tmp_path / "p.d3")
    algo, _ = _built_algo()
    D3Dataset(
        filepath=path, version=Version(None, "2026-01-01T00.00.00.000Z"), device="cpu:0"
    ).save(algo)
    assert D3Dataset(filepath=path, version=Version(None, None), device="cpu:0").exists()


def test_bad_inputs(tmp_path):
    import d3rlpy

    ds = D3Dataset(filepath=str(tmp_path / "p.d3"), device="cpu:0")
    with pytest.raises(DatasetError, match="no file at"):
        ds.load()
    with pytest.raises(DatasetError, match="saves a d3rlpy algorithm"):
        ds.save({"not": "an algo"})
    with pytest.raises(DatasetError, match="no weights yet"):
        ds.save(d3rlpy.algos.DiscreteCQLConfig().create(device="cpu:0"))
    (tmp_path / "p.d3").write_bytes(b"garbage")
    with pytest.raises(DatasetError, match=r"p\.d3: not a readable d3rlpy learnable"):
        ds.load()


def test_a_policy_not_trained_round_trips_with_its_reason(tmp_path):
    from leap_kalm.training.offline_rl import NotTrained

    ds = D3Dataset(filepath=str(tmp_path / "policy_kalm.d3"), device="cpu:0")
    ds.save(NotTrained("metaworld: no imagined data"))
    assert ds.load() == NotTrained("metaworld: no imagined data")
    algo, observations = _built_algo()
    ds.save(algo)  # a trained policy saved over it loads as d3rlpy again
    np.testing.assert_array_equal(ds.load().predict(observations), algo.predict(observations))

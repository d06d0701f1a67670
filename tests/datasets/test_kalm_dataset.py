"""KalmDataset: KALM's own file layouts (built here as KALM ships them) load canonical and
validated, bad files are named with their key, a user's file is never written, and both
layouts train a d3rlpy policy."""

from __future__ import annotations

import numpy as np
import pytest
from kedro.io.core import DatasetError

from leap_kalm.datasets import KalmDataset, NpyDataset
from leap_kalm.training.offline_rl import OfflineRLParams, to_mdp_dataset, train_offline_rl


def clevr_layout(n=4, horizon=6, seed=0):
    """KALM's clevr_robot.npy layout: canonical keys plus metadata and `states`."""
    rng = np.random.default_rng(seed)
    masks = np.zeros((n, horizon), dtype=np.int32)
    lengths = [horizon, 3, 2, horizon][:n] + [2] * max(0, n - 4)
    terminals = np.zeros((n, horizon, 1), dtype=bool)
    obs = np.zeros((n, horizon + 1, 10), dtype=np.float32)
    for i, length in enumerate(lengths):
        masks[i, :length] = 1
        obs[i, : length + 1] = rng.uniform(-0.5, 0.5, size=(length + 1, 10))
        terminals[i, length - 1, 0] = i % 2 == 1
    valid = masks[..., None].astype(np.float32)
    return {
        "num_trajectories": n, "observation_type": "continuous", "observation_dim": 10,
        "action_type": "discrete", "action_dim": 40, "number_of_objects": 5,
        "actions": (rng.integers(0, 40, size=(n, horizon)) * masks).astype(np.int32),
        "observations": obs[:, :-1] * valid,
        "next_observations": obs[:, 1:] * valid,
        "rewards": rng.normal(size=(n, horizon, 1)).astype(np.float32) * valid,
        "terminals": terminals,
        "masks": masks,
        "instructions": np.array([[f"push the red ball left {i}", f"red left {i}"] for i in range(n)]),
        "goals": np.repeat(rng.normal(size=(n, 1, 6)).astype(np.float32), horizon, axis=1),
        "states": rng.normal(size=(n, horizon, 69)).astype(np.float32),
    }  # fmt: skip


def metaworld_layout(n=4, horizon=6, seed=1):
    """KALM's meta_world.npy layout: float64 everywhere, masks (N, T, 1), float terminals,
    goals (N, 3), plus is_successes and env_names."""
    base = clevr_layout(n, horizon, seed)
    rng = np.random.default_rng(seed)
    masks = base["masks"][..., None].astype(np.float64)
    obs = np.concatenate([base["observations"], np.zeros((n, horizon, 81), np.float32)], -1)
    nxt = np.concatenate([base["next_observations"], np.zeros((n, horizon, 81), np.float32)], -1)
    return {
        "num_trajectories": n, "observation_type": "continuous", "observation_dim": 91,
        "action_type": "continuous", "action_dim": 4,
        "actions": rng.uniform(-1, 1, size=(n, horizon, 4)) * masks,
        "observations": obs.astype(np.float64), "next_observations": nxt.astype(np.float64),
        "rewards": base["rewards"].astype(np.float64), "terminals": base["terminals"].astype(np.float64),
        "masks": masks, "goals": rng.normal(size=(n, 3)),
        "is_successes": base["terminals"].any(axis=1).astype(np.float64),
        "env_names": np.array(["reach-v2"] * n), "instructions": base["instructions"],
    }  # fmt: skip


def _write(tmp_path, name, data):
    path = tmp_path / name
    NpyDataset(filepath=str(path), allow_pickle=True).save(data)
    return str(path)


def test_kalm_clevr_layout_loads_as_it_is(tmp_path):
    data = clevr_layout()
    loaded = KalmDataset(filepath=_write(tmp_path, "clevr_robot.npy", data)).load()
    for key in ("observations", "actions", "terminals", "masks", "goals", "states"):
        np.testing.assert_array_equal(loaded[key], data[key])
    assert loaded["action_dim"] == 40


def test_kalm_metaworld_layout_loads_canonical_without_changing_values(tmp_path):
    data = metaworld_layout()
    loaded = KalmDataset(filepath=_write(tmp_path, "meta_world.npy", data)).load()
    assert loaded["observations"].dtype == np.float32 and loaded["observations"].shape == (4, 6, 91)
    assert loaded["masks"].shape == (4, 6) and loaded["masks"].dtype == np.int32
    assert loaded["terminals"].dtype == bool and loaded["goals"].shape == (4, 6, 3)
    np.testing.assert_allclose(loaded["goals"][:, 3], data["goals"].astype(np.float32))
    np.testing.assert_allclose(loaded["actions"], data["actions"].astype(np.float32))
    assert loaded["env_names"].tolist() == ["reach-v2"] * 4
    assert data["masks"].dtype == np.float64, "the input dict is not modified"


@pytest.mark.parametrize("layout", [clevr_layout, metaworld_layout], ids=["clevr", "metaworld"])
def test_both_layouts_train_a_policy(tmp_path, layout):
    data = KalmDataset(filepath=_write(tmp_path, "kalm.npy", layout())).load()
    discrete = data["actions"].ndim == 2
    dataset = to_mdp_dataset(
        data, lambda t: np.ones((len(t), 3), np.float32), 40 if discrete else None
    )
    params = OfflineRLParams(
        algo="DiscreteBC" if discrete else "BC", config={"batch_size": 4}, n_steps=3
    )
    policy = train_offline_rl(dataset, None, params, discrete=discrete)
    observation = np.zeros((1, data["observations"].shape[-1] + 3), np.float32)
    assert policy.predict(observation).shape == ((1,) if discrete else (1, 4))


def test_bad_files_are_named_with_their_key(tmp_path):
    bad = metaworld_layout()
    bad["terminals"][0, 0, 0] = 2.0
    path = _write(tmp_path, "bad_terminals.npy", bad)
    with pytest.raises(
        DatasetError, match=r"bad_terminals.npy: key 'terminals' must hold only 0/1"
    ):
        KalmDataset(filepath=path).load()
    missing = clevr_layout()
    del missing["rewards"]
    path = _write(tmp_path, "no_rewards.npy", missing)
    with pytest.raises(DatasetError, match=r"no_rewards.npy: missing key\(s\) \['rewards'\]"):
        KalmDataset(filepath=path).load()
    with pytest.raises(
        DatasetError, match=r"nowhere.npy: no such file \(given as kalm_real_data\)"
    ):
        KalmDataset(
            filepath=str(tmp_path / "own.npy"), user_filepath=str(tmp_path / "nowhere.npy")
        ).load()


def test_a_users_file_is_read_never_written(tmp_path):
    user = _write(tmp_path, "user.npy", clevr_layout(seed=3))
    before = (tmp_path / "user.npy").read_bytes()
    dataset = KalmDataset(filepath=str(tmp_path / "own.npy"), user_filepath=user)
    np.testing.assert_array_equal(
        dataset.load()["observations"], clevr_layout(seed=3)["observations"]
    )
    dataset.save(clevr_layout(seed=4))
    assert (tmp_path / "user.npy").read_bytes() == before and (tmp_path / "own.npy").exists()


@pytest.mark.parametrize(
    "algo, layout",
    [("DiscreteBC", clevr_layout), ("DiscreteCQL", clevr_layout)]
    + [(name, metaworld_layout) for name in ("BC", "CQL", "IQL", "TD3PlusBC", "AWAC")],
)
def test_every_algorithm_kalm_names_trains_mixed_and_round_trips(tmp_path, algo, layout):
    """KALM's learners (CLEVR: DiscreteBC, DiscreteCQL; Meta-World: BC, CQL, IQL,
    TD3PlusBC, AWAC) train on real + imagined batches of KALM's own layout and load back
    from `.d3` predicting the same actions."""
    from leap_kalm.datasets import D3Dataset

    data = KalmDataset(filepath=_write(tmp_path, "kalm.npy", layout())).load()
    discrete = data["actions"].ndim == 2
    encode = lambda t: np.ones((len(t), 3), np.float32)  # noqa: E731
    dataset = to_mdp_dataset(data, encode, 40 if discrete else None)
    imagined = to_mdp_dataset(data, encode, 40 if discrete else None)
    params = OfflineRLParams(algo=algo, config={"batch_size": 4}, n_steps=2, n_steps_per_epoch=2)
    policy = train_offline_rl(dataset, imagined, params, discrete=discrete)
    assert type(policy).__name__ == algo
    store = D3Dataset(filepath=str(tmp_path / "policy.d3"), device="cpu:0")
    store.save(policy)
    observations = np.random.default_rng(0).normal(size=(5, data["observations"].shape[-1] + 3))
    observations = observations.astype(np.float32)
    np.testing.assert_allclose(store.load().predict(observations), policy.predict(observations))

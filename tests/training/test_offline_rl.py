"""Offline RL over d3rlpy: KALM data as MDPDatasets, algorithm configs from parameters,
real + imagined mixing, and a short fit that beats random play on a trivial goal."""

from __future__ import annotations

import numpy as np
import pytest

from leap_kalm.envs.clevr import world as clevr
from leap_kalm.envs.clevr.data import generate_clevr_dataset
from leap_kalm.training.offline_rl import (
    OfflineRLParams,
    algo_config,
    evaluate_policy,
    to_mdp_dataset,
    train_offline_rl,
)


def fake_encode(texts):
    """A deterministic 8-d 'embedding' per instruction (tests need no sentence model)."""
    return np.array([[(hash(t) >> k) % 7 / 7.0 for k in range(8)] for t in texts], dtype=np.float32)


def one_hot_goal_encode(texts):
    """Easy CLEVR goals name one ball and one direction: encode exactly those words."""
    words = ["red", "blue", "green", "purple", "cyan", "behind", "left", "front", "right", "still"]
    return np.array([[float(w in t.lower()) for w in words] for t in texts], dtype=np.float32)


def test_episodes_end_with_a_terminal_on_success_or_a_timeout():
    data = generate_clevr_dataset(
        6, seed=3, horizon=8, noise=[0.0, 1.0], n_instructions=2, progress=False
    )
    dataset = to_mdp_dataset(data, fake_encode, action_size=40)
    lengths = data["masks"].sum(axis=1)
    assert [len(e) for e in dataset.episodes] == lengths.tolist()
    for episode, n, done in zip(dataset.episodes, lengths, data["terminals"][:, :, 0], strict=True):
        assert episode.observations.shape == (n, 10 + 8)
        assert bool(episode.terminated) == bool(done[n - 1])
    np.testing.assert_allclose(
        dataset.episodes[0].observations[:, :10], data["observations"][0, : lengths[0]]
    )
    np.testing.assert_allclose(
        dataset.episodes[0].observations[0, 10:], fake_encode([data["instructions"][0, 0]])[0]
    )


def test_all_wordings_repeat_each_episode_once_per_instruction():
    data = generate_clevr_dataset(4, seed=3, horizon=5, n_instructions=3, progress=False)
    data["instructions"][1, 2] = ""  # a missing wording is skipped
    first = to_mdp_dataset(data, fake_encode, action_size=40)
    every = to_mdp_dataset(data, fake_encode, action_size=40, wordings="all")
    assert len(first.episodes) == 4 and len(every.episodes) == 3 + 2 + 3 + 3
    texts = [t for row in data["instructions"] for t in row if t]
    for episode, text in zip(every.episodes, texts, strict=True):
        np.testing.assert_allclose(episode.observations[0, 10:], fake_encode([text])[0])
    np.testing.assert_array_equal(every.episodes[1].actions, first.episodes[0].actions)
    with pytest.raises(ValueError, match=r"wordings must be one of \('first', 'all'\), got 'some'"):
        OfflineRLParams(wordings="some")


def test_algorithms_and_their_configs_come_from_d3rlpy_and_are_checked():
    import d3rlpy

    config = algo_config("DiscreteCQL", {"batch_size": 32, "gamma": 0.9}, discrete=True)
    assert isinstance(config, d3rlpy.algos.DiscreteCQLConfig) and config.gamma == 0.9
    with pytest.raises(
        ValueError, match=r"'PPO' is not a d3rlpy algorithm; d3rlpy has .*DiscreteCQL"
    ):
        algo_config("PPO", {}, discrete=True)
    with pytest.raises(ValueError, match=r"'CQL' does not fit this world's discrete actions"):
        algo_config("CQL", {}, discrete=True)
    with pytest.raises(ValueError, match=r"offline_rl config for DiscreteBC: .*gama"):
        algo_config("DiscreteBC", {"gama": 0.9}, discrete=True)
    with pytest.raises(ValueError, match="imagined_ratio must be in"):
        OfflineRLParams(imagined_ratio=1.0)


def test_real_and_imagined_batches_mix_in_the_asked_ratio(tmp_path, monkeypatch):
    """The imagined share of each batch is what the parameters say (d3rlpy's MixedReplayBuffer)."""
    from d3rlpy.dataset import MixedReplayBuffer

    real = to_mdp_dataset(generate_clevr_dataset(4, 1, horizon=6, progress=False), fake_encode, 40)
    imagined = to_mdp_dataset(
        generate_clevr_dataset(4, 2, horizon=6, progress=False), fake_encode, 40
    )
    seen = {}
    real_fit = MixedReplayBuffer.__init__

    def spy(self, primary, secondary, secondary_mix_ratio):
        seen["ratio"] = secondary_mix_ratio
        seen["sizes"] = (primary.transition_count, secondary.transition_count)
        real_fit(self, primary, secondary, secondary_mix_ratio)

    monkeypatch.setattr(MixedReplayBuffer, "__init__", spy)
    params = OfflineRLParams(
        algo="DiscreteBC",
        config={"batch_size": 8},
        n_steps=3,
        n_steps_per_epoch=3,
        imagined_ratio=0.25,
    )
    train_offline_rl(real, imagined, params, discrete=True)
    assert seen["ratio"] == 0.25 and seen["sizes"] == (
        real.transition_count,
        imagined.transition_count,
    )
    seen.clear()
    train_offline_rl(
        real,
        imagined,
        OfflineRLParams(algo="DiscreteBC", n_steps=2, imagined_ratio=0.0),
        discrete=True,
    )
    assert not seen, "imagined_ratio 0 trains on the real data alone"
    assert not (tmp_path / "d3rlpy_logs").exists()


def test_a_short_fit_beats_random_play_on_easy_goals():
    """Easy CLEVR goals (push one named ball one way): 400 DiscreteBC steps on scripted
    data solve far more than the 40-way random policy does."""
    import d3rlpy

    data = generate_clevr_dataset(
        300, seed=5, level="easy", noise=[0.0], n_instructions=1, progress=False
    )
    dataset = to_mdp_dataset(data, one_hot_goal_encode, action_size=40)
    params = OfflineRLParams(
        algo="DiscreteBC",
        config={"batch_size": 64, "learning_rate": 1e-3},
        n_steps=400,
        n_steps_per_epoch=400,
    )
    policy = train_offline_rl(dataset, None, params, discrete=True)
    random_policy = d3rlpy.algos.DiscreteRandomPolicyConfig().create()
    random_policy.build_with_dataset(dataset)

    def score(algo):
        return np.mean(
            evaluate_policy(algo, lambda: clevr.make_env("easy"), 60, 777, one_hot_goal_encode)
        )

    trained, chance = score(policy), score(random_policy)
    assert trained >= 0.5 and trained >= chance + 0.3, (trained, chance)


def test_a_named_observation_scaler_is_fitted_on_the_data_and_saved_with_the_policy(tmp_path):
    """`observation_scaler: standard` in the YAML config becomes d3rlpy's scaler, fitted on
    the training data (state + instruction), and the saved policy keeps its statistics."""
    import d3rlpy

    from leap_kalm.datasets.d3 import D3Dataset

    config = algo_config("DiscreteBC", {"observation_scaler": "standard"}, discrete=True)
    assert isinstance(config.observation_scaler, d3rlpy.preprocessing.StandardObservationScaler)
    with pytest.raises(
        ValueError, match=r"observation_scaler: 'zscore' is not one of \['min_max', 'standard'\]"
    ):
        algo_config("DiscreteBC", {"observation_scaler": "zscore"}, discrete=True)
    data = generate_clevr_dataset(5, seed=4, horizon=6, n_instructions=1, progress=False)
    dataset = to_mdp_dataset(data, one_hot_goal_encode, action_size=40)
    params = OfflineRLParams(
        algo="DiscreteBC", config={"batch_size": 8, "observation_scaler": "standard"},
        n_steps=5, n_steps_per_epoch=5,
    )  # fmt: skip
    policy = train_offline_rl(dataset, None, params, discrete=True)
    observations = np.concatenate([e.observations[: e.transition_count] for e in dataset.episodes])
    np.testing.assert_allclose(policy.observation_scaler.mean, observations.mean(axis=0), atol=1e-5)
    path = tmp_path / "policy.d3"
    D3Dataset(filepath=str(path)).save(policy)
    loaded = D3Dataset(filepath=str(path)).load()
    np.testing.assert_allclose(loaded.observation_scaler.std, policy.observation_scaler.std)
    np.testing.assert_array_equal(loaded.predict(observations), policy.predict(observations))

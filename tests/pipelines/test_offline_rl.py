"""`offline_rl` nodes: KALM's generated rollouts as the imagined data (labelled by the world),
and a named error when imagined data is expected and none exists."""

from __future__ import annotations

import numpy as np
import pytest

from leap_kalm.datasets import KalmRolloutsDataset, NpyDataset
from leap_kalm.envs.clevr import world as clevr
from leap_kalm.envs.clevr.data import generate_clevr_dataset
from leap_kalm.pipelines.imagine.nodes import labelled_kalm_rollouts
from leap_kalm.pipelines.offline_rl.nodes import train_policy

RL = {"algo": "DiscreteBC", "config": {"batch_size": 8}, "n_steps": 3, "n_steps_per_epoch": 3}


def kalm_generated_file(tmp_path, name="clevr_rephrase_generated.npy", n=4, steps=3):
    """KALM's generated layout: per-trajectory lists, padded past the valid steps."""
    tasks = clevr.novel_goals("rephrase", n, 11, 1)
    rng = np.random.default_rng(0)
    data = {
        "number_of_objects": 5,
        "instructions": [np.array([w[0]]) for w in tasks["instructions"]],
        "observations": [np.vstack([s, rng.uniform(-0.4, 0.4, (steps + 2, 10))]).astype(np.float32) for s in tasks["starts"]],
        "actions": [rng.integers(0, 40, steps + 2) for _ in range(n)],
        "observation_masks": [np.array([1] * (steps + 1) + [0, 0], bool) for _ in range(n)],
        "action_masks": [np.array([1] * steps + [0, 0], bool) for _ in range(n)],
        "goals": list(tasks["goals"]),
    }  # fmt: skip
    path = tmp_path / name
    NpyDataset(filepath=str(path), allow_pickle=True).save(data)
    return str(path), data


def test_kalm_generated_rollouts_become_labelled_offline_data(tmp_path):
    path, raw = kalm_generated_file(tmp_path)
    rollouts = KalmRolloutsDataset(filepath=path).load()
    assert rollouts["level"] == "rephrase" and [len(a) for a in rollouts["actions"]] == [3] * 4
    data = labelled_kalm_rollouts(rollouts, "clevr")
    for i in range(4):
        n = int(data["masks"][i].sum())
        np.testing.assert_allclose(data["observations"][i, :n], raw["observations"][i][:n])
        for t in range(n):
            reward, success, _ = clevr.judge_transition(
                "rephrase",
                data["observations"][i, t],
                data["next_observations"][i, t],
                raw["goals"][i],
            )
            assert data["rewards"][i, t, 0] == pytest.approx(reward)
            assert data["terminals"][i, t, 0] == success
    unnamed, _ = kalm_generated_file(tmp_path, name="rollouts.npy")
    with pytest.raises(ValueError, match="kalm_imagined_level"):
        labelled_kalm_rollouts(KalmRolloutsDataset(filepath=unnamed).load(), "clevr")
    assert KalmRolloutsDataset(filepath=unnamed, level="hard").load()["level"] == "hard"


def test_the_kalm_policy_trains_on_kalm_files_and_without_imagined_data_is_not_trained(tmp_path):
    from leap_kalm.training.offline_rl import NotTrained

    real = generate_clevr_dataset(4, 1, horizon=5, progress=False)
    path, _ = kalm_generated_file(tmp_path)
    rollouts = KalmRolloutsDataset(filepath=path).load()
    policy = train_policy(
        real, RL, "clevr", kalm_imagined=rollouts, rephrase=None, easy=None, hard=None
    )
    assert policy.impl is not None
    # CLEVR's default repeats easy rollouts; a KALM file of rephrase rollouts still trains
    repeated = train_policy(
        real, {**RL, "imagined_repeats": {"easy": 10}}, "clevr", kalm_imagined=rollouts,
        rephrase=None, easy=None, hard=None,
    )  # fmt: skip
    assert repeated.impl is not None
    missing = train_policy(
        real, RL, "clevr", kalm_imagined=None, rephrase=None, easy=None, hard=None
    )
    assert isinstance(missing, NotTrained)
    assert missing.reason.startswith("clevr: no imagined data, so the real + imagined policy")
    assert "kalm_imagined_data=PATH" in missing.reason
    # per-level policies: a KALM rephrase file trains the rephrase one; the easy one has
    # no data of its level and says so instead of training on rephrase rollouts
    own = train_policy(real, RL, "clevr", kalm_imagined=rollouts, level="rephrase", rephrase=None)
    assert own.impl is not None
    other = train_policy(real, RL, "clevr", kalm_imagined=rollouts, level="easy", easy=None)
    assert isinstance(other, NotTrained)
    assert other.reason == (
        "clevr: kalm_imagined_data holds rephrase rollouts, so the real + imagined easy "
        "policy has no imagined data and is not trained"
    )


def test_imagined_data_without_a_step_or_a_transition_trains_no_policy():
    """A level whose rollouts have no step, or only one-step misses (d3rlpy keeps no
    transition of those), leaves the policy of that level untrained, with the reason."""
    from leap_kalm.training.offline_rl import NotTrained

    real = generate_clevr_dataset(4, 1, horizon=5, progress=False)
    empty = {**real, "masks": np.zeros_like(real["masks"])}
    none = train_policy(real, RL, "clevr", level="rephrase", rephrase=empty)
    assert isinstance(none, NotTrained)
    assert none.reason.startswith("clevr: the imagined rephrase rollouts have no step")
    missed = {
        **real,
        "masks": np.zeros_like(real["masks"]),
        "terminals": np.zeros_like(real["terminals"]),
    }
    missed["masks"][:, 0] = 1  # one push each, none reaching its goal
    one_step = train_policy(real, RL, "clevr", level="easy", easy=missed)
    assert isinstance(one_step, NotTrained)
    assert "no imagined easy rollout has a transition to learn from" in one_step.reason
    # beside a level with transitions, the joint policy trains on that level alone
    assert train_policy(real, RL, "clevr", rephrase=real, easy=empty).impl is not None


def test_only_goal_consistent_imagined_rollouts_can_be_kept():
    """``imagined_episodes: goal_consistent`` trains on the imagined rollouts whose generated
    states reach their goal; with none, the policy is not trained (the run goes on to the
    real-only policy and the evaluation) and says why, instead of training on real data alone."""
    from leap_kalm.training.offline_rl import NotTrained, OfflineRLParams, select_episodes

    real = generate_clevr_dataset(4, 1, horizon=5, progress=False)
    imagined = {**generate_clevr_dataset(3, 2, horizon=5, progress=False)}
    imagined["goal_consistent"] = np.array([True, False, True])
    kept = select_episodes(imagined, imagined["goal_consistent"])
    assert kept["observations"].shape[0] == kept["masks"].shape[0] == 2
    np.testing.assert_array_equal(kept["actions"][1], imagined["actions"][2])
    params = {**RL, "imagined_episodes": "goal_consistent"}
    assert train_policy(real, params, "clevr", rephrase=imagined).impl is not None
    none = {**imagined, "goal_consistent": np.zeros(3, dtype=bool)}
    untrained = train_policy(real, params, "clevr", rephrase=none)
    assert isinstance(untrained, NotTrained)
    assert untrained.reason.startswith("clevr: no imagined rollout reaches its goal")
    assert "clevr.offline_rl.imagined_episodes=all" in untrained.reason
    # The real-only policy shares the parameters and has no imagined data to filter.
    assert train_policy(real, params, "clevr").impl is not None
    with pytest.raises(ValueError, match="imagined_episodes must be one of"):
        OfflineRLParams(imagined_episodes="best")


def test_every_imagined_level_is_sampled(monkeypatch):
    """The imagined levels become one dataset whose sampler holds every level's
    transitions (an `episodes.extend` listed the later levels' episodes without their
    transitions), and draws from it reach each level; the policy is trained on the
    buffers d3rlpy rebuilds from every episode."""
    from leap_kalm.training import offline_rl

    seen = {}

    def capture(real, mixed, config, **kwargs):
        seen["real"], seen["mixed"] = real, mixed
        return "fitted"

    monkeypatch.setattr(offline_rl, "train_offline_rl", capture)
    real = generate_clevr_dataset(4, 1, horizon=5, progress=False)
    levels = {
        "rephrase": generate_clevr_dataset(3, 2, horizon=5, progress=False),
        "easy": generate_clevr_dataset(2, 3, horizon=5, progress=False),
    }

    def alone(data):  # one level's own dataset (a timed-out episode has one fewer transition)
        return offline_rl.to_mdp_dataset(data, lambda t: np.zeros((len(t), 384)), 40)

    assert train_policy(real, RL, "clevr", **levels) == "fitted"
    mixed = seen["mixed"]
    assert len(mixed.episodes) == 5
    assert mixed.transition_count == sum(alone(v).transition_count for v in levels.values())
    assert seen["real"].transition_count == alone(real).transition_count
    # every transition of the easy level (the second) is in the sampler
    np.random.seed(0)
    easy = {id(e) for e in mixed.episodes[3:]}
    drawn = [mixed.buffer[i][0] for i in np.random.randint(mixed.transition_count, size=200)]
    assert 0 < sum(id(e) in easy for e in drawn) < 200

    with pytest.raises(ValueError, match="at least one dataset"):
        offline_rl.concat_datasets([])


def test_a_level_can_be_repeated_in_the_imagined_data(monkeypatch):
    """``imagined_repeats: {easy: 3}`` puts each kept easy rollout in three times (its
    transitions three times in the sampler); a name that is not a level of the world, or a
    count below 1, is a named error; a level with no data in this run is left out."""
    from leap_kalm.training import offline_rl

    seen = {}
    monkeypatch.setattr(
        offline_rl, "train_offline_rl", lambda real, mixed, config, **kw: seen.update(m=mixed)
    )
    real = generate_clevr_dataset(4, 1, horizon=5, progress=False)
    levels = {
        "rephrase": generate_clevr_dataset(3, 2, horizon=5, progress=False),
        "easy": generate_clevr_dataset(2, 3, horizon=5, progress=False),
    }
    train_policy(real, RL, "clevr", **levels)
    once = seen["m"]
    train_policy(real, {**RL, "imagined_repeats": {"easy": 3}}, "clevr", **levels)
    thrice = seen["m"]
    easy = sum(e.transition_count for e in once.episodes[3:])
    assert len(thrice.episodes) == 3 + 2 * 3
    assert thrice.transition_count == once.transition_count + 2 * easy
    first_easy = once.episodes[3].observations
    for copy in thrice.episodes[3:6]:  # np.repeat keeps an episode's copies together
        np.testing.assert_array_equal(copy.observations, first_easy)

    with pytest.raises(
        ValueError,
        match=r"imagined_repeats names \['hrad'\].*levels are \['rephrase', 'easy', 'hard'\]",
    ):
        train_policy(real, {**RL, "imagined_repeats": {"hrad": 2}}, "clevr", **levels)
    # a level of the world with no data in this run (e.g. the default {easy: 10} beside a
    # KALM file of rephrase rollouts) is left out, the rest repeated as asked
    train_policy(real, {**RL, "imagined_repeats": {"hard": 2, "easy": 3}}, "clevr", **levels)
    assert seen["m"].transition_count == thrice.transition_count
    with pytest.raises(ValueError, match="imagined_repeats.easy must be a whole number >= 1"):
        offline_rl.OfflineRLParams(imagined_repeats={"easy": 0})
    assert train_policy(real, {**RL, "imagined_repeats": {"hard": 2}}, "clevr") is None  # real only

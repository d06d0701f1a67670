"""`imagine` on CLEVR with a tiny grounded model: KALM-layout datasets per level that pass the
contract, labels from the world's own goal check, the quality summary, unsupported worlds."""

from __future__ import annotations

import numpy as np
import pytest

from leap_kalm.envs.clevr import world as clevr
from leap_kalm.envs.kalm_format import validate_kalm_dataset
from leap_kalm.llm.grounded import build_grounded, save_grounded
from leap_kalm.llm.imagination import Imagined
from leap_kalm.llm.models import load_model
from leap_kalm.pipelines.imagine.nodes import (
    ImagineParams,
    imagination_world,
    imagine_level,
    kalm_arrays,
    summarize_imagination,
)
from leap_kalm.pipelines.imagine.pipeline import imagination_levels
from leap_kalm.schemas import ModelRef
from tests.llm.test_grounded import DISCRETE


@pytest.fixture(scope="module")
def grounded_ref(tiny_model_dir, tmp_path_factory):
    lm, tokenizer = load_model(tiny_model_dir)
    path = tmp_path_factory.mktemp("grounded") / "model"
    save_grounded(build_grounded(lm, DISCRETE), tokenizer, path)
    return ModelRef(path=str(path), kind="model")


@pytest.mark.parametrize("level", ["rephrase", "easy", "hard"])
def test_each_level_is_a_kalm_dataset_labelled_by_the_world(grounded_ref, level):
    params = {"n_per_level": 5, "max_steps": 4, "batch_size": 3, "n_instructions": 2, "seed": 7}
    data = imagine_level(grounded_ref, None, params, {"name": "tiny-test"}, "clevr", level)
    summary = validate_kalm_dataset(data, source="test")
    horizon = 1 if level == "easy" else 4
    assert data["observations"].shape == (5, 4, 10) and data["instructions"].shape == (5, 2)
    assert summary["action_type"] == "discrete" and data["level"] == level
    tasks = clevr.novel_goals(level, 5, 7, 2)
    np.testing.assert_allclose(data["observations"][:, 0], tasks["starts"])
    np.testing.assert_allclose(data["goals"][:, 0], tasks["goals"])
    lengths = data["masks"].sum(axis=1)
    assert (lengths >= 1).all() and (lengths <= horizon).all()
    for i, n in enumerate(lengths):
        reward, success, _ = clevr.judge_transition(
            level,
            data["observations"][i, n - 1],
            data["next_observations"][i, n - 1],
            tasks["goals"][i],
        )
        assert data["rewards"][i, n - 1, 0] == pytest.approx(reward)
        assert data["terminals"][i, n - 1, 0] == success == data["goal_consistent"][i]
        assert data["replay_success"][i] == clevr.replay(
            level, tasks["starts"][i], tasks["goals"][i], data["actions"][i, :n]
        )


def test_arrays_mark_the_terminal_on_the_step_that_reaches_the_goal():
    class World:
        @staticmethod
        def judge_transition(level, state, next_state, goal):
            return float(next_state[0]), bool(next_state[0] >= 2), bool(next_state[0] >= 2)

    rollouts = [
        Imagined(states=np.array([[0.0], [1.0], [2.0]]), actions=np.array([3, 4]), ended=True),
        Imagined(states=np.array([[0.0], [1.0]]), actions=np.array([5]), ended=False),
    ]
    tasks = {"starts": np.zeros((2, 1)), "goals": np.ones((2, 6)), "instructions": [["a"], ["bb"]]}
    data = kalm_arrays(rollouts, tasks, "real", World, horizon=3)
    assert data["masks"].tolist() == [[1, 1, 0], [1, 0, 0]]
    assert data["terminals"][..., 0].tolist() == [[False, True, False], [False, False, False]]
    assert data["rewards"][0, :, 0].tolist() == [1.0, 2.0, 0.0]
    assert data["actions"].dtype == np.int32 and data["goal_consistent"].tolist() == [True, False]
    validate_kalm_dataset(data, source="test")


def test_the_summary_gives_each_level_its_shares_with_intervals():
    def level(name, consistent, replayed):
        masks = np.ones((4, 2))
        masks[3, 1] = 0  # the last rollout ended after one step
        return {
            "level": name, "masks": masks,
            "observations": np.arange(4 * 2 * 3, dtype=np.float32).reshape(4, 2, 3),
            "next_observations": np.ones((4, 2, 3)), "actions": np.full((4, 2), 7),
            "rewards": np.zeros((4, 2, 1)), "terminals": np.zeros((4, 2, 1), dtype=bool),
            "goal_consistent": np.array(consistent), "replay_success": np.array(replayed),
        }  # fmt: skip

    summary, transitions = summarize_imagination(
        easy=level("easy", [1, 1, 0, 0], [1, 0, 0, 0]), hard=level("hard", [0] * 4, [0] * 4)
    )
    assert summary["easy"]["goal_consistent"] == 0.5 and summary["easy"]["replay_success"] == 0.25
    assert (
        summary["hard"]["goal_consistent_ci95"][0] == 0.0 and summary["easy"]["mean_steps"] == 1.75
    )
    # the transitions table: 7 real steps per level, masked steps left out
    assert transitions.height == 14 and transitions["level"].unique().sort().to_list() == [
        "easy",
        "hard",
    ]
    first = transitions.row(0, named=True)
    assert (
        first["state"] == [0.0, 1.0, 2.0] and first["action"] == [7.0] and first["goal_consistent"]
    )
    easy = transitions.filter(transitions["level"] == "easy")
    assert easy.group_by("episode").len().sort("episode")["len"].to_list() == [2, 2, 2, 1]


def test_worlds_without_imagination_are_named(monkeypatch):
    import types

    import leap_kalm.pipelines.imagine.nodes as nodes

    assert imagination_levels("clevr") == imagination_levels("metaworld")
    assert imagination_levels("clevr") == ("rephrase", "easy", "hard")
    bare = types.SimpleNamespace(IMAGINATION_LEVELS=("easy",), novel_goals=None)
    monkeypatch.setattr(nodes, "get_world", lambda name, kind: bare)
    with pytest.raises(
        ValueError, match=r"world 'bare' does not support imagination yet: .*'judge_transition'"
    ):
        imagination_world("bare")


@pytest.fixture(scope="module")
def metaworld_grounded(tiny_model_dir, tmp_path_factory):
    from leap_kalm.llm.grounded import GroundingSpec

    lm, tokenizer = load_model(tiny_model_dir)
    path = tmp_path_factory.mktemp("grounded_mw") / "model"
    spec = GroundingSpec(obs_dim=39, action_kind="continuous", action_dim=4)
    save_grounded(build_grounded(lm, spec), tokenizer, path)
    return ModelRef(path=str(path), kind="model")


@pytest.mark.parametrize("level", ["rephrase", "easy", "hard"])
def test_metaworld_levels_are_imagined_with_their_tasks(metaworld_grounded, level):
    """Meta-World imagination: continuous actions, the task of each goal kept (env_names),
    labels from the task's success rule on the generated states, replays from the same
    reset; the goals are the level's own tasks, in turn."""
    from leap_kalm.envs.metaworld import world as metaworld
    from leap_kalm.envs.metaworld.tasks import TASKS_BY_LEVEL

    params = {"n_per_level": 3, "max_steps": 3, "batch_size": 2, "n_instructions": 2, "seed": 5}
    data = imagine_level(
        metaworld_grounded, None, params, {"name": "tiny-test"}, "metaworld", level
    )
    summary = validate_kalm_dataset(data, source="test")
    assert summary["action_type"] == "continuous" and data["actions"].shape == (3, 3, 4)
    tasks = metaworld.novel_goals(level, 3, 5, 2)
    names = TASKS_BY_LEVEL[level]
    assert list(data["env_names"]) == [names[i % len(names)] for i in range(3)]
    np.testing.assert_allclose(data["observations"][:, 0], tasks["starts"])
    np.testing.assert_allclose(data["goals"][:, 0], tasks["goals"])
    for i, n in enumerate(data["masks"].sum(axis=1)):
        reward, success, _ = metaworld.judge_transition(
            level, data["observations"][i, n - 1], data["next_observations"][i, n - 1],
            tasks["goals"][i], env_name=names[i % len(names)],
        )  # fmt: skip
        assert data["rewards"][i, n - 1, 0] == reward and data["terminals"][i, n - 1, 0] == success
    assert data["replay_success"].dtype == bool and data["replay_success"].shape == (3,)


def test_metaworld_replay_and_goal_check_need_the_task():
    """A scripted expert's actions from a novel goal's start succeed when replayed; the goal
    check and the replay refuse to guess the task, and a wrong seed is named."""
    from leap_kalm.envs.metaworld import world as metaworld
    from leap_kalm.envs.metaworld.env import MetaWorldTaskEnv
    from leap_kalm.envs.metaworld.policy import ScriptedMetaWorldPolicy

    tasks = metaworld.novel_goals("easy", 2, 3)  # episode 1: push-wall (reach's rule is
    name, seed = str(tasks["env_names"][1]), int(tasks["reset_seeds"][1])  # approximate)
    assert name == "push-wall-v3"
    env = MetaWorldTaskEnv(name, level="easy")
    obs, _ = env.reset(seed=seed)
    np.testing.assert_allclose(obs, tasks["starts"][1])
    policy, actions, success = ScriptedMetaWorldPolicy(name, seed=0), [], False
    while not success and len(actions) < 150:
        actions.append(policy(obs))
        obs, _, success, _, _ = env.step(actions[-1])
    assert success
    start, goal = tasks["starts"][1], tasks["goals"][1]
    assert metaworld.replay("easy", start, goal, actions, env_name=name, reset_seed=seed)
    assert not metaworld.replay("easy", start, goal, actions[:1], env_name=name, reset_seed=seed)
    assert metaworld.judge_transition("easy", start, obs, goal, env_name=name)[:2] == (10.0, True)
    with pytest.raises(ValueError, match="needs the episode's task"):
        metaworld.judge_transition("easy", start, obs, goal)
    with pytest.raises(ValueError, match="does not give the rollout's start state"):
        metaworld.replay("easy", start, goal, actions, env_name=name, reset_seed=seed + 1)


def kalm_prompt_file(n=3, seed=4):
    """KALM's prompt layout (as clevr_generate.py reads it), from real CLEVR goals."""
    tasks = clevr.novel_goals("rephrase", n, seed, 1)
    rng = np.random.default_rng(seed)
    return {
        "number_of_objects": 5,
        "instructions": [np.array([w[0]]) for w in tasks["instructions"]],
        "observations": [
            np.vstack([s, rng.normal(size=(4, 10))]).astype(np.float32) for s in tasks["starts"]
        ],
        "actions": [np.zeros(4, dtype=np.int64) for _ in range(n)],
        "observation_masks": [np.ones(5, dtype=bool) for _ in range(n)],
        "goals": list(tasks["goals"]),
    }, tasks


def test_kalm_prompt_file_supplies_its_levels_goals(grounded_ref, tmp_path):
    from leap_kalm.datasets import KalmPromptsDataset, NpyDataset

    prompts, tasks = kalm_prompt_file()
    path = tmp_path / "clevr_rephrase_prompt.npy"
    NpyDataset(filepath=str(path), allow_pickle=True).save(prompts)
    loaded = KalmPromptsDataset(filepath=str(path)).load()
    assert loaded["level"] == "rephrase" and loaded["instructions"][0] == [
        tasks["instructions"][0][0]
    ]
    params = {"n_per_level": 9, "max_steps": 2, "seed": 7}
    data = imagine_level(grounded_ref, loaded, params, {"name": "tiny-test"}, "clevr", "rephrase")
    np.testing.assert_allclose(data["observations"][:, 0], tasks["starts"])
    np.testing.assert_allclose(data["goals"][:, 0], tasks["goals"])
    assert data["instructions"][:, 0].tolist() == [w[0] for w in tasks["instructions"]]
    other = imagine_level(grounded_ref, loaded, params, {"name": "tiny-test"}, "clevr", "hard")
    assert len(other["masks"]) == 9, "the other levels keep the world's own goals"
    assert KalmPromptsDataset(filepath=None).load() is None


def test_bad_prompt_files_are_named(tmp_path):
    from kedro.io.core import DatasetError

    from leap_kalm.datasets import KalmPromptsDataset, NpyDataset

    prompts, _ = kalm_prompt_file()
    unnamed = tmp_path / "prompts.npy"
    NpyDataset(filepath=str(unnamed), allow_pickle=True).save(prompts)
    with pytest.raises(
        DatasetError, match=r"prompts.npy: cannot tell the goal level.*kalm_prompts_level"
    ):
        KalmPromptsDataset(filepath=str(unnamed)).load()
    assert KalmPromptsDataset(filepath=str(unnamed), level="easy").load()["level"] == "easy"
    del prompts["goals"]
    broken = tmp_path / "clevr_hard_prompt.npy"
    NpyDataset(filepath=str(broken), allow_pickle=True).save(prompts)
    with pytest.raises(DatasetError, match=r"clevr_hard_prompt.npy: missing key\(s\) \['goals'\]"):
        KalmPromptsDataset(filepath=str(broken)).load()


def test_goals_per_level_can_differ_by_level(grounded_ref):
    params = {"n_per_level": {"easy": 6, "hard": 2}, "max_steps": 2, "batch_size": 4, "seed": 3}
    easy = imagine_level(grounded_ref, None, params, {"name": "tiny-test"}, "clevr", "easy")
    hard = imagine_level(grounded_ref, None, params, {"name": "tiny-test"}, "clevr", "hard")
    assert len(easy["masks"]) == 6 and len(hard["masks"]) == 2
    config = ImagineParams.from_dict(params)
    assert config.goals_for("rephrase", clevr.IMAGINATION_LEVELS) == ImagineParams.DEFAULT_GOALS
    assert ImagineParams(n_per_level=7).goals_for("hard", clevr.IMAGINATION_LEVELS) == 7
    with pytest.raises(ValueError, match=r"names levels \['medium'\]"):
        ImagineParams(n_per_level={"medium": 3}).goals_for("easy", clevr.IMAGINATION_LEVELS)
    with pytest.raises(ValueError, match="'easy' must be a positive integer, got 0"):
        ImagineParams(n_per_level={"easy": 0}).goals_for("easy", clevr.IMAGINATION_LEVELS)


def test_max_steps_can_differ_by_level(grounded_ref):
    params = {"n_per_level": 3, "max_steps": {"rephrase": 2}, "batch_size": 3, "seed": 3}
    rephrase = imagine_level(grounded_ref, None, params, {"name": "tiny-test"}, "clevr", "rephrase")
    assert rephrase["masks"].shape[1] == 2 and rephrase["masks"].sum(axis=1).max() <= 2
    config = ImagineParams.from_dict(params)
    levels = clevr.IMAGINATION_LEVELS
    assert config.steps_for("rephrase", levels, 50) == 2
    assert config.steps_for("hard", levels, 50) == 50  # omitted: the env's own cap
    assert ImagineParams(max_steps=7).steps_for("easy", levels, 1) == 7
    assert ImagineParams().steps_for("hard", levels, 50) == 50
    with pytest.raises(ValueError, match=r"imagine.max_steps names levels \['medium'\]"):
        ImagineParams(max_steps={"medium": 3}).steps_for("easy", levels, 1)
    with pytest.raises(
        ValueError, match="imagine.max_steps for 'hard' must be a positive integer, got 0"
    ):
        ImagineParams(max_steps={"hard": 0}).steps_for("hard", levels, 50)

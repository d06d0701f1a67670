from __future__ import annotations

import random
import re

import pytest

from leap_kalm.envs.alfworld import AlfWorldEnv, BatchEnv, normalize_command, run_batch
from leap_kalm.envs.alfworld.env import NOTHING_HAPPENS, read_traj_data


def _walkthrough(path):
    return read_traj_data(path)["plan"]["walkthrough"]


def test_gymnasium_check_env(games_by_type):
    from gymnasium.utils.env_checker import check_env

    env = AlfWorldEnv(games_by_type["pick_and_place_simple"][0], max_steps=5)
    check_env(env, skip_render_check=True)
    env.close()


def test_reset_and_step_shapes(games_by_type):
    path = games_by_type["pick_heat_then_place_in_recep"][0]
    env = AlfWorldEnv(path, max_steps=20)
    obs, info = env.reset(seed=0)
    assert obs.startswith("-= Welcome to TextWorld, ALFRED! =-")
    assert "You are in the middle of a room" in obs
    assert re.search(r"Your task is to: .+\.$", obs)
    assert info["task"] and info["task"] in obs and info["won"] is False
    assert "look" in info["admissible_commands"] and any(
        c.startswith("go to ") for c in info["admissible_commands"]
    )
    plan = _walkthrough(path)
    for i, cmd in enumerate(plan):
        obs, reward, terminated, truncated, info = env.step(cmd)
        assert isinstance(obs, str) and isinstance(reward, float)
        assert terminated == (i == len(plan) - 1) and not truncated
    assert reward == 1.0 and info["won"] is True
    env.close()


def test_inadmissible_action_says_nothing_happens_and_counts(games_by_type):
    env = AlfWorldEnv(games_by_type["pick_and_place_simple"][0], max_steps=3)
    obs0, _ = env.reset()
    obs, reward, terminated, truncated, info = env.step("fly to the moon")
    assert obs == NOTHING_HAPPENS and reward == 0.0 and not terminated and not truncated
    assert info["steps"] == 1
    env.step("look")
    obs, _, terminated, truncated, info = env.step("dance")
    assert obs == NOTHING_HAPPENS and truncated and not terminated and info["steps"] == 3


def test_put_and_move_syntax_reach_the_same_state(games_by_type):
    assert normalize_command("put apple 1 in/on fridge 1") == "move apple 1 to fridge 1"
    assert normalize_command("put apple 1 in fridge 1") == "move apple 1 to fridge 1"
    assert normalize_command("  put   mug 2 on  desk 1 ") == "move mug 2 to desk 1"
    assert normalize_command("move apple 1 to fridge 1") == "move apple 1 to fridge 1"
    path = games_by_type["pick_two_obj_and_place"][0]
    plan = _walkthrough(path)
    assert any(c.startswith("move ") for c in plan)
    alt = [re.sub(r"^move (.+) to (.+)$", r"put \1 in/on \2", c) for c in plan]
    runs = []
    for commands in (plan, alt):
        env = AlfWorldEnv(path, max_steps=50)
        env.reset()
        trace = [env.step(c) for c in commands]
        runs.append([(o, r, t, i["admissible_commands"]) for o, r, t, _, i in trace])
        state = sorted(map(str, env.engine_state["_facts"]))
        runs[-1].append(state)
        env.close()
    assert runs[0] == runs[1]
    assert runs[0][-2][2] is True  # won


def test_command_cache_gives_identical_outputs(games_by_type):
    rng = random.Random(0)
    path = games_by_type["pick_clean_then_place_in_recep"][0]
    envs = [AlfWorldEnv(path, max_steps=40, cache_commands=c) for c in (True, False)]
    outs = [e.reset() for e in envs]
    assert outs[0] == outs[1]
    for _ in range(25):
        action = rng.choice(outs[0][-1]["admissible_commands"])
        outs = [e.step(action) for e in envs]
        assert outs[0] == outs[1]


def test_batch_runner_with_walkthrough_policy(games_by_type):
    paths = [ps[0] for ps in games_by_type.values()]
    plans = [_walkthrough(p) for p in paths]
    batch = BatchEnv.from_paths(paths, max_steps=20)

    def policy(observations, infos):
        return [
            plans[i][info["steps"]] if info["steps"] < len(plans[i]) else "look"
            for i, info in enumerate(infos)
        ]

    records = run_batch(batch, policy)
    assert [r["success"] for r in records] == [True] * len(paths)
    assert [r["num_actions"] for r in records] == [len(p) for p in plans]
    step = records[0]["steps"][0]
    assert set(step) == {"observation", "candidate_actions", "action"}
    batch.close()


def test_batch_length_mismatch(games_by_type):
    batch = BatchEnv.from_paths(games_by_type["pick_and_place_simple"][:2])
    batch.reset()
    with pytest.raises(ValueError):
        batch.step(["look"])

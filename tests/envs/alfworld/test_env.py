from __future__ import annotations

import random
import re

from leap_kalm.envs.alfworld import AlfWorldEnv, normalize_command
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


def test_world_surface_plays_the_walkthrough_to_a_win(games_by_type):
    from leap_kalm.envs.registry import get_world

    world = get_world("alfworld", "text")
    for paths in games_by_type.values():
        game = {"game_id": "g", "split": "train", "task_type": "t", "path": str(paths[0])}
        plan = _walkthrough(paths[0])
        env = world.make_env(game, max_steps=len(plan) + 5)
        observation, info = env.reset()
        assert world.parse_task(observation) == info["task"] != ""
        for action in plan:
            assert action in info["admissible_commands"]
            observation, reward, terminated, truncated, info = env.step(action)
        assert terminated and reward == 1.0 and info["won"] and not truncated
        env.close()


def _play(engine, plan):
    """(admissible commands after each step, won) along ``plan`` on an open engine."""
    state = engine.reset()
    seen = [tuple(state["admissible_commands"])]
    for command in plan:
        state, _, _ = engine.step(command)
        seen.append(tuple(state["admissible_commands"]))
    return seen, bool(state["won"])


def test_closed_engines_hand_their_planner_library_to_the_next(games_by_type):
    """Each engine loads its own copy of fast-downward's library from a file it deletes at
    once, so a process used to keep every copy's 33 MB on disk until it ended: 400 train
    games filled the disk. Closed (or collected) engines now give theirs back."""
    import gc

    from leap_kalm.envs.alfworld import engine as eng

    game_a, game_b = games_by_type["pick_and_place_simple"][:2]
    plan_a = eng.start_engine(game_a, walkthrough=True).reset()["extra.walkthrough"]
    plan_b = eng.start_engine(game_b, walkthrough=True).reset()["extra.walkthrough"]
    gc.collect()
    eng._FREE_PLANNER_LIBRARIES.clear()
    # two engines open at once: a library each, and interleaved play is independent play
    a, b = eng.start_engine(game_a), eng.start_engine(game_b)
    assert a.downward_lib is not b.downward_lib
    alone_a = _play(eng.start_engine(game_a), plan_a)
    alone_b = _play(eng.start_engine(game_b), plan_b)
    state_a, state_b = a.reset(), b.reset()
    for t in range(max(len(plan_a), len(plan_b))):
        if t < len(plan_a):
            state_a, _, _ = a.step(plan_a[t])
        if t < len(plan_b):
            state_b, _, _ = b.step(plan_b[t])
    assert state_a["won"] and state_b["won"] and alone_a[1] and alone_b[1]
    # closing gives the library back; the next engine reuses it and plays the same game
    lib = a.downward_lib
    a.close()
    a.close()  # twice is harmless
    assert eng._FREE_PLANNER_LIBRARIES.count(lib) == 1
    reused = eng.start_engine(game_b)
    assert reused.downward_lib is lib
    assert _play(reused, plan_b) == alone_b
    # an engine collected without close() gives it back too (TextWorld's grammar parser
    # holds the frames of the latest load, so that one is collected after the next load)
    gc.collect()
    eng._FREE_PLANNER_LIBRARIES.clear()
    lost = eng.start_engine(game_a)
    lib = lost.downward_lib
    next_one = eng.start_engine(game_b)
    del lost
    gc.collect()
    assert next_one.downward_lib is not lib
    assert lib in eng._FREE_PLANNER_LIBRARIES
    assert _play(eng.start_engine(game_a), plan_a) == alone_a

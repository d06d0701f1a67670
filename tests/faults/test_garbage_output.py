"""Garbage from the student model: empty answers, overlong ones, answers without the
markers, actions that exist nowhere. Each is parsed without crashing, repaired onto a
candidate where a close one exists or played as written (the env answers "Nothing
happens."), labelled in the trajectory, and counted in the evaluation summary."""

from __future__ import annotations

import pytest

from leap_kalm.llm.agent import StudentPolicy, StudentSettings, roll_out
from leap_kalm.tables import leap_summary_rows, trajectory_steps
from tests.llm.test_agent import _specs

GARBAGE = [
    "",  # nothing at all
    "REASON:\n" + "blah " * 3000,  # overlong, no action
    "I think I will open the second box now.",  # no markers
    "REASON:\nwhy not\nACTION:\nfly to the moon",  # an action that exists nowhere
    "REASON:\nthe coin\nACTION:\nOpen Box 1.",  # sloppy, but a candidate
    "REASON:\nx\nACTION:\nopen box 10",  # near a candidate, but not one
]


class _GarbageGenerator:
    """Stands in for the model: answers every prompt with the next garbage in turn."""

    def __init__(self) -> None:
        from leap_kalm.llm.generation import GenerationStats

        self.calls = 0
        self.stats = GenerationStats()

    def chat_prompt(self, messages):
        return "\n".join(m["content"] for m in messages)

    def generate(self, prompts, keys):
        out = [GARBAGE[(self.calls + i) % len(GARBAGE)] for i in range(len(prompts))]
        self.calls += len(prompts)
        return out

    def forget(self, key):
        pass


@pytest.fixture(scope="module")
def played():
    import dataclasses

    sampling = dataclasses.make_dataclass("Sampling", [("temperature", float, 0.0)])()
    generator = _GarbageGenerator()
    generator.sampling = sampling
    policy = StudentPolicy(
        generator, StudentSettings(env_name="toy", max_steps=6, batch_size=1), "garbage"
    )
    return list(roll_out(_specs(1), policy, "toy")), policy


def test_every_kind_of_garbage_is_played_and_labelled(played):
    (trajectory,), policy = played
    steps = trajectory["steps"]
    assert len(steps) == 5  # the fifth answer opens box 1: the episode is won there
    assert trajectory["success"] is True
    assert [s["repair"] for s in steps] == [
        "empty",
        "empty",
        "unmatched",
        "unmatched",
        "normalized",
    ]
    assert [s["action"] for s in steps[:4]] == [
        "", "", "I think I will open the second box now.", "fly to the moon"
    ]  # played as written (the env answers "Nothing happens."), never invented  # fmt: skip
    assert steps[4]["action"] == "open box 1"
    assert len(steps[1]["reason"]) < 20_000  # kept, bounded by what the model wrote
    counts = {k: v for k, v in policy.repair_counts().items() if v}
    assert counts == {"empty": 2, "unmatched": 2, "normalized": 1}


def test_garbage_is_counted_in_the_evaluation_summary(played):
    (trajectory,), _ = played
    table = trajectory_steps([{**trajectory, "split": "valid_seen"}], iteration=0)
    assert table["admissible"].to_list() == [False, False, False, False, True]
    (row,) = [r for r in leap_summary_rows(table) if r["task_type"] == "all"]
    assert row["invalid_action_rate"] == pytest.approx(4 / 5) and row["success_rate"] == 1.0


def test_the_real_alfworld_env_takes_any_garbage_as_a_no_op(tmp_path):
    from leap_kalm.envs.alfworld import AlfWorldEnv, generate_games

    path = generate_games("train", 1, seed=3, out_dir=tmp_path)[0]
    env = AlfWorldEnv(str(path), max_steps=10)
    _, info = env.reset()
    candidates = info["admissible_commands"]
    for action in ["", "x" * 5000, "fly to the moon", "\x00\x01", "go to " + "cabinet 1" * 100]:
        observation, reward, terminated, truncated, info = env.step(action)
        assert observation == "Nothing happens." and reward == 0 and not terminated
        assert info["admissible_commands"] == candidates
    env.close()


def test_the_webshop_env_takes_any_garbage_without_crashing(tmp_path):
    """Garbage is a no-op in the shop; a search for garbage is an empty results page (its
    only way on is back to search); the step cap still ends the episode with 0 reward."""
    from leap_kalm.envs.webshop import world

    game = world.list_games("test", 1, games_dir=str(tmp_path))[0]
    garbage = ["", "x" * 5000, "click[]", "click[nothing]", "search[]", "search[   ]"]
    searches = ["search[" + "x" * 5000 + "]", "search[\x00\x01]", "search[😀 ÿ]", "search[[[]]]"]
    env = world.make_env(game, max_steps=len(garbage) + 1)
    start, info = env.reset()
    for action in garbage:
        observation, reward, terminated, truncated, step_info = env.step(action)
        assert (observation, reward, terminated, truncated) == (start, 0.0, False, False), action
        assert step_info["admissible_commands"] == info["admissible_commands"]
    *_, truncated, step_info = env.step("click[buy now]")  # not on this page: a no-op too
    assert truncated and step_info["score"] == 0.0 and not step_info["won"]
    for action in searches:
        env.reset()
        observation, reward, terminated, _, step_info = env.step(action)
        assert "Total results: 0" in observation and reward == 0.0 and not terminated
        assert step_info["admissible_commands"] == ["click[back to search]"]

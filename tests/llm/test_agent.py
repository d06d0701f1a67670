import pytest

from leap_kalm.datasets import JSONLDataset
from leap_kalm.llm.agent import (
    EpisodeSpec,
    StudentPolicy,
    StudentSettings,
    roll_out,
    task_from_observation,
)
from leap_kalm.llm.generation import EpisodeGenerator, SamplingParams
from leap_kalm.llm.models import load_model


class BoxEnv:
    """A tiny text game: open the right box among four."""

    def __init__(self, target: int):
        self.target = target
        self.closed = False

    def reset(self, seed=None):
        return "-= Welcome =-\nfind the coin.", {"admissible_commands": self._candidates()}

    def _candidates(self):
        return [f"open box {i}" for i in range(1, 5)] + ["look"]

    def step(self, action):
        won = action == f"open box {self.target}"
        obs = (
            "You find the coin!"
            if won
            else ("Nothing happens." if action not in self._candidates() else "The box is empty.")
        )
        return obs, float(won), won, False, {"admissible_commands": self._candidates(), "won": won}

    def close(self):
        self.closed = True


def _specs(n):
    return [
        EpisodeSpec(game_id=f"game-{i}", make_env=lambda i=i: BoxEnv(1 + i % 4), task_type="find")
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return load_model(tiny_model_dir, device="cpu")


def _policy(tiny, batch_size=3, temperature=1.0, **settings):
    model, tokenizer = tiny
    sampling = SamplingParams(max_new_tokens=24, temperature=temperature, seed=11)
    return StudentPolicy(
        EpisodeGenerator(model, tokenizer, sampling),
        StudentSettings(env_name="toy", max_steps=4, batch_size=batch_size, **settings),
        "tiny-test",
    )


@pytest.mark.parametrize(
    "prompt_format",
    [
        "leap",
        "conversation",
        "conversation_places",
        "conversation_compact",
        "conversation_recovery",
    ],
)
def test_scored_actions_are_always_candidates(tiny, prompt_format):
    policy = _policy(tiny, action_selection="score", prompt_format=prompt_format)
    trajectories = list(roll_out(_specs(4), policy, "toy"))
    steps = [s for t in trajectories for s in t["steps"]]
    assert steps and all(s["repair"] == "scored" for s in steps)
    assert all(s["action"] in s["candidate_actions"] for s in steps)
    assert policy.repair_counts()["scored"] == len(steps)


def test_repair_scores_only_the_answers_that_match_no_candidate(tiny):
    """``repair`` keeps every written action that matches a candidate and scores the rest,
    so every action exists; with the same seed its matched answers equal ``generate``'s."""
    generated = list(roll_out(_specs(4), _policy(tiny), "toy"))
    policy = _policy(tiny, action_selection="repair")
    repaired = list(roll_out(_specs(4), policy, "toy"))
    first = {t["game_id"]: t["steps"][0] for t in generated}
    steps = [s for t in repaired for s in t["steps"]]
    assert steps and all(s["action"] in s["candidate_actions"] for s in steps)
    assert {s["repair"] for s in steps} <= {"exact", "normalized", "fuzzy", "scored"}
    for t in repaired:
        before, after = first[t["game_id"]], t["steps"][0]
        assert after["raw_action"] == before["raw_action"]
        if before["repair"] in ("unmatched", "empty"):
            assert after["repair"] == "scored"
        else:
            assert after["action"] == before["action"] and after["repair"] == before["repair"]
    assert policy.repair_counts().get("scored", 0) == sum(s["repair"] == "scored" for s in steps)


def test_rollout_shapes_and_bookkeeping(tiny):
    policy = _policy(tiny)
    trajectories = list(roll_out(_specs(5), policy, "toy", extra={"iteration": 0}))
    assert sorted(t["game_id"] for t in trajectories) == [f"game-{i}" for i in range(5)]
    for t in trajectories:
        assert (
            t["task"] == "find the coin." and t["iteration"] == 0 and t["model_id"] == "tiny-test"
        )
        assert 1 <= t["num_actions"] == len(t["steps"]) <= 4
        assert t["success"] == (
            t["steps"][-1]["action"] == f"open box {1 + int(t['game_id'][-1]) % 4}"
        )
        for step in t["steps"]:
            assert set(step) >= {
                "observation",
                "candidate_actions",
                "reason",
                "action",
                "raw_action",
                "repair",
            }
            assert step["repair"] != "exact" or step["action"] in step["candidate_actions"]
    counts = policy.repair_counts()
    assert sum(counts.values()) == sum(t["num_actions"] for t in trajectories)
    assert policy.generator.stats.reused_tokens > 0


def test_resumed_rollout_equals_uninterrupted(tiny, tmp_path):
    reference = {t["game_id"]: t for t in roll_out(_specs(6), _policy(tiny, batch_size=4), "toy")}
    ds = JSONLDataset(
        filepath=str(tmp_path / "rollouts.jsonl"), save_args={"mode": "resume", "key": "game_id"}
    )

    def producer(interrupt_after):
        def produce(done):
            finished = {r["game_id"] for r in done}
            todo = [s for s in _specs(6) if s.game_id not in finished]
            for count, trajectory in enumerate(roll_out(todo, _policy(tiny, batch_size=4), "toy")):
                if count == interrupt_after:
                    raise KeyboardInterrupt
                yield trajectory

        return produce

    with pytest.raises(KeyboardInterrupt):
        ds.save(producer(2))
    assert len(ds.load_partial()) == 2
    ds.save(producer(-1))
    resumed = {t["game_id"]: t for t in ds.load()}
    assert resumed == reference


def test_task_from_observation_is_the_last_line_of_a_world_without_its_own_task():
    assert task_from_observation("room.\n\nopen the blue box.\n") == "open the blue box."
    assert task_from_observation("i need red shoes") == "i need red shoes"
    assert task_from_observation("  \n") == ""


class ShelfEnv(BoxEnv):
    """BoxEnv whose empty box shows, every other step, a long page, the same every time (as
    a results page the shopper comes back to), and a short one between."""

    PAGE = "The box is empty. On the shelf: " + ", ".join(f"a cup {i}" for i in range(40)) + "."

    def __init__(self, target: int):
        super().__init__(target)
        self.steps = 0

    def step(self, action):
        obs, reward, won, truncated, info = super().step(action)
        self.steps += 1
        if obs == "The box is empty." and self.steps % 2:
            obs = self.PAGE
        return obs, reward, won, truncated, info


def test_compact_rollouts_keep_every_observation_whole_in_the_trajectory(tiny):
    """``conversation_compact`` shortens what the student reads, not what is logged: the
    trajectory (which the teacher corrects and SFT rebuilds chats from) has every page."""
    from leap_kalm.llm.prompts import student_messages

    specs = [
        EpisodeSpec(game_id=f"game-{i}", make_env=lambda: ShelfEnv(4), task_type="find")
        for i in range(3)
    ]
    policy = _policy(tiny, action_selection="score", prompt_format="conversation_compact")
    trajectories = list(roll_out(specs, policy, "toy"))
    assert len(trajectories) == 3
    pages = [s["observation"] for t in trajectories for s in t["steps"]]
    assert pages.count(ShelfEnv.PAGE) >= 2 and not any("not repeated" in p for p in pages)
    # the student read pointers where a page came back
    t = max(trajectories, key=lambda t: [s["observation"] for s in t["steps"]].count(ShelfEnv.PAGE))
    shown = student_messages(
        "conversation_compact",
        "toy",
        t["task"],
        t["steps"][:-1],
        t["steps"][-1]["observation"],
        t["steps"][-1]["candidate_actions"],
    )
    users = [m["content"] for m in shown if m["role"] == "user"]
    assert sum("not repeated" in u for u in users) >= 1
    # a pointer stands exactly where the page came back after another one in between
    observations = [s["observation"] for s in t["steps"]]
    expected = [
        o == ShelfEnv.PAGE and o in observations[:i] and observations[i - 1] != o
        for i, o in enumerate(observations)
    ]
    assert ["not repeated" in u for u in users] == expected

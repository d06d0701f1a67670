"""WebShop's human-demonstration file (``il_trajs_finalized_images.jsonl``) read as expert
logs: goals found by their instruction as WebShop finds them, replayed in the shop for the
reward, bad lines named; and `ingest` using it instead of the scripted expert."""

from __future__ import annotations

import json

import pytest
from kedro.io import DatasetError

from leap_kalm.envs.webshop import world
from leap_kalm.envs.webshop.demos import goal_key, instruction_of, read_human_demos
from leap_kalm.pipelines.ingest.nodes import collect_expert_logs


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    return world.list_games("train", 6, games_dir=str(tmp_path_factory.mktemp("webshop")))


def _demo(trajectory, text_form=False):
    """The expert's trajectory written as WebShop writes a human demonstration."""
    states = [s["observation"] for s in trajectory["steps"]]
    if text_form:  # WebShop's `text` observation mode for the search page
        states[0] = f"WebShop\nInstruction:\n{trajectory['task']}\n[button] Search [button_]"
    offered, idxs = [], []
    for step in trajectory["steps"]:
        if step["action"].startswith("search["):
            offered.append([])
            idxs.append(-1)
        else:
            offered.append(step["candidate_actions"])
            idxs.append(step["candidate_actions"].index(step["action"]))
    return {
        "states": states,
        "available_actions": offered,
        "action_idxs": idxs,
        "actions": [s["action"] for s in trajectory["steps"]],
        "images": [0] * len(states),
    }


def test_instructions_are_found_in_both_observation_forms():
    rich = "WebShop [SEP] Instruction: [SEP] i need a red mug, and price lower than 20.00 dollars [SEP] [button] Search [button_]"
    text = 'WebShop\nInstruction:\nI need a "red" mug, and price lower than 20.00 dollars\n[button] Search [button_]'
    assert instruction_of(rich) == "i need a red mug, and price lower than 20.00 dollars"
    assert goal_key(instruction_of(rich)) == goal_key(instruction_of(text)) == "i need a red mug"


def test_demonstrations_become_expert_logs_of_their_goals(games, tmp_path):
    experts = [world.run_expert(g, 15, 0) for g in games[:3]]
    diverging = _demo(experts[2])
    product_step = next(i for i, a in enumerate(diverging["actions"]) if a.startswith("click[g"))
    diverging["actions"][product_step] = "click[b0notinshop]"
    diverging["available_actions"][product_step] = diverging["available_actions"][product_step] + [
        "click[b0notinshop]"
    ]
    diverging["action_idxs"][product_step] = len(diverging["available_actions"][product_step]) - 1
    other_goal = _demo(experts[0])
    other_goal["states"][0] = other_goal["states"][0].replace(
        "Instruction: [SEP] ", "Instruction: [SEP] zz "
    )
    lines = [
        _demo(experts[0], text_form=True),
        other_goal,
        _demo(experts[1]),
        _demo(experts[0]),
        diverging,
    ]
    path = tmp_path / "il_trajs_finalized_images.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")

    demos = read_human_demos(path, games)
    assert [d["game_id"] for d in demos] == [g["game_id"] for g in games[:3]]  # one per game
    first, second, third = demos
    assert first["model_id"] == "human" and first["task"] == experts[0]["task"]
    assert [s["action"] for s in first["steps"]] == [s["action"] for s in experts[0]["steps"]]
    assert first["steps"][0]["candidate_actions"] == ["search[<query>]"]
    assert first["success"] and first["score"] == pytest.approx(1.0) and first["replay"] == "whole"
    assert (
        second["success"]
        and second["steps"][0]["observation"] == experts[1]["steps"][0]["observation"]
    )
    assert third["replay"] == f"diverged at step {product_step}"
    assert not third["success"] and third["score"] == 0.0
    assert "reason" not in third["steps"][0]  # the annotate stage gives reasons

    produce = collect_expert_logs(games, {"demos": str(path), "games_dir": "unused"}, "webshop")
    written = list(produce([]))
    assert [t["game_id"] for t in written] == [d["game_id"] for d in demos]
    assert written[0]["ingest_params"]["demos"] == str(path)
    assert [t["game_id"] for t in produce(written[:1])] == [d["game_id"] for d in demos[1:]]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{not json", r"line 2: malformed JSON"),
        (json.dumps({"states": ["x"], "actions": ["search[a]"]}), r"line 2: missing key\(s\) \['available_actions', 'action_idxs'\]"),
        (json.dumps({"states": ["a", "b"], "available_actions": [[]], "action_idxs": [-1], "actions": ["search[a]"]}), r"line 2: .*equal, non-zero length; got lengths"),
        (json.dumps({"states": ["a"], "available_actions": [["click[x]"]], "action_idxs": [0], "actions": ["click[y]"]}), r"line 2: step 0: action_idxs 0 does not point at the action 'click\[y\]'"),
    ],
)  # fmt: skip
def test_a_bad_line_is_named(games, tmp_path, line, expected):
    expert = world.run_expert(games[0], 15, 0)
    path = tmp_path / "demos.jsonl"
    path.write_text(json.dumps(_demo(expert)) + "\n" + line + "\n")
    with pytest.raises((ValueError, DatasetError), match=expected) as error:
        read_human_demos(path, games)
    assert str(path) in str(error.value)


def test_a_missing_file_or_one_for_other_goals_is_named(games, tmp_path):
    with pytest.raises(FileNotFoundError, match="il_trajs_finalized_images.jsonl"):
        read_human_demos(tmp_path / "nowhere.jsonl", games)
    other = _demo(world.run_expert(games[0], 15, 0))
    other["states"][0] = (
        "WebShop [SEP] Instruction: [SEP] nothing we sell [SEP] [button] Search [button_]"
    )
    path = tmp_path / "demos.jsonl"
    path.write_text(json.dumps(other) + "\n")
    with pytest.raises(ValueError, match=r"demonstrates none of the 6 train games"):
        collect_expert_logs(games, {"demos": str(path)}, "webshop")
    with pytest.raises(ValueError, match="the alfworld world reads no demonstration files"):
        collect_expert_logs([], {"demos": str(path)}, "alfworld")

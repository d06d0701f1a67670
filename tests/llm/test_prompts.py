from leap_kalm.llm.prompts import build_student_messages, format_completion

HISTORY = [
    {
        "observation": "You are in the middle of a room.",
        "action": "go to drawer 1",
        "candidate_actions": [],
    },
    {"observation": "The drawer 1 is closed.", "action": "open drawer 1", "candidate_actions": []},
]


def test_student_prompt_holds_task_history_observation_and_candidates():
    messages = build_student_messages(
        "alfworld",
        "put a mug in the sink",
        HISTORY,
        "You open the drawer 1.",
        ["look", "close drawer 1"],
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "ALFWorld" in messages[0]["content"]
    assert user.startswith("Your task is: put a mug in the sink")
    assert "Observation 0: You are in the middle of a room.\nAction 0: go to drawer 1" in user
    assert "Observation 2: You open the drawer 1." in user
    assert "- look\n- close drawer 1" in user
    assert (
        user.index("Action 1: open drawer 1")
        < user.index("Observation 2")
        < user.index("Candidate actions")
    )


def test_full_history_prompts_grow_append_only():
    first = build_student_messages("alfworld", "t", HISTORY[:1], "obs one", ["a"])[1]["content"]
    second = build_student_messages(
        "alfworld", "t", HISTORY[:1] + [{"observation": "obs one", "action": "a"}], "obs two", ["b"]
    )[1]["content"]
    stable = first[: first.index("Candidate actions")]
    assert second.startswith(stable)


def test_history_window_keeps_the_last_steps_with_true_indices():
    user = build_student_messages("alfworld", "t", HISTORY, "now", ["look"], history_window=1)[1][
        "content"
    ]
    assert "Earlier actions: go to drawer 1\n" in user
    assert "Observation 0" not in user and "Action 1: open drawer 1" in user
    full = build_student_messages("alfworld", "t", HISTORY, "now", ["look"])[1]["content"]
    assert "Earlier actions" not in full and "Observation 0" in full


def test_windowed_prompts_keep_a_growing_common_prefix():
    history = HISTORY + [{"observation": "You open the drawer 1.", "action": "close drawer 1"}]
    before = build_student_messages("alfworld", "t", history[:2], "o", ["a"], history_window=1)
    after = build_student_messages("alfworld", "t", history, "o", ["a"], history_window=1)
    assert "Earlier actions: go to drawer 1; open drawer 1\n" in after[1]["content"]
    assert after[1]["content"].startswith("Your task is: t\nEarlier actions: go to drawer 1")
    assert before[1]["content"].startswith("Your task is: t\nEarlier actions: go to drawer 1\n")


def test_completion_format():
    assert format_completion(" because ", " look ") == "REASON:\nbecause\nACTION:\nlook"

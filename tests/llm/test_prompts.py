import pytest

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


# -- conversation_places ---------------------------------------------------------------
PLACES = ["go to drawer 1", "go to drawer 2", "go to shelf 1", "look"]
ROOM = [
    {
        "observation": "You are in the middle of a room.",
        "reason": "r0",
        "action": "go to drawer 1",
        "candidate_actions": PLACES,
    },
    {
        "observation": "You arrive at drawer 1. The drawer 1 is closed.",
        "reason": "r1",
        "action": "go to shelf 1",
        "candidate_actions": ["go to drawer 2", "go to shelf 1", "open drawer 1"],
    },
]


def _users(messages):
    return [m["content"] for m in messages if m["role"] == "user"]


def test_conversation_places_lists_the_places_not_visited_yet():
    from leap_kalm.llm.prompts import build_conversation, student_messages

    now = "You arrive at shelf 1. On the shelf 1, you see a mug 1."
    candidates = ["go to drawer 1", "go to drawer 2", "take mug 1 from shelf 1"]
    messages = student_messages("conversation_places", "alfworld", "t", ROOM, now, candidates)
    users = _users(messages)
    assert users[0].endswith("Not visited yet: drawer 1, drawer 2, shelf 1")
    assert users[1].endswith("Not visited yet: drawer 2, shelf 1")
    # drawer 1 was visited, shelf 1 is where the student stands: only drawer 2 is left
    assert users[2] == now + "\nNot visited yet: drawer 2"
    assert messages == build_conversation("alfworld", "t", ROOM, now, candidates, places=True)
    plain = student_messages("conversation", "alfworld", "t", ROOM, now, candidates)
    assert [m["role"] for m in plain] == [m["role"] for m in messages]
    assert "Not visited" not in "".join(_users(plain))
    assert [m for m in plain if m["role"] == "assistant"] == [
        m for m in messages if m["role"] == "assistant"
    ]
    # the chat only appends: the next step's chat starts with this one's messages
    later = build_conversation(
        "alfworld",
        "t",
        ROOM
        + [
            {
                "observation": now,
                "reason": "r2",
                "action": "go to drawer 2",
                "candidate_actions": candidates,
            }
        ],
        "You arrive at drawer 2.",
        ["go to drawer 1", "go to shelf 1"],
        places=True,
    )
    assert later[: len(messages)] == messages
    assert _users(later)[-1] == "You arrive at drawer 2.\nNot visited yet: none"


def test_conversation_places_records_train_on_the_same_answers():
    from leap_kalm.llm.records import sft_records

    trajectory = {"game_id": "g1", "task": "t", "steps": ROOM}
    (plain,) = sft_records("conversation", "alfworld", None, [trajectory])
    (placed,) = sft_records("conversation_places", "alfworld", None, [trajectory])
    assert placed["loss_turns"] == plain["loss_turns"] == [2, 4]
    assert [placed["messages"][i] for i in placed["loss_turns"]] == [
        plain["messages"][i] for i in plain["loss_turns"]
    ]
    assert "Not visited yet: drawer 2, shelf 1" in placed["messages"][3]["content"]


# -- conversation_recovery -------------------------------------------------------------
FAILED = [
    {
        "observation": "You are in the middle of a room.",
        "reason": "r0",
        "action": "go to drawer 5",
        "candidate_actions": PLACES,
    },
    {
        "observation": "Nothing happens.",
        "reason": "r1",
        "action": "go to drawer 2",
        "candidate_actions": PLACES,
    },
]


def test_conversation_recovery_lists_the_candidates_after_an_action_that_was_none():
    from leap_kalm.llm.prompts import build_conversation, student_messages

    now = "You arrive at drawer 2. The drawer 2 is closed."
    candidates = ["go to drawer 1", "open drawer 2"]
    messages = student_messages("conversation_recovery", "alfworld", "t", FAILED, now, candidates)
    users = _users(messages)
    assert users[1] == "Nothing happens.\nCandidate actions: " + ", ".join(PLACES)
    # the first observation and an ordinary one are as in the plain conversation
    plain = student_messages("conversation", "alfworld", "t", FAILED, now, candidates)
    assert users[0] == _users(plain)[0] and users[2] == _users(plain)[2] == now
    assert [m for m in messages if m["role"] == "assistant"] == [
        m for m in plain if m["role"] == "assistant"
    ]
    assert messages == build_conversation("alfworld", "t", FAILED, now, candidates, recovery=True)
    # the current observation gets the list when it is the failure
    current = _users(
        student_messages(
            "conversation_recovery", "alfworld", "t", FAILED[:1], " Nothing happens. ", ["look"]
        )
    )
    assert current[-1] == " Nothing happens. \nCandidate actions: look"

    # the chat only appends: the next step's chat starts with this one's messages
    def step(action, candidates=candidates):
        return {
            "observation": now,
            "reason": "r2",
            "action": action,
            "candidate_actions": candidates,
        }

    def last_user(extra_step, observation="Nothing happens."):
        chat = build_conversation(
            "alfworld", "t", FAILED + [extra_step], observation, ["go to drawer 1"], recovery=True
        )
        assert chat[: len(messages)] == messages
        return _users(chat)[-1]

    assert (
        last_user(step("close drawer 2")) == "Nothing happens.\nCandidate actions: go to drawer 1"
    )
    # the rule is the candidates, not the text: a valid action's "Nothing happens." is
    # not followed by the list, an invalid action's other observation is
    assert last_user(step("open drawer 2")) == "Nothing happens."
    assert last_user(step("open drawer 9"), "The drawer is stuck.").endswith(
        "stuck.\nCandidate actions: go to drawer 1"
    )
    # a step logged without its candidates has nothing to compare with: no list
    assert last_user(step("open drawer 9", [])) == "Nothing happens."


def test_conversation_recovery_records_show_the_candidates_before_the_trained_answer():
    from leap_kalm.llm.records import sft_records

    trajectory = {"game_id": "g1", "task": "t", "steps": FAILED}
    (plain,) = sft_records("conversation", "alfworld", None, [trajectory])
    (listed,) = sft_records("conversation_recovery", "alfworld", None, [trajectory])
    assert listed["loss_turns"] == plain["loss_turns"] == [2, 4]
    assert [listed["messages"][i] for i in listed["loss_turns"]] == [
        plain["messages"][i] for i in plain["loss_turns"]
    ]
    assert listed["messages"][3]["content"].endswith("Candidate actions: " + ", ".join(PLACES))
    assert "Candidate actions" not in plain["messages"][3]["content"]
    # an expert episode, which never fails, trains on the same text as the plain chat
    (expert,) = sft_records(
        "conversation_recovery", "alfworld", None, [{"game_id": "g2", "task": "t", "steps": ROOM}]
    )
    (expert_plain,) = sft_records(
        "conversation", "alfworld", None, [{"game_id": "g2", "task": "t", "steps": ROOM}]
    )
    assert expert["messages"] == expert_plain["messages"]


# -- conversation_compact --------------------------------------------------------------
RESULTS = "Page 1 (Total results: 50) [SEP] " + " [SEP] ".join(
    f"[button] G{i:03d} [button_]" for i in range(20)
)
ITEM = "[button] < Prev [button_] [SEP] " + "Acorn coffee beans, 24 count " * 8
SHOP = [
    {
        "observation": "Instruction: buy coffee [SEP] [button] Search [button_]",
        "reason": "r0",
        "action": "search[coffee]",
    },
    {"observation": RESULTS, "reason": "r1", "action": "click[g001]"},
    {"observation": ITEM, "reason": "r2", "action": "click[< prev]"},
    {"observation": RESULTS, "reason": "r3", "action": "click[g002]"},
    {"observation": ITEM, "reason": "r4", "action": "click[< prev]"},
]


def test_conversation_compact_writes_a_repeated_long_observation_once():
    from leap_kalm.llm.prompts import COMPACT_MIN_CHARS, build_conversation, student_messages

    assert len(RESULTS) >= COMPACT_MIN_CHARS and len(ITEM) >= COMPACT_MIN_CHARS
    compact = student_messages("conversation_compact", "webshop", "t", SHOP, RESULTS, [])
    plain = student_messages("conversation", "webshop", "t", SHOP, RESULTS, [])
    users = _users(compact)
    assert _users(plain)[1:] == [RESULTS, ITEM, RESULTS, ITEM, RESULTS]
    assert users[1] == RESULTS and users[2] == ITEM  # first showings stay whole
    pointer = "(The same as the observation after your action search[coffee] above; not repeated.)"
    assert users[3] == users[5] == pointer
    assert (
        users[4]
        == "(The same as the observation after your action click[g001] above; not repeated.)"
    )
    # answers are untouched, and the chat still only appends
    assert [m for m in compact if m["role"] == "assistant"] == [
        m for m in plain if m["role"] == "assistant"
    ]
    assert build_conversation("webshop", "t", SHOP[:3], RESULTS, compact=True) == compact[:8]


def test_conversation_compact_keeps_short_repeats_and_the_first_observation():
    from leap_kalm.llm.prompts import student_messages

    nothing = "Nothing happens."
    steps = [
        {"observation": "You are in the middle of a room. " * 10, "reason": "a", "action": "look"},
        {"observation": nothing, "reason": "b", "action": "open drawer 9"},
    ]
    start = steps[0]["observation"]
    users = _users(student_messages("conversation_compact", "alfworld", "t", steps, nothing, []))
    assert users[2] == nothing  # too short to point at
    users = _users(student_messages("conversation_compact", "alfworld", "t", steps, start, []))
    assert users[0].endswith(start)
    assert users[2] == "(The same as your first observation above; not repeated.)"


def test_conversation_compact_writes_an_unchanged_page_whole():
    """An action that changed nothing (an option the item lacks) shows the same page
    again right after it: the student sees it whole, as in the plain chat, not a pointer
    to the step before (measured: 20 of 100 episodes looped on such pointers)."""
    from leap_kalm.llm.prompts import build_conversation

    stuck = SHOP[:2] + [
        {"observation": ITEM, "reason": "r2", "action": "click[red]"},
        {"observation": ITEM, "reason": "r3", "action": "click[red]"},
    ]
    users = _users(build_conversation("webshop", "t", stuck, ITEM, compact=True))
    assert users[2:] == [ITEM, ITEM, ITEM]
    # once the page changed in between, a return is a pointer again
    back = stuck + [{"observation": ITEM, "reason": "r4", "action": "click[< prev]"}]
    messages = build_conversation("webshop", "t", back, RESULTS, compact=True)
    assert _users(messages)[5] == (
        "(The same as the observation after your action search[coffee] above; not repeated.)"
    )
    # and the chat still only appends
    assert messages[: 2 * len(stuck) + 2] == build_conversation(
        "webshop", "t", stuck, ITEM, compact=True
    )


def test_conversation_compact_records_train_on_the_same_answers_with_fewer_tokens():
    from leap_kalm.llm.records import sft_records

    trajectory = {"game_id": "g1", "task": "t", "steps": SHOP}
    (plain,) = sft_records("conversation", "webshop", None, [trajectory])
    (compact,) = sft_records("conversation_compact", "webshop", None, [trajectory])
    assert compact["loss_turns"] == plain["loss_turns"] == [2, 4, 6, 8, 10]
    assert [compact["messages"][i] for i in compact["loss_turns"]] == [
        plain["messages"][i] for i in plain["loss_turns"]
    ]
    size = lambda r: sum(len(m["content"]) for m in r["messages"])  # noqa: E731
    assert size(compact) < size(plain) - len(RESULTS) - len(ITEM) + 200


def test_an_unknown_conversation_format_is_refused():
    from leap_kalm.llm.prompts import conversation_options

    with pytest.raises(ValueError, match="conversation_short"):
        conversation_options("conversation_short")

import pytest

from leap_kalm.llm.records import (
    aggregate_dagger,
    dpo_pairs_from_corrections,
    sft_records_from_corrections,
    sft_records_from_trajectories,
    split_by_trajectory,
)


def _trajectory(game_id, n=3):
    return {
        "game_id": game_id,
        "task": "put a mug in the sink",
        "steps": [
            {
                "observation": f"obs {t}",
                "candidate_actions": ["look", f"go to shelf {t}"],
                "reason": f"r{t}",
                "action": "look",
            }
            for t in range(n)
        ],
    }


def _correction(game_id, n=3, corrected=(1,)):
    return {
        "game_id": game_id,
        "summary": "keeps looking",
        "steps": [
            {
                "timestep": t,
                "original_observation": f"obs {t}",
                "original_reason": f"r{t}",
                "original_action": "look",
                "corrected_reason": f"better {t}",
                "corrected_action": f"go to shelf {t}" if t in corrected else "look",
                "is_corrected": t in corrected,
            }
            for t in range(n)
        ],
    }


def _trained_actions(records):
    """The action line each per-step record trains (the last line of its completion)."""
    return [r["completion"][0]["content"].split("\n")[-1] for r in records]


def test_sft_records_have_prompt_completion_shape():
    records = sft_records_from_trajectories([_trajectory("g1")], "alfworld")
    assert len(records) == 3
    record = records[2]
    assert [m["role"] for m in record["prompt"]] == ["system", "user"]
    assert "Observation 0: obs 0\nAction 0: look" in record["prompt"][1]["content"]
    assert "Observation 2: obs 2" in record["prompt"][1]["content"]
    assert record["completion"] == [{"role": "assistant", "content": "REASON:\nr2\nACTION:\nlook"}]


def test_corrections_become_sft_records_with_the_students_own_history():
    records = sft_records_from_corrections([_trajectory("g1")], [_correction("g1")], "alfworld")
    assert len(records) == 3
    assert records[1]["completion"][0]["content"] == "REASON:\nbetter 1\nACTION:\ngo to shelf 1"
    # the history shown is what the student did, not the correction
    assert "Action 0: look" in records[1]["prompt"][1]["content"]


def test_dpo_pairs_only_for_corrected_steps():
    pairs = dpo_pairs_from_corrections(
        [_trajectory("g1")], [_correction("g1", corrected=(0, 2))], "alfworld"
    )
    assert len(pairs) == 2
    assert pairs[0]["chosen"][0]["content"].endswith("go to shelf 0")
    assert pairs[0]["rejected"][0]["content"] == "REASON:\nr0\nACTION:\nlook"
    assert set(pairs[1]) == {"prompt", "chosen", "rejected", "game_id"}


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="g1 has 2 steps, the trajectory 3"):
        sft_records_from_corrections([_trajectory("g1")], [_correction("g1", n=2)], "alfworld")


def test_split_keeps_trajectories_together():
    records = sft_records_from_trajectories([_trajectory(f"g{i}") for i in range(20)], "alfworld")
    train, val = split_by_trajectory(records, 0.15, seed=1)
    assert len(train) + len(val) == len(records)
    assert {r["game_id"] for r in train}.isdisjoint({r["game_id"] for r in val})
    assert len({r["game_id"] for r in val}) == 3
    assert split_by_trajectory(records, 0.15, seed=1) == (train, val)


def test_dagger_balances_iterations():
    it0 = [{"game_id": f"a{i}", "x": i} for i in range(10)]
    it1 = [{"game_id": f"b{i}", "x": i} for i in range(4)]
    it2 = [{"game_id": f"c{i}", "x": i} for i in range(7)]
    merged = aggregate_dagger([it0, it1, it2], seed=0)
    assert len(merged) == 12
    assert [sum(r["iteration_source"] == k for r in merged) for k in range(3)] == [4, 4, 4]
    assert merged == aggregate_dagger([it0, it1, it2], seed=0)
    assert aggregate_dagger([], seed=0) == []


def test_dagger_cap_bounds_each_iteration_from_iteration_1():
    it0 = [{"game_id": f"a{i}"} for i in range(10)]
    it1 = [{"game_id": f"b{i}"} for i in range(6)]
    capped = aggregate_dagger([it0, it1], seed=0, cap=3)
    assert [sum(r["iteration_source"] == k for r in capped) for k in range(2)] == [3, 3]
    # a cap above the smallest iteration changes nothing; iteration 0 alone is never capped
    assert aggregate_dagger([it0, it1], seed=0, cap=50) == aggregate_dagger([it0, it1], seed=0)
    assert len(aggregate_dagger([it0], seed=0, cap=3)) == 10
    with pytest.raises(ValueError, match="dagger_actions_per_iteration"):
        aggregate_dagger([it0, it1], seed=0, cap=0)


def test_dagger_balances_supervised_actions_not_records():
    # iteration 0: whole episodes training 5 answers each; iteration 1: segments training one
    episodes = [{"game_id": f"e{i}", "loss_turns": [2, 4, 6, 8, 10]} for i in range(8)]
    segments = [{"game_id": f"s{i}", "loss_turns": [4]} for i in range(12)]
    merged = aggregate_dagger([episodes, segments], seed=0)
    actions = [
        sum(len(r["loss_turns"]) for r in merged if r["iteration_source"] == k) for k in range(2)
    ]
    # 12 corrected actions against 3 episodes (15 actions: the draw stops once 12 are reached)
    assert actions == [15, 12]
    assert merged == aggregate_dagger([episodes, segments], seed=0)
    capped = aggregate_dagger([episodes, segments], seed=0, cap=6)
    assert [sum(r["iteration_source"] == k for r in capped) for k in range(2)] == [2, 6]


def test_dagger_expert_share_is_apart_from_the_balance_of_later_iterations():
    episodes = [{"game_id": f"e{i}", "loss_turns": [2, 4, 6, 8, 10]} for i in range(8)]
    segments = [{"game_id": f"s{i}", "loss_turns": [4]} for i in range(12)]
    more = [{"game_id": f"t{i}", "loss_turns": [6]} for i in range(9)]

    def actions(merged, n):
        return [
            sum(len(r["loss_turns"]) for r in merged if r["iteration_source"] == k)
            for k in range(n)
        ]

    # 21 expert actions (5 episodes, the draw stops once 21 are reached); iterations 1
    # and 2 balanced between themselves at 9, not cut to the expert share
    assert actions(aggregate_dagger([episodes, segments, more], expert_share=21), 3) == [25, 9, 9]
    # more than the expert episodes hold: all of them
    assert actions(aggregate_dagger([episodes, segments], expert_share=1000), 2) == [40, 12]
    # the cap still bounds the later iterations
    capped = aggregate_dagger([episodes, segments, more], cap=4, expert_share=10)
    assert actions(capped, 3) == [10, 4, 4]
    # iteration 0 alone: the share does not apply
    assert len(aggregate_dagger([episodes], expert_share=5)) == 8
    with pytest.raises(ValueError, match="dagger_expert_actions"):
        aggregate_dagger([episodes, segments], expert_share=0)


# -- conversation format ----------------------------------------------------------
def _answers(messages):
    return [m["content"] for m in messages if m["role"] == "assistant"]


def test_a_trajectory_is_one_conversation_with_loss_on_every_answer():
    from leap_kalm.llm.records import conversation_records_from_trajectories

    (record,) = conversation_records_from_trajectories([_trajectory("g1")], "alfworld")
    roles = [m["role"] for m in record["messages"]]
    assert roles == ["system"] + ["user", "assistant"] * 3
    assert record["loss_turns"] == [2, 4, 6]
    assert all(record["messages"][i]["role"] == "assistant" for i in record["loss_turns"])
    assert record["messages"][1]["content"].startswith("Your task is: put a mug in the sink\nobs 0")
    assert [m["content"] for m in record["messages"][3::2]] == ["obs 1", "obs 2"]
    assert _answers(record["messages"])[2] == "REASON:\nr2\nACTION:\nlook"
    assert "Candidate actions" not in "".join(m["content"] for m in record["messages"])


def test_corrections_are_cut_where_the_student_diverged():
    from leap_kalm.llm.records import conversation_records_from_corrections

    correction = _correction("g1", n=5, corrected=(1, 3))
    records = conversation_records_from_corrections(
        [_trajectory("g1", 5)], [correction], "alfworld"
    )
    # segments end at each corrected step, plus one for the steps after the last
    assert [r["loss_turns"] for r in records] == [[2, 4], [6, 8], [10]]
    first, second, third = (_answers(r["messages"]) for r in records)
    assert first == [
        "REASON:\nbetter 0\nACTION:\nlook",
        "REASON:\nbetter 1\nACTION:\ngo to shelf 1",
    ]
    # later segments show the student's original answer at an earlier corrected step:
    # the observations after it followed that action
    assert second[1] == "REASON:\nr1\nACTION:\nlook" and second[0] == first[0]
    assert second[3] == "REASON:\nbetter 3\nACTION:\ngo to shelf 3"
    assert third[3] == "REASON:\nr3\nACTION:\nlook" and len(third) == 5
    trained = [i for r in records for i in r["loss_turns"]]
    assert trained == sorted(set(trained)) == [2, 4, 6, 8, 10]  # every step once


def test_a_correction_ending_on_a_corrected_step_has_no_empty_segment():
    from leap_kalm.llm.records import conversation_records_from_corrections

    correction = _correction("g1", n=3, corrected=(2,))
    records = conversation_records_from_corrections([_trajectory("g1")], [correction], "alfworld")
    assert [r["loss_turns"] for r in records] == [[2, 4, 6]]


def test_trained_steps_corrected_trains_only_the_teachers_corrections():
    from leap_kalm.llm.records import conversation_records_from_corrections

    correction = _correction("g1", n=5, corrected=(1, 3))
    records = conversation_records_from_corrections(
        [_trajectory("g1", 5)], [correction], "alfworld", trained_steps="corrected"
    )
    # one segment per corrected step, trained on that step alone; nothing after step 3
    assert [r["loss_turns"] for r in records] == [[4], [8]]
    second = _answers(records[1]["messages"])
    assert len(second) == 4
    assert second[1] == "REASON:\nr1\nACTION:\nlook"  # the student's own answer as context
    assert second[3] == "REASON:\nbetter 3\nACTION:\ngo to shelf 3"
    per_step = sft_records_from_corrections(
        [_trajectory("g1", 5)], [correction], "alfworld", trained_steps="corrected"
    )
    assert _trained_actions(per_step) == [
        "go to shelf 1",
        "go to shelf 3",
    ]
    with pytest.raises(ValueError, match="trained_steps"):
        sft_records_from_corrections([_trajectory("g1")], [correction], "alfworld", None, "some")


def test_trained_steps_first_trains_up_to_the_first_correction_only():
    from leap_kalm.llm.records import conversation_records_from_corrections

    correction = _correction("g1", n=5, corrected=(1, 3))
    (record,) = conversation_records_from_corrections(
        [_trajectory("g1", 5)], [correction], "alfworld", trained_steps="first"
    )
    # the kept step 0 and the corrected step 1; the off-course states after it are left out
    assert record["loss_turns"] == [2, 4]
    assert _answers(record["messages"]) == [
        "REASON:\nbetter 0\nACTION:\nlook",
        "REASON:\nbetter 1\nACTION:\ngo to shelf 1",
    ]
    per_step = sft_records_from_corrections(
        [_trajectory("g1", 5)], [correction], "alfworld", trained_steps="first"
    )
    assert len(per_step) == 2
    assert per_step[-1]["completion"][0]["content"].endswith("go to shelf 1")
    kept = _correction("g2", n=3, corrected=())
    assert conversation_records_from_corrections(
        [_trajectory("g2", 3)], [kept], "alfworld", trained_steps="first"
    ) == [] and sft_records_from_corrections(
        [_trajectory("g2", 3)], [kept], "alfworld", trained_steps="first"
    ) == []  # fmt: skip


def test_trained_corrections_stops_after_the_nth_correction():
    from leap_kalm.llm.records import conversation_records_from_corrections, sft_records

    trajectory, correction = _trajectory("g1", 7), _correction("g1", n=7, corrected=(1, 3, 5))
    every = conversation_records_from_corrections([trajectory], [correction], "alfworld")
    assert [r["loss_turns"] for r in every] == [[2, 4], [6, 8], [10, 12], [14]]
    two = conversation_records_from_corrections(
        [trajectory], [correction], "alfworld", max_corrections=2
    )
    assert two == every[:2]  # the same segments, nothing after the second correction
    corrected = conversation_records_from_corrections(
        [trajectory], [correction], "alfworld", "corrected", max_corrections=2
    )
    assert [r["loss_turns"] for r in corrected] == [[4], [8]]
    # a trajectory with no more corrections than the cap is trained to its end
    assert (
        conversation_records_from_corrections(
            [trajectory], [correction], "alfworld", max_corrections=3
        )
        == every
    )
    per_step = sft_records("leap", "alfworld", None, [trajectory], [correction], "trajectory", 2)
    assert _trained_actions(per_step) == [
        "look",
        "go to shelf 1",
        "look",
        "go to shelf 3",
    ]
    assert (
        len(sft_records("leap", "alfworld", None, [trajectory], [correction], "trajectory", 3)) == 7
    )
    with pytest.raises(ValueError, match="trained_corrections must be at least 1"):
        sft_records("conversation", "alfworld", None, [trajectory], [correction], "trajectory", 0)


def test_capped_correction_verbs_cut_only_those_corrections():
    """``capped_verbs=["go"]``: the cap counts the ``go`` corrections; a ``take`` after the
    cut is still trained, a ``go`` after it is not; the same in segments, branches and the
    per-step format."""
    from leap_kalm.llm.records import conversation_records_from_corrections, sft_records

    trajectory = _trajectory("g1", 8)
    correction = _correction("g1", n=8, corrected=(1, 2, 4, 5, 6))
    for t, action in ((2, "take mug 1 from shelf 2"), (6, "move mug 1 to desk 1")):
        correction["steps"][t]["corrected_action"] = action
    # go at 1, 4, 5; take at 2; move at 6: with a cap of 2 every correction counts and the
    # cut falls at step 2; counting only go, the cut falls at step 4 and the move (6) is kept
    args = ([trajectory], [correction], "alfworld", "corrected")
    plain = conversation_records_from_corrections(*args, max_corrections=2)
    assert [r["loss_turns"] for r in plain] == [[4], [6]]
    capped = conversation_records_from_corrections(*args, max_corrections=2, capped_verbs=["go"])
    assert [r["loss_turns"] for r in capped] == [[4], [6], [10], [14]]
    assert _answers(capped[-1]["messages"])[-1].endswith("move mug 1 to desk 1")
    (branched,) = conversation_records_from_corrections(
        *args, max_corrections=2, packing="branches", capped_verbs=["go"]
    )
    assert [b["turn"] for b in branched["branches"]] == [4, 6, 10, 14]
    per_step = sft_records(
        "leap", "alfworld", None, [trajectory], [correction], "corrected", 2, capped_verbs=["go"]
    )
    assert _trained_actions(per_step) == [
        "go to shelf 1",
        "take mug 1 from shelf 2",
        "go to shelf 4",
        "move mug 1 to desk 1",
    ]
    # no more counted corrections than the cap: everything is trained
    assert len(
        conversation_records_from_corrections(*args, max_corrections=3, capped_verbs=["go"])
    ) == 5  # fmt: skip
    with pytest.raises(ValueError, match="capped_correction_verbs needs trained_steps: corrected"):
        conversation_records_from_corrections(
            [trajectory], [correction], "alfworld", max_corrections=2, capped_verbs=["go"]
        )
    with pytest.raises(ValueError, match="trained_corrections set"):
        conversation_records_from_corrections(*args, capped_verbs=["go"])


def test_uncapped_invalid_corrections_are_trained_past_the_cap_and_not_counted():
    """A correction of an action that was not a candidate (the student's ``go to shelf 9``)
    is marked ``uncapped``: the cap neither counts nor cuts it, in segments, branches and
    the per-step format; a valid correction past the cut is still cut."""
    from leap_kalm.llm.records import (
        conversation_records_from_corrections,
        sft_records,
        uncap_invalid_corrections,
    )

    trajectory = _trajectory("g1", 8)
    for t in (2, 6):  # the student wrote a place the room lacks at steps 2 and 6
        trajectory["steps"][t]["action"] = "go to shelf 9"
    correction = _correction("g1", n=8, corrected=(1, 2, 4, 5, 6))
    (marked,) = uncap_invalid_corrections([trajectory], [correction])
    assert [t for t, s in enumerate(marked["steps"]) if s.get("uncapped")] == [2, 6]
    assert "uncapped" not in correction["steps"][2]  # the input is unchanged
    args = ([trajectory], [marked], "alfworld", "corrected")
    # counted: 1, 4, 5; a cap of 2 cuts at 4, so 5 is not trained, 2 and 6 are
    segments = conversation_records_from_corrections(*args, max_corrections=2)
    assert [r["loss_turns"] for r in segments] == [[4], [6], [10], [14]]
    plain = conversation_records_from_corrections(
        [trajectory], [correction], "alfworld", "corrected", max_corrections=2
    )
    assert [r["loss_turns"] for r in plain] == [[4], [6]]
    (branched,) = conversation_records_from_corrections(
        *args, max_corrections=2, packing="branches"
    )
    assert [b["turn"] for b in branched["branches"]] == [4, 6, 10, 14]
    per_step = sft_records("leap", "alfworld", None, [trajectory], [marked], "corrected", 2)
    assert _trained_actions(per_step) == [
        "go to shelf 1",
        "go to shelf 2",
        "go to shelf 4",
        "go to shelf 6",
    ]
    # a step without a candidate list is not judged; an unknown trajectory is an error
    trajectory["steps"][2]["candidate_actions"] = []
    (unjudged,) = uncap_invalid_corrections([trajectory], [correction])
    assert [t for t, s in enumerate(unjudged["steps"]) if s.get("uncapped")] == [6]
    with pytest.raises(ValueError, match="correction for unknown trajectory 'g1'"):
        uncap_invalid_corrections([], [correction])


def test_conversation_dpo_prompt_is_the_students_own_chat():
    from leap_kalm.llm.records import dpo_pairs

    (pair,) = dpo_pairs("conversation", "alfworld", None, [_trajectory("g1")], [_correction("g1")])
    assert [m["role"] for m in pair["prompt"]] == ["system", "user", "assistant", "user"]
    assert pair["prompt"][2]["content"] == "REASON:\nr0\nACTION:\nlook"
    assert pair["prompt"][3]["content"] == "obs 1"
    assert pair["chosen"][0]["content"].endswith("go to shelf 1")
    assert pair["rejected"][0]["content"].endswith("look")
    assert dpo_pairs(
        "conversation", "alfworld", None, [_trajectory("g1")], [_correction("g1")]
    ) == [pair]
    with pytest.raises(ValueError, match="prompt_format must be one of"):
        dpo_pairs("chat", "alfworld", None, [], [])


def test_sft_records_dispatch_on_the_prompt_format():
    from leap_kalm.llm.records import sft_records

    trajectories, corrections = [_trajectory("g1")], [_correction("g1")]
    assert sft_records("leap", "alfworld", 2, trajectories) == sft_records_from_trajectories(
        trajectories, "alfworld", 2
    )
    assert len(sft_records("leap", "alfworld", 2, trajectories, corrections)) == 3
    assert len(sft_records("conversation", "alfworld", None, trajectories)) == 1
    assert len(sft_records("conversation", "alfworld", None, trajectories, corrections)) == 2
    with pytest.raises(ValueError, match="prompt_format must be one of"):
        sft_records("chat", "alfworld", None, trajectories)


def _won(game_id, n=3):
    return {**_trajectory(game_id, n), "success": True}


def test_contrast_pairs_prefer_an_approved_step_over_the_corrected_action():
    from leap_kalm.llm.records import contrast_pairs_from_kept_steps, dpo_pairs

    # g1 failed and was corrected at step 1 (look -> go to shelf 1); g2 and g3 won; g4
    # failed without a correction. "go to shelf 1" is a candidate at step 1 of each.
    trajectories = [_trajectory("g1"), _won("g2"), _won("g3"), _trajectory("g4")]
    corrections = [_correction("g1")]
    contrasts = contrast_pairs_from_kept_steps(trajectories, corrections, "alfworld", ratio=1.0)
    assert len(contrasts) == 1  # one pair chose "go to shelf 1": one contrast
    (pair,) = contrasts
    assert pair["game_id"] in {"g2", "g3"}
    assert pair["chosen"] == [{"role": "assistant", "content": "REASON:\nr1\nACTION:\nlook"}]
    assert pair["rejected"] == [
        {"role": "assistant", "content": "REASON:\nbetter 1\nACTION:\ngo to shelf 1"}
    ]
    assert "Observation 1: obs 1" in pair["prompt"][1]["content"]  # the approved step's prompt
    # ratio 2 asks for two: both winners' step 1 qualify; the failed, uncorrected g4 and
    # g1's steps from its correction on never do
    two = contrast_pairs_from_kept_steps(trajectories, corrections, "alfworld", ratio=2.0)
    assert sorted(p["game_id"] for p in two) == ["g2", "g3"]
    assert contrast_pairs_from_kept_steps([_trajectory("g1"), _trajectory("g4")], corrections, "alfworld", ratio=5.0) == []  # fmt: skip
    # the same seed draws the same steps; dpo_pairs appends the contrasts to LEAP's pairs
    assert contrast_pairs_from_kept_steps(trajectories, corrections, "alfworld", seed=3) == (
        contrast_pairs_from_kept_steps(trajectories, corrections, "alfworld", seed=3)
    )
    plain = dpo_pairs("leap", "alfworld", 2, trajectories, corrections)
    both = dpo_pairs("leap", "alfworld", 2, trajectories, corrections, contrast_ratio=1.0)
    assert len(plain) == 1 and both[:1] == plain and both[1:] == contrasts
    assert contrast_pairs_from_kept_steps(trajectories, corrections, "alfworld", ratio=0) == []
    with pytest.raises(ValueError, match="contrast ratio must be >= 0"):
        contrast_pairs_from_kept_steps(trajectories, corrections, "alfworld", ratio=-1)


def test_contrast_pairs_skip_steps_where_the_student_already_took_the_action():
    from leap_kalm.llm.records import contrast_pairs_from_kept_steps

    won = _won("g2")
    won["steps"][1]["action"] = "go to shelf 1"  # the approved step took the preferred action
    assert contrast_pairs_from_kept_steps([_trajectory("g1"), won], [_correction("g1")], "alfworld") == []  # fmt: skip


# -- corrections as one chat with branches -------------------------------------------
def _branches(record):
    return [(b["turn"], b["message"]["content"]) for b in record["branches"]]


def test_branches_train_what_the_segments_train_from_one_chat():
    from leap_kalm.llm.records import conversation_records_from_corrections, supervised_actions

    trajectory, correction = _trajectory("g1", 5), _correction("g1", n=5, corrected=(1, 3))
    segments = conversation_records_from_corrections([trajectory], [correction], "alfworld")
    (record,) = conversation_records_from_corrections(
        [trajectory], [correction], "alfworld", packing="branches"
    )
    # the chat is the trajectory as lived: the last segment's chat, the student's own
    # answers at the corrected steps
    assert record["messages"] == segments[-1]["messages"]
    assert record["loss_turns"] == [2, 6, 10]  # the kept steps
    assert _branches(record) == [
        (4, "REASON:\nbetter 1\nACTION:\ngo to shelf 1"),
        (8, "REASON:\nbetter 3\nACTION:\ngo to shelf 3"),
    ]
    # each branch replaces exactly the answer the segment ending there trains
    for turn, content in _branches(record):
        (segment,) = [s for s in segments if s["loss_turns"][-1] == turn]
        assert segment["messages"][turn]["content"] == content
        assert segment["messages"][:turn] == record["messages"][:turn]
    assert supervised_actions(record) == sum(map(supervised_actions, segments)) == 5


def test_branches_follow_trained_steps_and_the_correction_cap():
    from leap_kalm.llm.records import conversation_records_from_corrections

    trajectory, correction = _trajectory("g1", 7), _correction("g1", n=7, corrected=(1, 3, 5))

    def packed(*args, **kwargs):
        (record,) = conversation_records_from_corrections(
            [trajectory], [correction], "alfworld", *args, packing="branches", **kwargs
        )
        return record["loss_turns"], [turn for turn, _ in _branches(record)], record

    loss, branches, record = packed("corrected")
    assert (loss, branches) == ([], [4, 8, 12]) and len(_answers(record["messages"])) == 6
    loss, branches, record = packed("first")
    assert (loss, branches) == ([2], [4]) and len(_answers(record["messages"])) == 2
    loss, branches, record = packed(max_corrections=2)
    assert (loss, branches) == ([2, 6], [4, 8]) and len(_answers(record["messages"])) == 4
    loss, branches, _ = packed("corrected", max_corrections=2)
    assert (loss, branches) == ([], [4, 8])
    kept = _correction("g2", n=3, corrected=())
    assert conversation_records_from_corrections(
        [_trajectory("g2", 3)], [kept], "alfworld", "corrected", packing="branches"
    ) == []  # fmt: skip
    (whole,) = conversation_records_from_corrections(
        [_trajectory("g2", 3)], [kept], "alfworld", packing="branches"
    )
    assert whole["loss_turns"] == [2, 4, 6] and whole["branches"] == []
    with pytest.raises(ValueError, match="correction_packing must be one of"):
        conversation_records_from_corrections(
            [trajectory], [correction], "alfworld", packing="tree"
        )


def test_untrained_correction_verbs_keep_the_students_answer_as_context():
    from leap_kalm.llm.records import conversation_records_from_corrections, untrain_corrections

    trajectory = _trajectory("g1", 5)
    correction = _correction("g1", n=5, corrected=(1, 3))
    correction["steps"][3]["corrected_action"] = "take mug 1 from shelf 3"
    (kept,) = untrain_corrections([correction], ["GO"])
    assert [s["is_corrected"] for s in kept["steps"]] == [False, False, False, True, False]
    assert kept["steps"][1]["corrected_action"] == "look"  # the student's own action
    assert kept["steps"][1]["corrected_reason"] == "r1"
    assert correction["steps"][1]["is_corrected"]  # the input is unchanged
    # only the take is trained, in the chat the student lived (its own answer at step 1)
    (record,) = conversation_records_from_corrections(
        [trajectory], [kept], "alfworld", trained_steps="corrected"
    )
    assert record["loss_turns"] == [8]
    answers = _answers(record["messages"])
    assert answers[1] == "REASON:\nr1\nACTION:\nlook"
    assert answers[3].endswith("take mug 1 from shelf 3")
    # the cap counts the trained corrections only: with both untrained, nothing is left
    assert untrain_corrections([correction], ["go", "take"])[0]["steps"][3]["is_corrected"] is False
    assert untrain_corrections([correction], []) == [correction]


def test_invalid_corrections_as_recovery_train_the_answer_after_the_students_action():
    """A correction of an action that was no candidate (``go to shelf 9``) is trained after
    that action and the observation it got, so the teacher's critique names an action the
    chat shows; a correction of a valid action still replaces it. Segments and the
    per-step format; branches refuse it."""
    from leap_kalm.llm.records import (
        conversation_records_from_corrections,
        invalid_corrections_as_recovery,
        sft_records,
    )

    trajectory = _trajectory("g1", 5)
    for t in (2, 4):  # no candidate at 2 and at the last step
        trajectory["steps"][t]["action"] = "go to shelf 9"
    correction = _correction("g1", n=5, corrected=(1, 2, 4))
    for t in (2, 4):
        correction["steps"][t]["original_action"] = "go to shelf 9"
    (marked,) = invalid_corrections_as_recovery([trajectory], [correction])
    # step 1's "look" was a candidate; step 4 is the last: nothing came after it
    assert [t for t, s in enumerate(marked["steps"]) if s.get("recovery")] == [2]
    assert "recovery" not in correction["steps"][2]  # the input is unchanged

    args = ([trajectory], [marked], "alfworld")
    first, second, third = conversation_records_from_corrections(*args, "corrected")
    assert first["loss_turns"] == [4]
    # step 2: the student's own answer, then what it got (obs 3), then the teacher's
    assert [m["role"] for m in second["messages"]] == ["system"] + ["user", "assistant"] * 4
    assert second["messages"][6]["content"] == "REASON:\nr2\nACTION:\ngo to shelf 9"
    assert second["messages"][7]["content"] == "obs 3"
    assert second["loss_turns"] == [8]
    assert second["messages"][8]["content"] == "REASON:\nbetter 2\nACTION:\ngo to shelf 2"
    assert third["loss_turns"] == [10]  # step 4, not marked: replaced as before
    assert _answers(third["messages"])[2] == "REASON:\nr2\nACTION:\ngo to shelf 9"
    plain = conversation_records_from_corrections([trajectory], [correction], "alfworld")
    assert [r["loss_turns"] for r in plain] == [[2, 4], [6], [8, 10]]
    # trajectory: the kept steps before the recovery step are trained, its original is not
    assert [r["loss_turns"] for r in conversation_records_from_corrections(*args)] == [
        [2, 4], [8], [8, 10],
    ]  # fmt: skip
    with pytest.raises(ValueError, match="needs correction_packing: segments"):
        conversation_records_from_corrections(*args, "corrected", packing="branches")

    per_step = sft_records("leap", "alfworld", None, [trajectory], [marked], "corrected")
    assert _trained_actions(per_step) == ["go to shelf 1", "go to shelf 2", "go to shelf 4"]
    shown = per_step[1]["prompt"][-1]["content"]
    assert "Action 2: go to shelf 9" in shown and "Observation 3: obs 3" in shown
    assert "go to shelf 2" in shown  # step 2's candidates
    unmarked = sft_records("leap", "alfworld", None, [trajectory], [correction], "corrected")
    assert "go to shelf 9" not in unmarked[1]["prompt"][-1]["content"]


def test_recovery_records_in_conversation_recovery_list_the_candidates_before_the_answer():
    """With ``prompt_format: conversation_recovery`` the "Nothing happens." the student's
    invalid action got is followed by that state's candidates, so the teacher's recovery
    answer is trained where the chat shows what the student could do."""
    from leap_kalm.llm.records import (
        conversation_records_from_corrections,
        invalid_corrections_as_recovery,
    )

    trajectory = _trajectory("g1", 4)
    trajectory["steps"][1]["action"] = "go to shelf 9"
    trajectory["steps"][2]["observation"] = "Nothing happens."
    correction = _correction("g1", n=4, corrected=(1,))
    correction["steps"][1]["original_action"] = "go to shelf 9"
    correction["steps"][2]["original_observation"] = "Nothing happens."
    (marked,) = invalid_corrections_as_recovery([trajectory], [correction])
    args = ([trajectory], [marked], "alfworld", "corrected")
    (listed,) = conversation_records_from_corrections(*args, "conversation_recovery")
    (plain,) = conversation_records_from_corrections(*args, "conversation")
    assert listed["loss_turns"] == plain["loss_turns"] == [6]
    assert listed["messages"][4]["content"] == "REASON:\nr1\nACTION:\ngo to shelf 9"
    # step 1's candidates: the state the invalid action left unchanged
    assert (
        listed["messages"][5]["content"]
        == "Nothing happens.\nCandidate actions: look, go to shelf 1"
    )
    assert plain["messages"][5]["content"] == "Nothing happens."
    assert listed["messages"][6] == plain["messages"][6]
    assert listed["messages"][6]["content"].endswith("ACTION:\ngo to shelf 1")

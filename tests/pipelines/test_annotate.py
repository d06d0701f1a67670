"""`annotate` nodes, called directly on real expert logs of a few generated games."""

from __future__ import annotations

import pytest

from leap_kalm.pipelines.annotate.nodes import annotate_expert_logs
from tests.pipelines.conftest import LEAP, TEACHER, snapshot


def test_every_expert_step_gets_a_reason_and_nothing_else_changes(expert_logs, privileged_states):
    before = snapshot(expert_logs, privileged_states)
    annotated = annotate_expert_logs(expert_logs, privileged_states, TEACHER, LEAP)
    assert [t["game_id"] for t in annotated] == [t["game_id"] for t in expert_logs]
    for new, old in zip(annotated, expert_logs, strict=True):
        assert new["annotated_by"] == "scripted"
        assert len(new["steps"]) == len(old["steps"]) == new["num_actions"]
        for step, original in zip(new["steps"], old["steps"], strict=True):
            assert isinstance(step["reason"], str) and len(step["reason"]) > 20
            assert {k: v for k, v in step.items() if k != "reason"} == original
        assert {k: v for k, v in new.items() if k not in ("steps", "annotated_by")} == {
            k: v for k, v in old.items() if k != "steps"
        }
    assert snapshot(expert_logs, privileged_states) == before
    assert "reason" not in expert_logs[0]["steps"][0]


def test_reasons_are_the_teachers_own_and_deterministic(expert_logs, privileged_states):
    from leap_kalm.teachers import make_teacher

    teacher = make_teacher("alfworld", TEACHER)
    first = annotate_expert_logs(expert_logs, privileged_states, TEACHER, LEAP)
    again = annotate_expert_logs(expert_logs, privileged_states, TEACHER, LEAP)
    assert first == again
    for trajectory, privileged, annotated in zip(
        expert_logs, privileged_states, first, strict=True
    ):
        assert [s["reason"] for s in annotated["steps"]] == teacher.annotate(trajectory, privileged)


def test_failed_expert_runs_are_dropped(expert_logs, privileged_states):
    failed = {**expert_logs[1], "success": False, "score": 0.0}
    logs = [expert_logs[0], failed, expert_logs[2]]
    annotated = annotate_expert_logs(logs, privileged_states, TEACHER, LEAP)
    assert [t["game_id"] for t in annotated] == [
        expert_logs[0]["game_id"],
        expert_logs[2]["game_id"],
    ]
    assert annotate_expert_logs([failed], privileged_states, TEACHER, LEAP) == []


def test_reasons_use_the_privileged_task_view(expert_logs, privileged_states):
    """The teacher names the task's object kind, which it reads from the privileged state."""
    annotated = annotate_expert_logs(expert_logs[:1], privileged_states, TEACHER, LEAP)
    without = annotate_expert_logs(expert_logs[:1], [], TEACHER, LEAP)
    target = next(e for e in privileged_states[0]["essential_objects"] if e["role"] == "target")
    assert any(target["type"] in s["reason"] for s in annotated[0]["steps"])
    assert [s["reason"] for s in without[0]["steps"]] != [
        s["reason"] for s in annotated[0]["steps"]
    ]


def test_bad_teacher_or_leap_parameters_are_named(expert_logs, privileged_states):
    with pytest.raises(ValueError, match="teacher.kind must be one of"):
        annotate_expert_logs(expert_logs, privileged_states, {"kind": "oracle"}, LEAP)
    with pytest.raises(ValueError, match="realizability must be within 0..100"):
        annotate_expert_logs(expert_logs, privileged_states, {"realizability": 101}, LEAP)
    with pytest.raises(
        ValueError, match="leap.env must be a text world \(alfworld, webshop\), got 'nethack'"
    ):
        annotate_expert_logs(expert_logs, privileged_states, TEACHER, {"env": "nethack"})


def test_a_failing_llm_teacher_does_not_stop_annotate(expert_logs, privileged_states, monkeypatch):
    """The whole iteration used to stop at the first trajectory a weak teacher could not
    annotate; now the scripted teacher stands in (or the trajectory is left out) and the
    other annotations are kept."""
    from tests.teachers.test_teachers import _llm_teacher_that_fails

    built = _llm_teacher_that_fails(monkeypatch)
    params = {"kind": "llm", "max_attempts": 2}
    annotated = annotate_expert_logs(expert_logs, privileged_states, params, LEAP)
    scripted = annotate_expert_logs(expert_logs, privileged_states, TEACHER, LEAP)
    assert [t["annotated_by"] for t in annotated] == ["scripted (fallback: llm failed)"] * 3
    assert [t["steps"] for t in annotated] == [t["steps"] for t in scripted]
    assert len(built[0].client.bodies) == 2 * len(expert_logs)  # two attempts each
    skipped = annotate_expert_logs(
        expert_logs, privileged_states, {**params, "on_failure": "skip"}, LEAP
    )
    assert skipped == []

"""`annotate` nodes: a causal reason for every expert step."""

from __future__ import annotations

import logging
from typing import Any

from leap_kalm.pipelines.params import LeapParams
from leap_kalm.progress import track
from leap_kalm.teachers import make_guarded_teacher

logger = logging.getLogger(__name__)


def annotate_expert_logs(
    expert_logs: list[dict[str, Any]],
    privileged_states: list[dict[str, Any]],
    teacher_params: dict[str, Any],
    leap_params: dict[str, Any],
) -> list[dict[str, Any]]:
    """Add a hint-only ``reason`` to every step of every successful expert trajectory.

    Failed expert runs are dropped (they are not demonstrations). Inputs are not mutated.

    Returns:
        The annotated trajectories, with the teacher recorded in ``annotated_by``
        (``scripted (fallback: llm failed)`` where the scripted teacher stood in; a
        trajectory the teacher failed on is left out with ``teacher.on_failure: skip``).
    """
    config = LeapParams.from_dict(leap_params)
    teacher = make_guarded_teacher(config.env, teacher_params)
    privileged = {p["game_id"]: p for p in privileged_states}
    wins = [t for t in expert_logs if t["success"]]
    logger.info(
        "annotating %d of %d expert trajectories (successful ones)", len(wins), len(expert_logs)
    )
    annotated = []
    for trajectory in track(wins, "annotate expert steps"):
        reasons, by = teacher.annotate(trajectory, privileged.get(trajectory["game_id"], {}))
        if reasons is None:  # the teacher failed and on_failure is skip
            continue
        steps = [
            {**step, "reason": reason}
            for step, reason in zip(trajectory["steps"], reasons, strict=True)
        ]
        annotated.append({**trajectory, "steps": steps, "annotated_by": by})
    teacher.report("annotate", len(wins))
    return annotated

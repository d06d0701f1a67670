"""`correct` nodes: roll out the previous student, then correct its failed trajectories."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator
from typing import Any

from leap_kalm.pipelines.leap_common import (
    LeapParams,
    TeacherAdapter,
    TeacherParams,
    episode_specs,
    model_id_of,
    model_load_kwargs,
    student_ref,
)
from leap_kalm.progress import track
from leap_kalm.schemas import ModelRef

logger = logging.getLogger(__name__)


def roll_out_student(
    games: list[dict[str, Any]],
    previous_student: ModelRef | None,
    leap_params: dict[str, Any],
    model_params: dict[str, Any],
    iteration: int,
) -> Callable[[list], Iterator[dict[str, Any]]]:
    """The previous iteration's student plays the train games (resumable).

    Iteration 0 has no student to roll out: it returns no trajectories (behaviour cloning
    on annotated expert logs happens in ``train_sft`` instead).

    Returns:
        A producer for a resumable ``JSONLDataset``: trajectories already written by an
        interrupted run are kept and their games are not played again.
    """
    config = LeapParams.from_dict(leap_params)

    def produce(done: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        if iteration == 0:
            return
        from leap_kalm.llm.agent import StudentPolicy, StudentSettings, roll_out
        from leap_kalm.llm.generation import EpisodeGenerator, SamplingParams
        from leap_kalm.llm.models import load_model

        ref = student_ref(previous_student, model_params, iteration)
        specs = episode_specs(config.env, games, "train", config.rollout_max_steps)
        if config.n_rollout_games is not None:
            specs = random.Random(config.seed + iteration).sample(
                specs, min(config.n_rollout_games, len(specs))
            )
        finished = {t["game_id"] for t in done}
        todo = [s for s in specs if s.game_id not in finished]
        model, tokenizer = load_model(ref, merge_adapter=True, **model_load_kwargs(model_params))
        sampling = SamplingParams.from_dict({"seed": config.seed + iteration, **config.sampling})
        settings = StudentSettings(
            config.env, config.history_window, config.rollout_max_steps, config.batch_size
        )
        policy = StudentPolicy(
            EpisodeGenerator(model, tokenizer, sampling), settings, model_id_of(ref)
        )
        extra = {"iteration": iteration, "seed": sampling.seed}
        yield from track(
            roll_out(todo, policy, config.env, extra), "student rollouts", total=len(todo)
        )
        logger.info(
            "rollout repairs: %s; cache: %s", policy.repair_counts(), policy.generator.stats
        )

    return produce


def correct_failed_rollouts(
    rollouts: list[dict[str, Any]],
    privileged_states: list[dict[str, Any]],
    games: list[dict[str, Any]],
    teacher_params: dict[str, Any],
    leap_params: dict[str, Any],
) -> list[dict[str, Any]]:
    """The privileged teacher corrects every failed rollout, step by step.

    Returns:
        One correction per failed trajectory (``summary`` plus corrected steps), each
        recording the teacher and its token usage so far.
    """
    config = LeapParams.from_dict(leap_params)
    teacher = TeacherAdapter(config.env, TeacherParams.from_dict(teacher_params))
    privileged = {p["game_id"]: p for p in privileged_states}
    by_id = {g["game_id"]: g for g in games}
    failed = [t for t in rollouts if not t["success"]]
    logger.info("correcting %d failed of %d rollouts", len(failed), len(rollouts))
    corrections = []
    for trajectory in track(failed, "teacher corrections"):
        correction = teacher.correct(
            trajectory, privileged[trajectory["game_id"]], by_id[trajectory["game_id"]]
        )
        corrections.append(
            {**correction, "teacher": teacher.config.kind, "teacher_usage": teacher.usage()}
        )
    return corrections

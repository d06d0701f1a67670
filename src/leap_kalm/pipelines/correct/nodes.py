"""`correct` nodes: roll out the previous student, then correct its failed trajectories."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator
from typing import Any

from leap_kalm.envs.registry import episode_specs
from leap_kalm.pipelines.leap_iteration import rolls_out, starting_model
from leap_kalm.pipelines.params import LeapParams
from leap_kalm.progress import track
from leap_kalm.schemas import ModelRef
from leap_kalm.teachers import make_guarded_teacher

logger = logging.getLogger(__name__)


def _rollout_games(config: LeapParams, games: list[dict[str, Any]], iteration: int) -> list[Any]:
    """The train episodes an iteration rolls out: all, or ``n_rollout_games`` of them drawn
    with the iteration's seed."""
    specs = episode_specs(config.env, games, "train", config.rollout_max_steps)
    if config.n_rollout_games is None:
        return specs
    rng = random.Random(config.seed + iteration)
    return rng.sample(specs, min(config.n_rollout_games, len(specs)))


def roll_out_student(
    games: list[dict[str, Any]],
    previous_student: ModelRef | None,
    leap_params: dict[str, Any],
    model_params: dict[str, Any],
    iteration: int,
) -> Callable[[list], Iterator[dict[str, Any]]]:
    """The previous iteration's student plays (a sample of) the train games (resumable).

    Iteration 0 has no student to roll out: it returns no trajectories.

    Returns:
        A producer for a resumable ``JSONLDataset``: trajectories already written by an
        interrupted run are kept and their games are not played again.
    """
    config = LeapParams.from_dict(leap_params)

    def produce(done: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        if not rolls_out(iteration):
            return
        from leap_kalm.llm.agent import roll_out
        from leap_kalm.llm.student import load_student_policy

        ref = starting_model(previous_student, model_params, iteration)
        specs = _rollout_games(config, games, iteration)
        todo = [s for s in specs if s.game_id not in {t["game_id"] for t in done}]
        if not todo:
            return
        sampling = {"seed": config.seed + iteration, **config.sampling}
        settings = config.student_settings(config.rollout_max_steps)
        policy = load_student_policy(ref, model_params, sampling, settings)
        extra = {"iteration": iteration, "seed": policy.generator.sampling.seed}
        rollouts = roll_out(todo, policy, config.env, extra)
        yield from track(rollouts, "student rollouts", total=len(todo))
        logger.info(
            "rollout repairs: %s; cache: %s", policy.repair_counts(), policy.generator.stats
        )

    return produce


def _privileged_of(privileged: dict[str, Any], trajectory: dict[str, Any]) -> dict[str, Any]:
    """The privileged state of a trajectory's game, or an error that names the game."""
    if trajectory["game_id"] not in privileged:
        raise KeyError(
            f"no privileged state for game {trajectory['game_id']!r}: run the privilege "
            "stage on the games index that holds it (kedro run --pipeline=privilege)"
        )
    return privileged[trajectory["game_id"]]


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
    teacher = make_guarded_teacher(config.env, teacher_params, games)
    privileged = {p["game_id"]: p for p in privileged_states}
    failed = [t for t in rollouts if not t["success"]]
    logger.info("correcting %d failed of %d rollouts", len(failed), len(rollouts))
    corrections = []
    for trajectory in track(failed, "teacher corrections"):
        correction, by = teacher.correct(trajectory, _privileged_of(privileged, trajectory))
        if correction is None:  # the teacher failed and on_failure is skip
            continue
        corrections.append({**correction, "teacher": by, "teacher_usage": teacher.usage()})
    teacher.report("correct", len(failed))
    return corrections


def tabulate_corrections(
    rollouts: list[dict[str, Any]], corrections: list[dict[str, Any]], iteration: int
) -> tuple[Any, Any]:
    """The iteration's student rollouts and the teacher's corrections as step tables
    (polars; parquet in the catalog): see :mod:`leap_kalm.tables`."""
    from leap_kalm.tables import correction_steps, trajectory_steps

    return trajectory_steps(rollouts, iteration), correction_steps(rollouts, corrections, iteration)

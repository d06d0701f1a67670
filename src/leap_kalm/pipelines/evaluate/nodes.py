"""`evaluate` nodes: roll the student out on held-out games and report success."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from leap_kalm.envs.registry import episode_specs
from leap_kalm.isolation import in_fresh_process
from leap_kalm.llm.parsing import is_admissible
from leap_kalm.pipelines.leap_iteration import trained_student
from leap_kalm.pipelines.params import LeapParams
from leap_kalm.progress import track
from leap_kalm.schemas import ModelRef

logger = logging.getLogger(__name__)

SUMMARY_COLUMNS = [
    "iteration",
    "env",
    "split",
    "task_type",
    "success_rate",
    "ci_low",
    "ci_high",
    "mean_score",
    "mean_actions",
    "mean_actions_won",
    "invalid_action_rate",
    "repeat_rate",
    "n",
]


def select_student(
    student_sft: ModelRef, student_dpo: ModelRef, leap_params: dict[str, Any]
) -> ModelRef:
    """The student this iteration trained (SFT or DPO); the other one is a skipped marker."""
    return trained_student(student_sft, student_dpo, LeapParams.from_dict(leap_params).train_method)


def evaluate_student(
    games: list[dict[str, Any]],
    student: ModelRef,
    leap_params: dict[str, Any],
    model_params: dict[str, Any],
    iteration: int,
) -> Callable[[list], Iterator[dict[str, Any]]]:
    """The student plays every game of the evaluation splits (greedy by default; resumable),
    in a fresh process unless ``leap.eval_fresh_process`` is false."""
    config = LeapParams.from_dict(leap_params)

    def produce(done: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        finished = sorted({t["game_id"] for t in done})
        total = sum(
            1
            for split in config.eval_splits
            for s in episode_specs(config.env, games, split, config.eval_max_steps)
            if s.game_id not in finished
        )
        if not total:
            return
        args = (games, student, leap_params, model_params, iteration, finished)
        rollouts = (
            in_fresh_process(play_evaluation, *args, label="evaluation")
            if config.eval_fresh_process
            else play_evaluation(*args)
        )
        yield from track(rollouts, "evaluation", total=total)

    return produce


def play_evaluation(
    games: list[dict[str, Any]],
    student: ModelRef,
    leap_params: dict[str, Any],
    model_params: dict[str, Any],
    iteration: int,
    finished: list[str],
) -> Iterator[dict[str, Any]]:
    """Play the evaluation games not in ``finished``; yield each trajectory as it ends."""
    from leap_kalm.llm.agent import roll_out
    from leap_kalm.llm.student import load_student_policy

    config = LeapParams.from_dict(leap_params)
    skip = set(finished)
    specs = [
        s
        for split in config.eval_splits
        for s in episode_specs(config.env, games, split, config.eval_max_steps)
        if s.game_id not in skip
    ]
    sampling = {"seed": config.seed, **config.eval_sampling}
    settings = config.student_settings(config.eval_max_steps)
    policy = load_student_policy(student, model_params, sampling, settings)
    yield from roll_out(specs, policy, config.env, {"iteration": iteration})
    logger.info("evaluation repairs: %s", policy.repair_counts())


def success_row(trajectories: list[dict[str, Any]]) -> dict[str, Any]:
    """Success with its Wilson 95% interval, and behaviour diagnostics, of some episodes.

    ``invalid_action_rate`` is the share of steps whose action was not a candidate,
    ``repeat_rate`` the share of steps that repeated the previous action, and
    ``mean_actions_won`` the mean length of the won episodes (``None`` when none was won),
    ``mean_score`` the mean final reward (WebShop's score; ALFWorld's is 1 for a win).
    """
    from leap_kalm.stats import wilson_interval

    n = len(trajectories)
    wins = [t for t in trajectories if t["success"]]
    steps = [s for t in trajectories for s in t["steps"]]
    repeats = sum(
        a["action"] == b["action"]
        for t in trajectories
        for a, b in zip(t["steps"], t["steps"][1:], strict=False)
    )
    low, high = wilson_interval(len(wins), n)
    return {
        "success_rate": len(wins) / n,
        "ci_low": low,
        "ci_high": high,
        "mean_score": sum(t.get("score", float(t["success"])) for t in trajectories) / n,
        "mean_actions": sum(t["num_actions"] for t in trajectories) / n,
        "mean_actions_won": (sum(t["num_actions"] for t in wins) / len(wins)) if wins else None,
        "invalid_action_rate": sum(
            not is_admissible(s["action"], s["candidate_actions"]) for s in steps
        )
        / max(len(steps), 1),
        "repeat_rate": repeats / max(len(steps), 1),
        "n": n,
    }


def summarize_evaluation(
    eval_rollouts: list[dict[str, Any]], leap_params: dict[str, Any], iteration: int
) -> dict[str, Any]:
    """Success (with a 95% interval), length and diagnostics per split and task type (and
    ``all``) for one iteration; see :func:`success_row`."""
    config = LeapParams.from_dict(leap_params)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for trajectory in eval_rollouts:
        groups[(trajectory["split"], trajectory["task_type"])].append(trajectory)
        groups[(trajectory["split"], "all")].append(trajectory)
    rows = [
        {"iteration": iteration, "env": config.env, "split": split, "task_type": task_type}
        | success_row(trajectories)
        for (split, task_type), trajectories in sorted(groups.items())
    ]
    repairs: dict[str, int] = defaultdict(int)
    for trajectory in eval_rollouts:
        for step in trajectory["steps"]:
            repairs[step.get("repair", "exact")] += 1
    return {
        "iteration": iteration,
        "env": config.env,
        "rows": rows,
        "action_repairs": dict(repairs),
    }


def report_leap_progress(
    history: list[dict[str, Any]], evaluation: dict[str, Any]
) -> tuple[Any, list[dict[str, Any]], Any]:
    """Fold this iteration's results into the history; table and plot of success across iterations.

    Returns:
        ``(summary table, updated history, figure)``; a re-run of an iteration replaces its rows.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    key = (evaluation["iteration"], evaluation["env"])
    kept = [r for r in history if (r["iteration"], r["env"]) != key]
    rows = sorted(
        kept + evaluation["rows"],
        key=lambda r: (r["env"], r["iteration"], r["split"], r["task_type"]),
    )
    table = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    figure, axis = plt.subplots(figsize=(6, 4))
    overall = table[table["task_type"] == "all"]
    for (env, split), part in overall.groupby(["env", "split"]):
        axis.plot(part["iteration"], 100 * part["success_rate"], marker="o", label=f"{env} {split}")
    from matplotlib.ticker import MaxNLocator

    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_xlabel("LEAP iteration")
    axis.set_ylabel("success rate (%)")
    axis.set_ylim(0, 100)
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    return table, rows, figure

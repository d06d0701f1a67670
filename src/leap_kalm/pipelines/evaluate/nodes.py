"""`evaluate` nodes: roll the student out on held-out games and report success."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from leap_kalm.envs.registry import episode_specs
from leap_kalm.isolation import in_fresh_process
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
    "score_ci_low",  # a 95% Student-t interval of mean_score
    "score_ci_high",
    "mean_r_type",  # the parts of a graded world's reward (WebShop's), null elsewhere
    "mean_r_att",
    "mean_r_option",
    "mean_r_price",
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


def summarize_evaluation(
    eval_rollouts: list[dict[str, Any]], leap_params: dict[str, Any], iteration: int
) -> tuple[dict[str, Any], Any]:
    """Success (with a 95% interval), length and diagnostics per split and task type (and
    ``all``) for one iteration, computed with polars from the evaluation's step table.

    Returns:
        The iteration's report (``rows`` as :func:`leap_kalm.tables.leap_summary_rows`,
        ``action_repairs``) and the step table (``eval_steps``, parquet in the catalog).
    """
    from leap_kalm.tables import leap_summary_rows, trajectory_score, trajectory_steps

    config = LeapParams.from_dict(leap_params)
    steps = trajectory_steps(eval_rollouts, iteration)
    rows = [{"iteration": iteration, "env": config.env} | row for row in leap_summary_rows(steps)]
    repairs = dict(steps.group_by("repair").len().sort("len", descending=True).iter_rows())
    games = [  # paired across iterations by game (an evaluation without ids: by position)
        {"split": t["split"], "game_id": t.get("game_id") or f"episode {i}",
         "success": bool(t["success"]), "score": trajectory_score(t)}
        for i, t in enumerate(eval_rollouts)
    ]  # fmt: skip
    report = {
        "iteration": iteration, "env": config.env, "rows": rows, "action_repairs": repairs,
        "games": games,
    }  # fmt: skip
    return report, steps


def report_leap_progress(
    history: list[dict[str, Any]], evaluation: dict[str, Any]
) -> tuple[Any, list[dict[str, Any]], Any]:
    """Fold this iteration's results into the history; table and plot of success across iterations.

    Returns:
        ``(summary table, updated history, figure)``; a re-run of an iteration replaces its rows.
    """
    import pandas as pd

    from leap_kalm.plots import pyplot

    plt = pyplot()

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


PAIRED_COLUMNS = [
    "env",
    "iteration",
    "baseline_iteration",
    "split",  # a held-out split, or ``all``
    "n",  # games both iterations played
    "won_both",
    "won_only_new",
    "won_only_baseline",
    "success_delta",  # mean per-game difference in success (iteration - baseline)
    "success_delta_ci_low",  # its Student-t 95% interval
    "success_delta_ci_high",
    "mcnemar_p",  # exact two-sided McNemar test on the games only one of them won
    "score_delta",
    "score_delta_ci_low",
    "score_delta_ci_high",
]


def compare_iterations(
    outcomes: list[dict[str, Any]], evaluation: dict[str, Any]
) -> tuple[Any, list[dict[str, Any]]]:
    """Each iteration against iteration 0 and against the one before it, game by game on
    the same held-out games: a paired difference resolves far smaller changes than two
    separate intervals (a third of the games can change outcome between neighbouring
    students; ``docs/results.md``).

    Args:
        outcomes: the per-game outcomes of earlier iterations (``env, iteration, split,
            game_id, success, score``), as this node wrote them.
        evaluation: this iteration's report; its ``games`` replace any earlier run's.

    Returns:
        ``(table with PAIRED_COLUMNS, updated outcomes)``.
    """
    import pandas as pd

    from leap_kalm.stats import paired_by_split

    env, iteration = evaluation["env"], evaluation["iteration"]
    kept = [r for r in outcomes if (r["env"], r["iteration"]) != (env, iteration)]
    new = [{"env": env, "iteration": iteration} | game for game in evaluation.get("games", [])]
    if "games" not in evaluation:
        logger.warning(
            "%s iteration %s: its report has no per-game outcomes (written before they were "
            "kept); summarise it again with --from-nodes %s.summarize_evaluation_node",
            env, iteration, env,
        )  # fmt: skip
    updated = sorted(kept + new, key=lambda r: (r["env"], r["iteration"], r["split"], r["game_id"]))
    by_iteration: dict[tuple[str, int], dict[tuple[str, str], tuple[bool, float]]] = {}
    for r in updated:
        by_iteration.setdefault((r["env"], r["iteration"]), {})[(r["split"], r["game_id"])] = (
            r["success"], r["score"],
        )  # fmt: skip
    rows = []
    for (world, later), games in sorted(by_iteration.items()):
        if later == 0:
            continue
        for earlier in sorted({0, later - 1}):
            base = by_iteration.get((world, earlier))
            if base is None:
                continue
            for row in paired_by_split(base, games):
                rows.append({"env": world, "iteration": later, "baseline_iteration": earlier} | row)
    for row in rows:
        if row["iteration"] == iteration and row["split"] == "all":
            logger.info(
                "%s iteration %s vs %s: success %+.1f points (95%% interval %+.1f to %+.1f, "
                "McNemar p %.3f; %s games won only now, %s only then), score %+.1f",
                row["env"], iteration, row["baseline_iteration"], 100 * row["success_delta"],
                100 * row["success_delta_ci_low"], 100 * row["success_delta_ci_high"],
                row["mcnemar_p"], row["won_only_new"], row["won_only_baseline"],
                100 * row["score_delta"],
            )  # fmt: skip
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS), updated

"""Step-level tables a researcher can query (polars), and the summaries computed from them.

The JSONL trajectories are the stages' contract; these tables flatten them, one row per
step, into versioned parquet datasets (kedro-datasets' ``polars.EagerPolarsDataset``):

* ``trajectory_steps``: evaluation and training rollouts (episode, step, observation,
  action, whether it was a candidate, how the written answer was repaired, reward, done);
* ``correction_steps``: the teacher's corrections beside the student's original steps;
* ``kalm_episode_table``: KALM policies' evaluation episodes.

``leap_summary_rows`` and ``kalm_summary`` compute the reports (``leap_eval_summary``,
``kalm_eval_summary``) from these tables, so a notebook's query and the report agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leap_kalm.llm.parsing import is_admissible
from leap_kalm.schemas import REWARD_PARTS

STEP_COLUMNS = [
    "iteration", "env", "split", "episode", "game_id", "task_type", "success", "score", "num_actions",
    "step", "observation", "reason", "action", "raw_action", "repair", "admissible",
    "repeated", "reward", "done", *REWARD_PARTS,
]  # fmt: skip


def trajectory_score(trajectory: dict[str, Any]) -> float:
    """An episode's score: its graded reward where the world grades (WebShop), else success."""
    return float(trajectory.get("score", float(trajectory["success"])))


def trajectory_steps(trajectories: Sequence[dict[str, Any]], iteration: int | None = None) -> Any:
    """One row per step of ``trajectories`` (columns ``STEP_COLUMNS``; ``episode`` is the
    trajectory's position in ``trajectories``).

    ``admissible``: the action is one of the step's candidates (or fills a candidate's
    template); ``repeated``: it is the episode's previous action again; ``reward`` and
    ``done``: the episode's final reward on its last step, 0 and False before it;
    ``repair``: how the student's written action was matched (``exact`` for expert steps);
    ``r_type``, ``r_att``, ``r_option``, ``r_price``: the parts of a graded world's final
    reward (WebShop's), on every step of the episode, null where the world or goal has none.
    """
    import polars as pl

    rows = []
    for episode, trajectory in enumerate(trajectories):
        steps = trajectory["steps"]
        score = trajectory_score(trajectory)
        parts = trajectory.get("reward_parts") or {}
        for t, step in enumerate(steps):
            last = t == len(steps) - 1
            rows.append(
                {
                    "iteration": trajectory.get("iteration", iteration),
                    "env": trajectory.get("env", ""),
                    "split": trajectory.get("split", ""),
                    "episode": episode,
                    "game_id": trajectory.get("game_id", ""),
                    "task_type": trajectory.get("task_type", ""),
                    "success": bool(trajectory["success"]),
                    "score": score,
                    "num_actions": int(trajectory.get("num_actions", len(steps))),
                    "step": t,
                    "observation": step.get("observation", ""),
                    "reason": step.get("reason", ""),
                    "action": step["action"],
                    "raw_action": step.get("raw_action", step["action"]),
                    "repair": step.get("repair", "exact"),
                    "admissible": is_admissible(step["action"], step["candidate_actions"]),
                    "repeated": t > 0 and step["action"] == steps[t - 1]["action"],
                    "reward": score if last else 0.0,
                    "done": last,
                    **{k: parts.get(k) for k in REWARD_PARTS},
                }
            )
    schema = {
        "iteration": pl.Int64, "env": pl.Utf8, "split": pl.Utf8, "episode": pl.Int64,
        "game_id": pl.Utf8,
        "task_type": pl.Utf8, "success": pl.Boolean, "score": pl.Float64,
        "num_actions": pl.Int64, "step": pl.Int64, "observation": pl.Utf8, "reason": pl.Utf8,
        "action": pl.Utf8, "raw_action": pl.Utf8, "repair": pl.Utf8, "admissible": pl.Boolean,
        "repeated": pl.Boolean, "reward": pl.Float64, "done": pl.Boolean,
        **{k: pl.Float64 for k in REWARD_PARTS},
    }  # fmt: skip
    return pl.DataFrame(rows, schema=schema)


def correction_steps(
    trajectories: Sequence[dict[str, Any]],
    corrections: Sequence[dict[str, Any]],
    iteration: int | None = None,
) -> Any:
    """One row per step of every corrected trajectory: the student's original reason and
    action beside the teacher's, whether the step was corrected, and whether the original
    was a candidate at all."""
    import polars as pl

    by_id = {t["game_id"]: t for t in trajectories}
    rows = []
    for correction in corrections:
        trajectory = by_id.get(correction["game_id"], {"steps": []})
        for step in correction["steps"]:
            t = step["timestep"]
            candidates = (
                trajectory["steps"][t]["candidate_actions"] if t < len(trajectory["steps"]) else []
            )
            rows.append(
                {
                    "iteration": trajectory.get("iteration", iteration),
                    "game_id": correction["game_id"],
                    "task_type": trajectory.get("task_type", ""),
                    "teacher": correction.get("teacher", ""),
                    "step": t,
                    "observation": step["original_observation"],
                    "original_reason": step["original_reason"],
                    "original_action": step["original_action"],
                    "original_admissible": is_admissible(step["original_action"], candidates),
                    "corrected_reason": step["corrected_reason"],
                    "corrected_action": step["corrected_action"],
                    "is_corrected": bool(step["is_corrected"]),
                }
            )
    schema = {
        "iteration": pl.Int64, "game_id": pl.Utf8, "task_type": pl.Utf8, "teacher": pl.Utf8,
        "step": pl.Int64, "observation": pl.Utf8, "original_reason": pl.Utf8,
        "original_action": pl.Utf8, "original_admissible": pl.Boolean,
        "corrected_reason": pl.Utf8, "corrected_action": pl.Utf8, "is_corrected": pl.Boolean,
    }  # fmt: skip
    return pl.DataFrame(rows, schema=schema)


def group_summary(steps: Any, keys: list[str]) -> list[dict[str, Any]]:
    """Success, score, length and behaviour per group of a step table (see
    :func:`leap_summary_rows`)."""
    import polars as pl

    from leap_kalm.stats import mean_interval, wilson_interval

    parts = [k for k in REWARD_PARTS if k in steps.columns]
    episodes = steps.group_by([*keys, "episode"]).agg(
        pl.col("success").first(), pl.col("score").first(), pl.col("num_actions").first(),
        *(pl.col(k).first() for k in parts),
    )  # fmt: skip
    by_episode = episodes.group_by(keys).agg(
        n=pl.len(),
        wins=pl.col("success").sum(),
        mean_score=pl.col("score").mean(),
        scores=pl.col("score"),
        mean_actions=pl.col("num_actions").mean(),
        mean_actions_won=pl.col("num_actions").filter(pl.col("success")).mean(),
        **{f"mean_{k}": pl.col(k).mean() for k in parts},
    )
    by_step = steps.group_by(keys).agg(
        invalid_action_rate=(~pl.col("admissible")).mean(),
        repeat_rate=pl.col("repeated").mean(),
    )
    rows = []
    for row in by_episode.join(by_step, on=keys).sort(keys).iter_rows(named=True):
        low, high = wilson_interval(int(row["wins"]), int(row["n"]))
        score_low, score_high = mean_interval(list(row["scores"]))
        rows.append(
            {
                **{k: row[k] for k in keys},
                "success_rate": row["wins"] / row["n"],
                "ci_low": low,
                "ci_high": high,
                "mean_score": row["mean_score"],
                "score_ci_low": score_low,
                "score_ci_high": score_high,
                **{f"mean_{k}": row[f"mean_{k}"] for k in parts},
                "mean_actions": row["mean_actions"],
                "mean_actions_won": row["mean_actions_won"],
                "invalid_action_rate": row["invalid_action_rate"],
                "repeat_rate": row["repeat_rate"],
                "n": int(row["n"]),
            }
        )
    return rows


def leap_summary_rows(steps: Any) -> list[dict[str, Any]]:
    """Per split and task type, and per split over all task types (``task_type: all``),
    sorted: success with its Wilson 95% interval, ``mean_score`` (final reward),
    ``mean_actions`` (and of won episodes: ``None`` when none was won),
    ``invalid_action_rate`` (steps whose action was no candidate) and ``repeat_rate``
    (steps that repeated the previous action), ``n`` episodes."""
    import polars as pl

    if steps.is_empty():
        return []
    both = pl.concat([steps, steps.with_columns(task_type=pl.lit("all"))])
    return group_summary(both, ["split", "task_type"])


KALM_EPISODE_COLUMNS = ["env", "policy", "level", "episode", "seed", "success"]


def kalm_episode_table(rows: Sequence[dict[str, Any]]) -> Any:
    """KALM policies' evaluation episodes (columns ``KALM_EPISODE_COLUMNS``)."""
    import polars as pl

    schema = {
        "env": pl.Utf8, "policy": pl.Utf8, "level": pl.Utf8, "episode": pl.Int64,
        "seed": pl.Int64, "success": pl.Boolean,
    }  # fmt: skip
    return pl.DataFrame(list(rows), schema=schema)


def kalm_summary(episodes: Any, order: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Success per (policy, level) with its Wilson 95% interval, in ``order``; a pair with
    no episodes (a policy that could not be evaluated) has NaN success and ``n`` 0."""
    import polars as pl

    from leap_kalm.stats import wilson_interval

    counts = {
        (r["policy"], r["level"]): (int(r["wins"]), int(r["n"]))
        for r in episodes.group_by(["policy", "level"])
        .agg(wins=pl.col("success").sum(), n=pl.len())
        .iter_rows(named=True)
    }
    rows = []
    for policy, level in order:
        wins, n = counts.get((policy, level), (0, 0))
        if n:
            low, high = wilson_interval(wins, n)
            rows.append({"policy": policy, "level": level, "success_rate": wins / n,
                         "ci_low": low, "ci_high": high, "n": n})  # fmt: skip
        else:
            nan = float("nan")
            rows.append({"policy": policy, "level": level, "success_rate": nan,
                         "ci_low": nan, "ci_high": nan, "n": 0})  # fmt: skip
    return rows


def kalm_transition_table(datasets: Sequence[dict[str, Any]]) -> Any:
    """One row per transition of KALM-layout datasets (the imagined levels): ``level``,
    ``episode``, ``t``, ``state``, ``action`` and ``next_state`` (lists of floats; a discrete
    action is a one-element list), ``reward``, ``terminal``, and the episode's
    ``goal_consistent`` / ``replay_success`` where the dataset has them."""
    import numpy as np
    import polars as pl

    rows = []
    for data in datasets:
        masks = np.asarray(data["masks"]).reshape(len(data["masks"]), -1)
        consistent = data.get("goal_consistent")
        replayed = data.get("replay_success")
        for i, t in zip(*np.nonzero(masks), strict=True):
            action = np.asarray(data["actions"][i, t], dtype=np.float64).reshape(-1)
            rows.append(
                {
                    "level": str(data.get("level", "")),
                    "episode": int(i),
                    "t": int(t),
                    "state": np.asarray(data["observations"][i, t], dtype=np.float64).tolist(),
                    "action": action.tolist(),
                    "next_state": np.asarray(
                        data["next_observations"][i, t], dtype=np.float64
                    ).tolist(),
                    "reward": float(np.asarray(data["rewards"][i, t]).reshape(-1)[0]),
                    "terminal": bool(np.asarray(data["terminals"][i, t]).reshape(-1)[0]),
                    "goal_consistent": None if consistent is None else bool(consistent[i]),
                    "replay_success": None if replayed is None else bool(replayed[i]),
                }
            )
    schema = {
        "level": pl.Utf8, "episode": pl.Int64, "t": pl.Int64, "state": pl.List(pl.Float64),
        "action": pl.List(pl.Float64), "next_state": pl.List(pl.Float64), "reward": pl.Float64,
        "terminal": pl.Boolean, "goal_consistent": pl.Boolean, "replay_success": pl.Boolean,
    }  # fmt: skip
    return pl.DataFrame(rows, schema=schema)

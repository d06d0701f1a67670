"""Learning curves as matplotlib figures, saved as PNG by kedro-datasets' matplotlib dataset.

The trainers keep their loss log: transformers' ``trainer.state.log_history`` goes into
the trained model's ``meta`` (so it travels with the model directory), d3rlpy's per-epoch
metrics come back from ``fit``. These helpers turn them into figures a person can open.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from leap_kalm.schemas import ModelRef

Curve = tuple[list[float], list[float]]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (figures are saved, never shown)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _figure(title: str) -> tuple[Any, Any]:
    fig, ax = pyplot().subplots(figsize=(6, 3.5))
    ax.set_title(title)
    return fig, ax


def curve_points(log_history: Sequence[Mapping[str, Any]], key: str = "loss") -> Curve:
    """``(steps, values)`` of ``key`` in a transformers ``log_history`` (entries without
    it, such as the final summary, are left out)."""
    steps, values = [], []
    for entry in log_history:
        value = entry.get(key)
        if isinstance(value, int | float) and math.isfinite(value) and "step" in entry:
            steps.append(float(entry["step"]))
            values.append(float(value))
    return steps, values


def moving_mean(values: Sequence[float], window: int) -> list[float]:
    """The mean of each value and the ``window - 1`` before it (fewer at the start)."""
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def curves_figure(
    curves: Mapping[str, Curve], title: str, xlabel: str, ylabel: str, note: str = ""
) -> Any:
    """One line per named curve; ``note`` (or "nothing was logged") where none has points."""
    fig, ax = _figure(title)
    drawn = 0
    for label, (x, y) in curves.items():
        if not x:
            continue
        if len(x) < 50:
            ax.plot(x, y, marker=".", label=label)
        else:  # long logs are noisy (batches of alike records): the raw line faint, a mean over it
            (raw,) = ax.plot(x, y, alpha=0.3, lw=0.8)
            ax.plot(x, moving_mean(y, max(5, len(y) // 25)), color=raw.get_color(), label=label)
        drawn += 1
    if drawn:
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if drawn > 1:
            ax.legend()
    else:
        ax.axis("off")
        ax.text(0.5, 0.5, note or "nothing was logged", ha="center", va="center", wrap=True)
    fig.tight_layout()
    return fig


def trainer_curve_figure(ref: ModelRef, title: str, keys: Sequence[str] = ("loss",)) -> Any:
    """The training loss of a model trained by a transformers/trl trainer, read from its
    ``meta["log_history"]``; a figure that says why when it was skipped or logged nothing."""
    if ref.kind == "skipped":
        return curves_figure({}, title, "", "", note=f"not trained: {ref.meta.get('reason', '')}")
    history = ref.meta.get("log_history") or []
    curves = {key: curve_points(history, key) for key in keys}
    return curves_figure(curves, title, "optimizer step", "training loss")


def plot_trainer_curve(ref: ModelRef, title: str) -> Any:
    """Node: the learning curve of a trained student or grounded model (see
    :func:`trainer_curve_figure`)."""
    return trainer_curve_figure(ref, title)


def trainer_curve_node(title: str) -> Any:
    """:func:`plot_trainer_curve` with its title bound, named as itself (for a Kedro node)."""
    import functools

    return functools.update_wrapper(
        functools.partial(plot_trainer_curve, title=title), plot_trainer_curve
    )


def d3rlpy_curves(histories: Mapping[str, Sequence[Mapping[str, Any]]], title: str) -> Any:
    """d3rlpy's per-epoch losses (``[{"epoch": e, "loss": ..., "td_loss": ..., ...}, ...]``
    per policy; its ``time_*`` figures are left out): one panel per loss, one line per
    policy."""
    metrics = sorted({k for rows in histories.values() for r in rows for k in r if "loss" in k})
    if not metrics:
        return curves_figure({}, title, "", "")
    fig, axes = pyplot().subplots(1, len(metrics), figsize=(4 * len(metrics), 3.2), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        for label, rows in histories.items():
            points = [(r["epoch"], r[metric]) for r in rows if metric in r]
            if points:
                ax.plot(*zip(*points, strict=True), marker=".", label=label)
        ax.set_title(metric)
        ax.set_xlabel("epoch")
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def grouped_bars(
    series: Mapping[str, Mapping[str, tuple[float, float, float]]],
    groups: Sequence[str],
    title: str,
) -> Any:
    """Rates in percent as grouped bars with their intervals: ``series`` maps a bar label
    to ``{group: (rate, low, high)}`` (fractions); a group a series lacks gets no bar."""
    fig, ax = pyplot().subplots(figsize=(max(6.0, 1.6 * len(groups)), 3.8))
    width = 0.8 / max(len(series), 1)
    for k, (label, values) in enumerate(series.items()):
        xs = [i + (k - (len(series) - 1) / 2) * width for i, g in enumerate(groups) if g in values]
        rates = [100 * values[g][0] for g in groups if g in values]
        below = [100 * (values[g][0] - values[g][1]) for g in groups if g in values]
        above = [100 * (values[g][2] - values[g][0]) for g in groups if g in values]
        ax.bar(xs, rates, width, yerr=[below, above], capsize=3, label=label)
    ax.set_xticks(range(len(groups)), list(groups))
    ax.set_ylabel("success rate (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig

"""Learning-curve figures from the trainers' logs."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from leap_kalm.plots import curve_points, d3rlpy_curves, trainer_curve_figure  # noqa: E402
from leap_kalm.schemas import ModelRef  # noqa: E402


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [ax.get_title() for ax in fig.axes]


def test_curve_points_keep_only_logged_steps():
    history = [
        {"loss": 2.0, "step": 1, "epoch": 0.1},
        {"loss": float("nan"), "step": 2},
        {"loss": 1.0, "step": 3},
        {"train_runtime": 12.0, "step": 3},  # the final summary has no loss
    ]
    assert curve_points(history) == ([1.0, 3.0], [2.0, 1.0])
    assert curve_points(history, "grad_norm") == ([], [])


def test_trainer_curve_draws_the_loss_or_says_why_not():
    ref = ModelRef(
        path="x",
        kind="model",
        meta={"log_history": [{"loss": 3.0, "step": 1}, {"loss": 2.5, "step": 2}]},
    )
    fig = trainer_curve_figure(ref, "SFT: training loss")
    (ax,) = fig.axes
    assert list(ax.lines[0].get_ydata()) == [3.0, 2.5] and ax.get_ylabel() == "training loss"
    skipped = trainer_curve_figure(
        ModelRef(path="", kind="skipped", meta={"reason": "dpo run"}), "SFT"
    )
    assert any("not trained: dpo run" in t for t in _texts(skipped))
    empty = trainer_curve_figure(ModelRef(path="x", kind="model", meta={}), "SFT")
    assert any("nothing was logged" in t for t in _texts(empty))


def test_d3rlpy_curves_one_panel_per_metric_one_line_per_policy():
    histories = {
        "real": [
            {"epoch": 1, "loss": 2.0, "td_loss": 1.0, "time_step": 0.01},
            {"epoch": 2, "loss": 1.5, "td_loss": 0.8, "time_step": 0.02},
        ],
        "kalm": [{"epoch": 1, "loss": 2.2, "td_loss": 1.1}],
    }
    fig = d3rlpy_curves(histories, "clevr: offline RL losses")
    assert [ax.get_title() for ax in fig.axes] == ["loss", "td_loss"]
    assert [len(ax.lines) for ax in fig.axes] == [2, 2]
    assert list(fig.axes[0].lines[0].get_ydata()) == [2.0, 1.5]
    assert any("nothing was logged" in t for t in _texts(d3rlpy_curves({"real": []}, "empty")))


def test_long_logs_get_a_moving_mean_beside_the_raw_line():
    from leap_kalm.plots import moving_mean

    assert moving_mean([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]
    history = [{"loss": float(i % 2), "step": i} for i in range(1, 101)]
    fig = trainer_curve_figure(ModelRef(path="x", kind="model", meta={"log_history": history}), "g")
    raw, mean = fig.axes[0].lines
    assert len(raw.get_ydata()) == len(mean.get_ydata()) == 100
    assert abs(mean.get_ydata()[-1] - 0.5) <= 0.1 and raw.get_alpha() == 0.3  # window 5

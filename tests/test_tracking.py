"""TensorBoard tracking (``tracking.tensorboard``): the hook's run directory, parameters
without secrets, evaluation summaries as scalars, and trainers' and d3rlpy's losses."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from kedro.io import DataCatalog, MemoryDataset

from leap_kalm import tracking
from leap_kalm.hooks import TrackingHook


def read_events(log_dir: Path) -> SimpleNamespace:
    """Scalars (tag -> [(step, value)]) and text tags of every event file under ``log_dir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    scalars: dict[str, list[tuple[int, float]]] = {}
    texts: list[str] = []
    for events in sorted(log_dir.rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0, "tensors": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            scalars.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
        texts += [t for t in acc.Tags()["tensors"] if "text_summary" in t]
    return SimpleNamespace(scalars=scalars, texts=texts)


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv(tracking.RUN_DIR_ENV, raising=False)
    monkeypatch.delenv(tracking.NODE_ENV, raising=False)


def test_off_by_default_means_no_callbacks_and_no_folders(clean_env):
    from d3rlpy.logging import NoopAdapterFactory

    assert tracking.trainer_callbacks("sft") == []
    assert isinstance(tracking.d3rlpy_logger("DiscreteBC"), NoopAdapterFactory)
    assert tracking.switched_on("false") is False and tracking.switched_on("True") is True
    with pytest.raises(ValueError, match="tracking.tensorboard must be true or false, got 'maybe'"):
        tracking.switched_on("maybe")


def test_parameters_are_flattened_without_secrets():
    flat = tracking.flat_parameters(
        {
            "seed": 0,
            "alfworld": {
                "leap": {"sampling": {"temperature": 0.7}, "eval_splits": ["a", "b"]},
                "teacher": {"client": {"api_key": "sk-SECRET", "model": "gpt-4o"}},
            },
            "kalm_real_data": None,
        }
    )
    assert flat == {
        "seed": 0,
        "alfworld.leap.sampling.temperature": 0.7,
        "alfworld.leap.eval_splits": '["a", "b"]',
        "alfworld.teacher.client.model": "gpt-4o",
        "kalm_real_data": "null",
    }


def test_summary_rows_become_tagged_scalars_at_their_iteration():
    table = pd.DataFrame(
        {
            "iteration": [0, 1],
            "split": ["valid_seen", "valid_seen"],
            "task_type": ["all", "all"],
            "n": [60, 60],
            "success_rate": [0.5, 0.625],
            "converged": [True, False],  # booleans are not metrics
        }
    )
    scalars = tracking.summary_scalars(table, "alfworld.leap_eval_summary")
    prefix = "metrics/alfworld.leap_eval_summary/valid_seen/all"
    assert scalars == [
        (f"{prefix}/n", 60.0, 0),
        (f"{prefix}/success_rate", 0.5, 0),
        (f"{prefix}/n", 60.0, 1),
        (f"{prefix}/success_rate", 0.625, 1),
    ]


def test_the_hook_writes_parameters_and_summaries_and_cleans_up(tmp_path, clean_env):
    params = {
        "seed": 3,
        "tracking": {"tensorboard": "true", "log_dir": str(tmp_path / "tb")},
        "clevr": {"client": {"api_key": "sk-NEVER-WRITTEN"}},
    }
    catalog = DataCatalog(datasets={"parameters": MemoryDataset(params)})
    hook = TrackingHook()
    hook.before_pipeline_run({"pipeline_name": "kalm"}, None, catalog)
    run = Path(os.environ[tracking.RUN_DIR_ENV])
    assert run.parent == tmp_path / "tb" and run.name.endswith("_kalm")
    hook.before_node_run(SimpleNamespace(name="clevr.train_grounded_llm_node"))
    assert tracking.stage_dir("x") == str(run / "clevr.train_grounded_llm_node")
    summary = pd.DataFrame({"policy": ["kalm"], "level": ["easy"], "success_rate": [0.4]})
    hook.after_dataset_saved("clevr.kalm_eval_summary", summary)
    hook.after_dataset_saved("clevr.not_a_summary", summary)  # ignored
    hook.after_pipeline_run()
    assert tracking.RUN_DIR_ENV not in os.environ and tracking.NODE_ENV not in os.environ
    events = read_events(run)
    # once as the summary was saved, once beside the hparams at the end of the run
    assert (
        events.scalars["metrics/clevr.kalm_eval_summary/kalm/easy/success_rate"]
        == [(0, pytest.approx(0.4))] * 2
    )
    assert any(t.startswith("parameters") for t in events.texts)
    written = b"".join(p.read_bytes() for p in run.rglob("*") if p.is_file())
    assert b"seed" in written and b"sk-NEVER-WRITTEN" not in written


def test_the_hook_does_nothing_when_off(tmp_path, clean_env):
    catalog = DataCatalog(
        datasets={"parameters": MemoryDataset({"tracking": {"tensorboard": False}})}
    )
    hook = TrackingHook()
    hook.before_pipeline_run({"pipeline_name": "kalm"}, None, catalog)
    hook.before_node_run(SimpleNamespace(name="n"))
    hook.after_pipeline_run()
    assert tracking.RUN_DIR_ENV not in os.environ and tracking.NODE_ENV not in os.environ


def test_d3rlpy_losses_go_under_the_nodes_folder(tmp_path, monkeypatch):
    from leap_kalm.envs.clevr.data import generate_clevr_dataset
    from leap_kalm.training.offline_rl import OfflineRLParams, to_mdp_dataset, train_offline_rl
    from tests.training.test_offline_rl import fake_encode

    monkeypatch.setenv(tracking.RUN_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(tracking.NODE_ENV, "clevr.train_policy_real_node")
    data = generate_clevr_dataset(4, seed=0, horizon=5, n_instructions=2, progress=False)
    params = OfflineRLParams.from_dict(
        {"algo": "DiscreteBC", "config": {"batch_size": 8}, "n_steps": 6, "n_steps_per_epoch": 3}
    )
    train_offline_rl(to_mdp_dataset(data, fake_encode, 40), None, params, discrete=True)
    events = read_events(tmp_path / "clevr.train_policy_real_node")
    assert [step for step, _ in events.scalars["metrics/loss"]] == [1, 2]
    assert all(np.isfinite(v) for _, v in events.scalars["metrics/loss"])
    assert not Path("d3rlpy_logs").exists()

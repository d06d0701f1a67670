"""Slices of the composed pipelines (``leap_iter``, ``kalm``) run in-process with
SequentialRunner on a DataCatalog of MemoryDatasets; producer outputs (rollouts,
evaluation rollouts) go to resumable JSONL files in tmp_path, as in the real catalog."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from kedro.io import DataCatalog, MemoryDataset
from kedro.pipeline import Pipeline
from kedro.runner import SequentialRunner

from leap_kalm.datasets import JSONLDataset
from leap_kalm.pipeline_registry import register_pipelines
from leap_kalm.schemas import ModelRef
from leap_kalm.teachers import validate_correction
from tests.pipelines.conftest import LEAP, TEACHER, TRAIN


@pytest.fixture(scope="module")
def pipelines() -> dict[str, Pipeline]:
    return register_pipelines()


@pytest.fixture(scope="module")
def alfworld(pipelines) -> Pipeline:
    return pipelines["leap_iter"].only_nodes_with_namespaces(["alfworld"])


class KeptDataset(MemoryDataset):
    """A MemoryDataset the runner cannot release, so intermediate outputs can be checked."""

    def _release(self) -> None:
        pass


def _catalog(
    pipe: Pipeline, tmp_path, data: dict[str, Any], producers: tuple[str, ...] = ()
) -> DataCatalog:
    """The slice's inputs in memory (as they are, not copied), resumable JSONL files for
    the outputs that nodes return as producers, every other output kept in memory."""
    datasets: dict[str, Any] = {
        name: KeptDataset(value, copy_mode="assign") for name, value in data.items()
    }
    for name in producers:
        datasets[name] = JSONLDataset(
            filepath=str(tmp_path / f"{name}.jsonl"), save_args={"mode": "resume", "key": "game_id"}
        )
    for name in pipe.all_outputs() - set(datasets):
        datasets[name] = KeptDataset(copy_mode="assign")
    return DataCatalog(datasets=datasets)


def _names(pipe: Pipeline) -> set[str]:
    return {n.name for n in pipe.nodes}


def _run(pipe: Pipeline, catalog: DataCatalog) -> None:
    missing = pipe.inputs() - set(catalog.keys())
    assert not missing, f"slice needs {missing}"
    SequentialRunner().run(pipe, catalog)


def test_iteration_0_data_prep_privilege_annotate_sft_records(
    tmp_path, alfworld, alfworld_games, expert_logs
):
    pipe = alfworld.from_nodes("alfworld.compute_privileged_states_node").to_outputs(
        "alfworld.sft_records"
    )
    assert _names(pipe) == {
        "alfworld.compute_privileged_states_node",
        "alfworld.annotate_expert_logs_node",
        "alfworld.correct_failed_rollouts_node",
        "alfworld.build_sft_records_node",
    }
    failed_expert = {**expert_logs[2], "success": False}
    catalog = _catalog(
        pipe,
        tmp_path,
        {
            "alfworld.games": alfworld_games,
            "alfworld.expert_logs": [*expert_logs[:2], failed_expert],
            "alfworld.rollouts": [],  # iteration 0 rolls nothing out
            "alfworld.previous_sft_pool": [],
            "params:alfworld.leap": LEAP,
            "params:alfworld.teacher": TEACHER,
            "params:leap_iteration": 0,
        },
        producers=("alfworld.privileged_states",),
    )
    _run(pipe, catalog)
    states = catalog.load("alfworld.privileged_states")  # written by the producer, read back
    assert [s["game_id"] for s in states] == [
        g["game_id"] for g in alfworld_games if g["split"] == "train"
    ]
    annotated = catalog.load("alfworld.annotated_logs")
    assert [t["game_id"] for t in annotated] == [t["game_id"] for t in expert_logs[:2]]
    assert all(s["reason"] for t in annotated for s in t["steps"])
    assert catalog.load("alfworld.corrections") == []
    records, pool = catalog.load("alfworld.sft_records"), catalog.load("alfworld.sft_pool")
    assert len(records) == len(pool) == sum(len(t["steps"]) for t in expert_logs[:2])
    assert {r["iteration"] for r in pool} == {0} and {r["split"] for r in records} == {
        "train",
        "val",
    }
    assert {r["game_id"] for r in records} == {t["game_id"] for t in expert_logs[:2]}


def test_iteration_1_rollout_correct_and_training_records(
    tmp_path, alfworld, alfworld_games, privileged_states, tiny_model_dir, sft_records_0
):
    pipe = alfworld.from_nodes("alfworld.roll_out_student_node").to_outputs(
        "alfworld.sft_records", "alfworld.dpo_pairs"
    )
    assert _names(pipe) == {
        "alfworld.roll_out_student_node",
        "alfworld.correct_failed_rollouts_node",
        "alfworld.build_sft_records_node",
        "alfworld.build_dpo_pairs_node",
    }
    _, pool_0 = sft_records_0
    catalog = _catalog(
        pipe,
        tmp_path,
        {
            "alfworld.games": alfworld_games,
            "alfworld.previous_student": ModelRef(path=tiny_model_dir, kind="model"),
            "alfworld.privileged_states": privileged_states,
            "alfworld.annotated_logs": [],
            "alfworld.previous_sft_pool": pool_0,
            "params:alfworld.leap": LEAP,
            "params:alfworld.teacher": TEACHER,
            "params:model": {"name": "tiny-test"},
            "params:leap_iteration": 1,
        },
        producers=("alfworld.rollouts",),
    )
    _run(pipe, catalog)
    rollouts = catalog.load("alfworld.rollouts")  # written by the producer, read back
    assert len(rollouts) == 3 and all(r["iteration"] == 1 for r in rollouts)
    corrections = catalog.load("alfworld.corrections")
    failed = [r for r in rollouts if not r["success"]]
    assert [c["game_id"] for c in corrections] == [r["game_id"] for r in failed]
    for correction, trajectory in zip(corrections, failed, strict=True):
        validate_correction(correction, trajectory)
    pairs = catalog.load("alfworld.dpo_pairs")
    assert len(pairs) == sum(s["is_corrected"] for c in corrections for s in c["steps"]) > 0
    pool = catalog.load("alfworld.sft_pool")
    assert sum(r["iteration"] == 0 for r in pool) == len(pool_0)
    assert sum(r["iteration"] == 1 for r in pool) == sum(len(r["steps"]) for r in failed)
    assert {r["iteration"] for r in catalog.load("alfworld.sft_records")} == {0, 1}


def test_iteration_0_train_select_evaluate_report(
    tmp_path, alfworld, alfworld_games, sft_records_0, tiny_model_dir, staging
):
    pipe = alfworld.from_nodes("alfworld.train_sft_student_node", "alfworld.train_dpo_student_node")
    assert _names(pipe) == {
        "alfworld.train_sft_student_node",
        "alfworld.train_dpo_student_node",
        "alfworld.select_student_node",
        "alfworld.evaluate_student_node",
        "alfworld.summarize_evaluation_node",
        "alfworld.report_leap_progress_node",
        "alfworld.compare_iterations_node",
        "alfworld.plot_sft_curve_node",
        "alfworld.plot_dpo_curve_node",
    }
    old_row = {
        "iteration": 0,
        "env": "alfworld",
        "split": "valid_seen",
        "task_type": "all",
        "success_rate": 1.0,
        "ci_low": 0.7,
        "ci_high": 1.0,
        "mean_actions": 1.0,
        "mean_actions_won": 1.0,
        "invalid_action_rate": 0.0,
        "repeat_rate": 0.0,
        "n": 9,
    }
    catalog = _catalog(
        pipe,
        tmp_path,
        {
            "alfworld.games": alfworld_games,
            "alfworld.sft_records": sft_records_0[0],
            "alfworld.dpo_pairs": [],
            "alfworld.previous_student": None,
            "alfworld.leap_eval_history": [old_row],  # an earlier run of iteration 0: replaced
            "alfworld.leap_game_outcomes": [],
            "params:alfworld.leap": LEAP,
            "params:alfworld.train_sft": TRAIN,
            "params:alfworld.train_dpo": TRAIN,
            "params:model": {"name": tiny_model_dir},
            "params:leap_iteration": 0,
        },
        producers=("alfworld.eval_rollouts",),
    )
    _run(pipe, catalog)
    student = catalog.load("alfworld.student")
    assert student.kind == "adapter" and student == catalog.load("alfworld.student_sft")
    assert catalog.load("alfworld.student_dpo").kind == "skipped"
    assert student.meta["iteration"] == 0 and student.meta["started_from"] == tiny_model_dir
    eval_rollouts = catalog.load("alfworld.eval_rollouts")
    assert sorted(t["split"] for t in eval_rollouts) == ["valid_seen", "valid_unseen"]
    assert all(t["model_id"] == student.path for t in eval_rollouts)
    evaluation = catalog.load("alfworld.eval")
    assert evaluation["iteration"] == 0 and evaluation["env"] == "alfworld"
    history = catalog.load("alfworld.leap_eval_history_updated")
    assert history == evaluation["rows"] and old_row not in history
    table = catalog.load("alfworld.leap_eval_summary")
    import pandas as pd

    from leap_kalm.pipelines.evaluate.nodes import SUMMARY_COLUMNS

    pd.testing.assert_frame_equal(table, pd.DataFrame(history, columns=SUMMARY_COLUMNS))
    import matplotlib.pyplot as plt

    figure = catalog.load("alfworld.leap_success_plot")
    assert [line.get_label() for line in figure.axes[0].get_lines()] == [
        "alfworld valid_seen",
        "alfworld valid_unseen",
    ]
    plt.close(figure)
    outcomes = catalog.load("alfworld.leap_game_outcomes_updated")
    assert sorted((o["split"], o["game_id"]) for o in outcomes) == sorted(
        (t["split"], t["game_id"]) for t in eval_rollouts
    )
    assert all(o["iteration"] == 0 and isinstance(o["success"], bool) for o in outcomes)
    assert catalog.load("alfworld.leap_paired_comparison").empty  # iteration 0 has no baseline


def test_kalm_clevr_ingest_slice(pipelines):
    pipe = pipelines["kalm"].only_nodes_with_namespaces(["clevr"])
    pipe = Pipeline([n for n in pipe.nodes if n in set(pipelines["ingest"].nodes)])
    assert _names(pipe) == {"clevr.generate_offline_data_node", "clevr.summarize_offline_data_node"}
    assert pipe.inputs() == {"params:clevr.ingest", "params:kalm_real_data"}
    params = {"n_episodes": 3, "horizon": 10, "n_instructions": 2, "seed": 1}
    catalog = _catalog(pipe, None, {"params:clevr.ingest": params, "params:kalm_real_data": None})
    _run(pipe, catalog)
    data, data_h5 = catalog.load("clevr.kalm_offline"), catalog.load("clevr.kalm_offline_hdf5")
    assert data["observations"].shape == data["next_observations"].shape == (3, 10, 10)
    assert data["actions"].shape == (3, 10) and data["actions"].dtype == np.int32
    assert data["rewards"].shape == data["terminals"].shape == (3, 10, 1)
    assert data["masks"].shape == (3, 10) and data["instructions"].shape == (3, 2)
    assert ((0 <= data["actions"]) & (data["actions"] < 40)).all()
    for key in ("observations", "actions", "rewards", "masks", "goals"):
        np.testing.assert_array_equal(data[key], data_h5[key])
    summary = catalog.load("clevr.kalm_offline_summary")
    assert summary["n_episodes"] == 3 and summary["horizon"] == 10
    assert summary["observation_dim"] == 10

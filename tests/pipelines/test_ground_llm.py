"""`ground_llm` on CLEVR and Meta-World data: records with episodes held out, the spec from
the data or the world, and the kalm composition's ingest -> grounding slice on the tiny model."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from kedro.io import DataCatalog
from kedro.pipeline import Pipeline
from kedro.runner import SequentialRunner

from leap_kalm.llm.grounded import load_grounded
from leap_kalm.pipeline_registry import register_pipelines
from leap_kalm.pipelines.ground_llm.nodes import (
    GroundLLMParams,
    build_grounding_records,
    grounding_spec,
)
from tests.llm.test_grounded import CONTINUOUS, DISCRETE, kalm_arrays
from tests.pipelines.test_compositions import KeptDataset


def test_records_hold_out_whole_episodes():
    data = kalm_arrays(DISCRETE, n=20)
    records, held = build_grounding_records(data, {"tasks": {"held_out_fraction": 0.25}})
    train_eps, held_eps = {r["episode"] for r in records}, {r["episode"] for r in held}
    assert len(held_eps) == 5 and len(train_eps) == 15 and not train_eps & held_eps
    assert len(records) == 4 * 15 and {r["task"] for r in records} == {
        "rollout", "dynamics", "consequence", "explanation"
    }  # fmt: skip


def test_the_spec_comes_from_the_data_and_else_from_the_world():
    params = GroundLLMParams(state_loss_weight=0.3)
    clevr = grounding_spec(kalm_arrays(DISCRETE), "clevr", params)
    scale = clevr.pop("state_scale")
    outcome = clevr.pop("outcome_scale")
    assert clevr == {
        "obs_dim": 10, "action_kind": "discrete", "action_dim": 40,
        "state_loss_weight": 0.3, "action_loss_weight": 0.5,
    }  # fmt: skip
    assert len(scale) == 10 and min(scale) > 0  # the spread of each number's change
    assert len(outcome) == 10 and min(outcome) > 0  # ... over a whole episode
    kalm_metadata = {**kalm_arrays(DISCRETE), "action_type": "discrete", "action_dim": 12}
    assert grounding_spec(kalm_metadata, "clevr", params)["action_dim"] == 12
    metaworld = grounding_spec(kalm_arrays(CONTINUOUS), "metaworld", params)
    assert (metaworld["obs_dim"], metaworld["action_kind"], metaworld["action_dim"]) == (
        6,
        "continuous",
        4,
    )
    with pytest.raises(ValueError, match="world 'alfworld' is a text world, not a kalm world"):
        grounding_spec(kalm_arrays(DISCRETE), "alfworld", params)


def test_kalm_clevr_ingest_then_grounding_slice(tiny_model_dir):
    pipelines = register_pipelines()
    nodes = set(pipelines["ingest"].nodes) | set(pipelines["ground_llm"].nodes)
    pipe = Pipeline(
        [n for n in pipelines["kalm"].only_nodes_with_namespaces(["clevr"]).nodes if n in nodes]
    )
    assert pipe.inputs() == {
        "params:clevr.ingest", "params:kalm_real_data", "params:clevr.ground_llm", "params:model"
    }  # fmt: skip
    inputs = {
        "params:kalm_real_data": None,
        "params:clevr.ingest": {"n_episodes": 10, "horizon": 6, "n_instructions": 2, "seed": 1},
        "params:clevr.ground_llm": {
            "tasks": {"held_out_fraction": 0.2},
            "train": {"max_steps": 2, "per_device_train_batch_size": 4, "lora": {"r": 0}},
        },
        "params:model": {"name": tiny_model_dir},
    }
    datasets = {k: KeptDataset(v, copy_mode="assign") for k, v in inputs.items()}
    datasets |= {name: KeptDataset(copy_mode="assign") for name in pipe.all_outputs()}
    catalog = DataCatalog(datasets=datasets)
    SequentialRunner().run(pipe, catalog)
    held = catalog.load("clevr.grounding_held_out")
    assert {r["episode"] for r in held} and len(catalog.load("clevr.grounding_records")) == 32
    ref = catalog.load("clevr.grounded_llm")
    assert ref.meta["spec"]["action_dim"] == 40 and ref.meta["world"] == "clevr"
    model, _ = load_grounded(ref.path)
    assert dataclasses.replace(model.spec, state_scale=None, outcome_scale=None) == DISCRETE
    assert len(model.spec.state_scale) == 10 and len(model.spec.outcome_scale) == 10
    assert len(model.spec.state_scale) == 10 and np.isfinite(ref.meta["train/train_loss"])


def test_grounding_is_scored_on_every_held_out_transition(tiny_model_dir, tmp_path):
    from leap_kalm.llm.grounded import build_grounded, save_grounded
    from leap_kalm.llm.models import load_model
    from leap_kalm.pipelines.ground_llm.nodes import evaluate_grounding
    from leap_kalm.schemas import ModelRef

    lm, tokenizer = load_model(tiny_model_dir)
    save_grounded(build_grounded(lm, DISCRETE), tokenizer, tmp_path / "g")
    data = kalm_arrays(DISCRETE, n=10)
    params = {"tasks": {"held_out_fraction": 0.2}}
    _, held = build_grounding_records(data, params)
    report = evaluate_grounding(
        ModelRef(path=str(tmp_path / "g"), kind="model"), data, held, params, {"name": "tiny-test"}
    )
    held_eps = {r["episode"] for r in held}
    lengths = data["masks"].sum(axis=1)
    assert report["held_out_transitions"] == sum(lengths[i] for i in held_eps)
    assert report["train_transitions"] == lengths.sum() - report["held_out_transitions"]
    assert min(report["grounded_mse"], report["mlp_mse"], report["no_change_mse"]) > 0

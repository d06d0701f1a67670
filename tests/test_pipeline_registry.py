"""The registry lists every pipeline, and every node input resolves in the catalog."""

from __future__ import annotations

from pathlib import Path

import pytest
from kedro.config import OmegaConfigLoader
from kedro.framework.project import configure_project
from kedro.io import DataCatalog

from leap_kalm.pipeline_registry import STAGES, register_pipelines

PROJECT = Path(__file__).resolve().parents[1]
EXPECTED = set(STAGES) | {"leap_iter", "kalm", "__default__"}


@pytest.fixture(scope="module")
def pipelines():
    configure_project("leap_kalm")
    return register_pipelines()


def _config(env: str):
    loader = OmegaConfigLoader(
        str(PROJECT / "conf"),
        base_env="base",
        default_run_env=env,
        merge_strategy={"parameters": "soft"},
    )
    return loader["catalog"], loader["parameters"]


def test_registry_lists_the_twelve_pipelines(pipelines):
    assert set(pipelines) == EXPECTED
    assert len(EXPECTED) == 13  # ten stages, two compositions, and __default__


def test_default_pipeline_trains_nothing(pipelines):
    training = {"train_sft", "train_dpo", "ground_llm", "offline_rl"}
    default_nodes = {n.name for n in pipelines["__default__"].nodes}
    for stage in training:
        assert not default_nodes & {n.name for n in pipelines[stage].nodes}


def test_compositions_contain_their_stages(pipelines):
    for stage in (
        "ingest",
        "annotate",
        "privilege",
        "correct",
        "train_sft",
        "train_dpo",
        "evaluate",
    ):
        assert set(pipelines[stage].nodes) <= set(pipelines["leap_iter"].nodes)
    for stage in ("ingest", "ground_llm", "imagine", "offline_rl", "evaluate"):
        assert set(pipelines[stage].nodes) <= set(pipelines["kalm"].nodes)


def _param_exists(params: dict, dotted: str) -> bool:
    node = params
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@pytest.mark.parametrize("env", ["local", "test"])
def test_every_node_input_resolves(pipelines, env):
    catalog_conf, params = _config(env)
    catalog = DataCatalog.from_config(catalog_conf)
    unresolved = []
    for name, pipeline in pipelines.items():
        for dataset in sorted(pipeline.inputs()):
            if dataset == "parameters":
                continue
            if dataset.startswith("params:"):
                if not _param_exists(params, dataset.removeprefix("params:")):
                    unresolved.append(f"{name}: {dataset}")
                continue
            explicit = dataset in catalog_conf
            if not explicit and catalog.config_resolver.match_dataset_pattern(dataset) is None:
                unresolved.append(f"{name}: {dataset}")
    assert unresolved == []


def test_catalog_factories_resolve_to_our_datasets():
    catalog_conf, _ = _config("local")
    catalog = DataCatalog.from_config(catalog_conf)
    assert type(catalog["alfworld.expert_logs"]).__name__ == "JSONLDataset"
    assert type(catalog["alfworld.iter2.student"]).__name__ == "ModelDirDataset"
    assert type(catalog["clevr.kalm_offline"]).__name__ == "NpyDataset"
    assert type(catalog["clevr.kalm_offline_hdf5"]).__name__ == "HDF5Dataset"
    assert type(catalog["metaworld.policy"]).__name__ == "D3Dataset"
    described = catalog["alfworld.iter1.rollouts"]._describe()
    assert str(described["filepath"]).endswith("data/07_model_output/alfworld/iter1/rollouts.jsonl")
    assert described["mode"] == "resume"

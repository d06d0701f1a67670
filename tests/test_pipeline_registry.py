"""The registry lists every pipeline, and every node input resolves in the catalog."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kedro.framework.project import configure_project
from kedro.io import DataCatalog

from leap_kalm.pipeline_registry import STAGES, register_pipelines

PROJECT = Path(__file__).resolve().parents[1]
EXPECTED = set(STAGES) | {
    "leap_iter",
    "leap_iter_alfworld",
    "leap_iter_webshop",
    "kalm",
    "__default__",
}


@pytest.fixture(scope="module")
def pipelines():
    configure_project("leap_kalm")
    return register_pipelines()


def _config(env: str):
    from leap_kalm.settings import CONFIG_LOADER_ARGS, CONFIG_LOADER_CLASS

    loader = CONFIG_LOADER_CLASS(
        str(PROJECT / "conf"), **{**CONFIG_LOADER_ARGS, "default_run_env": env}
    )
    return loader["catalog"], loader["parameters"]


def test_registry_lists_the_stages_and_compositions(pipelines):
    assert set(pipelines) == EXPECTED
    assert len(EXPECTED) == 15  # ten stages, leap_iter (+ one per text world), kalm, __default__


def test_worlds_outside_the_default_run_only_when_named(pipelines):
    """WebShop is registered but not in `leap_iter` or `__default__`: the quick profile stays
    ALFWorld's; `leap_iter_webshop` runs LEAP on WebShop alone."""

    def worlds(name):
        return {n.namespace.split(".")[0] for n in pipelines[name].nodes if n.namespace}

    assert worlds("leap_iter") == worlds("leap_iter_alfworld") == {"alfworld"}
    assert worlds("leap_iter_webshop") == {"webshop"}
    assert "webshop" not in worlds("__default__") and "webshop" in worlds("correct")
    assert {n.name.split(".", 1)[1] for n in pipelines["leap_iter_webshop"].nodes} == {
        n.name.split(".", 1)[1] for n in pipelines["leap_iter"].nodes
    }


def test_default_pipeline_trains_nothing(pipelines):
    training = {"train_sft", "train_dpo", "ground_llm", "offline_rl"}
    default_nodes = {n.name for n in pipelines["__default__"].nodes}
    for stage in training:
        assert not default_nodes & {n.name for n in pipelines[stage].nodes}


def _in_namespaces(pipeline, envs):
    return {n for n in pipeline.nodes if n.namespace and n.namespace.split(".")[0] in envs}


def test_compositions_contain_their_stages(pipelines):
    leap_stages = (
        "ingest",
        "annotate",
        "privilege",
        "correct",
        "train_sft",
        "train_dpo",
        "evaluate",
    )
    for stage in leap_stages:
        assert _in_namespaces(pipelines[stage], {"alfworld"}) <= set(pipelines["leap_iter"].nodes)
    for stage in ("ingest", "ground_llm", "imagine", "offline_rl", "evaluate"):
        assert _in_namespaces(pipelines[stage], {"clevr", "metaworld"}) <= set(
            pipelines["kalm"].nodes
        )
    assert not _in_namespaces(pipelines["leap_iter"], {"clevr", "metaworld"})
    names = {n.name for n in pipelines["leap_iter"].nodes}
    for expected in (
        "alfworld.roll_out_student_node",
        "alfworld.train_sft_student_node",
        "alfworld.evaluate_student_node",
    ):
        assert expected in names


def _param_exists(params: dict, dotted: str) -> bool:
    node = params
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@pytest.mark.parametrize("env", ["local", "test", "learn"])
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
    assert "/iter2/" in str(catalog["alfworld.iter2.student"]._describe()["filepath"])
    assert type(catalog["clevr.kalm_offline"]).__name__ == "KalmDataset"
    assert type(catalog["clevr.kalm_offline_hdf5"]).__name__ == "HDF5Dataset"
    assert type(catalog["metaworld.policy_real"]).__name__ == "D3Dataset"
    assert type(catalog["clevr.imagined_hard"]).__name__ == "KalmDataset"
    described = catalog["alfworld.rollouts"]._describe()
    assert "/07_model_output/alfworld/iter" in str(described["filepath"])
    assert described["mode"] == "resume"


def test_iteration_comes_from_runtime_params_or_the_latest_completed(tmp_path):
    from leap_kalm.pipelines.leap_iteration import next_iteration
    from leap_kalm.settings import CONFIG_LOADER_ARGS, CONFIG_LOADER_CLASS

    assert next_iteration(str(tmp_path)) == 0
    for i in (0, 1):
        (tmp_path / "08_reporting" / "alfworld" / f"iter{i}").mkdir(parents=True)
        (tmp_path / "08_reporting" / "alfworld" / f"iter{i}" / "eval.json").write_text("{}")
    assert next_iteration(str(tmp_path)) == 2
    conf = tmp_path / "conf"
    shutil.copytree(PROJECT / "conf", conf)
    (conf / "base" / "globals.yml").write_text(f"data_root: {tmp_path}\n")
    latest = CONFIG_LOADER_CLASS(str(conf), **{**CONFIG_LOADER_ARGS, "default_run_env": "local"})
    assert latest["parameters"]["leap_iteration"] == 2
    assert "/iter2/rollouts.jsonl" in latest["catalog"]["{env}.rollouts"]["filepath"]
    loader = CONFIG_LOADER_CLASS(
        str(PROJECT / "conf"),
        **{**CONFIG_LOADER_ARGS, "default_run_env": "local"},
        runtime_params={"leap_iteration": 3},
    )
    catalog = DataCatalog.from_config(loader["catalog"])
    assert "/iter3/rollouts.jsonl" in str(catalog["alfworld.rollouts"]._describe()["filepath"])
    assert "/iter2/student" in str(catalog["alfworld.previous_student"]._describe()["filepath"])
    assert loader["parameters"]["leap_iteration"] == 3


def test_later_iterations_override_the_trainer_settings_from_iteration_1():
    from leap_kalm.pipelines.leap_iteration import iteration_settings
    from leap_kalm.training.sft import SFTParams

    settings = {
        "learning_rate": 1e-4,
        "num_train_epochs": 2,
        "later_iterations": {"learning_rate": 3e-5, "num_train_epochs": 1},
    }
    assert iteration_settings(settings, 0) == {"learning_rate": 1e-4, "num_train_epochs": 2}
    later = iteration_settings(settings, 2)
    assert later == {"learning_rate": 3e-5, "num_train_epochs": 1}
    assert SFTParams.from_dict(later).learning_rate == 3e-5
    assert iteration_settings({"learning_rate": 1e-4}, 1) == {"learning_rate": 1e-4}
    with pytest.raises(ValueError, match="unknown keys"):
        SFTParams.from_dict(iteration_settings({"later_iterations": {"learnin_rate": 1}}, 1))


def test_training_nodes_are_tagged_gpu(pipelines):
    tagged = {
        n.name for n in pipelines["leap_iter"].nodes + pipelines["kalm"].nodes if "gpu" in n.tags
    }
    assert {"alfworld.train_sft_student_node", "alfworld.train_dpo_student_node"} <= tagged
    assert {
        "clevr.train_grounded_llm_node",
        "clevr.train_real_policy_node",
        "clevr.train_kalm_policy_node",
        "clevr.train_kalm_rephrase_policy_node",
        "clevr.train_kalm_easy_policy_node",
        "clevr.train_kalm_hard_policy_node",
    } <= tagged
    assert "alfworld.build_sft_records_node" not in tagged

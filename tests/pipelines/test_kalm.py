"""The `kalm` composition for CLEVR end to end on the tiny model, in process: offline data ->
grounded LLM -> imagined levels -> real-only and real+imagined policies -> evaluation table."""

from __future__ import annotations

import numpy as np
from kedro.io import DataCatalog
from kedro.runner import SequentialRunner

from leap_kalm.envs.kalm_format import validate_kalm_dataset
from leap_kalm.pipeline_registry import register_pipelines
from leap_kalm.pipelines.evaluate.kalm_nodes import KALM_SUMMARY_COLUMNS
from tests.pipelines.test_compositions import KeptDataset


def test_kalm_clevr_end_to_end(tiny_model_dir):
    pipe = register_pipelines()["kalm"].only_nodes_with_namespaces(["clevr"])
    inputs = {
        "params:kalm_real_data": None,
        "params:clevr.ingest": {"n_episodes": 12, "horizon": 5, "n_instructions": 2, "seed": 1},
        "params:clevr.ground_llm": {
            "tasks": {"held_out_fraction": 0.2},
            "train": {"max_steps": 2, "per_device_train_batch_size": 4, "lora": {"r": 0}},
        },
        "params:clevr.imagine": {"n_per_level": 3, "max_steps": 3, "batch_size": 3},
        "clevr.kalm_prompts": None,
        "clevr.kalm_imagined": None,
        "params:clevr.offline_rl": {
            "algo": "DiscreteBC",
            "config": {"batch_size": 8},
            "n_steps": 5,
            "n_steps_per_epoch": 5,
        },  # fmt: skip
        "params:clevr.kalm_evaluation": {"n_per_level": 2, "levels": ["real", "easy"]},
        "params:model": {"name": tiny_model_dir},
    }
    assert pipe.inputs() == set(inputs)
    datasets = {k: KeptDataset(v, copy_mode="assign") for k, v in inputs.items()}
    datasets |= {name: KeptDataset(copy_mode="assign") for name in pipe.all_outputs()}
    catalog = DataCatalog(datasets=datasets)
    SequentialRunner().run(pipe, catalog)
    for level in ("rephrase", "easy", "hard"):
        data = catalog.load(f"clevr.imagined_{level}")
        assert validate_kalm_dataset(data, source=level)["n_episodes"] == 3
    transitions = catalog.load("clevr.imagined_transitions")
    assert transitions["level"].unique().sort().to_list() == ["easy", "hard", "rephrase"]
    assert transitions.height == sum(
        int(catalog.load(f"clevr.imagined_{level}")["masks"].sum())
        for level in ("rephrase", "easy", "hard")
    )
    quality = catalog.load("clevr.imagination_summary")
    assert set(quality) == {"rephrase", "easy", "hard"} and quality["hard"]["n"] == 3
    summary = catalog.load("clevr.kalm_eval_summary")
    assert list(summary.columns) == KALM_SUMMARY_COLUMNS
    assert summary[["policy", "level"]].values.tolist() == [
        ["real", "real"],
        ["real", "easy"],
        ["kalm", "real"],
        ["kalm", "easy"],
        ["kalm_rephrase", "real"],
        ["kalm_easy", "real"],
        ["kalm_easy", "easy"],
        ["kalm_hard", "real"],
    ]  # fmt: skip  (a per-level policy plays real goals and its own level's)
    # the tiny model's one-push easy rollouts all miss, and d3rlpy keeps no transition of a
    # one-step episode that times out: the easy policy says so and is reported with n = 0
    from leap_kalm.training.offline_rl import NotTrained

    easy = catalog.load("clevr.policy_kalm_easy")
    assert (
        isinstance(easy, NotTrained) and "no imagined easy rollout has a transition" in easy.reason
    )
    trained = summary["policy"] != "kalm_easy"
    assert (summary.loc[trained, "n"] == 2).all() and (summary.loc[~trained, "n"] == 0).all()
    assert np.all(summary.loc[trained, "ci_low"] <= summary.loc[trained, "success_rate"])
    episodes = catalog.load("clevr.kalm_eval_episodes")  # the table the summary comes from
    import polars as pl

    wins = episodes.group_by(["policy", "level"], maintain_order=True).agg(pl.col("success").sum())
    rates = summary.loc[trained, "success_rate"]
    assert wins["success"].to_list() == (rates * 2).round().astype(int).tolist()
    policies = ("real", "kalm", "kalm_rephrase", "kalm_hard")
    for policy in policies:
        assert catalog.load(f"clevr.policy_{policy}").impl is not None
        losses = catalog.load(f"clevr.policy_{policy}_losses")
        assert [row["epoch"] for row in losses] == [1] and "loss" in losses[0]
    assert catalog.load("clevr.policy_kalm_easy_losses") == []
    curves = catalog.load("clevr.offline_rl_learning_curves")
    assert [len(ax.lines) for ax in curves.axes] == [len(policies)] * len(curves.axes)
    (bars,) = catalog.load("clevr.kalm_eval_plot").axes
    assert [t.get_text() for t in bars.get_xticklabels()] == ["real", "easy"]
    assert [round(b.get_height()) for b in bars.patches] == [
        round(100 * r) for r in summary["success_rate"].iloc[:4]
    ]  # real data only, then real + imagined, each at real and easy
    grounding = catalog.load("clevr.grounding_learning_curve")
    assert len(grounding.axes[0].lines[0].get_xdata()) == 2  # two steps, each logged


def test_the_evaluation_plot_puts_each_level_policy_beside_the_joint_one():
    """Bars per level: real only, real + every level's imagined data, and the level's own
    policy on its level (its real-goal row stays in the table); a policy with n = 0 has
    no bar."""
    import pandas as pd

    from leap_kalm.pipelines.evaluate.kalm_nodes import plot_kalm_evaluation

    rows = [
        ("real", "real", 0.6), ("real", "rephrase", 0.4), ("real", "easy", 0.5),
        ("kalm", "real", 0.6), ("kalm", "rephrase", 0.45), ("kalm", "easy", 0.7),
        ("kalm_rephrase", "real", 0.62), ("kalm_rephrase", "rephrase", 0.55),
        ("kalm_easy", "real", 0.58), ("kalm_easy", "easy", 0.8),
        ("kalm_hard", "real", float("nan")),
    ]  # fmt: skip
    summary = pd.DataFrame(
        [{"env": "clevr", "policy": p, "level": lv, "success_rate": r, "ci_low": r - 0.05,
          "ci_high": r + 0.05, "n": 0 if r != r else 100} for p, lv, r in rows]
    )  # fmt: skip
    (ax,) = plot_kalm_evaluation(summary, "clevr").axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["real", "rephrase", "easy"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "real data only", "real + imagined (all levels)", "real + the level's own imagined data"
    ]  # fmt: skip
    from matplotlib.container import BarContainer

    own = [c for c in ax.containers if isinstance(c, BarContainer)][2]
    assert [round(b.get_height()) for b in own] == [55, 80]
    assert [round(b.get_x() + b.get_width() / 2) for b in own] == [1, 2]  # rephrase, easy


def test_policies_are_evaluated_only_on_the_observation_layout_they_learnt():
    """A Meta-World policy on our 39 numbers plays the env; one trained on KALM's 91-number
    layout is reported as not evaluated (NaN, n = 0), not crashed into the env."""
    from leap_kalm.pipelines.evaluate.kalm_nodes import evaluate_kalm_policies
    from leap_kalm.training.offline_rl import (
        NotTrained,
        OfflineRLParams,
        to_mdp_dataset,
        train_offline_rl,
    )  # fmt: skip
    from tests.datasets.test_kalm_dataset import metaworld_layout

    def fit(data):
        dataset = to_mdp_dataset(data, lambda t: np.zeros((len(t), 384), np.float32), None)
        return train_offline_rl(
            dataset, None, OfflineRLParams(algo="BC", config={"batch_size": 4}, n_steps=2), False
        )

    ours = metaworld_layout()
    ours["observations"] = ours["observations"][..., :39].astype(np.float32)
    ours["next_observations"] = ours["next_observations"][..., :39].astype(np.float32)
    from leap_kalm.envs.kalm_format import canonical_kalm_dataset

    params = {"n_per_level": 1, "levels": ["easy"]}
    table, episodes = evaluate_kalm_policies(
        params, "metaworld",
        real=fit(canonical_kalm_dataset(ours, "ours")),
        kalm=fit(canonical_kalm_dataset(metaworld_layout(), "kalm")),
        none=NotTrained("metaworld: no imagined data"),
    )  # fmt: skip
    assert table["policy"].tolist() == ["real", "kalm", "none"]
    assert table["n"].tolist() == [1, 0, 0] and table["success_rate"].iloc[1:].isna().all()
    assert episodes.rows() == [
        ("metaworld", "real", "easy", 0, 20_000, bool(table["success_rate"].iloc[0]))
    ]


def test_kalm_cli_run_and_its_notebook(tmp_path):
    """`kedro run --env test --pipeline=kalm --namespaces=clevr` from a copy of the checkout
    writes the catalog's files, and notebooks/kalm_results.ipynb executes on them."""
    from tests.helpers import copy_project, execute_notebook, notebook_text, run_kedro

    project = copy_project(tmp_path / "project")
    result = run_kedro(
        "run", "--env", "test", "--pipeline=kalm", "--namespaces=clevr",
        cwd=project, timeout=900, OMP_NUM_THREADS="1",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    reporting = project / "data" / "test" / "08_reporting" / "clevr"
    assert (reporting / "imagination_summary.json").is_file()
    import pandas as pd

    resources = pd.read_json(reporting.parent / "node_resources.jsonl", lines=True)
    assert len(resources) == 18 and (resources["status"] == "done").all()
    assert "clevr.train_grounded_llm_node" in set(resources["node"])
    assert (resources["peak_rss_mb"] > 0).all() and (resources["pipeline"] == "kalm").all()
    assert (reporting / "kalm_eval_summary.csv").is_dir()  # versioned
    for curve in (
        "grounding_learning_curve.png",
        "offline_rl_learning_curves.png",
        "kalm_eval.png",
    ):
        versions = list((reporting / curve).glob("*/" + curve))
        assert len(versions) == 1 and versions[0].read_bytes()[:4] == b"\x89PNG", curve
    notebook = execute_notebook(project, "kalm_results.ipynb")
    outputs = notebook_text(notebook)
    assert "real episodes:" in outputs and "imagined rephrase rollouts:" in outputs
    assert "goal_consistent" in outputs and "grounded_mse" in outputs
    images = [
        o for c in notebook.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})
    ]
    assert len(images) == 2  # the success bars and the two trajectories


def test_kalm_metaworld_cli_run_imagines_with_the_tasks(tmp_path):
    """`kedro run --env test --pipeline=kalm --namespaces=metaworld`: the grounded model
    imagines each novel level (continuous actions, each goal's task kept), and the
    real + imagined policy is trained and evaluated beside the real-only one."""
    import json

    from leap_kalm.envs.metaworld.tasks import TASKS_BY_LEVEL
    from tests.helpers import copy_project, run_kedro

    project = copy_project(tmp_path / "project")
    result = run_kedro(
        "run", "--env", "test", "--pipeline=kalm", "--namespaces=metaworld",
        cwd=project, timeout=900, OMP_NUM_THREADS="1",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    root = project / "data" / "test"
    for level in ("rephrase", "easy", "hard"):
        path = root / "07_model_output" / "metaworld" / f"imagined_{level}.npy"
        data = np.load(path, allow_pickle=True).item()
        assert validate_kalm_dataset(data, source=level)["action_type"] == "continuous"
        assert list(data["env_names"]) == list(TASKS_BY_LEVEL[level][:2])
    quality = json.loads((root / "08_reporting/metaworld/imagination_summary.json").read_text())
    assert set(quality) == {"rephrase", "easy", "hard"} and quality["easy"]["n"] == 2
    versions = list((root / "08_reporting/metaworld/kalm_eval_summary.csv").glob("*/*.csv"))
    import pandas as pd

    summary = pd.read_csv(versions[0])
    assert summary[["policy", "level"]].values.tolist() == [
        ["real", "easy"], ["kalm", "easy"], ["kalm_easy", "easy"]
    ]  # fmt: skip


def test_kalms_own_files_work_as_the_issue_writes_the_commands(tmp_path):
    """`kedro run --pipeline=kalm --namespaces=clevr --params "kalm_real_data=PATH,
    kalm_prompts=PATH"` and `kedro run --pipeline=offline_rl --namespaces=metaworld --params
    "kalm_real_data=PATH"`, on files in KALM's own layouts: the first imagines its prompt
    file's goals; the second trains the real-only policy and, with no imagined data, says
    the real + imagined one is not trained instead of failing the run."""
    import json

    from leap_kalm.datasets import D3Dataset, NpyDataset
    from leap_kalm.training.offline_rl import NotTrained
    from tests.datasets.test_kalm_dataset import clevr_layout, metaworld_layout
    from tests.helpers import copy_project, run_kedro
    from tests.pipelines.test_imagine import kalm_prompt_file

    files = tmp_path / "kalm"
    prompts, tasks = kalm_prompt_file()
    for name, data in {
        "clevr_robot.npy": clevr_layout(n=12), "meta_world.npy": metaworld_layout(n=12),
        "clevr_rephrase_prompt.npy": prompts,
    }.items():  # fmt: skip
        NpyDataset(filepath=str(files / name), allow_pickle=True).save(data)
    project = copy_project(tmp_path / "project")
    root = project / "data" / "test"

    def run(pipeline: str, world: str, params: str) -> None:
        result = run_kedro(
            "run", "--env", "test", f"--pipeline={pipeline}", f"--namespaces={world}",
            "--params", params, cwd=project, timeout=900, OMP_NUM_THREADS="1",
        )  # fmt: skip
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    prompt_file = files / "clevr_rephrase_prompt.npy"
    run("kalm", "clevr", f"kalm_real_data={files / 'clevr_robot.npy'},kalm_prompts={prompt_file}")
    imagined = np.load(root / "07_model_output/clevr/imagined_rephrase.npy", allow_pickle=True)
    assert imagined.item()["instructions"][:, 0].tolist() == [w[0] for w in tasks["instructions"]]
    offline = json.loads((root / "08_reporting/clevr/kalm_offline_summary.json").read_text())
    assert offline["n_episodes"] == 12, "the user's file, not the generated data"
    run("offline_rl", "metaworld", f"kalm_real_data={files / 'meta_world.npy'}")
    models = root / "06_models" / "metaworld"
    (real,) = (models / "policy_real.d3").glob("*/policy_real.d3")
    (kalm,) = (models / "policy_kalm.d3").glob("*/policy_kalm.d3")
    policy = D3Dataset(filepath=str(real), device="cpu:0").load()
    assert type(policy).__name__ == "CQL" and list(policy.impl.observation_shape) == [91 + 384]
    not_trained = D3Dataset(filepath=str(kalm), device="cpu:0").load()
    assert isinstance(not_trained, NotTrained)
    assert "no imagined data, so the real + imagined policy is not trained" in not_trained.reason
    (easy,) = (models / "policy_kalm_easy.d3").glob("*/policy_kalm_easy.d3")
    reason = D3Dataset(filepath=str(easy), device="cpu:0").load().reason
    assert "no imagined data, so the real + imagined easy policy is not trained" in reason

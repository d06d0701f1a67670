"""Secrets: a run with an API key in the credentials leaves no trace of it anywhere it
writes. `leap_iter` runs with an LLM teacher (a real `transformers serve` on 127.0.0.1),
TensorBoard tracking on, then kedro-viz builds its site and the results notebook runs;
every file and every line of output is searched for the key."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.helpers import copy_project, execute_notebook, notebook_text, run_kedro
from tests.llm.test_client import server  # noqa: F401 - the real server fixture

CANARY = "sk-canary-" + uuid.uuid4().hex  # made at run time: not even this file holds it


def _files_holding(root: Path, secret: bytes) -> list[str]:
    return [
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and secret in path.read_bytes()
    ]


def test_an_api_key_never_leaves_the_credentials_file(server, tiny_model_dir, tmp_path):  # noqa: F811
    project = copy_project(tmp_path / "project")
    credentials = project / "conf" / "test" / "credentials.yml"
    credentials.write_text(f"openai:\n  api_key: {CANARY}\n")
    params = ",".join(
        [
            "alfworld.teacher.kind=llm",
            f"alfworld.teacher.client.base_url={server}/v1",
            f"alfworld.teacher.client.model={tiny_model_dir}",
            "alfworld.teacher.client.max_tokens=16",
            "alfworld.teacher.max_attempts=1",
            "tracking.tensorboard=true",
        ]
    )
    outputs = []
    for _ in range(2):  # iteration 0 (annotations), then 1 (corrections)
        result = run_kedro(
            "run", "--env", "test", "--pipeline=leap_iter", "--params", params,
            cwd=project, timeout=600, OMP_NUM_THREADS="1", CI="true", OPENAI_API_KEY="",
        )  # fmt: skip
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        outputs.append(result.stdout + result.stderr)
    log = "\n".join(outputs)
    assert "OPENAI_API_KEY (values not shown)" in log  # the hook exported the key: in use
    assert (
        "scripted (fallback: llm failed)"
        in (project / "data/test/03_primary/alfworld/annotated_logs.jsonl").read_text()
    )  # the teacher was asked (the tiny model answers no JSON)
    assert list((project / "data/02_intermediate/llm_cache").rglob("*.json"))  # replies kept
    viz = run_kedro(
        "viz", "build", "--include-hooks", cwd=project, timeout=600, OMP_NUM_THREADS="1"
    )
    outputs.append(viz.stdout + viz.stderr)
    notebook = execute_notebook(project, "leap_results.ipynb")
    assert CANARY not in "\n".join(outputs) and CANARY not in notebook_text(notebook)
    written = [p for p in project.rglob("*") if p.is_file() and p != credentials]
    assert len(written) > 100
    leaks = [
        f for f in _files_holding(project, CANARY.encode()) if f != "conf/test/credentials.yml"
    ]
    assert leaks == []

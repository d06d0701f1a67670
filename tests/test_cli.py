"""The project's command-line entry points work from a fresh checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
KEDRO = str(Path(sys.executable).with_name("kedro"))


def _kedro(*args: str, cwd: Path = PROJECT, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"}
    return subprocess.run(
        [KEDRO, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_registry_list():
    result = _kedro("registry", "list")
    assert result.returncode == 0, result.stderr
    for name in ("leap_iter", "kalm", "ingest", "evaluate", "offline_rl"):
        assert f"- {name}" in result.stdout


def test_catalog_patterns_resolve():
    result = _kedro("catalog", "list-patterns")
    assert result.returncode == 0, result.stderr
    assert "{env}.iter{it}.rollouts" in result.stdout


def test_viz_build_writes_a_site(tmp_path):
    work = tmp_path / "project"
    shutil.copytree(
        PROJECT,
        work,
        ignore=shutil.ignore_patterns(".venv", ".git", "data", "*.pyc", "__pycache__"),
    )
    (work / "data").mkdir()
    result = _kedro("viz", "build", cwd=work, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    site = work / "build"
    assert (site / "index.html").exists()
    import json

    main = json.loads((site / "api" / "main").read_text())
    assert {p["id"] for p in main["pipelines"]} >= {"leap_iter", "kalm", "ingest", "evaluate"}
    assert (site / "api" / "pipelines" / "leap_iter").exists()

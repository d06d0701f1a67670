"""The project's command-line entry points work from a fresh checkout."""

from __future__ import annotations

from tests.helpers import copy_project
from tests.helpers import run_kedro as _kedro


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
    work = copy_project(tmp_path / "project")
    result = _kedro("viz", "build", cwd=work, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    site = work / "build"
    assert (site / "index.html").exists()
    import json

    main = json.loads((site / "api" / "main").read_text())
    assert {p["id"] for p in main["pipelines"]} >= {"leap_iter", "kalm", "ingest", "evaluate"}
    assert (site / "api" / "pipelines" / "leap_iter").exists()

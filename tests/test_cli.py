"""The project's command-line entry points work from a fresh checkout."""

from __future__ import annotations

import json
import shutil
import urllib.request

import pytest

from leap_kalm import viz
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


@pytest.fixture(scope="module")
def viz_site(tmp_path_factory):
    """``kedro viz build`` once, in a copy of the checkout."""
    work = copy_project(tmp_path_factory.mktemp("viz") / "project")
    result = _kedro("viz", "build", cwd=work, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return work / "build"


def test_viz_build_writes_a_site(viz_site):
    assert (viz_site / "index.html").exists()
    main = json.loads((viz_site / "api" / "main").read_text())
    assert {p["id"] for p in main["pipelines"]} >= {"leap_iter", "kalm", "ingest", "evaluate"}
    assert (viz_site / "api" / "pipelines" / "leap_iter").exists()
    names = viz.pipeline_node_names(viz_site, "leap_iter")
    assert {
        "train_sft_student_node",
        "evaluate_student_node",
        "correct_failed_rollouts_node",
    } <= set(names)
    with pytest.raises(FileNotFoundError, match="no pipeline 'nope'"):
        viz.pipeline_node_names(viz_site, "nope")


@pytest.mark.skipif(viz.find_chromium() is None, reason=f"no Chromium: {viz.INSTALL_HINT}")
def test_viz_page_shows_the_pipelines_node_names(viz_site, tmp_path):
    """The site, served on 127.0.0.1 and rendered by headless Chromium, draws every node of
    ``leap_iter`` and ``kalm``; a blank page with the same API files draws none of them."""
    with viz.serving(viz_site) as url:
        assert url.startswith("http://127.0.0.1:")
        for pipeline in ("leap_iter", "kalm"):
            names = viz.pipeline_node_names(viz_site, pipeline)
            dom = viz.rendered_dom(viz.page_url(url, pipeline))
            assert viz.missing_names(dom, names) == [], pipeline
    blank = tmp_path / "blank"
    shutil.copytree(viz_site / "api", blank / "api")
    (blank / "index.html").write_text("<html><body></body></html>")
    with viz.serving(blank) as url:
        names = viz.pipeline_node_names(blank, "leap_iter")
        assert viz.missing_names(viz.rendered_dom(viz.page_url(url, "leap_iter")), names) == names


def test_viz_helpers_name_what_is_missing(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="index.html does not exist"):
        with viz.serving(tmp_path):
            pass
    (tmp_path / "index.html").write_text("<p>hello</p>")
    with viz.serving(tmp_path) as url:
        assert urllib.request.urlopen(url, timeout=10).read() == b"<p>hello</p>"
    assert viz.page_url("http://127.0.0.1:1/", "kalm") == (
        "http://127.0.0.1:1/__leap_kalm_quiet?pid=kalm&expandAllPipelines=true"
    )
    with viz.serving(tmp_path) as url:  # the quiet page switches the tour off, then goes on
        quiet = urllib.request.urlopen(viz.page_url(url, "kalm"), timeout=10).read().decode()
        assert "showFeatureHints: false" in quiet and "location.replace" in quiet
    assert viz.missing_names("<text>a_node</text><text>b</text>", ["a_node", "c"]) == ["c"]
    monkeypatch.setattr(viz.shutil, "which", lambda name: None)
    with pytest.raises(FileNotFoundError, match="apt-get install chromium"):
        viz.rendered_dom("http://127.0.0.1:1/")

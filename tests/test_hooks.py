import random

import numpy as np

from leap_kalm.hooks import SeedingHook, seed_everything
from leap_kalm.progress import track


def _draw():
    import torch

    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_seed_everything_makes_all_generators_repeat():
    seed_everything(7)
    first = _draw()
    seed_everything(7)
    assert _draw() == first
    seed_everything(8)
    assert _draw() != first


class _Catalog:
    def __init__(self, params):
        self._params = params

    def __contains__(self, name):
        return name == "parameters"

    def load(self, name):
        return self._params


def test_hook_seeds_from_the_seed_parameter():
    hook = SeedingHook()
    hook.before_pipeline_run(run_params={}, pipeline=None, catalog=_Catalog({"seed": 3}))
    first = _draw()
    hook.before_pipeline_run(run_params={}, pipeline=None, catalog=_Catalog({"seed": 3}))
    assert _draw() == first


def test_track_yields_everything_with_or_without_bars(monkeypatch):
    monkeypatch.setenv("LEAP_KALM_PROGRESS", "1")
    assert list(track(range(5), "counting")) == [0, 1, 2, 3, 4]
    monkeypatch.setenv("LEAP_KALM_PROGRESS", "0")
    assert list(track(iter("abc"), "letters")) == ["a", "b", "c"]


class _Node:
    def __init__(self, name):
        self.name = name


class _Context:
    def __init__(self, root):
        self.config_loader = {"globals": {"data_root": str(root)}}


def test_resource_hook_measures_each_node_from_its_own_start(tmp_path):
    """A node that holds 300 MB shows it; the node after it, holding nothing, does not (the
    peak is reset at each node's start); a child process's peak is recorded; a failed node
    is recorded as failed; the rows are appended as each node ends."""
    import json
    import subprocess
    import sys

    from leap_kalm.hooks import ResourceHook
    from leap_kalm.settings import HOOKS
    from tests.helpers import PROJECT

    assert any(isinstance(hook, ResourceHook) for hook in HOOKS)
    path = tmp_path / "data" / "08_reporting" / "node_resources.jsonl"
    # The nodes run in a fresh interpreter: in a test session this process already holds
    # gigabytes from earlier tests, whose freed pages can make a new block's RSS invisible,
    # and a child's peak counts only when it beats every earlier child of the process.
    script = f"""
import json, pathlib, subprocess, sys
import numpy as np
from leap_kalm.hooks import ResourceHook
from tests.test_hooks import _Context, _Node
path = pathlib.Path({str(path)!r})
hook = ResourceHook()
hook.after_context_created(_Context({str(tmp_path / "data")!r}))
hook.before_pipeline_run({{"pipeline_names": ["kalm"]}}, None, None)
hook.before_node_run(_Node("big"))
block = np.ones(300 * 2**20 // 8)  # 300 MiB, written so it is resident
hook.after_node_run(_Node("big"), {{}})
del block
assert [json.loads(line)["node"] for line in path.read_text().splitlines()] == ["big"]
hook.before_node_run(_Node("small"))
hook.after_node_run(_Node("small"), {{}})
hook.before_node_run(_Node("child"))
subprocess.run([sys.executable, "-c", "b = bytearray(400 * 2**20); b[::4096] = b'x' * len(b[::4096])"], check=True)
hook.on_node_error(RuntimeError("boom"), _Node("child"))
"""
    subprocess.run([sys.executable, "-c", script], check=True, cwd=PROJECT)

    rows = {row["node"]: row for row in map(json.loads, path.read_text().splitlines())}
    assert list(rows) == ["big", "small", "child"]
    assert rows["big"]["peak_since"] == "node" and rows["big"]["pipeline"] == "kalm"
    assert rows["big"]["peak_rss_mb"] - rows["small"]["peak_rss_mb"] > 250
    assert rows["child"]["status"] == "failed" and rows["child"]["child_peak_rss_mb"] >= 400
    assert rows["big"]["child_peak_rss_mb"] is None
    assert all(row["wall_s"] >= 0 for row in rows.values())


def test_resource_hook_works_without_resource_module_or_proc(tmp_path, monkeypatch):
    """On Windows there is neither ``resource`` nor ``/proc``: the hook still records each
    node's wall time, with the peak marked as unknown-since-start and no child peak."""
    import builtins
    import json
    import sys

    from leap_kalm import hooks

    real_import, real_open = builtins.__import__, builtins.open

    def no_resource(name, *args, **kwargs):
        if name == "resource":
            raise ImportError("No module named 'resource'")
        return real_import(name, *args, **kwargs)

    def no_proc(path, *args, **kwargs):
        if str(path).startswith("/proc/"):
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "resource", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_resource)
    monkeypatch.setattr(builtins, "open", no_proc)
    assert hooks._maxrss_mb() == 0.0 and hooks._maxrss_mb(children=True) == 0.0

    hook = hooks.ResourceHook()
    hook.after_context_created(_Context(tmp_path / "data"))
    hook.before_pipeline_run({"pipeline_name": "leap_iter"}, None, None)
    hook.before_node_run(_Node("n"))
    hook.after_node_run(_Node("n"), {})
    monkeypatch.undo()
    (row,) = map(
        json.loads,
        (tmp_path / "data" / "08_reporting" / "node_resources.jsonl").read_text().splitlines(),
    )
    assert row["node"] == "n" and row["status"] == "done" and row["pipeline"] == "leap_iter"
    assert row["peak_since"] == "process" and row["peak_rss_mb"] == 0.0
    assert row["child_peak_rss_mb"] is None and row["wall_s"] >= 0


def test_resource_hook_counts_the_save_of_a_producer_node(tmp_path):
    """Kedro calls ``after_node_run`` before it saves the outputs; a resumable producer does
    its work during that save, so the row waits for the last output: run through Kedro's
    own runner, a node whose dataset takes 0.3 s to save is measured at 0.3 s or more, and
    one whose save fails is recorded as failed."""
    import json
    import time

    import pytest
    from kedro.framework.hooks.manager import _create_hook_manager
    from kedro.io import AbstractDataset, DataCatalog, MemoryDataset
    from kedro.pipeline import node, pipeline
    from kedro.runner import SequentialRunner

    from leap_kalm.hooks import ResourceHook

    class Producer(AbstractDataset):
        def __init__(self, fail=False):
            self.fail, self.saved = fail, None

        def _save(self, data):
            self.saved = list(data())  # the work happens here, as in JSONLDataset
            if self.fail:
                raise OSError("disk full")

        def _load(self):
            return self.saved

        def _describe(self):
            return {}

    def produce(_):
        def run():
            time.sleep(0.3)
            yield 1

        return run

    def plain(_):
        return 2

    hook = ResourceHook()
    hook.after_context_created(_Context(tmp_path / "data"))
    manager = _create_hook_manager()
    manager.register(hook)
    hook.before_pipeline_run({"pipeline_name": "p"}, None, None)
    rows_path = tmp_path / "data" / "08_reporting" / "node_resources.jsonl"
    catalog = DataCatalog({"a": MemoryDataset(0), "b": Producer(), "c": MemoryDataset()})
    flow = pipeline([node(produce, "a", "b", name="producer"), node(plain, "a", "c", name="plain")])
    SequentialRunner().run(flow, catalog, manager)
    rows = {r["node"]: r for r in map(json.loads, rows_path.read_text().splitlines())}
    assert rows["producer"]["status"] == "done" and rows["producer"]["wall_s"] >= 0.3
    assert rows["plain"]["status"] == "done" and rows["plain"]["wall_s"] < 0.3

    catalog = DataCatalog({"a": MemoryDataset(0), "b": Producer(fail=True)})
    broken = pipeline([node(produce, "a", "b", name="broken")])
    with pytest.raises(Exception, match="disk full") as raised:
        SequentialRunner().run(broken, catalog, manager)
    # what KedroSession.run does with a runner's error
    manager.hook.on_pipeline_error(
        error=raised.value, run_params={}, pipeline=broken, catalog=catalog
    )
    last = json.loads(rows_path.read_text().splitlines()[-1])
    assert last["node"] == "broken" and last["status"] == "failed" and last["wall_s"] >= 0.3


def test_resource_hook_gives_freed_memory_back_before_each_node(tmp_path, monkeypatch):
    """Memory an earlier node freed is returned to the OS before the next node's peak is
    reset, so the node's peak starts from what the process holds."""
    from leap_kalm import hooks
    from leap_kalm.training import memory

    calls = []
    monkeypatch.setattr(memory, "_malloc_trim", lambda: calls.append)
    hook = hooks.ResourceHook()
    hook.after_context_created(_Context(tmp_path))
    hook.before_node_run(_Node("a"))
    hook.after_node_run(_Node("a"), {})
    hook.before_node_run(_Node("b"))
    assert calls == [0, 0]

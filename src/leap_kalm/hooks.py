"""Project hooks: seeding, credentials, TensorBoard tracking of a run, and each node's wall
time and peak memory."""

from __future__ import annotations

import datetime
import json
import logging
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from kedro.framework.hooks import hook_impl

from leap_kalm import tracking
from leap_kalm.training.memory import release_freed_memory

logger = logging.getLogger(__name__)


def seed_everything(seed: int, deterministic_torch: bool = False) -> None:
    """Seed ``random``, numpy and torch (if installed) with one integer."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency, but keep the hook light
        return
    torch.manual_seed(seed)
    if deterministic_torch:
        torch.use_deterministic_algorithms(True, warn_only=True)


class SeedingHook:
    """Seeds random/numpy/torch from the ``seed`` parameter before the pipeline runs."""

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline: Any, catalog: Any) -> None:
        params = catalog.load("parameters") if "parameters" in catalog else {}
        seed = int(params.get("seed", 0))
        seed_everything(seed, bool(params.get("deterministic_torch", False)))
        logger.info("Seeded random, numpy and torch with %d", seed)


class CredentialsHook:
    """Exposes API keys from ``conf/local/credentials.yml`` as environment variables.

    An entry ``openai: {api_key: sk-...}`` becomes ``OPENAI_API_KEY`` (an entry
    ``<name>: {api_key: ...}`` becomes ``<NAME>_API_KEY``) unless that variable is already
    set. Keys are never logged or written to datasets; clients read them from the
    environment.
    """

    @hook_impl
    def after_context_created(self, context: Any) -> None:
        try:
            credentials = context.config_loader["credentials"]
        except Exception:  # no credentials file is fine
            return
        exported = []
        for name, entry in (credentials or {}).items():
            if isinstance(entry, dict) and entry.get("api_key"):
                variable = f"{str(name).upper()}_API_KEY"
                if not os.environ.get(variable):
                    os.environ[variable] = str(entry["api_key"])
                    exported.append(variable)
        if exported:
            logger.info(
                "API keys from credentials exported as %s (values not shown)", ", ".join(exported)
            )


class TrackingHook:
    """Opens the run's TensorBoard directory when ``tracking.tensorboard`` is true."""

    def __init__(self) -> None:
        self._writer: Any = None
        self._params: dict[str, Any] = {}
        self._metrics: dict[str, float] = {}
        self._owned_env = False

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline: Any, catalog: Any) -> None:
        params = catalog.load("parameters") if "parameters" in catalog else {}
        settings = params.get("tracking") or {}
        if not tracking.switched_on(settings.get("tensorboard", False)):
            return
        try:
            from tensorboardX import SummaryWriter
        except ImportError as error:
            raise ImportError(
                "tracking.tensorboard is true but tensorboardX is not installed; "
                "`pip install tensorboardX tensorboard` (make setup installs both)"
            ) from error
        name = run_params.get("pipeline_names") or run_params.get("pipeline_name") or "default"
        name = "+".join(name) if isinstance(name, (list, tuple)) else str(name)
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        root = os.path.abspath(
            os.path.join(settings.get("log_dir") or tracking.DEFAULT_LOG_DIR, f"{stamp}_{name}")
        )
        os.makedirs(root, exist_ok=True)
        os.environ[tracking.RUN_DIR_ENV] = root
        self._owned_env = True
        self._writer = SummaryWriter(logdir=os.path.join(root, "parameters"))
        self._params = tracking.flat_parameters(params)
        self._metrics = {}
        lines = [f"| `{k}` | `{v}` |" for k, v in sorted(self._params.items())]
        self._writer.add_text(
            "parameters", "\n".join(["| parameter | value |", "|---|---|", *lines])
        )
        logger.info("TensorBoard: this run logs to %s", root)

    @hook_impl
    def before_node_run(self, node: Any) -> None:
        if tracking.run_dir() is not None:
            os.environ[tracking.NODE_ENV] = node.name

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data: Any) -> None:
        if self._writer is None or not dataset_name.endswith("eval_summary"):
            return
        try:
            scalars = tracking.summary_scalars(data, dataset_name)
        except Exception as error:  # a table we cannot read must not stop the run
            logger.warning("TensorBoard: %s not logged (%s)", dataset_name, error)
            return
        for tag, value, step in scalars:
            self._writer.add_scalar(tag, value, step)
            self._metrics[tag] = value
        self._writer.flush()

    def _close(self) -> None:
        if self._writer is not None:
            if self._metrics:
                hparams = {
                    k: v for k, v in self._params.items() if not isinstance(v, str) or len(v) < 200
                }
                self._writer.add_hparams(hparams, self._metrics, name="hparams")
            self._writer.close()
            self._writer = None
        if self._owned_env:
            os.environ.pop(tracking.RUN_DIR_ENV, None)
            os.environ.pop(tracking.NODE_ENV, None)
            self._owned_env = False

    @hook_impl
    def after_pipeline_run(self) -> None:
        self._close()

    @hook_impl
    def on_pipeline_error(self) -> None:
        self._close()


def _reset_peak_rss() -> bool:
    """Reset this process's peak RSS (Linux: ``5`` into ``/proc/self/clear_refs``); False
    where that cannot be done (the peak then counts from the process's start)."""
    try:
        with open("/proc/self/clear_refs", "w") as file:
            file.write("5")
        return True
    except OSError:
        return False


def _maxrss_mb(children: bool = False) -> float:
    """``ru_maxrss`` of this process (or, with ``children``, of its largest finished child)
    in MiB; 0.0 where the ``resource`` module does not exist (Windows)."""
    try:
        import resource
    except ImportError:
        return 0.0
    peak = resource.getrusage(
        resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    ).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, else KiB


def _peak_rss_mb() -> float:
    """This process's peak RSS in MiB: ``VmHWM`` where ``/proc`` has it, else ``ru_maxrss``."""
    try:
        with open("/proc/self/status") as file:
            for line in file:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return _maxrss_mb()


class ResourceHook:
    """Each node's wall time and peak memory, logged and appended as one JSON line per node
    to ``<data_root>/08_reporting/node_resources.jsonl`` as soon as the node ends, its
    outputs saved (so an interrupted run keeps what it measured). The save counts: a
    resumable producer (expert logs, rollouts, evaluation) does its work while its
    ``JSONLDataset`` writes it, after Kedro's ``after_node_run``.

    A row holds ``run`` (when the run started), ``pipeline``, ``node``, ``status`` (done or
    failed), ``wall_s``, ``peak_rss_mb`` (the kedro process's peak during the node, reset
    at the node's start; on systems without ``/proc`` the peak since the process started,
    marked by ``peak_since: process``, and 0 where there is no ``resource`` module either,
    as on Windows) and ``child_peak_rss_mb`` (the largest child process
    that finished during the node, such as the fresh-process evaluation, when it set a new
    high for the run; else null). With a runner that runs nodes side by side the peaks
    are the process's, shared by the nodes running together.
    """

    def __init__(self) -> None:
        self._path: Path | None = None
        self._run = ""
        self._pipeline = ""
        self._started: dict[str, tuple[float, float, bool]] = {}
        self._saving: dict[str, tuple[Any, set[str]]] = {}  # name -> (node, outputs not saved yet)

    @hook_impl
    def after_context_created(self, context: Any) -> None:
        try:
            root = context.config_loader["globals"].get("data_root")
        except Exception:  # no globals: the default data folder
            root = None
        self._path = Path(root or "data") / "08_reporting" / "node_resources.jsonl"

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline: Any, catalog: Any) -> None:
        self._run = datetime.datetime.now().isoformat(timespec="seconds")
        name = run_params.get("pipeline_names") or run_params.get("pipeline_name") or "__default__"
        self._pipeline = "+".join(name) if isinstance(name, (list, tuple)) else str(name)

    @hook_impl
    def before_node_run(self, node: Any) -> None:
        # what earlier nodes freed goes back to the OS first, so a node's peak (and the
        # machine's memory while it runs) starts from what the process really holds
        release_freed_memory()
        reset = _reset_peak_rss()
        self._started[node.name] = (time.perf_counter(), _maxrss_mb(children=True), reset)

    @hook_impl
    def after_node_run(self, node: Any, outputs: dict[str, Any]) -> None:
        # A resumable producer does its work while its dataset saves it, after this
        # hook: the row is written once the node's last output is saved.
        pending = set(outputs or ())
        if pending and node.name in self._started:
            self._saving[node.name] = (node, pending)
        else:
            self._record(node, "done")

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, node: Any) -> None:
        if node.name not in self._saving:
            return
        pending = self._saving[node.name][1]
        pending.discard(dataset_name)
        if not pending:
            del self._saving[node.name]
            self._record(node, "done")

    @hook_impl
    def on_node_error(self, error: Exception, node: Any) -> None:
        self._record(node, "failed")

    @hook_impl
    def on_pipeline_error(self, error: Exception) -> None:
        """A node whose outputs failed to save (an interrupted producer) is recorded as failed."""
        for node, _ in list(self._saving.values()):
            del self._saving[node.name]
            self._record(node, "failed")

    def _record(self, node: Any, status: str) -> None:
        if node.name not in self._started:
            return
        start, children_before, reset = self._started.pop(node.name)
        children = _maxrss_mb(children=True)
        row = {
            "run": self._run,
            "pipeline": self._pipeline,
            "node": node.name,
            "status": status,
            "wall_s": round(time.perf_counter() - start, 2),
            "peak_rss_mb": round(_peak_rss_mb(), 1),
            "peak_since": "node" if reset else "process",
            "child_peak_rss_mb": round(children, 1) if children > children_before else None,
        }
        logger.info(
            "%s: %.1f s, peak RSS %.2f GB%s", node.name, row["wall_s"], row["peak_rss_mb"] / 1024,
            f" (a child process: {children / 1024:.2f} GB)" if row["child_peak_rss_mb"] else "",
        )  # fmt: skip
        if self._path is None:
            return
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            with self._path.open("a", encoding="utf-8") as file:
                file.write(json.dumps(row) + "\n")
        except OSError as error:  # a full disk must not fail the node that just succeeded
            logger.warning("node resources not written to %s: %s", self._path, error)

"""Project hooks: seeding, credentials, and TensorBoard tracking of a run."""

from __future__ import annotations

import datetime
import logging
import os
import random
from typing import Any

from kedro.framework.hooks import hook_impl

from leap_kalm import tracking

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

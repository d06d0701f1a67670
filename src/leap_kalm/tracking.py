"""TensorBoard tracking, switched on by the ``tracking`` parameter (off by default).

With ``tracking: {tensorboard: true}`` a run writes one TensorBoard run directory,
``<log_dir>/<time>_<pipeline>/``, holding

- ``parameters``: the run's parameters (as text, and as hparams beside the final metrics;
  keys that look like secrets are left out),
- ``<node name>/``: the loss curves of every trainer that node runs (trl's SFT and DPO,
  the grounding ``Trainer``: transformers' ``TensorBoardCallback``; d3rlpy's algorithms:
  its ``TensorboardAdapterFactory``),
- ``metrics/…``: every number in the evaluation summaries (``*eval_summary`` datasets) as
  it is saved, tagged by the summary's text columns, at step ``iteration`` where the table
  has one.

The run directory is opened by ``hooks.TrackingHook`` (this module stays free of Kedro,
as everything below ``pipelines/`` does) and reaches the trainers through the
``LEAP_KALM_TENSORBOARD_DIR`` environment variable (and the node's name through
``LEAP_KALM_TRACKING_NODE``), so trainers in spawned or ``accelerate launch`` processes
log there too. View it with
``tensorboard --logdir data/09_tracking/tensorboard`` (``make tensorboard``).
"""

from __future__ import annotations

import json
import logging
import os
import re
from typing import Any

logger = logging.getLogger(__name__)

RUN_DIR_ENV = "LEAP_KALM_TENSORBOARD_DIR"
NODE_ENV = "LEAP_KALM_TRACKING_NODE"
DEFAULT_LOG_DIR = "data/09_tracking/tensorboard"
_SECRET = re.compile(r"(api[_-]?key|token|secret|password|credential)", re.IGNORECASE)


def run_dir() -> str | None:
    """This run's TensorBoard directory, or ``None`` when tracking is off."""
    return os.environ.get(RUN_DIR_ENV) or None


def stage_dir(default: str) -> str | None:
    """Where the running node's trainer writes (``<run>/<node name>``), or ``None`` when off."""
    root = run_dir()
    if root is None:
        return None
    stage = os.environ.get(NODE_ENV) or default
    return os.path.join(root, re.sub(r"[^\w.\-]+", "_", stage))


def trainer_callbacks(default_stage: str) -> list[Any]:
    """transformers callbacks for a ``Trainer``: a TensorBoard writer when tracking is on."""
    log_dir = stage_dir(default_stage)
    if log_dir is None:
        return []
    from tensorboardX import SummaryWriter
    from transformers.integrations import TensorBoardCallback

    return [TensorBoardCallback(SummaryWriter(logdir=log_dir))]


def d3rlpy_logger(default_stage: str) -> Any:
    """d3rlpy's logger adapter: TensorBoard under the node's directory when on, else none
    (d3rlpy's file logger would leave ``d3rlpy_logs/`` folders behind)."""
    from d3rlpy.logging import NoopAdapterFactory, TensorboardAdapterFactory

    log_dir = stage_dir(default_stage)
    return NoopAdapterFactory() if log_dir is None else TensorboardAdapterFactory(log_dir)


def switched_on(value: Any) -> bool:
    """A yes/no parameter as YAML or ``--params`` gives it (``true``, ``"false"``, ``1``).

    Raises:
        ValueError: For anything else, naming the parameter.
    """
    if isinstance(value, bool) or value is None:
        return bool(value)
    text = str(value).strip().lower()
    if text in {"true", "yes", "on", "1"}:
        return True
    if text in {"false", "no", "off", "0", "null", "none", ""}:
        return False
    raise ValueError(f"tracking.tensorboard must be true or false, got {value!r}")


def flat_parameters(params: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a.b.c": value}`` for every scalar parameter, leaving out secret-looking keys
    (their values are never written)."""
    flat: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if _SECRET.search(str(key)):
            continue
        if isinstance(value, dict):
            flat.update(flat_parameters(value, f"{name}."))
        elif isinstance(value, (bool, int, float, str)) or value is None:
            flat[name] = "null" if value is None else value
        else:
            flat[name] = json.dumps(value, default=str)
    return flat


def summary_scalars(table: Any, dataset: str) -> list[tuple[str, float, int]]:
    """``(tag, value, step)`` for every number in an evaluation summary table.

    A row's tag is ``metrics/<dataset>/<its text columns>/<numeric column>``; its step is
    the row's ``iteration`` where the table has that column, else 0.
    """
    import pandas as pd

    frame = table.to_pandas() if hasattr(table, "to_pandas") else pd.DataFrame(table)
    types = pd.api.types
    columns = [c for c in frame.columns if c != "iteration"]
    text = [c for c in columns if types.is_string_dtype(frame[c]) or frame[c].dtype == object]
    numbers = [
        c for c in columns if c not in text
        and types.is_numeric_dtype(frame[c]) and not types.is_bool_dtype(frame[c])
    ]  # fmt: skip
    out = []
    for _, row in frame.iterrows():
        where = "/".join(str(row[c]) for c in text if pd.notna(row[c]))
        step = int(row["iteration"]) if "iteration" in frame.columns else 0
        for column in numbers:
            if pd.notna(row[column]):
                tag = "/".join(p for p in ("metrics", dataset, where, column) if p)
                out.append((tag, float(row[column]), step))
    return out

"""Shared by the benchmarks: run one measurement in its own spawned process."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Mapping
from typing import Any


def in_child(
    target: Callable[..., None], *args: Any, label: str, env: Mapping[str, str] | None = None
) -> dict:
    """Run ``target(*args, queue)`` in a fresh spawned process (its peak RSS is its own) and
    return the dict it put on the queue; exit with ``label`` if the child fails. ``env``:
    variables set for the child only (read at its start, e.g. glibc's ``GLIBC_TUNABLES`` or
    ``LD_PRELOAD``), this process's environment restored once the child has started."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=target, args=(*args, queue))
    saved = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})
    try:
        child.start()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    result = queue.get()
    child.join()
    if child.exitcode:
        raise SystemExit(f"{label}: exit code {child.exitcode}")
    return result

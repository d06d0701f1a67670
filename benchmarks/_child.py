"""Shared by the benchmarks: run one measurement in its own spawned process."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any


def in_child(target: Callable[..., None], *args: Any, label: str) -> dict:
    """Run ``target(*args, queue)`` in a fresh spawned process (its peak RSS is its own) and
    return the dict it put on the queue; exit with ``label`` if the child fails."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=target, args=(*args, queue))
    child.start()
    result = queue.get()
    child.join()
    if child.exitcode:
        raise SystemExit(f"{label}: exit code {child.exitcode}")
    return result

"""Rich progress bars for long loops (rollouts, generation, data generation).

Bars are shown on a terminal and stay silent in CI logs and notebooks that set
``LEAP_KALM_PROGRESS=0``; the loop itself is unchanged either way.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def progress_enabled() -> bool:
    """Bars are on unless ``LEAP_KALM_PROGRESS=0`` or ``CI`` is set."""
    if os.environ.get("LEAP_KALM_PROGRESS") is not None:
        return os.environ["LEAP_KALM_PROGRESS"] not in {"0", "false", "False", ""}
    return not os.environ.get("CI")


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate over ``items`` with a rich progress bar (elapsed, remaining, rate)."""
    if not progress_enabled():
        yield from items
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=False) as progress:
        task = progress.add_task(description, total=total)
        for item in items:
            yield item
            progress.advance(task)

"""Run a generator in a fresh Python process and yield its items in this one.

Why: after a training run in the same process, generation on the CPU is measured to be
1.4x slower (``docs/results.md``, "The in-process evaluation slowdown"); a fresh process
does not carry whatever state training left behind. Items cross the process boundary one
at a time, so a resumable dataset downstream still writes each as it arrives.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

logger = logging.getLogger(__name__)

_ITEM, _DONE, _ERROR = "item", "done", "error"
_POLL_S = 2.0
_ORPHAN_EXIT = 70  # the child's exit code when it stops because its parent is gone


def _exit_when_orphaned(parent_pid: int, poll_s: float) -> None:
    """Stop this process as soon as ``parent_pid`` is no longer its parent.

    A parent killed by SIGTERM or SIGKILL (a stopped ``kedro run``) runs none of its
    clean-up, so without this its spawned child would go on computing (a whole batch of
    rollouts, minutes on a CPU) until its next write to the closed pipe fails.
    """
    while True:
        time.sleep(poll_s)
        if os.getppid() != parent_pid:
            os._exit(_ORPHAN_EXIT)


class FreshProcessError(RuntimeError):
    """The generator failed or its process died; the message carries the child's traceback."""


def _child(
    fn: Callable[..., Iterator[Any]],
    args: tuple,
    kwargs: dict,
    out: Any,
    log_level: int,
    parent_pid: int,
) -> None:
    threading.Thread(
        target=_exit_when_orphaned, args=(parent_pid, _POLL_S / 4), daemon=True
    ).start()
    # A spawned child starts with a default logging set-up (kedro's own when kedro is the
    # main script): give fn's package the level it has in the parent, and a handler.
    logging.basicConfig(format="[fresh process] %(levelname)s %(name)s: %(message)s")
    logging.getLogger(fn.__module__.split(".")[0]).setLevel(log_level)
    try:
        for item in fn(*args, **kwargs):
            out.send((_ITEM, item))  # written to the pipe before the next item is made
        out.send((_DONE, None))
    except BaseException as error:  # report everything, including KeyboardInterrupt
        out.send((_ERROR, f"{type(error).__name__}: {error}\n{traceback.format_exc()}"))
    finally:
        out.close()


def in_fresh_process(
    fn: Callable[..., Iterator[Any]], *args: Any, label: str = "work", **kwargs: Any
) -> Iterator[Any]:
    """Yield what ``fn(*args, **kwargs)`` yields, running it in a newly spawned process.

    ``fn`` must be importable (a module-level function) and its arguments and items
    picklable. Each item is in the pipe before the child makes the next, so a child that
    dies loses none it had made. An exception in the child is raised here as
    ``FreshProcessError`` with the child's traceback; a child that dies without a word
    (killed, out of memory) is named with its exit code and the number of items it had
    delivered. Closing the generator early stops the child, and so does this process's
    death, however it dies (the child checks for its parent twice a second).
    """
    context = multiprocessing.get_context("spawn")
    reader, writer = context.Pipe(duplex=False)
    log_level = logging.getLogger(fn.__module__.split(".")[0]).getEffectiveLevel()
    process = context.Process(
        target=_child, args=(fn, args, kwargs, writer, log_level, os.getpid()), daemon=True
    )
    process.start()
    writer.close()  # the child holds the only writing end: its death reads as end of file
    delivered = 0
    try:
        while True:
            if not reader.poll(_POLL_S) and process.is_alive():
                continue
            try:
                kind, payload = reader.recv()
            except EOFError:
                process.join(timeout=10)
                raise FreshProcessError(
                    f"the {label} process (pid {process.pid}) died with exit code {process.exitcode} "
                    f"after {delivered} items, without reporting an error (killed? out of memory?); "
                    "what it delivered is kept, so rerunning the same command resumes"
                ) from None
            if kind == _ITEM:
                delivered += 1
                yield payload
            elif kind == _DONE:
                break
            else:
                raise FreshProcessError(
                    f"the {label} process failed after {delivered} items: {payload}"
                )
        process.join(timeout=30)
    finally:
        if process.is_alive():
            process.terminate()
            process.join(timeout=10)
        reader.close()

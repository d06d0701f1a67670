"""Give the memory a training step freed back to the operating system.

On Linux, glibc's allocator keeps the memory of freed tensors in its heap: a training
step's activations (gigabytes on whole-episode chats) are freed at the end of the step,
but the process's resident size stays at the largest step so far and creeps up as
episodes of new lengths fragment the heap. Measured on the WebShop learning profile's
SFT without gradient checkpointing (SmolLM2-135M, 17 optimiser steps in a fresh
process): 4.2 GB after the first step, 9.9 GB after the 17th, peak 10.7 GB; with
``malloc_trim`` after every step 2.2-2.9 GB between steps, peak 9.8 GB, for about 4% more
time per step (the freed pages are faulted in again). The kedro process kept
13.3 GB after its SFT node while the evaluation ran beside it (``docs/results.md``,
twenty-seventh session).

:func:`release_freed_memory` calls ``malloc_trim(0)``; where the C library has no such
function (macOS, musl) it does nothing and says so once.

Giving the memory back has a price: every step faults its blocks in again and the kernel
zeroes every page (glibc serves blocks above its mmap threshold, at most 32 MB, with fresh
pages anyway). Measured with ``benchmarks/cpu_allocator.py`` (fp32, 2 cores, the learning
profiles' iteration-0 SFT records): WebShop without gradient checkpointing 1.7 million
minor page faults and 28.8 s of kernel time per 80.0-s step; with the freed memory kept in
the heap (no ``mmap`` for large blocks, no trimming) 84 thousand faults, 3.1 s, 59.4 s per
step (1.35x), peak RSS 8.2 instead of 8.0 GB. ALFWorld: 1.45x without gradient
checkpointing, 1.19x with it. The training parameter ``freed_memory`` chooses: ``keep``
(the default) keeps it for the next step while the trainer runs
(:func:`freed_memory_policy`) and gives it back once training ends; ``release`` gives it
back after every step (the lower resident size between steps, for a process that shares
the machine while it trains).

``keep`` lets the heap fragment: with bf16 on a CPU with AMX, whole-episode SFT on
ALFWorld's learn profile rose all through the run, to 13.3 GiB at 154 steps with oneDNN's
primitive cache bounded (fp32: 6.2), while a step's own activations and the optimiser
state are a few GB (``docs/results.md``, thirty-seventh session). The training parameter
``freed_memory_ceiling_gb`` bounds it: with ``keep``, after an optimiser step that leaves
the process's resident size above the ceiling, the heap's free memory goes back to the
OS once (:func:`resident_gb`), and the next steps keep again.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger(__name__)

FREED_MEMORY = ("release", "keep")
# glibc's <malloc.h>: mallopt parameters
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -3, -4
# What glibc's own rules reach after the first large block is freed (the mmap threshold
# follows freed mmap blocks up to 32 MB on 64-bit, the trim threshold at twice it): where
# a keep ends, as setting any of these turns those rules off for the rest of the process.
GLIBC_MMAP_THRESHOLD = 4 * 1024 * 1024 * ctypes.sizeof(ctypes.c_long)
GLIBC_TRIM_THRESHOLD, GLIBC_MMAP_MAX = 2 * GLIBC_MMAP_THRESHOLD, 65536


@functools.cache
def _c_function(name: str, *argtypes: Any) -> Any:
    """The C library's function ``name`` (returning an int), or ``None`` where it has none."""
    try:  # the process's own symbols include its C library's
        function = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError, TypeError):  # no such function; TypeError: Windows
        logger.debug("no %s in this C library: the allocator keeps its own policy", name)
        return None
    function.argtypes = list(argtypes)
    function.restype = ctypes.c_int
    return function


def _malloc_trim() -> Any:
    """glibc's ``malloc_trim(pad)``, or ``None``."""
    return _c_function("malloc_trim", ctypes.c_size_t)


def _mallopt() -> Any:
    """glibc's ``mallopt(param, value)``, or ``None``."""
    return _c_function("mallopt", ctypes.c_int, ctypes.c_int)


def check_freed_memory(value: str) -> str:
    """``value`` if it names a policy, else a ``ValueError`` that lists them."""
    if value not in FREED_MEMORY:
        raise ValueError(f"freed_memory: {value!r}; expected one of {list(FREED_MEMORY)}")
    return value


@contextlib.contextmanager
def freed_memory_policy(freed_memory: str) -> Iterator[bool]:
    """While training runs: ``keep`` serves large blocks from the heap instead of fresh
    ``mmap`` pages and never trims it, so the next step reuses the pages this one freed;
    on the way out (an error too) the settings glibc's own rules would have reached by
    then come back, and the heap's free memory goes back to the OS. ``release`` changes
    nothing (the per-step release is the callback's). Yields whether the allocator was
    told to keep (glibc only)."""
    check_freed_memory(freed_memory)
    mallopt = _mallopt() if freed_memory == "keep" else None
    if mallopt is None:
        yield False
        return
    mallopt(M_MMAP_MAX, 0)
    mallopt(M_TRIM_THRESHOLD, -1)  # -1: never trim
    try:
        yield True
    finally:
        mallopt(M_MMAP_MAX, GLIBC_MMAP_MAX)
        mallopt(M_MMAP_THRESHOLD, GLIBC_MMAP_THRESHOLD)
        mallopt(M_TRIM_THRESHOLD, GLIBC_TRIM_THRESHOLD)
        release_freed_memory()


def release_freed_memory() -> bool:
    """Return the heap's free memory to the OS; whether the C library could (glibc)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def resident_gb() -> float | None:
    """This process's resident size in GB (``/proc/self/statm``), or ``None`` where the
    system does not say (not Linux)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e9


def memory_release_callbacks(
    freed_memory: str = "release", ceiling_gb: float | None = None
) -> list[Any]:
    """The transformers callbacks ``freed_memory`` needs: with ``release``, one that
    releases freed memory after every optimiser step, after each checkpoint save and when
    training ends; with ``keep``, none (:func:`freed_memory_policy` gives it back at the
    end), or with ``ceiling_gb`` one that releases after a step that leaves the resident
    size above it."""
    if ceiling_gb is not None and ceiling_gb < 0:
        raise ValueError(f"freed_memory_ceiling_gb must be >= 0 or null, got {ceiling_gb}")
    if check_freed_memory(freed_memory) == "keep":
        return [] if ceiling_gb is None else [_ceiling_callback(ceiling_gb)]
    from transformers import TrainerCallback

    class ReleaseFreedMemory(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            release_freed_memory()

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            release_freed_memory()

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            release_freed_memory()

    return [ReleaseFreedMemory()]


def _ceiling_callback(ceiling_gb: float) -> Any:
    from transformers import TrainerCallback

    class ReleaseAboveCeiling(TrainerCallback):
        """Gives the heap's free memory back after a step that ends above ``ceiling_gb``."""

        def __init__(self) -> None:
            self.releases = 0

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            rss = resident_gb()
            if rss is not None and rss > ceiling_gb and release_freed_memory():
                self.releases += 1
                logger.debug(
                    "resident %.1f GB above freed_memory_ceiling_gb %.1f: released (%d so far)",
                    rss,
                    ceiling_gb,
                    self.releases,
                )

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.releases:
                logger.info(
                    "freed memory went back to the OS after %d of the steps (resident above %.1f GB)",
                    self.releases,
                    ceiling_gb,
                )

    return ReleaseAboveCeiling()

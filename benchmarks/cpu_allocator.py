"""Benchmark: what the memory allocator costs a whole-episode SFT step on this CPU.

An SFT step on a long episode allocates large blocks (the logits of the supervised tokens,
each layer's activations) and frees them again. glibc serves blocks above its mmap threshold
(at most 32 MB) with fresh ``mmap`` pages, so every step page-faults them in again and the
kernel zeroes every page: the WebShop learning profile's SFT spent 21-28% of its CPU time in
the kernel, and the ALFWorld iteration-2 run counted 157 million minor page faults. This
runs the same SFT (the first ``--steps`` optimiser steps over a data root's iteration-0 SFT
records, SmolLM2-135M-Instruct, full fine-tuning, one episode per forward, 4 accumulated,
gradient checkpointing with ``--gradient-checkpointing``) under each allocator setting,
each in its own process:

- ``glibc``: ``freed_memory: release`` (the default before this benchmark: ``malloc_trim`` after
  every step, glibc's defaults; the reports' "glibc (default)" row);
- ``glibc THP``: the same with ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` (glibc ≥ 2.35 asks
  for transparent huge pages, so a fault maps 2 MB instead of 4 kB where the kernel's
  ``transparent_hugepage`` is ``madvise`` or ``always``);
- ``torch THP``: ``THP_MEM_ALLOC_ENABLE=1``, PyTorch's own switch: its CPU allocator aligns
  blocks of 2 MB and more to 2 MB and advises huge pages for them (read from the process's
  environment, so a running process can set it before its first large tensor);
- ``glibc kept``: no ``mmap`` for large blocks and no trimming (``glibc.malloc.mmap_max=0``,
  a 64 GB ``trim_threshold``, the per-step ``malloc_trim`` off): freed memory is reused, at
  the price of a resident size that stays at its peak;
- ``freed_memory: keep``: the project's own switch for the same thing, set by
  ``mallopt`` inside the running process while the trainer runs (the training parameter
  ``freed_memory``; ``leap_kalm.training.memory``);
- ``jemalloc``: ``LD_PRELOAD`` of ``libjemalloc.so.2`` (Debian's ``libjemalloc2``), where
  installed (``--jemalloc PATH`` to name another).

Reported per setting: median seconds per optimiser step and, per step after the first,
minor page faults, user and system CPU seconds; peak RSS and RSS between steps (a heap
that keeps freed memory may creep up as episode lengths change). ``--only NAME ...`` runs
those settings beside the default; ``--rounds 2`` runs the settings
twice, alternating, so that both see the same machine load.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/cpu_allocator.py --env alfworld --data-root data/learn --steps 6

Writes benchmarks/results/cpu_allocator_<env>.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

JEMALLOC = Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
KEPT = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736"


Setting = tuple[str, bool, str, dict[str, str]]


def settings(jemalloc: Path | None) -> list[Setting]:
    """(name, per-step release, ``freed_memory`` parameter, environment of the child) for
    every setting there is."""
    rows = [
        ("glibc (default)", True, "release", {}),
        ("glibc THP", True, "release", {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}),
        ("torch THP", True, "release", {"THP_MEM_ALLOC_ENABLE": "1"}),
        ("glibc kept", False, "release", {"GLIBC_TUNABLES": KEPT}),
        ("freed_memory: keep", True, "keep", {}),
    ]
    if jemalloc is not None and jemalloc.exists():
        rows.append(("jemalloc", True, "release", {"LD_PRELOAD": str(jemalloc)}))
    return rows


def run(records: Path, setting: Setting, steps: int, checkpointing: bool) -> dict:
    from _child import in_child
    from sft_memory import _run

    name, release, freed_memory, env = setting
    overrides = {"freed_memory": freed_memory, "gradient_checkpointing": checkpointing}
    return in_child(_run, str(records), release, steps, overrides, label=name, env=env)


def main() -> None:
    from _sft_clock import iteration0_sft_records

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="alfworld", choices=("alfworld", "webshop"))
    parser.add_argument("--data-root", type=Path, default=Path("data"))
    parser.add_argument("--steps", type=int, default=6, help="optimiser steps per setting")
    parser.add_argument("--rounds", type=int, default=1, help="times every setting runs")
    parser.add_argument("--jemalloc", type=Path, default=JEMALLOC)
    parser.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="train with gradient checkpointing (the profiles' default; off: the learn "
        "profile's WebShop runs)",
    )
    parser.add_argument(
        "--only", nargs="+", metavar="NAME", help="run only these settings (names as reported)"
    )
    args = parser.parse_args()
    records = iteration0_sft_records(args.data_root, args.env)
    if args.steps < 3:
        raise SystemExit("--steps: at least 3 (the first step warms up and is not counted)")
    chosen = settings(args.jemalloc)
    if args.only:
        unknown = sorted(set(args.only) - {s[0] for s in chosen})
        if unknown:
            raise SystemExit(f"--only: no setting {unknown}; there are {[s[0] for s in chosen]}")
        chosen = [s for s in chosen if s[0] in args.only or s[0] == "glibc (default)"]
    rows = []
    for round_ in range(1, args.rounds + 1):
        for setting in chosen:
            result = run(records, setting, args.steps, args.gradient_checkpointing)
            print(f"round {round_} {setting[0]}: {result}", flush=True)
            rows.append((round_, setting[0], result))
    base = {r: res["seconds"] for r, name, res in rows if name == "glibc (default)"}
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    lines = [
        f"# SFT step cost by memory allocator ({args.env})",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{platform.libc_ver()[0]} {platform.libc_ver()[1]}, transparent_hugepage "
        f"`{thp.read_text().strip() if thp.exists() else 'unknown'}`, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; SmolLM2-135M-Instruct, "
        f"full fine-tuning {'with' if args.gradient_checkpointing else 'without'} gradient "
        "checkpointing, one episode per forward, 4 "
        f"accumulated; the first {args.steps} optimiser steps over `{records}` "
        f"({rows[0][2]['records']} train records), each setting in its own process. Per step: "
        "the mean over the steps after the first.",
        "",
        "| round | allocator | s/step (median) | vs glibc default | minor faults/step "
        "| user s/step | system s/step | system share | peak RSS (GB) "
        "| RSS between steps: first / last (GB) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for round_, name, r in rows:
        cpu = r["user_s_per_step"] + r["system_s_per_step"]
        lines.append(
            f"| {round_} | {name} | {r['seconds']:.1f} | {base[round_] / r['seconds']:.2f}x | "
            f"{r['faults_per_step']:,.0f} | {r['user_s_per_step']:.1f} | "
            f"{r['system_s_per_step']:.1f} | {r['system_s_per_step'] / cpu:.0%} | "
            f"{r['peak_gb']:.1f} | {r['between_gb'][0]:.1f} / {r['between_gb'][-1]:.1f} |"
        )
    lines += [
        "",
        "`vs glibc default`: the default's median s/step in the same round over this "
        "setting's (above 1: faster).",
    ]
    from _report import write_report

    suffix = "_checkpointing" if args.gradient_checkpointing else ""
    write_report(f"cpu_allocator_{args.env}{suffix}", lines)


if __name__ == "__main__":
    main()

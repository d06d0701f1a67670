"""Benchmark: a whole-episode SFT run's memory with and without giving freed memory back.

glibc keeps the memory of freed tensors in the process's heap, so an SFT run's resident
size creeps up step by step (each step's activations are freed and the next, longer
episode needs a bigger block). With ``freed_memory: release``, ``leap_kalm.training.memory``
calls ``malloc_trim`` after every optimiser step, checkpoint save and at the end of training
(the default, ``keep``, only at the end). This runs the same SFT
(the first ``--steps`` optimiser steps over a data root's iteration-0 SFT records,
SmolLM2-135M-Instruct, full fine-tuning, one episode per forward, 4 accumulated, without
gradient checkpointing, as the WebShop learning profile measured 14 GB) twice, each in its
own process: with the per-step release and without it. Reported per
setting: peak RSS of the process, RSS between steps (after the step's release, where on),
RSS after training, and median seconds per optimiser step.

``--onednn-cache N [N ...]`` compares oneDNN primitive cache capacities instead (each
capacity in its own process, ``freed_memory: keep``, the profiles' default): on a CPU with
native bf16, oneDNN compiles and keeps a primitive per operator shape, and whole episodes
bring a new shape on nearly every forward (``leap_kalm.ONEDNN_PRIMITIVE_CACHE_CAPACITY``).

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/sft_memory.py --env webshop --data-root data/learn --steps 12
    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/sft_memory.py --env alfworld --data-root data/learn --steps 20 --onednn-cache 1024 128

Writes benchmarks/results/sft_memory_<env>.md (``_onednn`` added for the cache comparison).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _rss_gb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024**2
    return float("nan")


def _usage() -> tuple[float, float, float]:
    """This process's minor page faults, user and system CPU seconds so far."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt, usage.ru_utime, usage.ru_stime


def _run(records_path: str, release: bool, steps: int, overrides: dict, out) -> None:
    """In a child process: train ``steps`` optimiser steps, report memory, time, and per
    optimiser step after the first (which warms up) minor page faults and CPU seconds.
    ``release`` False: the project's release does nothing; ``overrides``: SFT parameters
    over the ones below (``freed_memory``, ``gradient_checkpointing``)."""
    import resource

    from _sft_clock import median_gap, sft_step_stamps

    from leap_kalm.llm.models import load_model
    from leap_kalm.training import memory
    from leap_kalm.training.sft import SFTParams

    if not release:
        memory._malloc_trim = lambda: None  # the project's release does nothing
    rows = [json.loads(line) for line in open(records_path, encoding="utf-8")]
    records = [r for r in rows if r.get("split", "train") == "train"]
    between: list[float] = []  # read after the project's callbacks: RSS after the release
    usage: list[tuple[float, float, float]] = []
    model, tokenizer = load_model("smollm2-135m-instruct", device="cpu", trainable=True)
    params = SFTParams.from_dict(
        {
            "max_steps": steps,
            "learning_rate": 1e-4,
            "max_length": 4096,
            "logging_steps": steps,
            "lora": {"r": 0},
            "per_device_train_batch_size": 1,
            "gradient_accumulation_steps": 4,
            "gradient_checkpointing": False,
            "freed_memory": "release",
            **overrides,
        }
    )

    def on_step() -> None:
        between.append(_rss_gb())
        usage.append(_usage())

    stamps = sft_step_stamps(model, tokenizer, records, params, on_step)
    n = max(len(usage) - 1, 1)
    faults, user, system = (
        (last - first) / n for first, last in zip(usage[0], usage[-1], strict=True)
    )
    out.put(
        {
            "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2,
            "between_gb": between,
            "after_gb": _rss_gb(),
            "seconds": median_gap(stamps),
            "records": len(records),
            "faults_per_step": faults,
            "user_s_per_step": user,
            "system_s_per_step": system,
        }
    )


Setting = tuple[str, bool, dict[str, str], dict]


def settings(onednn_cache: list[int] | None) -> list[Setting]:
    """(label, per-step release, environment of the child, SFT overrides) per setting."""
    if onednn_cache:
        return [
            (
                f"oneDNN cache {n}" + (" (oneDNN's default)" if n == 1024 else ""),
                True,
                {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": str(n)},
                {"freed_memory": "keep"},
            )
            for n in onednn_cache
        ]
    return [
        ("release after each step: no", False, {}, {}),
        ("release after each step: yes", True, {}, {}),
    ]


def run(records_path: Path, setting: Setting, steps: int) -> dict:
    from _child import in_child

    label, release, env, overrides = setting
    return in_child(_run, str(records_path), release, steps, overrides, label=label, env=env)


def main() -> None:
    from _sft_clock import iteration0_sft_records

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="webshop", choices=("alfworld", "webshop"))
    parser.add_argument("--data-root", type=Path, default=Path("data"))
    parser.add_argument("--steps", type=int, default=12, help="optimiser steps per setting")
    parser.add_argument(
        "--onednn-cache",
        type=int,
        nargs="+",
        metavar="N",
        help="compare these oneDNN primitive cache capacities instead of the release",
    )
    args = parser.parse_args()
    if args.onednn_cache and min(args.onednn_cache) < 0:
        raise SystemExit("--onednn-cache: capacities are 0 or more")
    records = iteration0_sft_records(args.data_root, args.env)
    from leap_kalm.llm.models import cpu_has_native_bf16

    results = {}
    for setting in settings(args.onednn_cache):
        results[setting[0]] = run(records, setting, args.steps)
        print(f"{setting[0]}: {results[setting[0]]}", flush=True)
    title = (
        "oneDNN's primitive cache"
        if args.onednn_cache
        else "giving freed memory back after every step"
    )
    lines = [
        f"# SFT memory ({args.env}): {title}",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {platform.libc_ver()[0]} "
        f"{platform.libc_ver()[1]}, native bf16 {cpu_has_native_bf16()} (bf16 autocast where "
        "true); SmolLM2-135M-Instruct, full fine-tuning without gradient "
        f"checkpointing, one episode per forward, 4 accumulated; the first {args.steps} "
        f"optimiser steps over `{records}` ({next(iter(results.values()))['records']} train "
        "records), each setting in its own process.",
        "",
        "| setting | peak RSS (GB) | RSS between steps: first / last / max (GB) "
        "| RSS after training (GB) | s/step (median) |",
        "|---|---|---|---|---|",
    ]
    for label, r in results.items():
        b = r["between_gb"]
        lines.append(
            f"| {label} | {r['peak_gb']:.1f} | "
            f"{b[0]:.1f} / {b[-1]:.1f} / {max(b):.1f} | {r['after_gb']:.1f} | {r['seconds']:.1f} |"
        )
    lines += [
        "",
        "RSS between steps is read after the step's release (where on); the peak includes "
        "each step's own activations, which no release can lower.",
    ]
    from _report import write_report

    write_report(f"sft_memory_{args.env}" + ("_onednn" if args.onednn_cache else ""), lines)


if __name__ == "__main__":
    main()

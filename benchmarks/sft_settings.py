"""Benchmark: what an SFT step on whole episodes costs, by chat format and gradient checkpointing.

On whole-episode chats (the ``conversation`` formats) a step's time grows faster than its
tokens: at 2-5k tokens the CPU's attention kernel, not the linear layers, is most of a
forward and backward. Two levers are measured side by side on the same episodes of a
data root's annotated expert logs (the ``annotate`` stage's output):

* ``conversation_compact`` against ``conversation``: an observation already shown in the
  episode (WebShop's results page on every ``< prev``) is written once, so the same
  supervised actions cost fewer and shorter sequences;
* gradient checkpointing on and off: off skips recomputing every layer's forward in the
  backward pass, and keeps all activations in memory.

Each setting trains in its own process (so its peak RSS is its own): SmolLM2-135M-Instruct,
full fine-tuning, one episode per forward, 4 accumulated, bf16 autocast where native,
completion-only scoring, as the learning profiles train. The sample takes every k-th
episode by length from the longest down, so the longest episode (the memory peak) is in
it. Settings alternate round by round; medians of seconds per optimiser step.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/sft_settings.py --env webshop --data-root data/learn

Writes benchmarks/results/sft_settings_<env>.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

SETTINGS = (
    ("conversation", True),
    ("conversation", False),
    ("conversation_compact", True),
    ("conversation_compact", False),
)


def annotated_logs(env: str, data_root: Path) -> list[dict]:
    path = data_root / f"03_primary/{env}/annotated_logs.jsonl"
    if not path.exists():
        raise SystemExit(
            f"need {path}: run `kedro run --pipeline=annotate --namespaces={env}` for that data root"
        )
    return [json.loads(line) for line in path.open(encoding="utf-8")]


def sample_episodes(logs: list[dict], tokenizer, n: int) -> list[dict]:
    """``n`` logs, every k-th by length (in ``conversation`` tokens) from the longest down."""
    from leap_kalm.llm.records import sft_records
    from leap_kalm.training.sft import tokenize_conversation

    logs = [log for log in logs if log["steps"]]
    env = logs[0]["env"]
    lengths = [
        len(tokenize_conversation(tokenizer, r["messages"], r["loss_turns"])["input_ids"])
        for r in sft_records("conversation", env, None, logs)
    ]
    ranked = [log for _, log in sorted(zip(lengths, range(len(logs)), strict=True), reverse=True)]
    return [logs[i] for i in ranked[:: max(1, len(ranked) // n)][:n]]


def _time_setting(fmt: str, checkpointing: bool, logs: list[dict], steps: int, out) -> None:
    """In a child process: seconds per optimiser step and peak RSS of one setting."""
    import resource

    from _sft_clock import median_sft_step

    from leap_kalm.llm.models import load_model
    from leap_kalm.llm.records import sft_records
    from leap_kalm.training.sft import SFTParams, tokenize_conversation

    model, tokenizer = load_model("smollm2-135m-instruct", device="cpu", trainable=True)
    records = sft_records(fmt, logs[0]["env"], None, logs)
    tokens = sum(
        len(tokenize_conversation(tokenizer, r["messages"], r["loss_turns"])["input_ids"])
        for r in records
    )
    params = SFTParams.from_dict(
        {
            "max_steps": steps,
            "learning_rate": 1e-4,
            "max_length": 8192,
            "logging_steps": steps,
            "lora": {"r": 0},
            "per_device_train_batch_size": 1,
            "gradient_accumulation_steps": 4,
            "gradient_checkpointing": checkpointing,
        }
    )
    seconds = median_sft_step(model, tokenizer, records, params)
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    out.put({"seconds": seconds, "peak_gb": peak_gb, "tokens": tokens})


def time_setting(fmt: str, checkpointing: bool, logs: list[dict], steps: int) -> dict:
    from _child import in_child

    return in_child(
        _time_setting,
        fmt,
        checkpointing,
        logs,
        steps,
        label=f"{fmt}, checkpointing {checkpointing}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="webshop", choices=("alfworld", "webshop"))
    parser.add_argument("--data-root", type=Path, default=Path("data"))
    parser.add_argument(
        "--steps", type=int, default=4, help="optimiser steps per setting and round"
    )
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    args = parser.parse_args()

    from leap_kalm.llm.models import cpu_has_native_bf16, load_model

    logs = annotated_logs(args.env, args.data_root)
    _, tokenizer = load_model("smollm2-135m-instruct")
    sample = sample_episodes(logs, tokenizer, 4 * args.steps)
    actions = sum(len(log["steps"]) for log in sample)
    runs: dict[tuple[str, bool], list[dict]] = {setting: [] for setting in SETTINGS}
    for _ in range(args.rounds):
        for fmt, checkpointing in SETTINGS:
            result = time_setting(fmt, checkpointing, sample, args.steps)
            runs[(fmt, checkpointing)].append(result)
            print(f"{fmt}, checkpointing {checkpointing}: {result}", flush=True)
    base = statistics.median(r["seconds"] for r in runs[SETTINGS[0]])
    lines = [
        f"# SFT on whole episodes ({args.env}): chat format and gradient checkpointing",
        "",
        f"Machine: {platform.processor() or platform.machine()}, native bf16: "
        f"{cpu_has_native_bf16()}; SmolLM2-135M-Instruct, full fine-tuning, one episode per "
        f"forward, 4 accumulated; {args.rounds} alternating rounds of {args.steps} steps "
        "(first dropped), each setting in its own process; medians.",
        f"Data: {len(sample)} of {len(logs)} annotated expert logs from `{args.data_root}` "
        f"(every k-th by length from the longest), {actions} supervised actions.",
        "",
        "| format | gradient checkpointing | tokens (all episodes) | s/step | episode tokens/s "
        "| supervised actions/s | vs conversation with checkpointing | peak RSS (GB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for fmt, checkpointing in SETTINGS:
        done = runs[(fmt, checkpointing)]
        seconds = statistics.median(r["seconds"] for r in done)
        tokens = done[0]["tokens"]
        per_step = len(sample) / (args.steps)  # episodes per optimiser step, averaged
        lines.append(
            f"| {fmt} | {'on' if checkpointing else 'off'} | {tokens} | {seconds:.1f} | "
            f"{tokens / per_step / seconds:.0f} | {actions / per_step / seconds:.2f} | "
            f"{base / seconds:.2f}x | {max(r['peak_gb'] for r in done):.1f} |"
        )
    lines += [
        "",
        "Tokens per second count each setting's own episode tokens (fewer for the compact "
        "format); supervised actions per second compare the settings on the same actions.",
    ]
    from _report import write_report

    write_report(f"sft_settings_{args.env}", lines)


if __name__ == "__main__":
    main()

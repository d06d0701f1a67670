"""Benchmark: what one supervised action costs, LEAP's per-step prompt vs the episode as a chat.

Both formats are built from the same annotated expert logs (the ``annotate`` stage's
output of a data root): ``leap`` makes one record per step (task, a window of earlier
steps, the observation and the candidate list; loss on the answer), ``conversation``
one record per trajectory (observations as user turns, answers as assistant turns; loss
on every answer), ``conversation_places`` the same with each observation followed by the
places not visited yet. Reported side by side, in one run:

* tokens per supervised action (every token a training step encodes, over the actions
  it supervises), counted with the student's own tokenizer and chat template;
* supervised actions per second of SFT (4 records per optimiser step, each format with
  its profile's batching: per-step records 4 to a forward, episodes 1 to a forward with 4
  accumulated and gradient checkpointing; full fine-tuning, bf16 autocast where native,
  completion-only scoring), the formats
  alternating round by round so both see the same machine load; medians.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/supervision_format.py --data-root data/learn

Writes benchmarks/results/supervision_format.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
from pathlib import Path


def annotated_logs(data_root: Path) -> list[dict]:
    path = data_root / "03_primary/alfworld/annotated_logs.jsonl"
    if not path.exists():
        raise SystemExit(f"need {path}: run `kedro run --pipeline=annotate` for that data root")
    return [json.loads(line) for line in path.open(encoding="utf-8")]


def records_of(fmt: str, logs: list[dict]) -> list[dict]:
    from leap_kalm.llm.records import sft_records

    return sft_records(fmt, "alfworld", 2 if fmt == "leap" else None, logs)


def count_tokens(fmt: str, records: list[dict], tokenizer) -> tuple[int, int]:
    """``(tokens encoded, actions supervised)`` over all records."""
    from leap_kalm.training.sft import tokenize_conversation

    tokens = actions = 0
    from leap_kalm.llm.prompts import CONVERSATION_FORMATS

    for record in records:
        if fmt in CONVERSATION_FORMATS:
            row = tokenize_conversation(tokenizer, record["messages"], record["loss_turns"])
            tokens, actions = tokens + len(row["input_ids"]), actions + len(record["loss_turns"])
        else:
            text = tokenizer.apply_chat_template(
                record["prompt"] + record["completion"], tokenize=False
            )
            tokens += len(tokenizer(text, add_special_tokens=False)["input_ids"])
            actions += 1
    return tokens, actions


def step_settings(fmt: str) -> dict:
    """Four records per optimiser step, as each format trains in its profile: per-step
    records (~380 tokens) four to a forward; whole episodes (0.5-2.7k tokens) one to a
    forward with four accumulated and gradient checkpointing (``conf/base/parameters_train_sft.yml``:
    four episodes to a forward ran out of 24 GB)."""
    from leap_kalm.llm.prompts import CONVERSATION_FORMATS

    if fmt in CONVERSATION_FORMATS:
        return {
            "per_device_train_batch_size": 1,
            "gradient_accumulation_steps": 4,
            "gradient_checkpointing": True,
        }
    return {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 1}


def time_sft(fmt: str, records: list[dict], steps: int) -> float:
    """Median seconds per optimiser step (the first, warming up, is dropped)."""
    from _sft_clock import median_sft_step

    from leap_kalm.llm.models import load_model
    from leap_kalm.training.sft import SFTParams

    model, tokenizer = load_model("smollm2-135m-instruct", device="cpu", trainable=True)
    params = SFTParams.from_dict(
        {
            "max_steps": steps,
            "learning_rate": 1e-4,
            "max_length": 3072,
            "logging_steps": steps,
            "lora": {"r": 0},
            **step_settings(fmt),
        }
    )
    return median_sft_step(model, tokenizer, records, params)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", type=Path, default=Path("data"))
    parser.add_argument("--steps", type=int, default=6, help="SFT steps per format and round")
    parser.add_argument(
        "--rounds", type=int, default=2, help="alternating rounds (0: count tokens only)"
    )
    args = parser.parse_args()

    from leap_kalm.llm.models import cpu_has_native_bf16, load_model

    logs = annotated_logs(args.data_root)
    _, tokenizer = load_model("smollm2-135m-instruct")
    formats = ("leap", "conversation", "conversation_places")
    records = {fmt: records_of(fmt, logs) for fmt in formats}
    counts = {fmt: count_tokens(fmt, records[fmt], tokenizer) for fmt in formats}
    per_record = {fmt: counts[fmt][1] / len(records[fmt]) for fmt in formats}
    seconds: dict[str, list[float]] = {fmt: [] for fmt in formats}
    for _ in range(args.rounds):
        for fmt in formats:
            sample = records[fmt][:: max(1, len(records[fmt]) // (4 * args.steps))]
            seconds[fmt].append(time_sft(fmt, sample[: 4 * args.steps], args.steps))
            print(f"{fmt}: {seconds[fmt][-1]:.2f} s/step", flush=True)
    step = {
        fmt: statistics.median(seconds[fmt]) if seconds[fmt] else float("nan") for fmt in formats
    }
    rate = {fmt: 4 * per_record[fmt] / step[fmt] for fmt in formats}
    lines = [
        "# Supervision format: LEAP's per-step prompt vs the episode as one chat",
        "",
        f"Machine: {platform.processor() or platform.machine()}, native bf16: "
        f"{cpu_has_native_bf16()}; SmolLM2-135M-Instruct, full fine-tuning, 4 records per "
        "optimiser step (per-step records 4 to a forward; episodes 1 to a forward, 4 "
        "accumulated, gradient checkpointing), "
        f"{args.rounds} alternating rounds of {args.steps} steps (first dropped); medians.",
        f"Data: {len(logs)} annotated expert logs from `{args.data_root}`.",
        "",
        "| format | records | supervised actions | tokens per supervised action | s/step | supervised actions/s |",
        "|---|---|---|---|---|---|",
    ]
    for fmt in formats:
        tokens, actions = counts[fmt]
        lines.append(
            f"| {fmt} | {len(records[fmt])} | {actions} | {tokens / actions:.0f} | "
            + (
                f"{step[fmt]:.2f} | {rate[fmt]:.2f} |"
                if seconds[fmt]
                else "not timed | not timed |"
            )
        )
    per_action = {fmt: counts[fmt][0] / counts[fmt][1] for fmt in formats}
    lines.append("")
    for fmt in formats[1:]:
        speed = (
            f", {rate[fmt] / rate['leap']:.1f}x more supervised actions per second"
            if args.rounds
            else " (training speed not timed: --rounds 0)"
        )
        lines.append(
            f"- {fmt} vs per-step: {per_action['leap'] / per_action[fmt]:.1f}x fewer tokens "
            f"per supervised action{speed}."
        )
    from _report import write_report

    write_report("supervision_format", lines)


if __name__ == "__main__":
    main()

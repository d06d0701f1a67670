"""Benchmark: what a corrected trajectory costs to train, a chat per correction vs one chat with branches.

Both layouts are built from the same teacher corrections of one LEAP iteration (the
``correct`` stage's output of a data root) and train the same answers in the same
contexts (``tests/training/test_sft.py`` checks that the losses agree):

* ``segments``: one chat per correction, each re-encoding the trajectory up to it (today's
  default; ``leap.trained_corrections`` caps how many, because the cost grows with the
  square of the trajectory);
* ``branches``: one chat per trajectory, each corrected answer a branch off the chat before
  it under a 4-D attention mask (``leap.correction_packing: branches``).

Reported side by side, in one run, for ``trained_steps`` trajectory and corrected, every
correction and the first three:

* tokens encoded per supervised action, with the student's own tokenizer and template;
* with ``--rounds`` > 0, seconds of full-fine-tuning SFT per supervised action on the same
  ``--trajectories`` corrected trajectories (one record per optimiser step, the learn
  profile's precision and no gradient checkpointing; after a one-step warm-up, from the
  trainer's set-up, which both layouts pay alike, to the last step), the layouts
  alternating round by round; medians.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/correction_packing.py --data-root data/learn --iteration 1

Writes benchmarks/results/correction_packing.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

VARIANTS = [
    (steps, cap, packing)
    for steps in ("trajectory", "corrected")
    for cap in (None, 3)
    for packing in ("segments", "branches")
]


def load_corrections(data_root: Path, iteration: int) -> tuple[list[dict], list[dict]]:
    """The iteration's rollouts and the teacher's corrections of them."""
    folder = data_root / f"07_model_output/alfworld/iter{iteration}"
    out = []
    for name in ("rollouts.jsonl", "corrections.jsonl"):
        path = folder / name
        rows = [json.loads(line) for line in path.open(encoding="utf-8")] if path.exists() else []
        if not rows:
            raise SystemExit(
                f"need {path}: run `kedro run --env learn --pipeline=leap_iter_alfworld "
                f"--params leap_iteration={iteration}` for that data root first"
            )
        out.append(rows)
    return out[0], out[1]


def records_of(rollouts, corrections, steps, cap, packing) -> list[dict]:
    from leap_kalm.llm.records import sft_records

    return sft_records("conversation", "alfworld", None, rollouts, corrections, steps, cap, packing)


def count(records: list[dict], tokenizer) -> tuple[int, int]:
    """``(tokens encoded, actions supervised)`` over all records."""
    from leap_kalm.llm.records import supervised_actions
    from leap_kalm.training.sft import tokenize_branched

    tokens = actions = 0
    for r in records:
        row = tokenize_branched(tokenizer, r["messages"], r["loss_turns"], r.get("branches"))
        tokens, actions = tokens + len(row["input_ids"]), actions + supervised_actions(r)
    return tokens, actions


def seconds_per_action(records: list[dict]) -> float:
    """Seconds of SFT per supervised action over ``records[1:]`` (one record per step)."""
    from _sft_clock import sft_step_stamps

    from leap_kalm.llm.models import load_model
    from leap_kalm.llm.records import supervised_actions
    from leap_kalm.training.sft import SFTParams

    model, tokenizer = load_model("smollm2-135m-instruct", device="cpu", trainable=True)
    params = SFTParams.from_dict(
        {
            "max_steps": len(records),
            "learning_rate": 1e-4,
            "max_length": 3072,
            "logging_steps": len(records),
            "per_device_train_batch_size": 1,
            "gradient_accumulation_steps": 1,
            "gradient_checkpointing": False,
            "lora": {"r": 0},
        }
    )
    sft_step_stamps(model, tokenizer, records[:1], params)  # warm-up: kernels, allocator
    start = time.perf_counter()
    stamps = sft_step_stamps(model, tokenizer, records, params)
    # from the call (trainer set-up included, the same for both layouts) to the last step:
    # every record is trained once, in the trainer's shuffled order
    return (stamps[-1] - start) / sum(map(supervised_actions, records))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", type=Path, default=Path("data/learn"))
    parser.add_argument("--iteration", type=int, default=1)
    parser.add_argument("--trajectories", type=int, default=8, help="corrected trajectories timed")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds (0: tokens only)")
    args = parser.parse_args()

    from leap_kalm.llm.models import cpu_has_native_bf16, load_model

    rollouts, corrections = load_corrections(args.data_root, args.iteration)
    _, tokenizer = load_model("smollm2-135m-instruct")
    counts = {v: count(records_of(rollouts, corrections, *v), tokenizer) for v in VARIANTS}
    n_corrected = sum(s["is_corrected"] for c in corrections for s in c["steps"])
    lines = [
        "# Corrections as SFT chats: a chat per correction (segments) vs one chat with branches",
        "",
        f"Machine: {platform.processor() or platform.machine()}, native bf16: "
        f"{cpu_has_native_bf16()}; SmolLM2-135M-Instruct's tokenizer and chat template.",
        f"Data: iteration {args.iteration}'s {len(corrections)} corrected rollouts "
        f"({n_corrected} corrected steps) from `{args.data_root}`.",
        "",
        "| trained_steps | trained_corrections | packing | supervised actions | tokens encoded | tokens per supervised action |",
        "|---|---|---|---|---|---|",
    ]
    for steps, cap, packing in VARIANTS:
        tokens, actions = counts[(steps, cap, packing)]
        lines.append(
            f"| {steps} | {cap or 'every'} | {packing} | {actions} | {tokens:,} | "
            f"{tokens / max(actions, 1):.0f} |"
        )
    lines.append("")
    for steps in ("trajectory", "corrected"):
        for cap in (None, 3):
            seg, br = counts[(steps, cap, "segments")], counts[(steps, cap, "branches")]
            assert seg[1] == br[1], "both layouts must supervise the same actions"
            lines.append(
                f"- {steps}, {cap or 'every'} correction(s): branches encode "
                f"{seg[0] / br[0]:.1f}x fewer tokens for the same {br[1]} actions."
            )
    if args.rounds:
        ids = [c["game_id"] for c in corrections if any(s["is_corrected"] for s in c["steps"])]
        sample = [c for c in corrections if c["game_id"] in set(ids[: args.trajectories])]
        timed = {
            p: records_of(rollouts, sample, "corrected", None, p) for p in ("segments", "branches")
        }
        seconds: dict[str, list[float]] = {p: [] for p in timed}
        for _ in range(args.rounds):
            for packing, records in timed.items():
                seconds[packing].append(seconds_per_action(records))
                print(f"{packing}: {seconds[packing][-1]:.2f} s per action", flush=True)
        med = {p: statistics.median(s) for p, s in seconds.items()}
        lines += [
            "",
            f"SFT on {len(sample)} corrected trajectories (trained_steps corrected, every "
            f"correction: {len(timed['segments'])} segment records, {len(timed['branches'])} "
            f"branched), one record per step, {args.rounds} alternating round(s); medians:",
            "",
            "| packing | records | s per supervised action |",
            "|---|---|---|",
            *(f"| {p} | {len(timed[p])} | {med[p]:.2f} |" for p in timed),
            "",
            f"- branches train a supervised correction {med['segments'] / med['branches']:.1f}x "
            "faster than segments.",
        ]
    from _report import write_report

    write_report("correction_packing", lines)


if __name__ == "__main__":
    main()

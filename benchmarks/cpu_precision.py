"""Benchmark: what makes the embedded student fast on a CPU, each switch side by side.

Training: LoRA SFT steps of SmolLM2 on real ALFWorld records (annotated expert logs,
history window 2, batch 4), with the speed-ups switched on one at a time:

  A. fp32, LoRA dropout 0.05, trl scoring every position (the defaults before)
  B. A + bf16 autocast
  C. B + LoRA dropout 0
  D. C + completion-only scoring (the defaults now)

Generation: one batched student step (12 episodes, prefill + greedy answer), fp32 weights
vs bf16 weights, with how often the two pick the same action.

Variants alternate round by round, so all see the same machine load; the report gives
medians. bf16 only pays off on CPUs that do it natively (AMX/AVX512-BF16); the report
says which CPU it ran on.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/cpu_precision.py   # after `kedro run --pipeline=ingest`

Writes benchmarks/results/cpu_precision.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

VARIANTS = {
    "A fp32, dropout 0.05, all positions scored": {
        "bf16": False,
        "dropout": 0.05,
        "compact": False,
    },
    "B + bf16 autocast": {"bf16": True, "dropout": 0.05, "compact": False},
    "C + LoRA dropout 0": {"bf16": True, "dropout": 0.0, "compact": False},
    "D + completion-only scoring (default)": {"bf16": True, "dropout": 0.0, "compact": True},
}


def sft_records(n: int) -> list[dict]:
    from leap_kalm.llm.records import sft_records_from_trajectories
    from leap_kalm.teachers.alfworld import ScriptedAlfWorldTeacher

    logs_path = ROOT / "data/02_intermediate/alfworld/expert_logs.jsonl"
    states_path = ROOT / "data/03_primary/alfworld/privileged_states.jsonl"
    if not logs_path.exists() or not states_path.exists():
        raise SystemExit(
            f"need {logs_path} and {states_path}: run `kedro run --pipeline=ingest` first"
        )
    states = {}
    for line in states_path.open():
        row = json.loads(line)
        states[row["game_id"]] = row
    teacher = ScriptedAlfWorldTeacher()
    trajectories = []
    for line in logs_path.open():
        log = json.loads(line)
        reasons = teacher.annotate(log, states[log["game_id"]])
        log["steps"] = [{**s, "reason": r} for s, r in zip(log["steps"], reasons, strict=True)]
        trajectories.append(log)
    records = sft_records_from_trajectories(trajectories, "alfworld", history_window=2)
    return records[:: max(1, len(records) // n)][:n]


def time_sft(records: list[dict], variant: dict, steps: int) -> float:
    """Median seconds per optimiser step (the first step, which warms up, is dropped)."""
    from _sft_clock import median_sft_step

    from leap_kalm.llm.models import load_model
    from leap_kalm.training.sft import SFTParams

    model, tokenizer = load_model("smollm2-135m-instruct", device="cpu", trainable=True)
    params = SFTParams.from_dict(
        {
            "max_steps": steps,
            "learning_rate": 5e-4,
            "per_device_train_batch_size": 4,
            "logging_steps": steps,
            "bf16": variant["bf16"],
            "completion_only_scoring": variant["compact"],
            "lora": {"r": 16, "alpha": 32, "dropout": variant["dropout"]},
        }
    )
    return median_sft_step(model, tokenizer, records, params)


def time_generation(records: list[dict], dtype: str, rounds: int) -> tuple[float, list[str]]:
    import torch

    from leap_kalm.llm.generation import EpisodeGenerator, SamplingParams
    from leap_kalm.llm.models import load_model

    model, tokenizer = load_model("smollm2-135m-instruct", device="cpu", dtype=dtype)
    prompts = [
        tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True)
        for r in records[:12]
    ]
    times, outputs = [], []
    for i in range(rounds):
        gen = EpisodeGenerator(model, tokenizer, SamplingParams(max_new_tokens=48, temperature=0.0))
        start = time.perf_counter()
        with torch.inference_mode():
            outputs = gen.generate(prompts, [f"ep{i}-{k}" for k in range(len(prompts))])
        times.append(time.perf_counter() - start)
    return statistics.median(times), outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=7, help="SFT steps per variant and round")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    args = parser.parse_args()

    from leap_kalm.llm.models import cpu_has_native_bf16
    from leap_kalm.llm.parsing import split_answer

    records = sft_records(4 * args.steps)
    sft: dict[str, list[float]] = {name: [] for name in VARIANTS}
    gen: dict[str, list[float]] = {"float32": [], "bfloat16": []}
    answers: dict[str, list[str]] = {}
    for _ in range(args.rounds):
        for name, variant in VARIANTS.items():
            sft[name].append(time_sft(records, variant, args.steps))
            print(f"{name}: {sft[name][-1]:.2f} s/step", flush=True)
        for dtype in gen:
            seconds, answers[dtype] = time_generation(records, dtype, 2)
            gen[dtype].append(seconds)
            print(f"generation {dtype}: {seconds:.2f} s/batched step", flush=True)

    base = statistics.median(sft[next(iter(VARIANTS))])
    same = sum(
        split_answer(a)[1] == split_answer(b)[1]
        for a, b in zip(answers["float32"], answers["bfloat16"], strict=True)
    )
    cpu = platform.processor() or platform.machine()
    lines = [
        "# CPU precision and training switches (SmolLM2-135M-Instruct)",
        "",
        f"Machine: {cpu}, native bf16: {cpu_has_native_bf16()}; OMP threads as run. "
        f"{args.rounds} alternating rounds; medians.",
        "",
        f"## LoRA SFT step (batch 4, real ALFWorld records, history window 2; {args.steps} steps per run, first dropped)",
        "",
        "| variant | s/step | speed-up vs A |",
        "|---|---|---|",
    ]
    for name in VARIANTS:
        median = statistics.median(sft[name])
        lines.append(f"| {name} | {median:.2f} | {base / median:.2f}x |")
    g32, g16 = statistics.median(gen["float32"]), statistics.median(gen["bfloat16"])
    lines += [
        "",
        "## One batched student step (12 episodes: prefill + greedy answer, up to 48 new tokens)",
        "",
        "| weights | s/step |",
        "|---|---|",
        f"| float32 | {g32:.2f} |",
        f"| bfloat16 | {g16:.2f} ({g32 / g16:.2f}x) |",
        "",
        f"Same action chosen by fp32 and bf16: {same} of {len(answers['float32'])} episodes.",
        "",
        "Completion-only scoring gives the same loss and gradients as scoring every position",
        "(`tests/training/test_sft.py::test_completion_only_scoring_gives_the_same_loss_and_gradients`).",
    ]
    from _report import write_report

    write_report("cpu_precision", lines)


if __name__ == "__main__":
    main()

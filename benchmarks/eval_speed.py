"""Benchmark: evaluation speed of the rollout engine vs LEAP's way, factor by factor.

The same held-out games (ALFWorld, or WebShop goals with ``--env webshop``) are played end
to end (environment steps included) by the same student, greedily, in set-ups that add
one factor at a time:

1. LEAP's way: one episode at a time, the whole prompt re-encoded every step, fp32;
2. + batching: ``--batch`` episodes decoded together (still re-encoding, fp32);
3. + cache: each episode's KV cache reused, new tokens prefilled in one padded forward;
4. + bf16: the student's weights in bf16 (where the CPU computes bf16 natively);
5. + per-episode prefill: each episode's new tokens in a forward of their own (no
   padding to the batch's longest), the default since the seventeenth session;
6. + finished rows leave the batch: while decoding, the rows whose answer is complete
   are dropped once they are a quarter of the batch (``compact_after: 0.25``), the
   default since the twenty-third session. Set-ups 1-5 decode every row to the end.

``--setups 4,5`` runs a subset (numbers as above; ratios then compare neighbours).

Set-ups run in alternating rounds so that all see the same machine load; the report gives
episode-steps/s and episodes/s (medians over rounds), each factor's ratio, and how many
actions agree with set-up 1 (fp32 set-ups should agree exactly; bf16 may drift).

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/eval_speed.py \
        --student data/learn/06_models/alfworld/iter0/student_sft/<version>/student_sft \
        --games data/learn/01_raw/alfworld/games_index.json
    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/eval_speed.py --env webshop --split test \
        --student data/learn/06_models/webshop/iter0/student_sft/<version>/student_sft \
        --games data/learn/01_raw/webshop/games_index.json --max-steps 15 --max-new-tokens 96 \
        --batch 20 --episodes 40 --setups 5,6

Writes benchmarks/results/eval_speed.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from leap_kalm.envs.registry import episode_specs
from leap_kalm.llm.agent import StudentPolicy, StudentSettings, roll_out
from leap_kalm.llm.generation import EpisodeGenerator, SamplingParams
from leap_kalm.llm.models import load_model

SETUPS = [
    # label, batched, reuse cache, dtype, prefill, compact_after
    ("LEAP's way: one episode, re-encode, fp32", False, False, "float32", "batch", 0.0),
    ("+ batching", True, False, "float32", "batch", 0.0),
    ("+ KV cache, batched prefill", True, True, "float32", "batch", 0.0),
    ("+ bf16 weights", True, True, "bfloat16", "batch", 0.0),
    ("+ per-episode prefill", True, True, "bfloat16", "episode", 0.0),
    ("+ finished rows leave the batch", True, True, "bfloat16", "episode", 0.25),
]


def load_games(env: str, path: Path, split: str, n: int, max_steps: int) -> list:
    if not path.exists():
        raise SystemExit(f"{path} does not exist; run `kedro run --pipeline=ingest` first")
    index = json.loads(path.read_text())
    games = index["games"] if isinstance(index, dict) else index
    specs = episode_specs(env, games, split, max_steps)[:n]
    if len(specs) < n:
        raise SystemExit(f"{path}: only {len(specs)} {split} games, asked for {n}")
    return specs


def one_pass(models: dict, specs: list, setup: tuple, batch: int, args: argparse.Namespace) -> dict:
    label, batched, reuse, dtype, prefill, compact_after = setup
    max_steps, fmt = args.max_steps, args.prompt_format
    model, tokenizer = models[dtype]
    size = batch if batched else 1
    generator = EpisodeGenerator(
        model,
        tokenizer,
        SamplingParams(max_new_tokens=args.max_new_tokens, temperature=0.0),
        reuse_cache=reuse,
        max_batch=size,
        prefill=prefill,
        compact_after=compact_after,
    )
    settings = StudentSettings(
        args.env, None, max_steps, size, prompt_format=fmt, action_selection="generate"
    )
    policy = StudentPolicy(generator, settings, "benchmark")
    start = time.perf_counter()
    trajectories = sorted(roll_out(specs, policy, args.env), key=lambda t: t["game_id"])
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "steps": sum(len(t["steps"]) for t in trajectories),
        "won": sum(bool(t["success"]) for t in trajectories),
        "score": sum(t.get("score") or 0.0 for t in trajectories),
        "actions": [[s["action"] for s in t["steps"]] for t in trajectories],
        "encoded": generator.stats.encoded_tokens,
        "prompt": generator.stats.prompt_tokens,
        "row_steps": generator.stats.decoded_row_steps,
        "generated": generator.stats.generated_tokens,
    }


def agreement(actions: list, reference: list) -> float:
    pairs = [
        (a, b) for x, y in zip(actions, reference, strict=True) for a, b in zip(x, y, strict=False)
    ]
    return sum(a == b for a, b in pairs) / len(pairs) if pairs else 1.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", default="alfworld", choices=["alfworld", "webshop"])
    parser.add_argument("--student", default="smollm2-135m-instruct")
    parser.add_argument("--games", default="data/01_raw/alfworld/games_index.json")
    parser.add_argument("--split", default="valid_unseen")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument(
        "--batch",
        default="8",
        help="episodes decoded together; a comma list (e.g. 20,40,60) runs every set-up at each",
    )
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--prompt-format", default="conversation")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--setups", default="1,2,3,4,5,6", help="which set-ups, by number")
    parser.add_argument("--report", default="eval_speed", help="report name in benchmarks/results")
    args = parser.parse_args()
    setups = [SETUPS[int(i) - 1] for i in args.setups.split(",")]
    batches = [int(b) for b in args.batch.split(",")]
    if any(b < 1 for b in batches):
        raise SystemExit(f"--batch: every size must be at least 1, got {args.batch}")
    runs_of = [(s, b) for s in setups for b in batches if s[1] or b == batches[0]]
    specs = load_games(args.env, Path(args.games), args.split, args.episodes, args.max_steps)
    models = {}
    for dtype in sorted({s[3] for s in setups}):
        model, tokenizer = load_model(args.student, device="cpu", dtype=dtype)
        model.requires_grad_(False)
        models[dtype] = (model, tokenizer)

    def name(setup: tuple, batch: int) -> str:
        return setup[0] if len(batches) == 1 or not setup[1] else f"{setup[0]}, batch {batch}"

    runs: dict[str, list[dict]] = {name(s, b): [] for s, b in runs_of}
    for _ in range(args.rounds):
        for setup, batch in runs_of:
            label = name(setup, batch)
            runs[label].append(one_pass(models, specs, setup, batch, args))
            print(label, round(runs[label][-1]["seconds"], 1), "s", flush=True)
    reference = next(iter(runs.values()))[0]
    lines = [
        f"# Evaluation speed ({args.env}): the rollout engine vs LEAP's way",
        "",
        f"Student `{args.student}`, {args.episodes} `{args.split}` games played to the end or "
        f"{args.max_steps} steps, greedy, `{args.prompt_format}` prompts, {args.max_new_tokens} "
        f"new tokens at most; batch {args.batch}; set-ups alternated, medians of {args.rounds} "
        "round(s).",
        "",
        "| set-up | wall s | episode-steps | steps/s | episodes/s | tokens encoded | decoding rows computed (tokens kept) | vs previous | vs first | actions as the first | won | score |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    previous = None
    base = None
    for label in runs:
        r = runs[label][0]
        seconds = statistics.median(x["seconds"] for x in runs[label])
        rate = r["steps"] / seconds
        base = base or rate
        step_up = f"{rate / previous:.2f}×" if previous else ""
        lines.append(
            f"| {label} | {seconds:.1f} | {r['steps']} | {rate:.2f} | {args.episodes / seconds:.3f} | "
            f"{r['encoded']} of {r['prompt']} | {r['row_steps']} ({r['generated']}) | "
            f"{step_up} | {rate / base:.2f}× | "
            f"{agreement(r['actions'], reference['actions']):.0%} | {r['won']} | "
            f"{100 * r['score'] / args.episodes:.1f} |"
        )
        previous = rate
    lines += [
        "",
        "Ratios are of episode-steps/s, so that set-ups whose episodes end at different steps "
        "compare fairly; episodes/s is the direct figure.",
    ]
    from _report import write_report

    write_report(args.report, lines)


if __name__ == "__main__":
    main()

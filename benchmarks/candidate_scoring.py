"""Benchmark: scoring the admissible commands under the student (``action_selection: score``).

Replays ALFWorld annotated expert episodes as the student sees them in the conversation format (the
whole episode so far as one chat, growing every step) and, at several steps of each,
scores every admissible command after the expert's reason, two ways on the same cached
prompt:

- ``copy per candidate`` (the implementation before this benchmark): the prompt's cache
  expanded to one row per candidate, every candidate a row of its own;
- ``token tree`` (``EpisodeGenerator.score`` today): every candidate in one row as a
  token tree (shared prefixes computed once) with a 4-D mask over the cached prompt.

Passes alternate (copy, tree, copy, tree) so that both see the same machine load; the
report gives medians, their ratio, and the largest difference between the two scores of
any candidate (the same log-probabilities, computed differently).

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/candidate_scoring.py --logs data/learn/03_primary/alfworld/annotated_logs.jsonl

Writes benchmarks/results/candidate_scoring.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from leap_kalm.llm.generation import EpisodeGenerator, SamplingParams
from leap_kalm.llm.models import load_model
from leap_kalm.llm.prompts import student_messages


def load_cases(path: Path, episodes: int, at_steps: list[int]) -> list[dict]:
    """``(prompt messages, reason, candidates)`` at ``at_steps`` of the first ``episodes``
    expert logs long enough to have them."""
    if not path.exists():
        raise SystemExit(
            f"{path}: no annotated expert logs; run `kedro run --pipeline=annotate` first (or --env learn with --logs data/learn/...)"
        )
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    long_enough = [r for r in rows if len(r["steps"]) > max(at_steps)][:episodes]
    if len(long_enough) < episodes:
        raise SystemExit(f"{path}: need {episodes} expert logs with > {max(at_steps)} steps")
    cases = []
    for row in long_enough:
        for t in at_steps:
            step = row["steps"][t]
            cases.append(
                {
                    "key": f"{row['game_id']}@{t}",
                    "messages": student_messages(
                        "conversation",
                        "alfworld",
                        row["task"],
                        row["steps"][:t],
                        step["observation"],
                        step["candidate_actions"],
                    ),
                    "reason": step.get("reason", ""),
                    "candidates": step["candidate_actions"],
                }
            )
    return cases


def copy_per_candidate(
    gen: EpisodeGenerator, layers: list[Any], ids: list[int], tails: list[list[int]]
) -> list[float]:
    """The earlier way: the cached prompt expanded to one row per candidate."""
    import torch
    from transformers import DynamicCache

    cached = len(ids) - 1
    longest = max(len(t) for t in tails)
    rows = torch.tensor([[ids[-1], *t] + [t[-1]] * (longest - len(t)) for t in tails])
    positions = torch.arange(cached, cached + longest + 1)
    past = DynamicCache(
        ddp_cache_data=[
            (k.expand(len(tails), -1, -1, -1), v.expand(len(tails), -1, -1, -1)) for k, v in layers
        ]
    )
    with torch.no_grad():
        out = gen.model(
            input_ids=rows,
            position_ids=positions[None].expand(len(tails), -1),
            cache=past,
            use_cache=True,
        )
    logprobs = torch.log_softmax(out.logits[:, :-1].float(), dim=-1)
    picked = logprobs.gather(-1, rows[:, 1:, None])[..., 0]
    return [float(picked[i, : len(t)].sum()) for i, t in enumerate(tails)]


def one_pass(
    gen: EpisodeGenerator, cases: list[dict], way: str
) -> tuple[float, list[list[float]], int]:
    """Seconds spent scoring (prompts already cached), the scores, tokens in the trees."""
    seconds, scores, tree_tokens = 0.0, [], 0
    for case in cases:
        prompt = gen.chat_prompt(case["messages"]) + f"REASON:\n{case['reason']}\nACTION:\n"
        gen.score([prompt], [case["key"]], [case["candidates"][:1]])  # caches the prompt
        ids = gen.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        layers = gen._caches[case["key"]][1]
        tails = gen.continuation_ids(case["candidates"])
        tree_tokens += len({tuple(t[: j + 1]) for t in tails for j in range(len(t))})
        start = time.perf_counter()
        if way == "copy":
            scores.append(copy_per_candidate(gen, layers, ids, tails))
        else:
            scores.append(gen._score_tails(layers, ids, tails))
        seconds += time.perf_counter() - start
    return seconds, scores, tree_tokens


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--logs", default="data/03_primary/alfworld/annotated_logs.jsonl")
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--at-steps", default="2,8,14")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    model, tokenizer = load_model(args.model)
    gen = EpisodeGenerator(model, tokenizer, SamplingParams(max_new_tokens=8))
    cases = load_cases(Path(args.logs), args.episodes, [int(s) for s in args.at_steps.split(",")])
    runs: dict[str, list] = {"copy": [], "tree": []}
    for _ in range(args.repeats):
        for way in runs:
            runs[way].append(one_pass(gen, cases, way))
    med = {way: statistics.median(r[0] for r in rs) for way, rs in runs.items()}
    worst = max(
        abs(a - b)
        for row_a, row_b in zip(runs["copy"][0][1], runs["tree"][0][1], strict=True)
        for a, b in zip(row_a, row_b, strict=True)
    )
    same_choice = sum(
        max(range(len(a)), key=a.__getitem__) == max(range(len(b)), key=b.__getitem__)
        for a, b in zip(runs["copy"][0][1], runs["tree"][0][1], strict=True)
    )
    n_candidates = sum(len(c["candidates"]) for c in cases)
    candidate_tokens = sum(
        len(tail) for case in cases for tail in gen.continuation_ids(case["candidates"])
    )
    prompt_tokens = [
        len(tokenizer(gen.chat_prompt(c["messages"]), add_special_tokens=False)["input_ids"])
        for c in cases
    ]
    lines = [
        "# Scoring the admissible commands under the student: a cache copy per candidate vs one token tree",
        "",
        f"Model `{args.model}`, {len(cases)} prompts ({args.episodes} ALFWorld expert episodes at steps "
        f"{args.at_steps}, conversation format, {min(prompt_tokens)}–{max(prompt_tokens)} prompt tokens), "
        f"{n_candidates} candidates in all ({candidate_tokens} candidate tokens with the end-of-turn token, "
        f"{runs['tree'][0][2]} nodes in the trees); prompts cached before timing; passes alternated, "
        f"medians of {args.repeats}.",
        "",
        "| way | seconds for all prompts (median) | ms per candidate |",
        "|---|---|---|",
    ]
    for way, label in (("copy", "cache copied per candidate"), ("tree", "token tree, one row")):
        lines.append(f"| {label} | {med[way]:.2f} | {1000 * med[way] / n_candidates:.1f} |")
    lines += [
        "",
        f"Speed-up: **{med['copy'] / med['tree']:.1f}×**. Largest difference between the two scores of a "
        f"candidate: {worst:.2e} (summed log-probability); the same best candidate in {same_choice} of "
        f"{len(cases)} prompts.",
    ]
    from _report import write_report

    write_report("candidate_scoring", lines)


if __name__ == "__main__":
    main()

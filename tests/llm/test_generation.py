import pytest

from leap_kalm.llm.generation import EpisodeGenerator, SamplingParams, action_line_finished
from leap_kalm.llm.models import load_model
from leap_kalm.llm.prompts import build_student_messages


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return load_model(tiny_model_dir, device="cpu")


def _reference(model, tokenizer, prompt, max_new_tokens):
    import torch

    inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(
            **inputs,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
        )
    return tokenizer.decode(
        out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True
    ).strip()


def _episode_prompts(gen, n_steps, name):
    history, prompts = [], []
    for t in range(n_steps):
        observation = (
            f"You arrive at drawer {t + 1} in episode {name}. The drawer {t + 1} is closed."
        )
        candidates = [f"open drawer {t + 1}", "go to fridge 1", "look"]
        messages = build_student_messages(
            "alfworld", f"put a clean apple in fridge ({name})", history, observation, candidates
        )
        prompts.append(gen.chat_prompt(messages))
        history.append(
            {"observation": observation, "action": candidates[0], "candidate_actions": candidates}
        )
    return prompts


@pytest.mark.parametrize("prefill", ["episode", "batch"])
def test_batched_cached_greedy_equals_plain_generate(tiny, prefill):
    model, tokenizer = tiny
    sampling = SamplingParams(max_new_tokens=12, temperature=0.0, stop_after_action=False)
    gen = EpisodeGenerator(model, tokenizer, sampling, prefill=prefill)
    episodes = {name: _episode_prompts(gen, 4, name) for name in ("a", "bb", "ccc")}
    first_step_reused = first_step_tokens = 0
    for step in range(4):
        keys = list(episodes)
        prompts = [episodes[k][step] for k in keys]
        outputs = gen.generate(prompts, keys)
        for prompt, output in zip(prompts, outputs, strict=True):
            assert output == _reference(model, tokenizer, prompt, 12)
        if step == 0:
            first_step_reused, first_step_tokens = gen.stats.reused_tokens, gen.stats.prompt_tokens
    # the first step encodes everything; after it, most of every prompt comes from the cache
    assert first_step_reused == 0
    later_reused = gen.stats.reused_tokens - first_step_reused
    assert later_reused / (gen.stats.prompt_tokens - first_step_tokens) > 0.6
    assert gen.stats.encoded_tokens + gen.stats.reused_tokens == gen.stats.prompt_tokens


def test_episodes_of_different_lengths_get_the_same_answers_from_either_prefill(tiny):
    """Episodes joining a batch late (short history) beside long ones, and one whose
    prompt adds a single token: per-episode and padded prefill give the same greedy
    answers as plain generation, and the per-episode cache ends where every row ends."""
    model, tokenizer = tiny
    sampling = SamplingParams(max_new_tokens=8, temperature=0.0, stop_after_action=False)
    gens = {
        m: EpisodeGenerator(model, tokenizer, sampling, prefill=m) for m in ("episode", "batch")
    }
    long = _episode_prompts(gens["batch"], 6, "long")
    short = _episode_prompts(gens["batch"], 1, "short")[0]
    for gen in gens.values():
        gen.generate(long[:5], [f"long{i}" for i in range(5)])
    answers = {}
    for mode, gen in gens.items():
        gen.generate([long[4]], ["long4"])  # cached whole: only its last token is new
        answers[mode] = gen.generate([long[5], short, long[4] + "x"], ["long4", "short", "long3"])
        cache, mask, spans = gen._prefill(
            ["long4", "short"], gen._encode_prompts([long[5], short]), 3
        )
        if mode == "episode":
            assert {last for _, last in spans} == {mask.shape[1] - 3}
        assert [last - first for first, last in spans] == [
            len(tokenizer(p, add_special_tokens=False)["input_ids"]) - 1 for p in (long[5], short)
        ]
        assert mask.sum(dim=1).tolist() == [last - first for first, last in spans]
    expected = [_reference(model, tokenizer, p, 8) for p in (long[5], short, long[4] + "x")]
    assert answers["episode"] == answers["batch"] == expected


def test_unknown_prefill_mode(tiny):
    with pytest.raises(ValueError, match="prefill must be one of"):
        EpisodeGenerator(*tiny, prefill="padded")


def test_without_cache_reuse_everything_is_encoded(tiny):
    model, tokenizer = tiny
    gen = EpisodeGenerator(model, tokenizer, SamplingParams(max_new_tokens=4), reuse_cache=False)
    prompts = _episode_prompts(gen, 3, "x")
    for prompt in prompts:
        gen.generate([prompt], ["x"])
    assert gen.stats.reused_tokens == 0
    assert gen.stats.encoded_tokens == gen.stats.prompt_tokens


def test_sampling_is_seeded(tiny):
    model, tokenizer = tiny
    prompts = _episode_prompts(EpisodeGenerator(model, tokenizer), 1, "s") * 3
    params = SamplingParams(
        max_new_tokens=10, temperature=1.0, top_p=0.9, seed=5, stop_after_action=False
    )
    first = EpisodeGenerator(model, tokenizer, params).generate(prompts)
    again = EpisodeGenerator(model, tokenizer, params).generate(prompts)
    assert first == again
    other = EpisodeGenerator(
        model, tokenizer, SamplingParams(**{**params.__dict__, "seed": 6})
    ).generate(prompts)
    assert other != first


def test_action_line_detection():
    assert not action_line_finished("REASON:\nlook around\n")
    assert not action_line_finished("REASON:\nx\nACTION:\n")
    assert not action_line_finished("REASON:\nx\nACTION:\ngo to fridge 1")
    assert action_line_finished("REASON:\nx\nACTION:\ngo to fridge 1\n")
    assert action_line_finished("Action: open drawer 2\nmore")


def test_unknown_sampling_keys():
    with pytest.raises(ValueError, match="unknown keys"):
        SamplingParams.from_dict({"temp": 1})


def test_mismatched_keys():
    with pytest.raises(ValueError, match="2 prompts but 1 keys"):
        EpisodeGenerator.generate(object.__new__(EpisodeGenerator), ["a", "b"], ["k"])


@pytest.mark.parametrize("prefill", ["episode", "batch"])
def test_scores_are_the_summed_log_probabilities_of_a_full_forward(tiny, prefill):
    import torch

    model, tokenizer = tiny
    gen = EpisodeGenerator(model, tokenizer, SamplingParams(max_new_tokens=4), prefill=prefill)
    prompt = gen.chat_prompt([{"role": "user", "content": "go to the fridge"}])
    # shared prefixes ("go to fridge") are one node of the token tree; a repeated option
    # takes the same path
    options = [
        "go to fridge 1",
        "look",
        "go to fridge 2",
        "take apple 1 from countertop 2",
        "go to drawer 10",
        "go to fridge 1",
    ]
    scores = gen.score([prompt], ["ep"], [options])[0]
    assert scores[0] == scores[5] and len(set(scores[:5])) == 5
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    for option, score in zip(options, scores, strict=True):
        tail = tokenizer(option, add_special_tokens=False)["input_ids"] + [end]
        with torch.no_grad():
            logits = model(torch.tensor([ids + tail])).logits[0].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        expected = sum(float(logprobs[len(ids) - 1 + k, tok]) for k, tok in enumerate(tail))
        assert score == pytest.approx(expected, abs=1e-4)
    # scored again: the prompt comes from the cache, the scores do not change
    small = EpisodeGenerator(model, tokenizer, SamplingParams(), max_batch=2, prefill=prefill)
    assert small.score([prompt], ["ep"], [options])[0] == pytest.approx(scores, abs=1e-4)
    assert gen.score([prompt], ["ep"], [options])[0] == pytest.approx(scores, abs=1e-4)
    assert gen.stats.reused_tokens >= len(ids) - 1


def test_finished_rows_leave_the_batch_and_the_answers_stay_the_same(tiny):
    """Rows that end early are dropped from the decoding batch (``compact_after``): every
    answer is the one decoded with the whole batch to the end, cut at its stop token, with
    the same logits at every step, and fewer row-steps are computed."""
    import torch

    model, tokenizer = tiny
    # sampled (seeded per episode, so a row's tokens do not depend on its batch mates):
    # the tiny random model repeats one token under greedy decoding
    sampling = SamplingParams(max_new_tokens=16, temperature=1.0, stop_after_action=False)
    names = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff"]

    def decode(compact_after, stop_ids=None):
        gen = EpisodeGenerator(model, tokenizer, sampling, compact_after=compact_after)
        if stop_ids is not None:
            gen._stop_ids = set(stop_ids)
        gen.logits = {name: [] for name in names}  # each episode's next-token logits, in order
        sample = gen._sample

        def recording(logits, keys):
            for row, key in enumerate(keys):
                gen.logits[key].append(logits[row].clone())
            return sample(logits, keys)

        gen._sample = recording
        # histories of different lengths: each row has its own positions and mask
        prompts = [_episode_prompts(gen, k + 1, name)[k] for k, name in enumerate(names)]
        all_ids = gen._encode_prompts(prompts)  # the token ids, as ``generate`` decodes them
        cache, mask, _ = gen._prefill(names, all_ids, sampling.max_new_tokens)
        room = sampling.max_new_tokens
        ids = gen._decode(
            names, all_ids, cache, mask, mask.shape[1] - room, room, action_line_finished
        )
        return gen, ids

    _, full = decode(0.0, stop_ids=set())
    # a stop token per row at a different depth: rows 0, 2, 4 end early, the others run on
    stops = {row[k] for row, k in zip(full[::2], (2, 6, 10), strict=True)}
    expected = [row[: next((i for i, t in enumerate(row) if t in stops), len(row))] for row in full]
    assert len({len(e) for e in expected}) > 2  # the rows end at different steps
    kept, kept_ids = decode(0.0, stops)
    compact, compact_ids = decode(0.25, stops)
    assert kept_ids == compact_ids == expected
    assert compact.stats.decoded_row_steps < kept.stats.decoded_row_steps
    for name, row in zip(names, expected, strict=True):  # the same logits while a row writes
        live = min(len(row) + 1, sampling.max_new_tokens)  # its tokens and the stop token
        assert len(compact.logits[name]) >= live
        for a, b in zip(kept.logits[name][:live], compact.logits[name][:live], strict=True):
            assert torch.allclose(a, b, atol=1e-5)


def test_compact_after_must_be_a_share(tiny):
    model, tokenizer = tiny
    with pytest.raises(ValueError, match="compact_after"):
        EpisodeGenerator(model, tokenizer, compact_after=1.5)


def test_an_answer_cut_by_the_token_cap_gets_its_action_finished(tiny, monkeypatch):
    """Only an answer that used every token without finishing its ``ACTION:`` line is
    continued: from its prompt + its text + ``ACTION:``, on its episode's key, for at
    most ``finish_action_tokens`` tokens, stopping at the end of the action's line."""
    model, tokenizer = tiny
    gen = EpisodeGenerator(
        model, tokenizer, SamplingParams(max_new_tokens=12, finish_action_tokens=5)
    )

    def ids(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    runaway = "REASON:\n$3 under, opened; $4 under, opened; $5 under"
    gen.sampling.max_new_tokens = room = len(ids(runaway))
    first = {  # what the first pass writes per prompt
        "p0": ids(runaway),  # cut by the cap
        "p1": ids("REASON:\nok\nACTION:\nclick[a]\n"),  # a finished action
        "p2": ids("REASON:\nshort"),  # ended at a stop token, not at the cap
    }
    assert len(first["p1"]) < room and len(first["p2"]) < room
    calls = []

    def fake_raw(prompts, keys, budget, answered):
        calls.append((list(prompts), list(keys), budget, answered))
        if len(calls) == 1:
            return [first[p] for p in prompts]
        return [ids("click[b]\n")]

    monkeypatch.setattr(gen, "_generate_raw", fake_raw)
    out = gen.generate(["p0", "p1", "p2"], ["k0", "k1", "k2"])
    marker = "\nACTION:\n"
    assert out[0] == runaway + marker + "click[b]"
    assert out[1] == "REASON:\nok\nACTION:\nclick[a]" and out[2] == "REASON:\nshort"
    assert gen.stats.finished_actions == 1
    (_, _, budget0, answered0), (prompts, keys, budget, answered) = calls
    assert budget0 == room and answered0 is action_line_finished
    assert prompts == ["p0" + runaway + marker] and keys == ["k0"] and budget == 5
    assert answered("click[b]\n") and not answered("click[b") and not answered("\n")


def test_finishing_actions_on_the_tiny_model_changes_only_the_capped_answers(tiny):
    """The first pass is the same with the setting on or off (same seeds); every answer the
    cap cut gains an ``ACTION:`` part, and the count says how many."""
    model, tokenizer = tiny
    names = ["a", "bb", "ccc", "dddd"]

    def run(finish):
        gen = EpisodeGenerator(
            model,
            tokenizer,
            SamplingParams(max_new_tokens=10, temperature=1.0, finish_action_tokens=finish),
        )
        prompts = [_episode_prompts(gen, k + 1, name)[k] for k, name in enumerate(names)]
        return gen, gen.generate(prompts, names)

    off, before = run(0)
    on, after = run(6)
    assert off.stats.finished_actions == 0 and on.stats.finished_actions > 0
    changed = 0
    for a, b in zip(before, after, strict=True):
        if a != b:
            changed += 1
            head, sep, _ = b.rpartition("\nACTION:\n")
            assert sep and a.startswith(head.strip())
    assert changed <= on.stats.finished_actions


def test_sampling_settings_reject_a_negative_action_budget():
    with pytest.raises(ValueError, match="finish_action_tokens"):
        SamplingParams(finish_action_tokens=-1)
    with pytest.raises(ValueError, match="max_new_tokens"):
        SamplingParams(max_new_tokens=0)

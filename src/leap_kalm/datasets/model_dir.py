"""``ModelDirDataset``: a Hugging Face model or LoRA adapter directory in the catalog.

``save`` accepts a :class:`~leap_kalm.schemas.ModelRef` (its directory is copied), an
object with ``save_pretrained`` (model, tokenizer, peft model), or a tuple/list of such
objects (e.g. ``(model, tokenizer)``). ``load`` returns a ``ModelRef`` only, so the
consuming node chooses device and dtype when it loads the weights.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict
from typing import Any

from kedro.io.core import DatasetError, Version

from leap_kalm.datasets._base import FileDataset
from leap_kalm.schemas import ModelRef

META_FILE = "leap_kalm_model.json"


def describe_model_dir(path: str) -> ModelRef:
    """Build a ``ModelRef`` for a local directory, reading what kind of model it holds."""
    meta_path = os.path.join(path, META_FILE)
    meta = json.loads(open(meta_path, encoding="utf-8").read()) if os.path.exists(meta_path) else {}
    if meta.get("skipped"):
        return ModelRef(path=path, kind="skipped", meta=meta.get("meta", {}))
    adapter_cfg = os.path.join(path, "adapter_config.json")
    if os.path.exists(adapter_cfg):
        check_weights(path, ("adapter_model.safetensors", "adapter_model.bin"))
        base = json.loads(open(adapter_cfg, encoding="utf-8").read()).get("base_model_name_or_path")
        return ModelRef(path=path, kind="adapter", base_model=base, meta=meta.get("meta", {}))
    if not os.path.exists(os.path.join(path, "config.json")):
        raise DatasetError(
            f"{path}: neither config.json (a model) nor adapter_config.json (a LoRA adapter) is there"
        )
    check_weights(path, ("*.safetensors", "pytorch_model*.bin"))
    return ModelRef(path=path, kind="model", meta=meta.get("meta", {}))


def check_weights(path: str, patterns: tuple[str, ...]) -> None:
    """The directory holds weights, and every safetensors file is whole.

    A safetensors file starts with the length of its JSON header, and the header gives
    each tensor's byte range, so a file cut short (an interrupted copy or save) is found
    by its size alone, without loading it.

    Raises:
        DatasetError: Naming the directory and the missing or truncated file.
    """
    import glob

    files = sorted({f for pattern in patterns for f in glob.glob(os.path.join(path, pattern))})
    if not files:
        raise DatasetError(
            f"{path}: no weights ({' or '.join(patterns)}); the save that wrote this directory "
            "did not finish; train or copy the model again"
        )
    for file in files:
        if file.endswith(".safetensors"):
            _check_safetensors(file)


def _check_safetensors(file: str) -> None:
    size = os.path.getsize(file)
    try:
        with open(file, "rb") as handle:
            header_len = int.from_bytes(handle.read(8), "little")
            if size < 8 or 8 + header_len > size:
                raise ValueError("shorter than its header")
            header = json.loads(handle.read(header_len))
        end = max(
            (v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0
        )
    except (ValueError, KeyError, TypeError) as error:
        raise DatasetError(
            f"{file}: not a readable safetensors file ({error}); is it truncated?"
        ) from error
    if 8 + header_len + end > size:
        raise DatasetError(
            f"{file}: truncated ({size} bytes, its header needs {8 + header_len + end}); "
            "train or copy the model again"
        )


class ModelDirDataset(FileDataset[Any, ModelRef]):
    """A model or adapter directory, versionable like any kedro dataset."""

    def __init__(
        self,
        *,
        filepath: str | os.PathLike,
        missing_ok: bool = False,
        version: Version | None = None,
        credentials: dict[str, Any] | None = None,
        fs_args: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            filepath=filepath,
            version=version,
            credentials=credentials,
            fs_args=fs_args,
            metadata=metadata,
        )
        self._missing_ok = missing_ok
        if self._protocol != "file":
            raise DatasetError(
                f"ModelDirDataset({filepath}): only local directories are supported "
                f"(got protocol {self._protocol!r}); sync remote models to a local path first"
            )

    def load(self) -> ModelRef | None:
        try:
            path = self._load_path()
        except DatasetError:  # versioned, and no version exists yet
            if self._missing_ok:
                return None
            raise
        if not os.path.isdir(path) and self._missing_ok:
            return None
        if not os.path.isdir(path):
            raise DatasetError(
                f"ModelDirDataset: no model directory at '{path}'. Train or convert the model first."
            )
        return describe_model_dir(os.path.abspath(path))

    def save(self, data: Any) -> None:
        import shutil

        path = os.path.abspath(self._save_path())
        if os.path.exists(path):
            raise DatasetError(
                f"ModelDirDataset: '{path}' exists already; enable versioning or remove it"
            )
        os.makedirs(os.path.dirname(path), exist_ok=True)
        staging = tempfile.mkdtemp(dir=os.path.dirname(path), prefix=".tmp-model-")
        try:
            skipped = isinstance(data, ModelRef) and data.kind == "skipped"
            marker: dict[str, Any] = {"skipped": True} if skipped else {}
            meta = dict(data.meta) if skipped else self._stage(data, staging)
            with open(os.path.join(staging, META_FILE), "w", encoding="utf-8") as handle:
                json.dump({**marker, "meta": meta}, handle, indent=2, default=str)
            os.rename(staging, path)  # the directory appears whole or not at all
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        self._invalidate_cache()

    @staticmethod
    def _stage(data: Any, staging: str) -> dict[str, Any]:
        import shutil

        if isinstance(data, ModelRef):
            if not os.path.isdir(data.path):
                raise DatasetError(
                    f"ModelDirDataset: ModelRef points at missing directory '{data.path}'"
                )
            if data.meta.get("staged"):
                for entry in os.listdir(data.path):
                    shutil.move(os.path.join(data.path, entry), os.path.join(staging, entry))
                shutil.rmtree(data.path, ignore_errors=True)
                return {k: v for k, v in asdict(data)["meta"].items() if k != "staged"}
            shutil.copytree(data.path, staging, dirs_exist_ok=True)
            return {**asdict(data)["meta"], "copied_from": data.path}
        parts = data if isinstance(data, tuple | list) else [data]
        for part in parts:
            if not hasattr(part, "save_pretrained"):
                raise DatasetError(
                    f"ModelDirDataset saves a ModelRef or objects with save_pretrained, got {type(part).__name__}"
                )
            part.save_pretrained(staging)
        return {}

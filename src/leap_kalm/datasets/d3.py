"""``D3Dataset``: a d3rlpy learnable (algorithm + weights) in a ``.d3`` file."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from kedro.io.core import DatasetError, Version

from leap_kalm.datasets._base import FileDataset

_NOT_TRAINED = b'{"not_trained"'


class D3Dataset(FileDataset[Any, Any]):
    """A d3rlpy learnable ⇄ ``.d3``; a policy that was not trained
    (``training.offline_rl.NotTrained``) ⇄ a small JSON file at the same path, its reason.

    Args:
        filepath: Path of the ``.d3`` file.
        device: Where to load it: ``"auto"`` (cuda if available), ``"cpu:0"``, ``"cuda:0"``.
    """

    def __init__(
        self,
        *,
        filepath: str | os.PathLike,
        device: str = "auto",
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
        self._device = device

    def _describe(self) -> dict[str, Any]:
        return {**super()._describe(), "device": self._device}

    def _resolve_device(self) -> str | bool:
        if self._device != "auto":
            return self._device
        import torch

        return "cuda:0" if torch.cuda.is_available() else "cpu:0"

    def load(self) -> Any:
        import d3rlpy

        path = self._load_path()
        if not self._fs.exists(path):
            raise self._missing(path)
        with tempfile.TemporaryDirectory() as tmp:
            local = os.path.join(tmp, "model.d3")
            self._fs.get(path, local)
            with open(local, "rb") as file:
                if file.read(len(_NOT_TRAINED)) == _NOT_TRAINED:
                    from leap_kalm.training.offline_rl import NotTrained

                    file.seek(0)
                    return NotTrained(json.load(file)["not_trained"])
            try:
                return d3rlpy.load_learnable(local, device=self._resolve_device())
            except Exception as exc:  # zip/pickle/torch errors on a damaged file
                raise DatasetError(
                    f"{path}: not a readable d3rlpy learnable ({type(exc).__name__}: {exc})"
                ) from exc

    def save(self, data: Any) -> None:
        from leap_kalm.training.offline_rl import NotTrained

        if isinstance(data, NotTrained):
            path = self._save_path()
            with self._fs.open(path, "w", encoding="utf-8") as file:
                json.dump({"not_trained": data.reason}, file)
            self._invalidate_cache()
            return
        if not hasattr(data, "save") or not hasattr(data, "impl"):
            raise DatasetError(f"D3Dataset saves a d3rlpy algorithm, got {type(data).__name__}")
        if data.impl is None:
            raise DatasetError(
                "D3Dataset: the algorithm has no weights yet; build or fit it before saving"
            )
        path = self._save_path()
        with tempfile.TemporaryDirectory() as tmp:
            local = os.path.join(tmp, "model.d3")
            data.save(local)
            self._fs.put(local, path)
        self._invalidate_cache()

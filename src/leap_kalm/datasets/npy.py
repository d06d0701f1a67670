"""``NpyDataset``: a numpy array, or a dict of arrays, in a ``.npy`` file.

A dict is stored the way KALM stores its offline datasets: pickled inside a 0-d
object array. Loading such a file needs ``allow_pickle: true``, so the flag is off
unless the catalog entry turns it on.
"""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np
from kedro.io.core import DatasetError, Version

from leap_kalm.datasets._base import FileDataset

ArrayOrDict = np.ndarray | dict[str, Any]


class NpyDataset(FileDataset[ArrayOrDict, ArrayOrDict]):
    """Array or dict-of-arrays ⇄ ``.npy``.

    Args:
        filepath: Path of the ``.npy`` file (any fsspec protocol).
        allow_pickle: Needed to save or load a dict (KALM's dict-in-0-d-array format).
    """

    def __init__(
        self,
        *,
        filepath: str | os.PathLike,
        allow_pickle: bool = False,
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
        self._allow_pickle = allow_pickle

    def _describe(self) -> dict[str, Any]:
        return {**super()._describe(), "allow_pickle": self._allow_pickle}

    def load(self) -> ArrayOrDict:
        path = self._load_path()
        if not self._fs.exists(path):
            raise self._missing(path)
        with self._fs.open(path, "rb") as handle:
            raw = handle.read()
        try:
            array = np.load(io.BytesIO(raw), allow_pickle=self._allow_pickle)
        except ValueError as exc:
            if "allow_pickle" in str(exc):
                raise DatasetError(
                    f"{path}: holds pickled objects (a dict of arrays?); set allow_pickle: true "
                    "on its catalog entry if you trust the file"
                ) from exc
            raise DatasetError(
                f"{path}: not a readable .npy file ({exc}); is it truncated?"
            ) from exc
        except Exception as exc:  # a torn pickle raises EOFError, UnpicklingError, ...
            raise DatasetError(
                f"{path}: not a readable .npy file ({type(exc).__name__}: {exc})"
            ) from exc
        if array.dtype == object and array.shape == ():
            return array.item()
        return array

    def save(self, data: ArrayOrDict) -> None:
        path = self._save_path()
        if isinstance(data, dict):
            if not self._allow_pickle:
                raise DatasetError(
                    f"{path}: saving a dict needs allow_pickle: true (it is stored pickled in a 0-d array)"
                )
            array = np.empty((), dtype=object)
            array[()] = data
        else:
            array = np.asarray(data)
            if array.dtype == object and not self._allow_pickle:
                raise DatasetError(f"{path}: an object array needs allow_pickle: true")
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=self._allow_pickle)
        with self._fs.open(path, "wb") as handle:
            handle.write(buffer.getvalue())
        self._invalidate_cache()

"""``HDF5Dataset``: a dict of numpy arrays (nested dicts become groups) plus attributes.

h5py is not thread-safe, so every file access holds one process-wide lock. Strings
(e.g. KALM's ``instructions``) are stored as variable-length UTF-8 and come back as
``str`` arrays. File-level attributes travel under the reserved key ``"_attrs"``.
"""

from __future__ import annotations

import io
import os
import threading
from typing import Any

import numpy as np
from kedro.io.core import DatasetError, Version

from leap_kalm.datasets._base import FileDataset

ATTRS_KEY = "_attrs"
_H5_LOCK = threading.Lock()


def _write_group(group: Any, data: dict[str, Any], where: str, compression: str | None) -> None:
    import h5py

    for name, value in data.items():
        if name == ATTRS_KEY:
            for attr, attr_value in value.items():
                group.attrs[attr] = attr_value
            continue
        if isinstance(value, dict):
            _write_group(group.create_group(name), value, f"{where}/{name}", compression)
            continue
        array = np.asarray(value)
        if array.dtype.kind in "UO":
            try:
                array = array.astype(object).astype(h5py.string_dtype("utf-8"))
            except (TypeError, ValueError) as exc:
                raise DatasetError(
                    f"field '{where}/{name}': cannot store as strings ({exc})"
                ) from exc
        group.create_dataset(name, data=array, compression=compression if array.ndim else None)


def _read_group(group: Any) -> dict[str, Any]:
    import h5py

    out: dict[str, Any] = {}
    for name, item in group.items():
        if isinstance(item, h5py.Group):
            out[name] = _read_group(item)
        elif h5py.check_string_dtype(item.dtype) is not None:
            out[name] = item.asstr()[()].astype(str) if item.shape != () else item.asstr()[()]
        else:
            out[name] = item[()]
    if group.attrs:
        out[ATTRS_KEY] = {key: _plain(value) for key, value in group.attrs.items()}
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.generic):
        return value.item()
    return value


class HDF5Dataset(FileDataset[dict[str, Any], dict[str, Any]]):
    """Dict of arrays (+ ``_attrs``) ⇄ ``.hdf5``, versionable, guarded by a lock."""

    def __init__(
        self,
        *,
        filepath: str | os.PathLike,
        compression: str | None = None,
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
        self._compression = compression

    def _describe(self) -> dict[str, Any]:
        return {**super()._describe(), "compression": self._compression}

    def load(self) -> dict[str, Any]:
        import h5py

        path = self._load_path()
        if not self._fs.exists(path):
            raise self._missing(path)
        with self._fs.open(path, "rb") as handle:
            raw = handle.read()
        with _H5_LOCK:
            try:
                with h5py.File(io.BytesIO(raw), "r") as h5:
                    return _read_group(h5)
            except (OSError, KeyError, ValueError, RuntimeError) as exc:
                raise DatasetError(
                    f"{path}: not a readable HDF5 file ({exc}); is it truncated or corrupt?"
                ) from exc

    def save(self, data: dict[str, Any]) -> None:
        import h5py

        path = self._save_path()
        if not isinstance(data, dict):
            raise DatasetError(
                f"{path}: HDF5Dataset saves a dict of arrays, got {type(data).__name__}"
            )
        buffer = io.BytesIO()
        with _H5_LOCK:
            with h5py.File(buffer, "w") as h5:
                try:
                    _write_group(h5, data, "", self._compression)
                except DatasetError as exc:
                    raise DatasetError(f"{path}: {exc}") from exc
        with self._fs.open(path, "wb") as handle:
            handle.write(buffer.getvalue())
        self._invalidate_cache()

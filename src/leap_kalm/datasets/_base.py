"""Shared plumbing for the project's fsspec-backed, versionable datasets."""

from __future__ import annotations

import os
from copy import deepcopy
from pathlib import PurePosixPath
from typing import Any, Generic, TypeVar

import fsspec
from kedro.io.core import (
    AbstractVersionedDataset,
    DatasetError,
    Version,
    get_filepath_str,
    get_protocol_and_path,
)

_DI = TypeVar("_DI")
_DO = TypeVar("_DO")


class FileDataset(AbstractVersionedDataset[_DI, _DO], Generic[_DI, _DO]):
    """Base for a dataset stored as one file (or directory) on an fsspec filesystem.

    Subclasses implement ``load`` and ``save`` using ``self._load_path()`` and
    ``self._save_path()``, which resolve versions the same way kedro-datasets do.
    """

    def __init__(
        self,
        *,
        filepath: str | os.PathLike,
        version: Version | None = None,
        credentials: dict[str, Any] | None = None,
        fs_args: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        _fs_args = deepcopy(fs_args) or {}
        _credentials = deepcopy(credentials) or {}
        protocol, path = get_protocol_and_path(str(filepath), version)
        self._protocol = protocol
        if protocol == "file":
            _fs_args.setdefault("auto_mkdir", True)
        self._fs = fsspec.filesystem(protocol, **_credentials, **_fs_args)
        self.metadata = metadata
        super().__init__(
            filepath=PurePosixPath(path),
            version=version,
            exists_function=self._fs.exists,
            glob_function=self._fs.glob,
        )

    # -- paths ---------------------------------------------------------------
    def _load_path(self) -> str:
        return get_filepath_str(self._get_load_path(), self._protocol)

    def _save_path(self) -> str:
        return get_filepath_str(self._get_save_path(), self._protocol)

    def _missing(self, path: str) -> DatasetError:
        return DatasetError(
            f"{type(self).__name__}: no file at '{path}'. Run the pipeline that "
            "produces it first, or point the catalog entry at an existing file."
        )

    # -- kedro protocol ------------------------------------------------------
    def _describe(self) -> dict[str, Any]:
        return {"filepath": self._filepath, "protocol": self._protocol, "version": self._version}

    def _exists(self) -> bool:
        try:
            path = self._load_path()
        except DatasetError:
            return False
        return self._fs.exists(path)

    def _release(self) -> None:
        super()._release()
        self._invalidate_cache()

    def _invalidate_cache(self) -> None:
        self._fs.invalidate_cache(get_filepath_str(self._filepath, self._protocol))

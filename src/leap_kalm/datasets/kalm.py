"""``KalmDataset``: a KALM offline dataset (``.npy``, KALM's dict-in-a-0-d-array), loaded in
either of KALM's own layouts and checked against the contract on load.

``user_filepath`` points at a user's own file (``--params kalm_real_data=PATH`` through
the catalog): it is read, converted to the canonical layout and validated, and never
written; saving always writes ``filepath`` (the project's generated data).
"""

from __future__ import annotations

import os
from typing import Any

from kedro.io.core import AbstractDataset, DatasetError, Version

from leap_kalm.datasets.npy import NpyDataset


class KalmDataset(NpyDataset):
    """A KALM-format dict of arrays ⇄ ``.npy``, canonical and validated when loaded.

    Args:
        filepath: The project's own file (written by ``ingest``).
        user_filepath: A user's file to read instead (``null``: read ``filepath``).
        missing_ok: Load ``None`` when ``filepath`` does not exist (optional inputs).
    """

    def __init__(
        self,
        *,
        filepath: str | os.PathLike,
        user_filepath: str | os.PathLike | None = None,
        missing_ok: bool = False,
        version: Version | None = None,
        credentials: dict[str, Any] | None = None,
        fs_args: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            filepath=filepath,
            allow_pickle=True,
            version=version,
            credentials=credentials,
            fs_args=fs_args,
            metadata=metadata,
        )
        self._user_filepath = str(user_filepath) if user_filepath not in (None, "") else None
        self._missing_ok = missing_ok

    def _describe(self) -> dict[str, Any]:
        return {**super()._describe(), "user_filepath": self._user_filepath}

    def load(self) -> dict[str, Any] | None:
        from leap_kalm.envs.kalm_format import canonical_kalm_dataset, validate_kalm_dataset

        if self._user_filepath is not None:
            if not os.path.exists(self._user_filepath):
                raise DatasetError(
                    f"{self._user_filepath}: no such file (given as kalm_real_data); "
                    "pass the path of a KALM-format .npy file"
                )
            source = self._user_filepath
            data = NpyDataset(filepath=source, allow_pickle=True).load()
        else:
            source = str(self._load_path())
            if self._missing_ok and not self._fs.exists(source):
                return None
            data = super().load()
        try:
            data = canonical_kalm_dataset(data, source)
            validate_kalm_dataset(data, source)
        except ValueError as exc:
            raise DatasetError(str(exc)) from exc
        return data


class KalmPromptsDataset(AbstractDataset[None, Any]):
    """KALM's imagination prompt file (read-only): the start states, goals and wordings
    of one goal level, or ``None`` when no file is given (``--params kalm_prompts=PATH``).

    Args:
        filepath: The prompt ``.npy`` (``null``: none; imagination uses the world's goals).
        level: Its goal level (``null``: read from the file name, e.g. ``clevr_rephrase_prompt.npy``).
    """

    def __init__(
        self,
        *,
        filepath: str | os.PathLike | None = None,
        level: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self._filepath = str(filepath) if filepath not in (None, "") else None
        self._level = level or None
        self.metadata = metadata

    def _describe(self) -> dict[str, Any]:
        return {"filepath": self._filepath, "level": self._level}

    _parameter = "kalm_prompts"

    @staticmethod
    def _convert(data: Any, source: str, level: str | None) -> dict[str, Any]:
        from leap_kalm.envs.kalm_format import kalm_prompt_tasks

        return kalm_prompt_tasks(data, source, level)

    def load(self) -> dict[str, Any] | None:
        if self._filepath is None:
            return None
        if not os.path.exists(self._filepath):
            raise DatasetError(f"{self._filepath}: no such file (given as {self._parameter})")
        data = NpyDataset(filepath=self._filepath, allow_pickle=True).load()
        try:
            return self._convert(data, self._filepath, self._level)
        except ValueError as exc:
            raise DatasetError(str(exc)) from exc

    def save(self, data: None) -> None:
        raise DatasetError(f"{self._filepath}: KALM prompt files are read, never written")


class KalmRolloutsDataset(KalmPromptsDataset):
    """Imagined rollouts in KALM's generated layout (read-only; ``--params
    kalm_imagined_data=PATH``, ``kalm_imagined_level=LEVEL`` when the name does not say),
    or ``None`` when no file is given."""

    _parameter = "kalm_imagined_data"

    @staticmethod
    def _convert(data: Any, source: str, level: str | None) -> dict[str, Any]:
        from leap_kalm.envs.kalm_format import kalm_rollout_lists

        return kalm_rollout_lists(data, source, level)

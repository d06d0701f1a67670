"""``JSONLDataset``: a list of dict records stored one JSON object per line.

Two save modes:

* ``overwrite`` (default): ``save(records)`` writes the whole list.
* ``resume``: for long-running producers such as rollouts. ``save`` accepts a list,
  an iterator, or a *producer* ``callable(done_records) -> iterable of records``.
  Records are appended to a sidecar ``<path>.partial`` file one line at a time and
  flushed, so an interrupted run keeps every complete line it wrote. The next run
  reads the partial file (dropping a torn last line), hands the records already done
  to the producer, skips any record whose ``key`` was already written, and only when
  the producer is exhausted moves the result to the final (versioned) path.

  With ``reuse: true`` a finished save is a starting point too: when there is no partial
  file, the records of the last finished save that the producer vouches for (its
  ``reusable(record)`` predicate: same inputs, same parameters) are handed over as done,
  so a re-run (the next LEAP iteration) computes only what changed. A producer without
  ``reusable`` reuses nothing.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

from kedro.io.core import DatasetError, Version

from leap_kalm.datasets._base import FileDataset

logger = logging.getLogger(__name__)

Record = dict[str, Any]
Producer = Callable[[list[Record]], Iterable[Record]]


def parse_jsonl_lines(
    lines: Iterable[str], source: str, *, tolerate_torn_tail: bool = False
) -> list[Record]:
    """Parse JSON lines into dict records.

    Args:
        lines: The file's lines, in order.
        source: Name of the file, used in error messages.
        tolerate_torn_tail: Drop an unparseable last line that has no trailing newline
            (what a process killed mid-write leaves behind) instead of raising.

    Returns:
        The records.

    Raises:
        DatasetError: A line is not valid JSON or not a JSON object; names file and line.
    """
    lines = list(lines)
    records: list[Record] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            is_tail = number == len(lines) and not line.endswith("\n")
            if tolerate_torn_tail and is_tail:
                logger.warning("%s: dropping torn last line %d (interrupted write)", source, number)
                break
            raise DatasetError(
                f"{source}, line {number}: malformed JSON ({exc.msg} at column {exc.colno})"
            ) from exc
        if not isinstance(record, dict):
            raise DatasetError(
                f"{source}, line {number}: expected a JSON object, got {type(record).__name__}"
            )
        records.append(record)
    return records


def _flush_to_disk(handle: Any) -> None:
    handle.flush()
    try:
        os.fsync(handle.fileno())
    except (AttributeError, OSError, ValueError):  # remote filesystems have no descriptor
        pass


class JSONLDataset(FileDataset[Any, list[Record]]):
    """Dict records in a ``.jsonl`` file, versionable, with a resumable append mode.

    Example (catalog):

    ```yaml
    "{namespace}.rollouts":
      type: leap_kalm.datasets.JSONLDataset
      filepath: data/07_model_output/{namespace}/rollouts.jsonl
      save_args: {mode: resume, key: game_id}
    ```

    ``save_args.reuse: true`` (resume mode) also resumes from the last finished save,
    keeping the records the producer's ``reusable`` predicate accepts.
    """

    MODES = ("overwrite", "resume")

    def __init__(
        self,
        *,
        filepath: str | os.PathLike,
        save_args: dict[str, Any] | None = None,
        missing_ok: bool = False,
        allow_empty: bool = True,
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
        self._allow_empty = allow_empty
        save_args = dict(save_args or {})
        self._mode = save_args.pop("mode", "overwrite")
        self._key = save_args.pop("key", None)
        self._flush_every = int(save_args.pop("flush_every", 1))
        self._reuse = bool(save_args.pop("reuse", False))
        if self._mode not in self.MODES:
            raise DatasetError(
                f"JSONLDataset({filepath}): save_args.mode must be one of {self.MODES}, got {self._mode!r}"
            )
        if save_args:
            raise DatasetError(f"JSONLDataset({filepath}): unknown save_args {sorted(save_args)}")
        if self._reuse and self._mode != "resume":
            raise DatasetError(
                f"JSONLDataset({filepath}): save_args.reuse needs mode: resume, got {self._mode!r}"
            )

    def _describe(self) -> dict[str, Any]:
        return {**super()._describe(), "mode": self._mode, "key": self._key, "reuse": self._reuse}

    @property
    def partial_path(self) -> str:
        """Where records of an unfinished ``resume`` save accumulate."""
        from kedro.io.core import get_filepath_str

        return get_filepath_str(self._filepath, self._protocol) + ".partial"

    def load(self) -> list[Record]:
        """The records; ``[]`` for a missing file when ``missing_ok`` (e.g. a first iteration)."""
        try:
            path = self._load_path()
        except DatasetError:  # versioned, and no version exists yet
            if self._missing_ok:
                return []
            raise
        if not self._fs.exists(path):
            if self._missing_ok:
                return []
            raise self._missing(path)
        with self._fs.open(path, "r", encoding="utf-8") as handle:
            records = parse_jsonl_lines(handle, path)
        if not records and not self._allow_empty:
            raise DatasetError(
                f"{path}: no records, and this dataset is never empty (a run that wrote it was "
                "probably interrupted); re-run the node that writes it"
            )
        return records

    def load_partial(self) -> list[Record]:
        """Records an interrupted ``resume`` save left behind (empty if none)."""
        if not self._fs.exists(self.partial_path):
            return []
        with self._fs.open(self.partial_path, "r", encoding="utf-8") as handle:
            return parse_jsonl_lines(handle, self.partial_path, tolerate_torn_tail=True)

    def save(self, data: list[Record] | Iterable[Record] | Producer) -> None:
        save_path = self._save_path()
        if self._mode == "overwrite":
            if callable(data):
                data = data([])
            with self._fs.open(save_path, "w", encoding="utf-8") as handle:
                for index, record in enumerate(data):
                    handle.write(self._dump(record, index))
        else:
            self._save_resume(data, save_path)
        self._invalidate_cache()

    # -- resume mode ---------------------------------------------------------
    def _reusable(self, data: Any) -> list[Record]:
        """The last finished save's records that the producer ``data`` accepts again."""
        accepts = getattr(data, "reusable", None)
        if not (self._reuse and callable(data) and accepts is not None):
            return []
        try:
            path = self._load_path()
        except DatasetError:  # versioned, and no version yet
            return []
        if not self._fs.exists(path):
            return []
        try:
            with self._fs.open(path, "r", encoding="utf-8") as handle:
                previous = parse_jsonl_lines(handle, path)
        except DatasetError as exc:  # a damaged finished file: computed again, then replaced
            logger.warning("%s; reusing none of it, every record is computed again", exc)
            return []
        kept = [r for r in previous if accepts(r)]
        logger.info(
            "%s: reusing %d of the %d records of the last finished save",
            path,
            len(kept),
            len(previous),
        )
        return kept

    def _save_resume(self, data: Any, save_path: str) -> None:
        done = self.load_partial()
        if not done and not self._fs.exists(self.partial_path):
            done = self._reusable(data)
        # rewrite the partial file without a torn tail so appends start on a clean line
        with self._fs.open(self.partial_path, "w", encoding="utf-8") as handle:
            for index, record in enumerate(done):
                handle.write(self._dump(record, index))
        if done:
            logger.info(
                "%s: resuming after %d records already written", self.partial_path, len(done)
            )
        seen = {self._key_of(r, i) for i, r in enumerate(done)} if self._key else set()
        produced = data(list(done)) if callable(data) else data
        written = len(done)
        with self._fs.open(self.partial_path, "a", encoding="utf-8") as handle:
            for record in produced:
                if self._key:
                    key = self._key_of(record, written)
                    if key in seen:
                        continue
                    seen.add(key)
                handle.write(self._dump(record, written))
                written += 1
                if written % self._flush_every == 0:
                    _flush_to_disk(handle)
        self._fs.mv(self.partial_path, save_path)

    def _key_of(self, record: Record, index: int) -> Any:
        if self._key not in record:
            raise DatasetError(
                f"{self.partial_path}: record {index} has no key field {self._key!r}"
            )
        value = record[self._key]
        return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value

    def _dump(self, record: Record, index: int) -> str:
        if not isinstance(record, dict):
            raise DatasetError(
                f"{self._filepath}: record {index} is a {type(record).__name__}, expected a dict"
            )
        try:
            return json.dumps(record, ensure_ascii=False) + "\n"
        except (TypeError, ValueError) as exc:
            raise DatasetError(
                f"{self._filepath}: record {index} is not JSON-serialisable: {exc}"
            ) from exc

"""What a game's derived records were computed from, so that a re-run can tell whether
they still hold.

The expert's log and the teacher's privileged state of a game depend only on the game
(its index entry and the content of the files it names) and on the ingest parameters. Every LEAP
iteration runs ``ingest`` and ``privilege`` again on the same games; with their datasets'
``reuse: true`` (``leap_kalm.datasets.jsonl``) a record whose fingerprint still matches
is kept instead of replayed (ALFWorld learn profile: 200 expert games and privileged
states, about 3 minutes per iteration on 2 cores).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

# files up to this size are hashed by content; larger ones (a real catalog) by size and mtime
CONTENT_HASH_LIMIT = 16 * 1024 * 1024


def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    if size > CONTENT_HASH_LIMIT:
        return f"file:{size}:{mtime_ns}"
    with open(path, "rb") as handle:
        return "sha1:" + hashlib.sha1(handle.read(), usedforsecurity=False).hexdigest()


def _path_digest(path: str) -> str:
    """A file by its content (by size and mtime above ``CONTENT_HASH_LIMIT``); a folder by
    the names and digests of the files directly in it. Never by where it is, so that two
    copies of a project fingerprint the same games alike."""
    if os.path.isfile(path):
        stat = os.stat(path)
        return _file_digest(path, stat.st_size, stat.st_mtime_ns)
    listing = sorted(
        (entry.name, _file_digest(entry.path, entry.stat().st_size, entry.stat().st_mtime_ns))
        for entry in os.scandir(path)
        if entry.is_file()
    )
    return "dir:" + hashlib.sha1(json.dumps(listing).encode(), usedforsecurity=False).hexdigest()


def game_fingerprint(game: dict[str, Any], cache: dict[str, str] | None = None) -> str:
    """A digest of a games-index entry: its fields, with every file or folder it names
    replaced by that file's or folder's digest (so the fingerprint does not depend on where
    the project lies).

    Args:
        game: One entry of the games index (``game_id``, ``split``, ``path`` or ``catalog``...).
        cache: Digests of paths already seen (a folder shared by many games is read once).
    """
    cache = {} if cache is None else cache
    fields: dict[str, Any] = {}
    for key in sorted(game):
        value = game[key]
        if isinstance(value, str) and value and os.path.exists(value):
            if value not in cache:
                cache[value] = _path_digest(value)
            fields[key] = {"digest": cache[value]}
        else:
            fields[key] = value
    text = json.dumps(fields, sort_keys=True)
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def unchanged_games(
    games: Sequence[dict[str, Any]], **expected: Any
) -> tuple[dict[str, str], Callable[[dict[str, Any]], bool]]:
    """The fingerprints of ``games`` by ``game_id``, and the ``reusable`` predicate of a
    producer whose records carry ``game_fingerprint``: a finished record is accepted again
    when its game is one of ``games``, unchanged, and each field in ``expected`` (e.g. the
    ingest parameters, as they read back from JSON) still holds the same value."""
    paths: dict[str, str] = {}
    fingerprints = {g["game_id"]: game_fingerprint(g, paths) for g in games}

    def reusable(record: dict[str, Any]) -> bool:
        game_id = record.get("game_id")
        return (
            game_id in fingerprints
            and record.get("game_fingerprint") == fingerprints[game_id]
            and all(record.get(k) == v for k, v in expected.items())
        )

    return fingerprints, reusable

"""What a game's derived records were computed from, so that a re-run can tell whether
they still hold.

The expert's log and the teacher's privileged state of a game depend only on the game
(its index entry and the files it names) and on the ingest parameters. Every LEAP
iteration runs ``ingest`` and ``privilege`` again on the same games; with their datasets'
``reuse: true`` (``leap_kalm.datasets.jsonl``) a record whose fingerprint still matches
is kept instead of replayed (ALFWorld learn profile: 200 expert games and privileged
states, about 3 minutes per iteration on 2 cores).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

# files up to this size are hashed by content; larger ones (a real catalog) by size and mtime
CONTENT_HASH_LIMIT = 16 * 1024 * 1024


def _path_digest(path: str) -> str:
    if os.path.isfile(path):
        stat = os.stat(path)
        if stat.st_size > CONTENT_HASH_LIMIT:
            return f"file:{stat.st_size}:{stat.st_mtime_ns}"
        with open(path, "rb") as handle:
            return "sha1:" + hashlib.sha1(handle.read(), usedforsecurity=False).hexdigest()
    listing = sorted(
        (entry.name, entry.stat().st_size, entry.stat().st_mtime_ns)
        for entry in os.scandir(path)
        if entry.is_file()
    )
    return "dir:" + hashlib.sha1(json.dumps(listing).encode(), usedforsecurity=False).hexdigest()


def game_fingerprint(game: dict[str, Any], cache: dict[str, str] | None = None) -> str:
    """A digest of a games-index entry and of every file or folder it names (a file by its
    content, a folder by its files' names, sizes and modification times).

    Args:
        game: One entry of the games index (``game_id``, ``split``, ``path`` or ``catalog``...).
        cache: Digests of paths already seen (a folder shared by many games is read once).
    """
    cache = {} if cache is None else cache
    parts = [json.dumps(game, sort_keys=True)]
    for key in sorted(game):
        value = game[key]
        if isinstance(value, str) and value and os.path.exists(value):
            if value not in cache:
                cache[value] = _path_digest(value)
            parts.append(f"{key}={cache[value]}")
    return hashlib.sha1("\n".join(parts).encode(), usedforsecurity=False).hexdigest()

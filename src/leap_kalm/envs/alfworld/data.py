"""Finding ALFWorld games on disk: generated ones or the official ``json_2.1.1`` data."""

from __future__ import annotations

import json
import os
from pathlib import Path

ENV_VAR = "ALFWORLD_DATA"
OFFICIAL_DIR = "json_2.1.1"
GAME_FILE = "game.tw-pddl"
TRAJ_FILE = "traj_data.json"


class AlfWorldDataNotFoundError(FileNotFoundError):
    """No ALFWorld games where they were looked for."""


def _help(looked_for: str) -> str:
    return (
        f"No ALFWorld games found: looked for {looked_for}, i.e. folders holding both "
        f"'{GAME_FILE}' and '{TRAJ_FILE}' (official layout: <root>/{OFFICIAL_DIR}/train/"
        "<task>/<trial>/).\n"
        "To get the official data: on a machine with internet run `pip install alfworld` and "
        "`alfworld-download` (it fills ~/.cache/alfworld or $ALFWORLD_DATA), copy that folder "
        f"here and set {ENV_VAR}=<that folder> (or pass the path).\n"
        "Or generate games offline instead: "
        "`from leap_kalm.envs.alfworld import generate_games; "
        "generate_games('train', n=60, seed=0, out_dir='data/01_raw/alfworld')`."
    )


def load_games(path: str | Path, split: str | None = None) -> list[Path]:
    """Every ALFWorld game under ``path``: sorted ``game.tw-pddl`` paths of folders holding
    both ``game.tw-pddl`` and ``traj_data.json``.

    Follows ALFWorld's own loader: folders whose path contains ``movable`` or ``Sliced`` are
    skipped, as are games whose ``game.tw-pddl`` lacks ``"solvable": true``.

    Args:
        path: a split folder, a root holding split folders, or an official data root.
        split: if given, look under ``path/split`` (or ``path/json_2.1.1/split``) when it exists.
    """
    root = Path(path).expanduser()
    if split is not None:
        for cand in (root / split, root / OFFICIAL_DIR / split):
            if cand.is_dir():
                root = cand
                break
    if not root.exists():
        raise AlfWorldDataNotFoundError(_help(str(root)))
    games = []
    for traj in sorted(root.rglob(TRAJ_FILE)):
        folder = traj.parent
        game = folder / GAME_FILE
        rel = str(folder.relative_to(root)) if folder != root else folder.name
        if not game.is_file() or "movable" in rel or "Sliced" in rel:
            continue
        try:
            if not json.loads(game.read_text()).get("solvable", False):
                continue
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        games.append(game)
    return games


def resolve_alfworld_data(path: str | Path | None = None, split: str = "train") -> Path:
    """The folder holding a split's games.

    Uses ``path`` if given, else ``$ALFWORLD_DATA``. Accepts the data root (with
    ``json_2.1.1/<split>`` or ``<split>`` below it) or the split folder itself.

    Raises:
        AlfWorldDataNotFoundError: (a ``FileNotFoundError``) when nothing usable is there; the
            message says what was looked for and how to get or generate games.
    """
    source = "argument"
    if path is None:
        env = os.environ.get(ENV_VAR, "").strip()
        if not env:
            raise AlfWorldDataNotFoundError(
                _help(f"a path argument or ${ENV_VAR} (neither is set)")
            )
        path, source = env, f"${ENV_VAR}"
    root = Path(path).expanduser()
    candidates = [root / OFFICIAL_DIR / split, root / split]
    split_like = {OFFICIAL_DIR, "train", "valid_seen", "valid_unseen", "valid_train"}
    if root.is_dir() and not any((root / name).is_dir() for name in split_like):
        candidates.append(root)  # the split folder itself
    for cand in candidates:
        if cand.is_dir() and any(cand.rglob(TRAJ_FILE)):
            return cand
    looked = ", ".join(str(c) for c in candidates)
    raise AlfWorldDataNotFoundError(_help(f"{looked} (from {source})"))

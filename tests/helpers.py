"""Helpers for tests that run the project's CLI in a copy of the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
KEDRO = str(Path(sys.executable).with_name("kedro"))


def copy_project(dest: Path) -> Path:
    """A copy of the checkout without venv, git, data or build output, with an empty data/."""
    shutil.copytree(
        PROJECT,
        dest,
        ignore=shutil.ignore_patterns(".venv", ".git", "data", "build", "*.pyc", "__pycache__"),
    )
    (dest / "data").mkdir()
    return dest


def run_kedro(
    *args: str, cwd: Path = PROJECT, timeout: int = 300, **env: str
) -> subprocess.CompletedProcess:
    """``kedro <args>`` in ``cwd`` with telemetry off (and any extra environment variables)."""
    environment = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", **env}
    return subprocess.run(
        [KEDRO, *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout
    )

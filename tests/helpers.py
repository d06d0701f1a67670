"""Helpers for tests that run the project's CLI in a copy of the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def execute_notebook(project: Path, name: str, env: str = "test") -> Any:
    """Execute ``notebooks/<name>`` of ``project`` against its ``--env <env>`` outputs (as CI
    does); returns the executed notebook (its cells carry their outputs)."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(project / "notebooks" / name, as_version=4)
    previous = os.environ.get("KEDRO_ENV")
    os.environ["KEDRO_ENV"] = env
    try:
        NotebookClient(
            notebook,
            timeout=300,
            kernel_name="python3",
            resources={"metadata": {"path": str(project / "notebooks")}},
        ).execute()
    finally:
        if previous is None:
            os.environ.pop("KEDRO_ENV", None)
        else:
            os.environ["KEDRO_ENV"] = previous
    return notebook


def notebook_text(notebook: Any) -> str:
    """The text the executed ``notebook``'s cells printed."""
    return "".join(o.get("text", "") for cell in notebook.cells for o in cell.get("outputs", []))

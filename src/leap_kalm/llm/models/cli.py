"""``python -m leap_kalm.llm.models {prepare,list}``: build the cached models, list the registry."""

from __future__ import annotations

import logging

from leap_kalm.llm.models.embedded import prepare_embedded_model
from leap_kalm.llm.models.registry import REGISTRY
from leap_kalm.llm.models.tiny import build_tiny_model


def main(argv: list[str] | None = None) -> int:
    """``python -m leap_kalm.llm.models prepare`` converts the embedded model (used by make setup)."""
    import argparse
    import time

    from leap_kalm.llm import models as package

    parser = argparse.ArgumentParser(
        prog="python -m leap_kalm.llm.models", description=package.__doc__.splitlines()[0]
    )
    parser.add_argument("command", choices=["prepare", "list"])
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args(argv)
    if args.command == "list":
        for name, text in REGISTRY.items():
            print(f"{name:24s} {text}")  # noqa: T201 - CLI output
        return 0
    logging.basicConfig(level=logging.INFO)
    start = time.perf_counter()
    embedded = prepare_embedded_model(args.cache_dir)
    tiny = build_tiny_model(args.cache_dir)
    print(f"embedded model: {embedded}\ntiny model: {tiny}\n({time.perf_counter() - start:.1f} s)")  # noqa: T201
    return 0

"""Where every benchmark writes its report: ``benchmarks/results/<name>.md``."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def write_report(name: str, lines: list[str]) -> Path:
    """Write ``lines`` as ``results/<name>.md``, print them and the path; return the path."""
    out = RESULTS / f"{name}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines) + "\n"
    out.write_text(text, encoding="utf-8")
    print(text, end="")
    print(f"wrote {out}")
    return out

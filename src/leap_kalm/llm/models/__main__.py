"""Entry point of ``python -m leap_kalm.llm.models`` (see ``cli.main``)."""

from leap_kalm.llm.models.cli import main

if __name__ == "__main__":
    raise SystemExit(main())

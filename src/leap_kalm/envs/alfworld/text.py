"""ALFWorld's task sentence: the one parser for ``Your task is to: …``."""

from __future__ import annotations

import re

TASK_MARKER = "Your task is to:"
_END = re.compile(r'["\n]')


def parse_task(text: str) -> str:
    """The task after ``Your task is to:`` in an observation or a game's grammar, without
    its final period; ``""`` when the text holds no task.

    The task ends at the end of its line (observations) or at a closing quote (the
    grammar's JSON strings).
    """
    if TASK_MARKER not in text:
        return ""
    rest = text.split(TASK_MARKER, 1)[1].strip()
    return _END.split(rest, maxsplit=1)[0].strip().rstrip(".")

"""Parse ``REASON:/ACTION:`` answers and map the action onto an admissible candidate.

Small models answer sloppily: markdown, quotes, missing sections, extra lines, near
misses of a candidate. The parser repairs in order — exact, normalised, fuzzy — and
reports which repair it used, so outputs can count them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

REPAIRS = ("exact", "template", "normalized", "fuzzy", "unmatched", "empty", "scored")
_PLACEHOLDER = re.compile(r"<[^<>]+>")

_SECTION = re.compile(r"^\W*(reason|action)\W*:\s*(.*)$", re.IGNORECASE)
_WRAPPERS = " \t`*_\"'"
_PUT = re.compile(r"^put (.+?) (?:in/on|in|on|into|onto) (.+)$")


@dataclass(frozen=True)
class ParsedAnswer:
    """An answer mapped onto the candidates.

    Attributes:
        reason: The text of the REASON section ('' if none).
        action: The chosen candidate, or the raw action when nothing matched.
        raw_action: What the model wrote as its action.
        repair: One of ``REPAIRS``: how the action was matched (``scored``: chosen among
            the candidates by the student's own likelihood, not parsed).
        score: The fuzzy score (0-100) for ``fuzzy``; 100 for exact/normalised; the
            summed log-probability for ``scored``.
    """

    reason: str
    action: str
    raw_action: str
    repair: str
    score: float

    @property
    def valid(self) -> bool:
        return self.repair in ("exact", "normalized", "fuzzy", "scored")


def normalize_action(text: str) -> str:
    """Lower-case, strip quotes/markdown/punctuation, collapse spaces, ``put X in Y`` → ``move X to Y``."""
    text = text.strip(_WRAPPERS)
    text = re.sub(r"^[-*•>\d.)\s]+", "", text)  # list bullets, numbering, '> ' prompts
    text = text.lower().rstrip(".!;,").strip(_WRAPPERS).rstrip(".!;,")
    text = re.sub(r"\s+", " ", text).strip()
    match = _PUT.match(text)
    if match:
        text = f"move {match.group(1)} to {match.group(2)}"
    return text


def split_answer(text: str) -> tuple[str, str]:
    """Return ``(reason, raw_action)`` from a model answer, tolerating missing markers."""
    sections: dict[str, list[str]] = {"reason": [], "action": []}
    current: str | None = None
    for line in text.splitlines():
        match = _SECTION.match(line.strip())
        if match:
            current = match.group(1).lower()
            if match.group(2).strip():
                sections[current].append(match.group(2).strip())
            continue
        if current is not None and line.strip():
            sections[current].append(line.strip())
    reason = " ".join(sections["reason"]).strip()
    action_lines = sections["action"]
    if action_lines:
        return reason, action_lines[0]
    if current is None:  # no markers at all: the last non-empty line is the best guess
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return "", lines[-1] if lines else ""
    return reason, ""


def fill_template(raw_action: str, candidates: Sequence[str]) -> str | None:
    """``raw_action`` when it fills a candidate template such as WebShop's
    ``search[<query>]`` (free text in place of the ``<...>`` part, not the placeholder
    itself), else ``None``."""
    action = raw_action.strip()
    for candidate in candidates:
        if not _PLACEHOLDER.search(candidate):
            continue
        prefix, _, rest = candidate.partition(_PLACEHOLDER.search(candidate).group(0))
        pattern = re.escape(prefix) + r"(?P<text>.+)" + re.escape(rest)
        match = re.fullmatch(pattern, action, flags=re.IGNORECASE | re.DOTALL)
        if (
            match
            and match.group("text").strip()
            and not _PLACEHOLDER.fullmatch(match.group("text").strip())
        ):
            return action
    return None


def is_admissible(action: str, candidates: Sequence[str]) -> bool:
    """Whether ``action`` is one of ``candidates`` or fills one of their templates."""
    if _PLACEHOLDER.search(action):  # a template itself is not an action
        return False
    return action in candidates or fill_template(action, candidates) is not None


def match_candidate(
    raw_action: str, candidates: Sequence[str], fuzzy_cutoff: float = 80.0
) -> tuple[str, str, float]:
    """Map a raw action onto the candidates: ``(action, repair, score)``.

    A fuzzy match keeps the action's verb (:func:`action_verb`) and must be unique: when
    no candidate shares the verb, or the nearest two tie, the action is ``unmatched``
    (which ``action_selection: repair`` then scores under the student).
    """
    if not raw_action.strip():
        return "", "empty", 0.0
    if _PLACEHOLDER.search(raw_action):  # a template copied as it stands is not an action
        return raw_action.strip(), "unmatched", 0.0
    if raw_action in candidates:
        return raw_action, "exact", 100.0
    filled = fill_template(raw_action, candidates)
    if filled is not None:
        return filled, "template", 100.0
    normalized = normalize_action(raw_action)
    by_norm = {normalize_action(c): c for c in candidates}
    if normalized in by_norm:
        return by_norm[normalized], "normalized", 100.0
    # A fuzzy repair fixes a name or a number, never the kind of action: the nearest
    # candidate of another verb undoes what the student meant (on the learn profile,
    # "take apple 1 from microwave 1" while holding it became "move apple 1 to microwave 1",
    # "clean egg 1 with fridge 1" became "cool ..."; docs/results.md).
    same_verb = [c for c in by_norm if action_verb(c) == action_verb(normalized)]
    if same_verb:
        from rapidfuzz import fuzz, process

        best = process.extract(normalized, same_verb, scorer=fuzz.ratio, limit=2)
        if best and best[0][1] >= fuzzy_cutoff:
            # Two candidates equally near (a truncated ``click[g00000`` against every
            # product id) is a guess, not a repair: leave it unmatched.
            if len(best) == 1 or best[1][1] < best[0][1]:
                return by_norm[best[0][0]], "fuzzy", float(best[0][1])
    return raw_action.strip(), "unmatched", 0.0


def action_verb(action: str) -> str:
    """What kind of action ``action`` is: its first word (``go``, ``take``), or what
    comes before ``[`` in WebShop's ``click[...]`` and ``search[...]``."""
    return re.split(r"[\s\[]", action.strip().lower(), maxsplit=1)[0]


def parse_answer(text: str, candidates: Sequence[str], fuzzy_cutoff: float = 80.0) -> ParsedAnswer:
    """Parse a ``REASON:/ACTION:`` answer and match its action to a candidate."""
    reason, raw = split_answer(text)
    action, repair, score = match_candidate(raw, candidates, fuzzy_cutoff)
    return ParsedAnswer(reason=reason, action=action, raw_action=raw, repair=repair, score=score)


def count_repairs(answers: Iterable[ParsedAnswer]) -> dict[str, int]:
    """How many answers needed each kind of repair (every kind present, zeros included)."""
    counts = Counter(a.repair for a in answers)
    return {repair: counts.get(repair, 0) for repair in REPAIRS}

"""Turning strings a model quoted from a response into character offsets of that response.

Models are asked for verbatim substrings in order of appearance, but they change case, re-flow whitespace or
misquote a word. Each string is tried in three passes, each first after a moving cursor (the end of the previous
placed string, so a repeated phrase maps to its next occurrence) and then anywhere:

1. `exact`: verbatim;
2. `normalized`: ignoring case and collapsing runs of whitespace;
3. `fuzzy`: rapidfuzz's best partial alignment, then the nearby whole-word window with the highest similarity
   (rapidfuzz ratio, 0-1), accepted when it reaches `min_similarity` and recorded with the placement.

Strings that no pass places are returned unplaced (start None), so callers count and log them.

The fuzzy pass has a CPU budget: its cost grows with the needle's length times the length of every window it
compares (a 3,000-character near miss took minutes). When the comparisons it would make exceed
`MAX_FUZZY_CELLS` character pairs, it gives up and the string is unplaced, with `gave_up` set. The budget is
counted in work, not seconds, so the same inputs place the same way on every machine.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence

from shambench.schema import Model, Span

MIN_SIMILARITY = 0.8
# Character pairs (needle length x window length, summed over the windows compared) the fuzzy pass may spend on one
# string: at most a few seconds of rapidfuzz on these machines (a 700-character near miss still places).
MAX_FUZZY_CELLS = 20_000_000_000
_WORD = re.compile(r"\w+")
# Quotes and whitespace a model may wrap around a quoted substring.
_WRAPPING = " \t\r\n\"'`“”‘’"


class Placement(Model):
    """Where one quoted string was found in the response."""

    text: str
    """The string as the model gave it."""
    start: int | None = None
    """Offset of the first character, or None when the string could not be placed."""
    end: int | None = None
    """Offset one past the last character, or None when unplaced."""
    method: str | None = None
    """`exact`, `normalized` or `fuzzy`; None when unplaced."""
    similarity: float = 0.0
    """1.0 for exact and normalized matches, the rapidfuzz similarity (0-1) of a fuzzy match, 0 when unplaced."""
    gave_up: bool = False
    """True when the fuzzy pass was abandoned because it would exceed `MAX_FUZZY_CELLS` (the string is unplaced)."""

    @property
    def placed(self) -> bool:
        """Whether the string was found."""
        return self.start is not None

    def as_span(self, label: str | None = None) -> Span:
        """The placed string as a span (labelled `label`); ValueError when it was not placed."""
        if self.start is None or self.end is None:
            raise ValueError(f"{self.text!r} was not placed")
        return Span(start=self.start, end=self.end, label=label)


class _Normalized:
    """A lower-cased, whitespace-collapsed copy of a text with a map from its offsets back to the original."""

    def __init__(self, text: str):
        chars: list[str] = []
        origin: list[int] = []
        for i, ch in enumerate(text):
            if ch.isspace():
                if chars and chars[-1] == " ":
                    continue
                ch = " "
            for low in ch.lower():
                chars.append(low)
                origin.append(i)
        self.text = "".join(chars)
        self.origin = origin

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original range covered by normalized characters `[start, end)`."""
        return self.origin[start], self.origin[end - 1] + 1

    def position(self, original: int) -> int:
        """The first normalized offset at or after an original offset (`origin` rises, so a binary search)."""
        return bisect_left(self.origin, original)


def _normalize(text: str) -> str:
    return _Normalized(text).text.strip()


def _find(haystack: str, needle: str, cursor: int) -> int:
    """Index of `needle` at or after `cursor`, else anywhere, else -1."""
    at = haystack.find(needle, cursor)
    return at if at >= 0 else haystack.find(needle)


def _word_bounds(text: str) -> tuple[list[int], list[int]]:
    """Offsets where words start and where they end in `text`."""
    starts = [m.start() for m in _WORD.finditer(text)]
    ends = [m.end() for m in _WORD.finditer(text)]
    return starts, ends


class _OverBudget(Exception):
    """The fuzzy pass would compare more than `MAX_FUZZY_CELLS` character pairs."""


def _best_window(text: str, needle: str, start: int, end: int, budget: int) -> tuple[tuple[int, int, float], int]:
    """Among whole-word windows near `[start, end)`, the one most similar to `needle` (rapidfuzz ratio, 0-1),
    and the character pairs that cost; _OverBudget when that would be more than `budget`."""
    from rapidfuzz import fuzz

    slack = max(2, len(needle) // 2)
    starts, ends = _word_bounds(text)
    near_starts = [s for s in starts if start - slack <= s <= start + slack] or [start]
    near_ends = [e for e in ends if end - slack <= e <= end + slack] or [end]
    cells = len(needle) * (end - start + sum(e - s for s in near_starts for e in near_ends if e > s))
    if cells > budget:
        raise _OverBudget
    best = (start, end, fuzz.ratio(needle, text[start:end]) / 100)
    for s in near_starts:
        for e in near_ends:
            if e > s:
                score = fuzz.ratio(needle, text[s:e]) / 100
                if score > best[2]:
                    best = (s, e, score)
    return best, cells


def _fuzzy(norm: _Normalized, needle: str, cursor: int) -> tuple[int, int, float] | None:
    """The whole-word window of the normalized response most like `needle`, after the cursor first, or None;
    _OverBudget when the search would exceed `MAX_FUZZY_CELLS`."""
    from rapidfuzz import fuzz

    best = None
    budget = MAX_FUZZY_CELLS
    for offset in dict.fromkeys((norm.position(cursor), 0)):
        window = norm.text[offset:]
        if len(window) < len(needle):
            continue
        budget -= len(needle) * len(window)
        if budget < 0:
            raise _OverBudget
        found = fuzz.partial_ratio_alignment(needle, window)
        if found is None or found.score <= 0:
            continue
        candidate, cells = _best_window(norm.text, needle, offset + found.dest_start, offset + found.dest_end, budget)
        budget -= cells
        if best is None or candidate[2] > best[2]:
            best = candidate
    return best


def place(
    response: str,
    text: str,
    cursor: int = 0,
    min_similarity: float = MIN_SIMILARITY,
    normalized: _Normalized | None = None,
) -> Placement:
    """Where `text` occurs in `response`, searching after `cursor` first (see the module docstring);
    `normalized` is the response's normalized copy when the caller has made it already."""
    needle = text.strip(_WRAPPING)
    if not needle:
        return Placement(text=text)
    at = _find(response, needle, cursor)
    if at >= 0:
        return Placement(text=text, start=at, end=at + len(needle), method="exact", similarity=1.0)
    norm = normalized or _Normalized(response)
    norm_needle = _normalize(needle)
    if not norm_needle:
        return Placement(text=text)
    at = _find(norm.text, norm_needle, norm.position(cursor))
    if at >= 0:
        start, end = norm.span(at, at + len(norm_needle))
        return Placement(text=text, start=start, end=end, method="normalized", similarity=1.0)
    try:
        found = _fuzzy(norm, norm_needle, cursor)
    except _OverBudget:
        return Placement(text=text, gave_up=True)
    if found is None or found[2] < min_similarity:
        return Placement(text=text, similarity=found[2] if found else 0.0)
    start, end = norm.span(found[0], found[1])
    return Placement(text=text, start=start, end=end, method="fuzzy", similarity=round(found[2], 4))


def locate(response: str, texts: Sequence[str], min_similarity: float = MIN_SIMILARITY) -> list[Placement]:
    """A placement for each string, in order, with a cursor that moves past each placed string."""
    cursor = 0
    out = []
    norm: _Normalized | None = None
    for text in texts:
        # The response is normalized once, the first time a string needs it, not once per string: the cost of a
        # prediction stays linear in its strings.
        if norm is None and (needle := text.strip(_WRAPPING)) and needle not in response:
            norm = _Normalized(response)
        p = place(response, text, cursor, min_similarity, norm)
        if p.placed:
            cursor = max(cursor, p.end or 0)
        out.append(p)
    return out

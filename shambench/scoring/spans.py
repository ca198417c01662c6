"""Operations on character ranges that do not depend on any tokeniser."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shambench.schema import Span


def merge_spans(spans: Iterable[Span]) -> list[Span]:
    """Spans sorted by start, with overlapping or touching ranges merged into one.

    Touching ranges merge too (as Mu-SHROOM's `recompute_hard_labels` does) because no metric can tell
    `[0,3)+[3,5)` from `[0,5)`. A merged span joins the distinct labels with `|` and keeps the highest score.
    """
    ordered = sorted(spans, key=lambda s: (s.start, s.end))
    merged: list[Span] = []
    for span in ordered:
        if merged and span.start <= merged[-1].end:
            merged[-1] = _union(merged[-1], span)
        else:
            merged.append(span)
    return merged


def _union(a: Span, b: Span) -> Span:
    labels = [lab for lab in dict.fromkeys((a.label or "").split("|") + (b.label or "").split("|")) if lab]
    scores = [s for s in (a.score, b.score) if s is not None]
    return a.model_copy(
        update={
            "end": max(a.end, b.end),
            "label": "|".join(labels) or None,
            "score": max(scores) if scores else None,
        }
    )

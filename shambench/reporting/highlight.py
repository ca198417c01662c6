"""One example with its gold and predicted spans marked: for the terminal (`shambench show`) and as a static page
(`shambench show --html`, linked from the leaderboard)."""

from __future__ import annotations

import html
from collections.abc import Sequence

from shambench.schema import Example, Prediction, Span
from shambench.scoring.results import ExampleScores

KINDS = {1: "gold", 2: "pred", 3: "both"}
LEGEND = {"both": "gold and predicted", "gold": "gold, missed", "pred": "predicted, not gold"}
CSS = """
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
section{border-top:1px solid #ddd;padding:.8rem 0}
h2{font-size:1rem;margin:.2rem 0} .meta{color:#666;font-size:.85rem}
.response{white-space:pre-wrap;background:#fafafa;padding:.5rem;border-radius:4px}
mark{padding:0 1px;border-radius:2px} mark.both{background:#7fd68b} mark.gold{background:#f29b9b}
mark.pred{background:#f5e17a} .scores{color:#444;font-size:.85rem} details{margin:.3rem 0} pre{white-space:pre-wrap;font-size:.85rem}
"""


def segments(text: str, gold: Sequence[Span], pred: Sequence[Span]) -> list[tuple[str, str | None]]:
    """The text cut into runs, each marked `both`, `gold` (missed), `pred` (false alarm) or None."""
    marks = [0] * len(text)
    for bit, spans in ((1, gold), (2, pred)):
        for s in spans:
            for i in range(s.start, s.end):
                marks[i] |= bit
    out: list[tuple[str, str | None]] = []
    start = 0
    for i in range(1, len(text) + 1):
        if i == len(text) or marks[i] != marks[start]:
            out.append((text[start:i], KINDS.get(marks[start])))
            start = i
    return out


# How `shambench show` marks spans when its output is not a terminal (no colours).
PLAIN_MARKS = {"both": ("[[{{", "}}]]"), "gold": ("[[", "]]"), "pred": ("{{", "}}")}


def plain_marked(text: str, gold: Sequence[Span], pred: Sequence[Span]) -> str:
    """The text with `[[gold, missed]]`, `{{predicted, not gold}}` and `[[{{both}}]]` marked in plain characters."""
    return "".join(
        part if kind is None else f"{PLAIN_MARKS[kind][0]}{part}{PLAIN_MARKS[kind][1]}"
        for part, kind in segments(text, gold, pred)
    )


def usable_spans(pred: Prediction | None) -> list[Span]:
    """A prediction's spans, or none when it is missing or failed."""
    return pred.spans if pred is not None and pred.error is None else []


def _scores_html(row: ExampleScores | None) -> str:
    if row is None:
        return ""
    t, s = row.token, row.sentence
    text = f"span F1 {t.f1:.3f} (P {t.precision:.3f}, R {t.recall:.3f}) · sentence F1 {s.f1:.3f}"
    if row.cor is not None:
        text += f" · IoU {row.iou:.3f} · Cor {row.cor:.3f}"
    return f'<div class="scores">{html.escape(text)}</div>'


def _example_html(ex: Example, pred: Prediction | None, row: ExampleScores | None = None) -> str:
    marked = "".join(
        html.escape(t) if kind is None else f'<mark class="{kind}">{html.escape(t)}</mark>'
        for t, kind in segments(ex.response, ex.hallu_spans, usable_spans(pred))
    )
    status = "no prediction" if pred is None else f"failed: {pred.error}" if pred.error else ""
    parts = [
        f'<section id="{html.escape(ex.id, quote=True)}"><h2>{html.escape(ex.id)}</h2>',
        f'<div class="meta">{html.escape(ex.partition)}{" · " + html.escape(status) if status else ""}</div>',
    ]
    if row is not None:
        parts.append(_scores_html(row))
    if ex.question:
        parts.append(f"<p><b>Question:</b> {html.escape(ex.question)}</p>")
    if ex.context:
        parts.append(f"<details><summary>context</summary><pre>{html.escape(ex.context)}</pre></details>")
    parts.append(f'<div class="response">{marked}</div></section>')
    return "\n".join(parts)


def examples_page(
    title: str,
    examples: Sequence[Example],
    predictions: dict[str, Prediction],
    scores: dict[str, ExampleScores] | None = None,
) -> str:
    """A self-contained HTML page of the examples, in the order given, each with an anchor `#<id>` and, when
    `scores` are given, its per-example scores (everything escaped)."""
    legend = " ".join(f'<mark class="{k}">{html.escape(v)}</mark>' for k, v in LEGEND.items())
    body = "\n".join(_example_html(ex, predictions.get(ex.id), (scores or {}).get(ex.id)) for ex in examples)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p>{legend}</p>\n{body}\n</body></html>\n"
    )

"""One example with its gold and predicted spans marked: for the terminal (`shambench show`) and as a static page
(`shambench show --html`, linked from the leaderboard)."""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: `show --help` reads PER_PAGE from here without importing the schema
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
section{content-visibility:auto;contain-intrinsic-size:auto 10rem}
form.filter{position:sticky;top:0;background:#fff;padding:.5rem 0;border-bottom:1px solid #ddd;font-size:.9rem}
form.filter input,form.filter select{margin-right:1rem}
"""
# Filters the sections by id, partition and per-example span F1; the page is complete without it. Sections the
# browser does not show are not laid out (content-visibility), so pages of thousands of examples stay fast.
SCRIPT = """"use strict";
const form = document.querySelector("form.filter");
const sections = [...document.querySelectorAll("section[data-f1]")];
function apply() {
  const id = form.elements.id.value.trim().toLowerCase();
  const part = form.elements.partition.value;
  const max = form.elements.f1max.value === "" ? Infinity : Number(form.elements.f1max.value);
  let shown = 0;
  for (const s of sections) {
    const ok = (!id || s.id.toLowerCase().includes(id)) && (!part || s.dataset.partition === part) &&
      Number(s.dataset.f1) <= max;
    s.hidden = !ok;
    shown += ok;
  }
  document.getElementById("shown").textContent = shown + " of " + sections.length + " shown";
}
form.addEventListener("input", apply);
apply();
// Each distinct context is stored once (many responses share a source document) and put in place when opened.
const contexts = JSON.parse(document.getElementById("contexts").textContent);
for (const d of document.querySelectorAll("details[data-context]")) {
  d.addEventListener("toggle", () => {
    const pre = d.querySelector("pre");
    if (d.open && !pre.textContent) pre.textContent = contexts[d.dataset.context];
  });
}
"""


def segments(text: str, gold: Sequence[Span], pred: Sequence[Span]) -> list[tuple[str, str | None]]:
    """The text cut into runs, each marked `both`, `gold` (missed), `pred` (false alarm) or None.

    White space is never a token to the scorer, so a run of it carries only what the text on both sides of it
    shares: the space between two tokens of a gold span that were both predicted shows as agreement, not as a
    missed character."""
    marks = [0] * len(text)
    for bit, spans in ((1, gold), (2, pred)):
        for s in spans:
            for i in range(s.start, s.end):
                marks[i] |= bit
    i = 0
    while i < len(text):
        if not text[i].isspace():
            i += 1
            continue
        j = i
        while j < len(text) and text[j].isspace():
            j += 1
        shared = (marks[i - 1] if i else 0) & (marks[j] if j < len(text) else 0)
        marks[i:j] = [shared] * (j - i)
        i = j
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


def _scores_html(row: ExampleScores) -> str:
    t, s = row.token, row.sentence
    text = f"span F1 {t.f1:.3f} (P {t.precision:.3f}, R {t.recall:.3f}) · sentence F1 {s.f1:.3f}"
    if row.cor is not None:
        text += f" · IoU {row.iou:.3f} · Cor {row.cor:.3f}"
    return f'<div class="scores">{html.escape(text)}</div>'


def _example_html(ex: Example, pred: Prediction | None, row: ExampleScores, context_key: str | None) -> str:
    marked = "".join(
        html.escape(t) if kind is None else f'<mark class="{kind}">{html.escape(t)}</mark>'
        for t, kind in segments(ex.response, ex.hallu_spans, usable_spans(pred))
    )
    status = "no prediction" if pred is None else f"failed: {pred.error}" if pred.error else ""
    parts = [
        f'<section id="{html.escape(ex.id, quote=True)}" data-partition="{html.escape(ex.partition, quote=True)}" '
        f'data-f1="{row.token.f1:.3f}"><h2>{html.escape(ex.id)}</h2>',
        f'<div class="meta">{html.escape(ex.partition)}{" · " + html.escape(status) if status else ""}</div>',
        _scores_html(row),
    ]
    if ex.question:
        parts.append(f"<p><b>Question:</b> {html.escape(ex.question)}</p>")
    if context_key is not None:
        parts.append(
            f'<details data-context="{context_key}"><summary>context ({len(ex.context):,} characters)</summary>'
            "<pre></pre></details>"
        )
    parts.append(f'<div class="response">{marked}</div></section>')
    return "\n".join(parts)


def _filter_form(examples: Sequence[Example]) -> str:
    options = "".join(
        f'<option value="{html.escape(p, quote=True)}">{html.escape(p)}</option>'
        for p in sorted({ex.partition for ex in examples})
    )
    return (
        '<form class="filter">id <input name="id" type="search" size="18"> partition <select name="partition">'
        f'<option value="">all on this page</option>{options}</select> span F1 at most '
        '<input name="f1max" type="number" min="0" max="1" step="0.05" style="width:5em"> '
        '<span id="shown"></span></form>'
    )


def examples_page(
    title: str,
    examples: Sequence[Example],
    predictions: dict[str, Prediction],
    scores: dict[str, ExampleScores],
    summary: Sequence[str] = (),
    pages: Sequence[tuple[str, str]] = (),
) -> str:
    """A self-contained HTML page of the examples, in the order given, each with an anchor `#<id>` and its own
    scores (a run's `example_scores`), filterable by id, partition and span F1, under the `summary` lines
    (everything escaped; the only script is ours, allowed by its hash). Each distinct context is stored once and
    shown when its example's context is opened. `pages` (label, file name) links the other pages of a paginated
    set (`paginated`)."""
    legend = " ".join(f'<mark class="{k}">{html.escape(v)}</mark>' for k, v in LEGEND.items())
    keys: dict[str, str] = {}
    for ex in examples:
        if ex.context:
            keys.setdefault(ex.context, str(len(keys)))
    body = "\n".join(_example_html(ex, predictions.get(ex.id), scores[ex.id], keys.get(ex.context)) for ex in examples)
    # JSON in a script element: `<` escaped so that no text of the data can close the element.
    contexts = json.dumps({key: text for text, key in keys.items()}, ensure_ascii=False).replace("<", "\\u003c")
    intro = "".join(f'<p class="meta">{html.escape(line)}</p>' for line in summary)
    if pages:
        links = " ".join(
            f'<a href="{html.escape(name, quote=True)}">{html.escape(label)}</a>' if name else html.escape(label)
            for label, name in pages
        )
        intro += f'<p class="meta" id="pages">pages: {links}</p>'
    csp = f"default-src 'none'; style-src {csp_hash(CSS)}; script-src {csp_hash(SCRIPT)}; img-src 'none'"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp, quote=True)}">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>{intro}<p>{legend}</p>\n{_filter_form(examples)}\n{body}\n"
        f'<script type="application/json" id="contexts">{contexts}</script>\n'
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def csp_hash(text: str) -> str:
    """The Content-Security-Policy source expression allowing exactly this inline script or style."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def page_names(first: str, n_pages: int) -> list[str]:
    """The file names of a paginated set: `first` (e.g. `worst.html`), then `worst-2.html`, `worst-3.html`, ..."""
    stem, dot, suffix = first.rpartition(".")
    if not dot:
        stem, suffix = first, ""
    return [first] + [f"{stem}-{k}{dot}{suffix}" for k in range(2, n_pages + 1)]


PER_PAGE = 500
"""Examples per page of `shambench show --html` and of the leaderboard's example pages."""


def paginated(
    title: str,
    examples: Sequence[Example],
    predictions: dict[str, Prediction],
    scores: dict[str, ExampleScores],
    first: str,
    per_page: int,
    summary: Sequence[str] = (),
) -> dict[str, str]:
    """The examples as pages of at most `per_page`, by file name (`page_names`), each linking the others: a
    browser opens a page of a whole benchmark's examples at once instead of tens of megabytes."""
    chunks = [examples[i : i + per_page] for i in range(0, len(examples), per_page)] or [examples]
    names = page_names(first, len(chunks))
    out = {}
    for k, (name, chunk) in enumerate(zip(names, chunks)):
        start = k * per_page
        label = f"page {k + 1} of {len(chunks)}: examples {start + 1}-{start + len(chunk)}"
        nav = [(str(j + 1), "" if j == k else other) for j, other in enumerate(names)] if len(chunks) > 1 else []
        out[name] = examples_page(title, chunk, predictions, scores, [*summary, label] if nav else summary, nav)
    return out

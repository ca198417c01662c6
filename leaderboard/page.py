"""The self-contained leaderboard page: one HTML file with its CSS, script and SVG charts inline.

Every name, parameter and path on the page comes from a run or a submission, so the template autoescapes all of
it; the only markup not escaped is our own CSS and script, whose hashes the page's Content-Security-Policy lists
(so even a missed escape could not run injected script or load anything from the network).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shambench.leaderboard.errortypes import NOTE as TYPES_NOTE
from shambench.leaderboard.errortypes import type_tables
from shambench.leaderboard.schema import Cell, Entry, Leaderboard, Level
from shambench.reporting.highlight import csp_hash
from shambench.scoring.measures import registered
from shambench.scoring.typed import TYPES_CONVENTION

HERE = Path(__file__).resolve().parent
LEVELS = (("span", "Span level (token F1)"), ("sentence", "Sentence level"))
# Ten colours that stay apart for common colour-vision deficiencies (Tableau 10).
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
REPORTED_COLOUR = "#555555"


@dataclass(frozen=True)
class Frame:
    """Geometry of a horizontal chart whose x axis is F1 in [0, 1]."""

    left: float
    width: float
    top: float
    row: float

    def x(self, value: float) -> float:
        """The x coordinate of an F1 value (clamped to the axis)."""
        return round(self.left + max(0.0, min(1.0, value)) * self.width, 1)

    def y(self, index: int) -> float:
        """The centre line of the index-th row."""
        return round(self.top + (index + 0.5) * self.row, 1)

    def height(self, n_rows: int) -> float:
        """The chart's full height for `n_rows` rows plus the axis labels."""
        return self.top + n_rows * self.row + 24

    def ticks(self) -> list[dict[str, Any]]:
        """Vertical grid lines at 0, 0.2, ..., 1."""
        return [{"x": self.x(v / 5), "label": f"{v / 5:.1f}"} for v in range(6)]


STRIP = Frame(left=130, width=1000, top=12, row=46)
BARS = Frame(left=120, width=360, top=6, row=22)

# Table sections: ranked and reference rows together (by score), then the rows that are not comparable.
SECTIONS = (
    ("main", ("ranked", "reference")),
    ("partial", ("partial",)),
    ("incomplete", ("incomplete",)),
    ("reported", ("reported",)),
)


def charted(board: Leaderboard) -> list[Entry]:
    """The reproduced rows the charts show: ranked and reference ones (the others are not comparable)."""
    return [e for e in board.entries if e.standing in ("ranked", "reference")]


def colours(board: Leaderboard) -> dict[str, str]:
    """Row id → colour: charted rows in their order on the board; others fall back to grey."""
    return {e.id: PALETTE[i % len(PALETTE)] for i, e in enumerate(charted(board))}


def section_titles(board: Leaderboard) -> dict[str, str | None]:
    """The divider line above each table section."""
    n = len(board.partitions)
    return {
        "main": None,
        "partial": f"Complete, but not over the board's {n} partitions with their full example counts (not ranked)",
        "incomplete": "Incomplete runs: not the test split, limited, or with failed or missing predictions "
        "(not ranked)",
        "reported": "Reported in the SHAM-Bench paper (not reproduced here)",
    }


def coverage_text(entry: Entry, board: Leaderboard) -> str:
    """What an unranked row covers: its predicted/failed/missing counts and reasons, or its partitions."""
    if entry.standing == "partial":
        mine = {name: cell.n for name, cell in entry.span.datasets.items()}
        full = [name for name, n in board.partitions.items() if mine.get(name) == n]
        return f"covers {len(full)} of the board's {len(board.partitions)} partitions in full"
    c = entry.coverage
    counts = f"{c.predicted} of {c.total} predicted, {c.failed} failed, {c.missing} missing" if c else ""
    return " · ".join([counts, *entry.incomplete_because]) if counts else "; ".join(entry.incomplete_because)


CONVENTION_LABELS = {
    "paper": "span F1 (paper)",
    "hallucinated": "span F1, hallucinated examples",
    "pooled_token": "pooled token F1",
    "pooled_char": "pooled character F1",
    "sentence": "sentence F1",
    "iou": "Mu-SHROOM IoU",
    "cor": "Mu-SHROOM Cor",
}


def rank_orders(board: Leaderboard) -> dict[str, dict[str, str]]:
    """Per compared row, the verdict on its order with the row just below it and a sentence saying why."""
    st = board.stability
    if st is None:
        return {}
    names = {r.id: r.name for r in st.rows}
    out = {}
    for pair in st.pairs:
        if pair.adjacent:
            kept = len(st.conventions) - len(pair.reversed_under)
            why = f"above {names[pair.below]} under {kept} of {len(st.conventions)} conventions"
            if pair.reversed_under:
                why += " (not under " + ", ".join(CONVENTION_LABELS[c] for c in pair.reversed_under) + ")"
            why += f", and in {100 * pair.share:.1f}% of {st.n_resamples} paired resamples"
            out[pair.above] = {"verdict": pair.verdict, "css": pair.verdict.replace(" ", "-"), "why": why}
    return out


def _mark(entry: Entry, cell: Cell, frame: Frame, index: int, label: str, colour: str) -> dict[str, Any]:
    kind = "reported" if entry.kind == "reported" else entry.standing
    ci = cell.ci
    what = {"reported": "reported in paper", "reference": "reference baseline"}.get(kind, f"rank {entry.rank}")
    return {
        "entry": entry.id,
        "kind": kind,
        "x": frame.x(cell.f1),
        # Reproduced marks sit just above the task's line and reported ones just below, so they never hide each other.
        "y": frame.y(index) + (7 if kind == "reported" else -7),
        "ci": (frame.x(ci[0]), frame.x(ci[1])) if ci else None,
        "colour": colour,
        "title": f"{entry.name} ({what}) — {label}: F1 {cell.f1:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""),
    }


def strip_chart(board: Leaderboard, level: str) -> dict[str, Any]:
    """Per task, one mark per ranked, reference and reported entry at its F1 (with its 95% interval when known)."""
    palette = colours(board)
    marks = []
    for i, task in enumerate(board.tasks):
        for entry in (*charted(board), *board.reported):
            cell = getattr(entry, level).tasks.get(task)
            if cell is not None:
                marks.append(_mark(entry, cell, STRIP, i, task, palette.get(entry.id, REPORTED_COLOUR)))
    rows = [{"label": t, "y": STRIP.y(i)} for i, t in enumerate(board.tasks)]
    return {"frame": STRIP, "rows": rows, "marks": marks, "height": STRIP.height(len(rows))}


def bar_chart(entry: Entry, level: str, tasks: list[str]) -> dict[str, Any]:
    """One entry's per-task F1 as horizontal bars with their 95% intervals."""
    scores: Level = getattr(entry, level)
    bars = []
    for i, task in enumerate(t for t in tasks if t in scores.tasks):
        cell = scores.tasks[task]
        y = BARS.y(i)
        bars.append(
            {
                "label": task,
                "y": y,
                "top": y - BARS.row * 0.35,
                "height": BARS.row * 0.7,
                "width": BARS.x(cell.f1) - BARS.left,
                "end": BARS.x(cell.f1),
                "ci": (BARS.x(cell.ci[0]), BARS.x(cell.ci[1])) if cell.ci else None,
                "value": f"{cell.f1:.3f}",
            }
        )
    return {"frame": BARS, "bars": bars, "height": BARS.height(len(bars))}


def f3(value: float | None) -> str:
    """A score with three decimals, or nothing."""
    return "" if value is None else f"{value:.3f}"


def ci_text(cell: Cell | None) -> str:
    """`lo–hi` of a cell's interval, or nothing."""
    return f"{cell.ci[0]:.3f}–{cell.ci[1]:.3f}" if cell is not None and cell.ci else ""


def as_text(value: Any) -> str:
    """A parameter value as plain JSON text (the template escapes it)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _environment():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader(HERE),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(f3=f3, ci_text=ci_text, as_text=as_text)
    return env


def render(board: Leaderboard) -> str:
    """The page's HTML."""
    from markupsafe import Markup

    css = (HERE / "page.css").read_text(encoding="utf-8")
    script = (HERE / "page.js").read_text(encoding="utf-8")
    titles = section_titles(board)
    rows = {name: [e for e in (*board.entries, *board.reported) if e.standing in kept] for name, kept in SECTIONS}
    return (
        _environment()
        .get_template("page.html")
        .render(
            board=board,
            # The registered metrics shown beside the span F1 (`shambench.scoring.measures`).
            views=[m.board for m in registered() if m.board],
            levels=LEVELS,
            strips={level: strip_chart(board, level) for level, _ in LEVELS},
            bar_chart=bar_chart,
            colours=colours(board),
            reported_colour=REPORTED_COLOUR,
            sections=[(name, titles[name], rows[name]) for name, _ in SECTIONS],
            coverage_text=coverage_text,
            orders=rank_orders(board),
            type_tables=type_tables(board),
            types_note=TYPES_NOTE,
            types_convention=TYPES_CONVENTION,
            convention_labels=CONVENTION_LABELS,
            # Our own files, trusted and hashed into the policy below; everything else is escaped.
            css=Markup(css),
            script=Markup(script),
            csp=f"default-src 'none'; style-src {csp_hash(css)}; script-src {csp_hash(script)}; "
            "img-src 'none'; base-uri 'none'; form-action 'none'",
        )
    )

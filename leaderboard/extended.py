"""The extended view of the leaderboard: runs of the extended suite ranked by their own overall.

Rows come from runs whose results carry `groups.extended` (see `shambench.scoring.extended`): per group (a
task with the extended suite's added partitions, or the 14 Mu-SHROOM languages) its span F1, then the extended
overall span and sentence F1 with the population std over groups. Complete runs (test split, no `--limit`, every
example predicted without failure) over the board's groups with their full example counts are ranked by extended
overall span F1 (ties by sentence F1); reference baselines (`none`, `all`, `random`) are shown unranked between
them, the others in sections of their own, as on the main board. No paper reports detector scores on these
partitions, so the view has no reported rows. The main board never shows these figures: there, an extended run
is scored on the paper's partitions only.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from shambench.io import write_atomic, write_json
from shambench.reporting.naming import run_name
from shambench.schema import Model, Name
from shambench.scoring.results import ExtendedView, Results

PAGE = "extended.html"
DATA = "extended.json"


class Row(Model):
    """One run on the extended view."""

    name: Name
    """Detector (spec) of the run, or its directory."""
    source: str
    """The run directory."""
    groups: dict[str, float]
    """Per group, per-example span (token) F1."""
    counts: dict[str, int]
    """Per group, the examples scored."""
    overall_f1: float
    """Extended overall span F1: unweighted mean over the groups."""
    overall_std: float
    """Population standard deviation of the groups' span F1."""
    sentence_f1: float
    """Extended overall sentence F1."""
    standing: str = "ranked"
    """`ranked`, `reference`, `partial` (other groups or counts than the board's) or `incomplete`."""
    incomplete_because: list[str] = []
    """Why the run is not complete."""
    rank: int | None = None
    """Rank among the ranked rows; None for the others."""


class ExtendedBoard(Model):
    """What `extended.json` holds."""

    convention: str
    """How the groups and the overall are computed."""
    groups: dict[str, int]
    """The groups a row must cover to be ranked, with their largest example count."""
    rows: list[Row]
    """Ranked and reference rows by overall span F1, then partial and incomplete rows."""


def run_row(source: str, results: Results) -> Row:
    """The extended-view row of a scored run that carries `groups.extended`."""
    from shambench.leaderboard.build import incomplete_because, is_reference

    view = results.groups.extended
    assert view is not None  # extended_runs keeps only runs that carry it
    reasons = incomplete_because(results)
    return Row(
        name=run_name(results.run) or source,
        source=source,
        groups={g: s.token.f1 for g, s in view.groups.items()},
        counts={g: s.n for g, s in view.groups.items()},
        overall_f1=view.overall.token.f1,
        overall_std=view.overall.token.std,
        sentence_f1=view.overall.sentence.f1,
        standing="incomplete" if reasons else "reference" if is_reference(results) else "ranked",
        incomplete_because=reasons,
    )


def board(rows: Sequence[Row]) -> ExtendedBoard:
    """The rows with their standing and rank (see the module docstring)."""
    covered: dict[str, int] = {}
    for row in rows:
        if row.standing != "incomplete":
            for group, n in row.counts.items():
                covered[group] = max(covered.get(group, 0), n)
    placed = [
        r.model_copy(update={"standing": "partial"}) if r.standing != "incomplete" and r.counts != covered else r
        for r in rows
    ]
    section = {"ranked": 0, "reference": 0, "partial": 1, "incomplete": 2}
    ordered = sorted(placed, key=lambda r: (section[r.standing], -r.overall_f1, -r.sentence_f1, r.name))
    out, rank = [], 0
    for r in ordered:
        rank += r.standing == "ranked"
        out.append(r.model_copy(update={"rank": rank if r.standing == "ranked" else None}))
    return ExtendedBoard(convention=ExtendedView.model_fields["convention"].default, groups=covered, rows=out)


def render(extended: ExtendedBoard) -> str:
    """A self-contained HTML page: one table, a column per group."""
    groups = sorted(extended.groups)
    head = "".join(f"<th>{html.escape(g)}<br><small>n={extended.groups[g]}</small></th>" for g in groups)
    body = "".join(
        f'<tr class="{r.standing}"><td>{r.rank or ""}</td><td>{html.escape(r.name)}</td>'
        f"<td><b>{r.overall_f1:.3f}</b> <small>± {r.overall_std:.2f}</small></td><td>{r.sentence_f1:.3f}</td>"
        + "".join(f"<td>{r.groups[g]:.3f}</td>" if g in r.groups else "<td></td>" for g in groups)
        + f"<td>{html.escape(r.standing)}{': ' if r.incomplete_because else ''}"
        f"{html.escape('; '.join(r.incomplete_because))}</td>"
        f'<td class="src">{html.escape(r.source)}</td></tr>'
        for r in extended.rows
    )
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>shambench: extended suite</title><style>'
        "body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:right}td:nth-child(2){text-align:left}"
        ".reference,.partial,.incomplete{font-style:italic;color:#555}.src{font-size:70%;text-align:left}</style>"
        "</head><body><h1>Extended suite</h1><p>SHAM-Bench's partitions plus HaluQuestQA (long-form QA, human and "
        "GPT-4 answers), XSumFaith's human-written reference summaries and Mu-SHROOM in 14 languages. Span F1 per "
        "group and the extended overall (mean over groups, ± population std); never mixed into the paper's overall "
        f"of the main board. {html.escape(extended.convention)}.</p><table><tr><th>#</th><th>system</th>"
        f"<th>overall span F1</th><th>overall sentence F1</th>{head}<th>standing</th><th>source</th></tr>{body}"
        "</table></body></html>"
    )


def extended_runs(run_paths: Sequence[str | Path]) -> list[Row]:
    """The rows of the scored runs under `run_paths` that hold the extended view, each scored again from its
    journal and examples (as the board's rows are)."""
    from shambench.leaderboard.build import rescored_runs

    return [run_row(source, r) for source, r in rescored_runs(run_paths, "extended")]


def write_view(rows: Sequence[Row], out_dir: str | Path) -> Path:
    """Write `extended.json` and `extended.html` into the site folder; the page's path."""
    extended = board(rows)
    write_json(Path(out_dir) / DATA, extended)
    path = Path(out_dir) / PAGE
    write_atomic(path, render(extended))
    return path

"""The Mu-SHROOM page of the leaderboard: one tab per language, official IoU and Cor beside token and sentence F1.

Reproduced rows come from runs whose results carry `groups.mushroom` (the `mushroom-multilingual` source); per
language they are ranked by IoU (ties by Cor), the shared task's own ranking, and a run with missing predictions
is listed as incomplete, unranked. The organisers' rows (`mushroom_official.json`, shipped with the package: the
printed figures of the official test leaderboards, with their source, and no corpus text) are listed below as
reported and never ranked with reproduced runs. Beside them, where the runs' results hold `groups.agreement`,
the `human (one annotator vs the others)` row: each annotator scored against the majority and shares of the other
annotators, with the official IoU and Cor rules (a reference, never ranked; the organisers' rows are scored against
the full gold, an easier target than the others' majority is for one annotator).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from shambench.io import write_atomic
from shambench.leaderboard.schema import HUMAN_NAME
from shambench.reporting.naming import run_name
from shambench.schema import Model, Name
from shambench.scoring.results import Results
from shambench.scoring.shared_task import row_of
from shambench.sources import source_of
from shambench.structured import json_file

OFFICIAL = Path(__file__).with_name("mushroom_official.json")
PAGE = "mushroom.html"
# The shared-task view (`Results.groups`) this board reads, as the Mu-SHROOM source declares it.
VIEW = "mushroom"


class Row(Model):
    """One row of a language's table."""

    name: Name
    """Run (detector and run directory) or the organisers' row name."""
    iou: float
    """Official character IoU."""
    cor: float
    """Official Cor."""
    token_f1: float | None = None
    """Per-example token F1 (reproduced runs only)."""
    sentence_f1: float | None = None
    """Per-example sentence F1 (reproduced runs only)."""
    rank: int | None = None
    """Rank among the complete reproduced runs of the language; None for reported and incomplete rows."""
    status: str = "complete"
    """`complete`, `incomplete` (missing predictions), `human` (one annotator against the others) or `reported`
    (printed by the organisers)."""
    source: str = ""
    """Where a reported figure is printed, or the run's directory."""


def official_rows() -> dict[str, list[Row]]:
    """The organisers' baseline and best-team rows per language, marked as reported."""
    data = json_file(OFFICIAL, "the official leaderboard rows (package data)")
    return {
        lang: [Row(name=r["name"], iou=r["iou"], cor=r["cor"], status="reported", source=r["source"]) for r in rows]
        for lang, rows in data["languages"].items()
    }


def human_rows(runs: Sequence[tuple[str, Results]]) -> dict[str, Row]:
    """Per language, one annotator against the others (from the first run whose results hold the figure)."""
    rows: dict[str, Row] = {}
    for _, results in runs:
        group = results.groups.agreement
        for partition, p in group.partitions.items() if group else ():
            dataset = partition.split("/", 1)[-1]
            placed = row_of(dataset, source_of(dataset))
            if placed is None or placed[0] != VIEW or p.human.iou is None or p.human.cor is None:
                continue
            rows.setdefault(
                placed[1],
                Row(
                    name=HUMAN_NAME,
                    iou=p.human.iou,
                    cor=p.human.cor,
                    token_f1=p.human.token.f1,
                    sentence_f1=p.human.sentence.f1,
                    status="human",
                    source=f"each of the {p.items} items' annotators against the majority (IoU) and shares (Cor) "
                    "of the others, mean over annotators, then items",
                ),
            )
    return rows


def language_tables(runs: Sequence[tuple[str, Results]]) -> dict[str, list[Row]]:
    """Per language, the ranked reproduced rows, then the unranked incomplete ones, then the human row and the
    reported rows."""
    reproduced: dict[str, list[Row]] = {}
    for source, results in runs:
        view = results.groups.mushroom
        if view is None:
            continue
        name = run_name(results.run) or source
        complete = results.missing_predictions == 0
        for lang, s in view.languages.items():
            reproduced.setdefault(lang, []).append(
                Row(
                    name=name,
                    iou=s.iou,
                    cor=s.cor,
                    token_f1=s.token_f1,
                    sentence_f1=s.sentence_f1,
                    status="complete" if complete else "incomplete",
                    source=source,
                )
            )
    official = official_rows()
    human = human_rows(runs)
    tables = {}
    for lang in sorted(official.keys() | reproduced.keys()):
        rows = reproduced.get(lang, [])
        ranked = sorted((r for r in rows if r.status == "complete"), key=lambda r: (-r.iou, -r.cor))
        ranked = [r.model_copy(update={"rank": i}) for i, r in enumerate(ranked, 1)]
        beside = [human[lang]] if lang in human else []
        tables[lang] = [*ranked, *(r for r in rows if r.status != "complete"), *beside, *official.get(lang, [])]
    return tables


def render(tables: dict[str, list[Row]]) -> str:
    """A self-contained HTML page with one tab (a section linked from the top) per language."""

    def num(v: float | None) -> str:
        return "" if v is None else f"{v:.4f}"

    tabs = " ".join(f'<a href="#{lang}">{lang}</a>' for lang in tables)
    sections = []
    for lang, rows in tables.items():
        body = "".join(
            f'<tr class="{r.status}"><td>{r.rank or ""}</td><td>{html.escape(r.name)}</td><td>{num(r.iou)}</td>'
            f"<td>{num(r.cor)}</td><td>{num(r.token_f1)}</td><td>{num(r.sentence_f1)}</td>"
            f'<td>{r.status}</td><td class="src">{html.escape(r.source)}</td></tr>'
            for r in rows
        )
        sections.append(
            f'<section id="{lang}"><h2>{lang}</h2><table><tr><th>#</th><th>system</th><th>IoU</th><th>Cor</th>'
            f"<th>token F1</th><th>sentence F1</th><th>status</th><th>source</th></tr>{body}</table></section>"
        )
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>Mu-SHROOM, per language</title><style>'
        "body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:right}td:nth-child(2){text-align:left}"
        ".reported,.incomplete{font-style:italic;color:#555}.human{font-weight:bold;background:#f3f3e6}.src{font-size:70%;text-align:left}</style></head><body>"
        "<h1>Mu-SHROOM (SemEval-2025 Task 3), per language</h1><p>Reproduced runs are ranked by official IoU (ties "
        "by Cor). Rows marked <i>reported</i> are the organisers' printed figures, never ranked with reproduced "
        "runs; <i>incomplete</i> runs miss predictions and are not ranked. The <b>human</b> row is one annotator "
        "scored against the majority and shares of the other annotators with the same IoU and Cor rules: a reference, "
        "never ranked (the organisers' rows are scored against the full gold, an easier target).</p>"
        f"<nav>{tabs}</nav>" + "".join(sections) + "</body></html>"
    )


def mushroom_runs(run_paths: Sequence[str | Path]) -> list[tuple[str, Results]]:
    """The scored runs under `run_paths` that hold the Mu-SHROOM per-language view, with their directories, each
    scored again from its journal and examples (as the board's rows are)."""
    from shambench.leaderboard.build import rescored_runs

    return rescored_runs(run_paths, "mushroom")


def write_page(runs: Sequence[tuple[str, Results]], out_dir: str | Path) -> Path:
    """Write `mushroom.html` into the site folder; its path."""
    path = Path(out_dir) / PAGE
    write_atomic(path, render(language_tables(runs)))
    return path

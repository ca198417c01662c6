"""The board's per error type view: which kinds of error each row finds, per source whose gold spans are typed.

Each reproduced row carries, per source and gold error type, the pooled recall of the type's gold characters and
tokens with their intervals, and the type-aware F1 where its spans are labelled (`groups.types` of its results,
`shambench.scoring.typed`). The page shows one table per source: rows as on the board, a column per type.
"""

from __future__ import annotations

from shambench.leaderboard.schema import Entry, Leaderboard, TypeCell
from shambench.schema import Model
from shambench.scoring.results import Results

NOTE = (
    "Per source whose gold spans carry error types (each adapter maps the source's labels onto its types; a span "
    "with several types counts for each): the share of the type's gold characters a row's spans cover, pooled "
    "over the source's examples, with its 95% bootstrap interval; tokens and, for rows whose spans carry types, "
    "the type-aware F1 in the cell's tooltip."
)


def type_cells(results: Results) -> dict[str, dict[str, TypeCell]]:
    """Per source with typed gold, per type, a run's recall figures (and typed F1 where its spans carry types)."""
    group = results.groups.types
    if group is None:
        return {}
    return {
        name: {
            t: TypeCell(
                gold_chars=s.gold_chars,
                char_recall=s.char_recall.recall,
                char_ci=s.char_recall.ci,
                token_recall=s.token_recall.recall,
                token_ci=s.token_recall.ci,
                typed_f1=s.typed_char.f1 if s.typed_char is not None else None,
            )
            for t, s in ds.types.items()
        }
        for name, ds in group.datasets.items()
    }


class TypeTable(Model):
    """One source's table on the page."""

    source: str
    """The dataset name."""
    types: list[str]
    """Its types, the columns, in order."""
    gold_chars: dict[str, int]
    """Per type, its gold characters (the column's tooltip)."""
    rows: list[Entry]
    """The ranked and reference rows that report the source, in board order."""


def type_tables(board: Leaderboard) -> list[TypeTable]:
    """Per source some compared row reports types for, its table (sources in alphabetical order)."""
    rows = [e for e in board.entries if e.standing in ("ranked", "reference") and e.types]
    tables = []
    for source in sorted({s for e in rows for s in e.types}):
        mine = [e for e in rows if source in e.types]
        types = sorted({t for e in mine for t in e.types[source]})
        gold = {t: next(e.types[source][t].gold_chars for e in mine if t in e.types[source]) for t in types}
        tables.append(TypeTable(source=source, types=types, gold_chars=gold, rows=mine))
    return tables

"""The board's per error type view: each row's recall per gold type of each typed source, and the page's tables."""

from __future__ import annotations

import re

from shambench.leaderboard.build import assemble, build, run_entry
from shambench.leaderboard.errortypes import type_tables
from shambench.leaderboard.page import render
from shambench.schema import Example, Prediction, Span
from shambench.scoring.scorer import score

# Tokens of "aa bb cc": aa [0, 2), bb [3, 5), cc [6, 8). Gold: "aa" is x, "cc" is y; "dd" of plain is untyped.
EXAMPLES = [
    Example(
        id="t1",
        task="summ",
        dataset="typed",
        response="aa bb cc",
        hallu_spans=[Span(start=0, end=2, label="x"), Span(start=6, end=8, label="y")],
    ),
    Example(id="p1", task="summ", dataset="plain", response="dd ee", hallu_spans=[Span(start=0, end=2)]),
]


def _entry(detector: str, spans: dict[str, list[Span]]):
    results = score(EXAMPLES, [Prediction(id=i, spans=s) for i, s in spans.items()], n_resamples=20)
    results.run = results.run.model_copy(update={"detector": detector, "split": "test", "origin": "run"})
    return run_entry(results, f"runs/{detector}")


def test_rows_carry_their_recall_per_type_and_typed_f1_when_labelled():
    first = _entry("first-word", {"t1": [Span(start=0, end=2)], "p1": []})  # finds x, not y
    typed = _entry("typed", {"t1": [Span(start=0, end=8, label="y")], "p1": []})  # everything, all called y
    assert set(first.types) == {"typed"}  # `plain` has no typed gold
    x, y = first.types["typed"]["x"], first.types["typed"]["y"]
    assert (x.gold_chars, x.char_recall, x.token_recall, x.char_ci, x.typed_f1) == (2, 1.0, 1.0, (1.0, 1.0), None)
    assert (y.char_recall, y.token_recall, y.char_ci) == (0.0, 0.0, (0.0, 0.0))
    # "aa bb cc" labelled y: 6 non-space characters against y's 2 (cc): P 2/6, R 1, F1 2*2/(6+2) = 0.5; x: 0.
    assert typed.types["typed"]["y"].typed_f1 == 0.5 and typed.types["typed"]["x"].typed_f1 == 0.0
    assert typed.types["typed"]["x"].char_recall == 1.0


def test_the_page_shows_one_table_per_typed_source():
    board = assemble(
        [_entry("first-word", {"t1": [Span(start=0, end=2)], "p1": []}), _entry("none", {"t1": [], "p1": []})]
    )
    (table,) = type_tables(board)
    assert (table.source, table.types, table.gold_chars) == ("typed", ["x", "y"], {"x": 2, "y": 2})
    assert [e.name for e in table.rows] == [e.name for e in board.entries if e.types]
    page = render(board)
    section = page[page.index('id="types"') : page.index('id="details"')]
    body = section[section.index('data-level="types-typed"') :]
    cells = re.findall(r'<td class="num dataset"[^>]*>([0-9.]+)<span class="ci">', body)
    # first-word: x 1.000, y 0.000; none: 0.000 and 0.000 (rows in board order).
    order = [e.name for e in table.rows]
    expected = {"first-word": ["1.000", "0.000"], "none": ["0.000", "0.000"]}
    assert cells == [v for name in order for v in expected[name]]
    assert "character recall 1.000 (95% CI 1.000–1.000); token recall 1.000" in body


def test_the_build_rescores_typed_runs(tmp_path):
    from shambench.io import write_jsonl
    from tests.leaderboard.toy import make_run

    examples = tmp_path / "examples.jsonl"
    write_jsonl(examples, EXAMPLES)
    make_run(tmp_path / "runs" / "cc", examples, "cc", spans={"t1": [[6, 8]], "p1": []})
    board = build([tmp_path / "runs"], None)
    (entry,) = board.entries
    assert {t: c.char_recall for t, c in entry.types["typed"].items()} == {"x": 0.0, "y": 1.0}

"""The metric registry: a metric added as one registered function is in results.json, the table and the board."""

from __future__ import annotations

import json
import math

import pytest
from rich.console import Console

from shambench.leaderboard.build import build
from shambench.leaderboard.page import render
from shambench.reporting.tables import results_table
from shambench.schema import Example, Prediction, Span
from shambench.scoring import measures
from shambench.scoring.measures import BoardView, Columns, Group, metric
from shambench.scoring.metrics import pooled_prf
from shambench.scoring.results import PRF, Results
from shambench.scoring.scorer import score
from tests.leaderboard.toy import make_run, write_examples

CONVENTION = "micro precision/recall/F1 over all sentence units of the group"


@pytest.fixture
def sentence_pooled():
    """A metric added for the test (pooled sentence-unit F1), removed again once it ends."""

    @metric(
        "sentence_pooled",
        model=PRF,
        convention=CONVENTION,
        column="sent pooled",
        board=BoardView(
            key="f1_sentence_pooled",
            title="sentence F1",
            sub="pooled sentences",
            help="sentence F1 pooled over all units of each task, mean over tasks",
            task_note="pooled sentences",
        ),
    )
    def compute(columns: Columns, group: Group) -> PRF:
        p, r, f = pooled_prf(*(c[group.idx].sum() for c in columns.counts["sentence"]))
        return PRF(precision=p, recall=r, f1=f)

    yield
    measures.unregister("sentence_pooled")


def examples() -> list[Example]:
    # a1: sentences "The cat sat." (gold: cat) and "It was red."; a2: "Dogs ran." without gold.
    return [
        Example(
            id="a1", task="summ", dataset="toy", response="The cat sat. It was red.", hallu_spans=[Span(start=4, end=7)]
        ),
        Example(id="a2", task="summ", dataset="toy", response="Dogs ran."),
    ]


def test_an_added_metric_is_in_results_json_its_frame_and_the_table(sentence_pooled):
    predictions = [Prediction(id="a1", spans=[Span(start=4, end=7)]), Prediction(id="a2", spans=[Span(start=0, end=4)])]
    results = score(examples(), predictions, n_resamples=10)
    # Pooled over both examples: 1 unit found of 1 gold, 2 units predicted -> P 1/2, R 1, F1 2/3.
    written = json.loads(results.model_dump_json())
    for key in ("partitions", "tasks"):
        group = written[key]["summ/toy" if key == "partitions" else "summ"]["sentence_pooled"]
        assert (group["precision"], group["recall"]) == (0.5, 1.0) and math.isclose(group["f1"], 2 / 3)
    assert written["conventions"]["sentence_pooled"] == CONVENTION
    read = Results.model_validate_json(results.model_dump_json())
    assert measures.value_of(read.tasks["summ"], measures.registered()[-1]) == results.tasks["summ"].sentence_pooled
    frame = read.to_pandas().set_index("name")
    assert (
        frame.loc["summ", "sentence_pooled_precision"] == 0.5 and frame.loc["summ/toy", "sentence_pooled_recall"] == 1
    )
    console = Console(width=200, record=True)
    console.print(results_table(read))
    text = console.export_text()
    assert "sent pooled" in text
    task_row = next(line for line in text.splitlines() if line.strip().startswith("summ "))
    assert task_row.split()[7] == "0.667"  # after n, span F1, CI, P, R, F1 hallu, pooled F1


def test_an_added_metric_is_a_view_of_the_board(sentence_pooled, tmp_path):
    # The toy `all` run marks every unit: per task tp 1, predicted 2, gold 1 (see tests/leaderboard/toy.py).
    run = make_run(tmp_path / "all", write_examples(tmp_path / "examples.jsonl"), "all")
    board = build([run], None)
    (entry,) = board.entries
    assert math.isclose(entry.span.overall.f1_sentence_pooled, 2 / 3)
    assert math.isclose(entry.span.tasks["summ"].f1_sentence_pooled, 2 / 3)
    page = render(board)
    assert "pooled sentences</span>" in page and "; pooled sentences 0.667" in page


def test_the_built_in_metrics_are_registered_in_the_order_results_write_them():
    assert [m.name for m in measures.registered()] == [
        "token",
        "sentence",
        "token_with_gold",
        "token_pooled",
        "char_pooled",
        "mushroom",
        "threshold_free",
    ]
    assert [m.column for m in measures.registered() if m.column] == ["F1 hallu", "pooled F1"]

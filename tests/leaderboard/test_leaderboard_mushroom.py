"""The Mu-SHROOM page: per-language ranking of reproduced runs, reported rows kept apart and unranked."""

from __future__ import annotations

import pytest

from shambench.adapters.mushroom_multilingual import LANGUAGES
from shambench.leaderboard.mushroom import language_tables, official_rows, render, write_page
from shambench.leaderboard.schema import HUMAN_NAME
from shambench.schema import Annotations, Example, Prediction, Span, marked_by_more_than
from shambench.scoring.scorer import score

EXAMPLES = [
    Example(
        id=f"mushroom-de/{i}",
        dataset="mushroom-de",
        task="open_qa",
        response="Berlin liegt am Rhein.",
        hallu_spans=[(15, 20)],
        soft_spans=[{"start": 15, "end": 20, "prob": 0.8}],
        meta={"lang": "de"},
    )
    for i in range(2)
]


def _run(spans_per_example, detector):
    preds = [Prediction(id=ex.id, spans=spans) for ex, spans in zip(EXAMPLES, spans_per_example) if spans is not None]
    results = score(EXAMPLES, preds, n_resamples=10)
    results.run.detector = detector
    return (f"runs/{detector}", results)


def test_runs_are_ranked_by_iou_and_incomplete_or_reported_rows_are_not():
    exact = _run([[(15, 20)], [(15, 20)]], "exact")  # IoU 1 on both items
    half = _run([[(10, 20)], [(15, 20)]], "half")  # IoU 5/10 and 1: mean 0.75
    partial = _run([[(15, 20)], None], "partial")  # one prediction missing
    table = language_tables([half, partial, exact])["de"]
    assert [(r.name, r.rank, r.status) for r in table[:3]] == [
        ("exact", 1, "complete"),
        ("half", 2, "complete"),
        ("partial", None, "incomplete"),
    ]
    assert table[1].iou == 0.75
    reported = table[3:]
    assert reported == official_rows()["de"] and all(r.rank is None and r.status == "reported" for r in reported)
    assert reported[0].name == "Baseline (mark all)" and reported[0].iou == 0.345082


def test_every_language_has_a_tab_even_without_runs(tmp_path):
    tables = language_tables([])
    assert list(tables) == list(LANGUAGES)
    page = write_page([], tmp_path).read_text(encoding="utf-8")
    assert page.count("<section id=") == 14 and 'href="#zh"' in page
    assert render({"de": []}).count("<tr") == 1  # the header row only


def _annotated(i: int) -> Example:
    # "Berlin liegt am Rhein.": two annotators mark "Rhein" [16, 21), a third nothing; soft labels 2/3 there.
    marked = {"a": [Span(start=16, end=21)], "b": [Span(start=16, end=21)], "c": []}
    return Example(
        id=f"mushroom-de/{i}",
        dataset="mushroom-de",
        task="open_qa",
        response="Berlin liegt am Rhein.",
        hallu_spans=[(16, 21)],
        soft_spans=[{"start": 16, "end": 21, "prob": 2 / 3}],
        annotations=Annotations.leave_one_out(marked, lambda lists: marked_by_more_than(lists, 0.5), "m", soft=True),
        meta={"lang": "de"},
    )


def test_the_human_row_stands_beside_the_organisers_rows_never_ranked():
    examples = [_annotated(i) for i in range(2)]
    results = score(examples, [Prediction(id=ex.id, spans=[(16, 21)]) for ex in examples], n_resamples=10)
    results.run.detector = "exact"
    table = language_tables([("runs/exact", results)])["de"]
    assert [(r.name, r.rank, r.status) for r in table[:2]] == [("exact", 1, "complete"), (HUMAN_NAME, None, "human")]
    human = table[1]
    # Left out a (or b): the others are one "Rhein" and one nothing, a tie at half: no gold, IoU 0 for a's "Rhein".
    # Left out c: both others mark "Rhein", c marks nothing: IoU 0. Every annotator scores 0 on both items.
    assert (human.iou, human.token_f1) == (0.0, 0.0)
    # Cor of a: the others' shares (1/2 on "Rhein") against a's 0/1 vector ranks alike: 1; of c: constant, 0.
    assert human.cor == pytest.approx(2 / 3)
    assert table[2:] == official_rows()["de"]
    page = render({"de": table})
    assert f'<tr class="human"><td></td><td>{HUMAN_NAME}</td>' in page


def test_the_language_tabs_show_what_the_journal_gives_not_a_doctored_results_file(tmp_path):
    import json

    from shambench.leaderboard.mushroom import mushroom_runs
    from tests.leaderboard.toy import make_run, write_examples

    rows = [
        {
            "id": "m1",
            "dataset": "mushroom-en",
            "task": "open_qa",
            "question": "How tall is the tower?",
            "response": "The tower is 320 metres tall.",
            "hallu_spans": [[13, 16]],
            "soft_spans": [{"start": 13, "end": 16, "prob": 1.0}],
            "meta": {"lang": "en"},
        }
    ]
    examples = write_examples(tmp_path / "examples.jsonl", rows)
    run = make_run(tmp_path / "runs" / "exact", examples, "exact", spans={"m1": [[13, 16]]})
    claimed = json.loads((run / "results.json").read_text())
    assert claimed["groups"]["mushroom"]["languages"]["en"]["iou"] == 1.0
    claimed["groups"]["mushroom"]["languages"]["en"]["iou"] = 0.5
    (run / "results.json").write_text(json.dumps(claimed))
    ((_, results),) = mushroom_runs([tmp_path / "runs"])
    assert results.groups.mushroom is not None and results.groups.mushroom.languages["en"].iou == 1.0

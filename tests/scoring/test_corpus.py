"""The scorer's columnar corpus: read once, chunk by chunk, holding only what scoring reads."""

from __future__ import annotations

import gc
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shambench.errors import ScoringError
from shambench.schema import Annotations, Example, Prediction, Reading, SoftSpan, Span, Step
from shambench.scoring import corpus as corpus_module
from shambench.scoring import kept as kept_module
from shambench.scoring.corpus import Corpus
from shambench.scoring.scorer import Scorer
from tests.scoring.test_scorer import SCORE_FIELDS, ex, pred, random_case

T1 = "The cat sat. It was red."


def mixed_examples() -> list[Example]:
    """Every kind the corpus treats apart: empty responses, soft labels, steps, another language."""
    return [
        ex("a", "summ/x", [[4, 7]]),
        ex("b", "summ/x", response=""),
        ex("c", "qa/mushroom", [[0, 3]], soft_spans=[SoftSpan(start=0, end=3, prob=0.6)]),
        ex(
            "d",
            "math/steps",
            [[10, 19]],
            response="Step one.\nStep two.",
            steps=[Step(start=0, end=9, label=1), Step(start=10, end=19, label=0)],
        ),
        ex("e", "qa/mushroom-de", [[4, 9]], response="Der Hund bellt. Er ist laut.", meta={"lang": "DE"}),
        ex("f", "summ/y", [[0, 12]]),
    ]


def scores(scorer: Scorer, predictions: list[Prediction]) -> str:
    results, rows = scorer.score_with_examples(predictions)
    data = results.model_dump(mode="json", include=SCORE_FIELDS | {"groups", "segmentation"})
    return json.dumps([data, [r.model_dump(mode="json") for r in rows]], sort_keys=True)


MIXED_PREDICTIONS = [
    pred("a", [[0, 5]]),
    pred("c", [[0, 2]], soft_spans=[SoftSpan(start=0, end=2, prob=0.9)]),
    pred("d", [[10, 14]], step_scores=[0.1, 0.8]),
    pred("e", [[4, 8]]),
    pred("f", error="timeout"),
]


def test_the_corpus_keeps_columns_as_the_hand_counts_say():
    corpus = Corpus.of(mixed_examples())
    assert corpus.ids == ["a", "b", "c", "d", "e", "f"]
    assert corpus.lengths.tolist() == [24, 0, 24, 19, 28, 24]
    assert corpus.offsets.tolist() == [0, 24, 24, 48, 67, 95]
    # Gold spans moved onto the global axis by their example's offset.
    assert list(zip(corpus.gold_starts.tolist(), corpus.gold_ends.tolist())) == [
        (4, 7),
        (24, 27),
        (58, 67),
        (71, 76),
        (95, 107),
    ]
    # T1 has 8 tokens, the empty response none, the steps text 6, the German text 8 ("Der Hund bellt . Er ist laut .").
    assert corpus.tokens.count.tolist() == [8, 0, 8, 6, 8, 8]
    assert corpus.units.count.tolist() == [2, 0, 2, 2, 2, 2]
    assert corpus.units.starts[corpus.units.first[3] :][:2].tolist() == [48, 58]  # the steps, not sentences
    assert corpus.tokens.starts.dtype == np.int32
    assert [corpus.task_of(i) for i in range(6)] == ["summ", "summ", "qa", "math", "qa", "summ"]
    assert [corpus.dataset_of(i) for i in range(6)] == ["x", "x", "mushroom", "steps", "mushroom-de", "y"]
    assert sorted(corpus.soft) == [2] and sorted(corpus.with_steps) == [3]
    assert "spacy.blank('de')" in corpus.segmentation["qa/mushroom-de"]


def annotated_examples() -> list[Example]:
    """Examples with readings of every shape the columns keep: scored spans, silent annotators, soft shares given
    or not, unplaced spans, a checked and an unchecked gold; one example with none and one with an empty list."""
    soft = [SoftSpan(start=4, end=7, prob=0.5)]
    first = Annotations(
        readings=[
            Reading(annotator="a", spans=[Span(start=4, end=7, label="x", score=0.25)], others=[], others_soft=soft),
            Reading(annotator="b", spans=[], others=[Span(start=4, end=7)], others_soft=None),
        ],
        rule="one rule",
        reproduces_gold=True,
    )
    second = Annotations(
        readings=[Reading(annotator="a", spans=[Span(start=0, end=3), Span(start=13, end=16)], others=[])],
        rule="another rule",
        unplaced={"moved": 2},
    )
    return [
        ex("p", "summ/x", [[4, 7]], annotations=first),
        ex("q", "summ/x"),
        ex("r", "summ/x", annotations=Annotations(readings=[], rule="one rule")),
        ex("s", "qa/y", annotations=second),
    ]


def test_the_readings_are_kept_as_columns_as_the_hand_counts_say(tmp_path):
    readings = Corpus.of(annotated_examples()).annotations
    assert readings.examples.tolist() == [0, 3] and len(readings) == 2 and 3 in readings and 2 not in readings
    assert readings.first.tolist() == [0, 2, 3]  # p's two readings, then s's one
    assert readings.annotators == ["a", "b", "a"] and readings.annotators[0] is readings.annotators[2]
    assert [readings.rules[c] for c in readings.rule_code.tolist()] == ["one rule", "another rule"]
    assert readings.reproduces_gold.tolist() == [1, -1] and readings.unplaced == {3: {"moved": 2}}
    spans = readings.spans.lists(0, 3)
    assert spans[0] == [(4, 7, 0.25)] and spans[1] == []  # b marked nothing
    assert [r[:2] for r in spans[2]] == [(0, 3), (13, 16)] and all(np.isnan(r[2]) for r in spans[2])  # no score
    assert [[r[:2] for r in rs] for rs in readings.others.lists(0, 3)] == [[], [(4, 7)], []]
    assert readings.others_soft.lists(0, 3) == [[(4, 7, 0.5)], [], []]
    assert readings.soft_given.tolist() == [True, False, False]
    # A kept corpus reads the same columns back.
    path = tmp_path / "examples.jsonl"
    write_examples(path, annotated_examples())
    read, _ = reading(path)
    kept_module.file_corpus(path, None, read)
    kept = kept_module.file_corpus(path, None, read).annotations
    assert kept.names() == readings.names() and kept.index == readings.index
    assert kept.arrays().keys() == readings.arrays().keys()
    for name, column in readings.arrays().items():
        assert kept.arrays()[name].dtype == column.dtype
        np.testing.assert_array_equal(kept.arrays()[name], column)  # NaN scores equal too


def test_the_german_example_has_the_tokens_the_count_assumes():
    from shambench.scoring.text import tokens

    assert len(tokens("Der Hund bellt. Er ist laut.", "de")) == 8


@pytest.mark.parametrize("chunk", [1, 2, 5])
def test_chunk_boundaries_change_nothing(monkeypatch, chunk):
    whole = scores(Scorer(mixed_examples(), n_resamples=50), MIXED_PREDICTIONS)
    monkeypatch.setattr(corpus_module, "CHUNK_EXAMPLES", chunk)
    assert scores(Scorer(iter(mixed_examples()), n_resamples=50), MIXED_PREDICTIONS) == whole


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 7))
def test_a_generator_in_small_chunks_scores_as_the_list(seed, chunk):
    examples, predictions = random_case(seed)
    whole = scores(Scorer(examples, n_resamples=20), predictions)
    original = corpus_module.CHUNK_EXAMPLES
    corpus_module.CHUNK_EXAMPLES = chunk
    try:
        streamed = scores(Scorer((e for e in examples), n_resamples=20), predictions)
    finally:
        corpus_module.CHUNK_EXAMPLES = original
    assert streamed == whole


def test_a_corpus_past_int32_offsets_goes_int64_with_the_same_scores(monkeypatch):
    whole = scores(Scorer(mixed_examples(), n_resamples=50), MIXED_PREDICTIONS)
    monkeypatch.setattr(corpus_module, "CHUNK_EXAMPLES", 2)
    # The third chunk starts past the (lowered) limit: earlier chunks were int32 and are widened when joined.
    monkeypatch.setattr(corpus_module, "_INT32_MAX", 60)
    scorer = Scorer(mixed_examples(), n_resamples=50)
    assert scorer.tokens.starts.dtype == np.int64 and scorer.units.ends.dtype == np.int64
    assert scores(scorer, MIXED_PREDICTIONS) == whole


def live_examples() -> int:
    gc.collect()
    return sum(isinstance(o, Example) for o in gc.get_objects())


def test_only_examples_with_steps_are_kept_whole(monkeypatch):
    monkeypatch.setattr(corpus_module, "CHUNK_EXAMPLES", 2)
    before = live_examples()
    scorer = Scorer(iter(mixed_examples()), n_resamples=10)
    assert live_examples() - before == 1  # "d", whose steps the math metrics read
    assert {e.id for e in scorer.corpus.with_steps.values()} == {"d"}
    assert scorer.corpus.soft == {2: [(0, 3, 0.6)]}  # of "c", only its soft labels


@pytest.mark.usefixtures("command_line_settings")  # what the command line's process allows
@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_paused_while_a_corpus_is_read_and_left_as_it_was(enabled):
    seen = []

    def watched():
        for example in mixed_examples():
            seen.append(gc.isenabled())
            yield example

    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        paused = Scorer(watched(), n_resamples=10)
        assert seen == [False] * 6 and gc.isenabled() is enabled
        with pytest.raises(ScoringError, match="duplicate example id 'a'"):
            Corpus.of([*mixed_examples(), ex("a", "summ/x")])
        assert gc.isenabled() is enabled  # an error while reading restores it too
    finally:
        (gc.enable if was else gc.disable)()
    # Nothing a collection could change: the scores are those of a corpus read with the collector running.
    assert scores(paused, MIXED_PREDICTIONS) == scores(Scorer(mixed_examples(), n_resamples=10), MIXED_PREDICTIONS)


def test_example_rows_are_a_sequence_made_on_demand():
    scorer = Scorer(mixed_examples(), n_resamples=10)
    _, rows = scorer.score_with_examples(MIXED_PREDICTIONS)
    assert len(rows) == 6
    assert [r.id for r in rows] == ["a", "b", "c", "d", "e", "f"]
    assert rows[-1].id == "f" and rows[-1].status == "failed"
    assert rows[1].status == "missing" and rows[1].token.f1 == 1.0  # empty response, nothing predicted
    assert [r.id for r in rows[1:5:2]] == ["b", "d"]
    assert rows[2].iou is not None and rows[0].iou is None
    with pytest.raises(IndexError):
        rows[6]
    with pytest.raises(IndexError):
        rows[-7]


def test_response_length_checks_predictions_without_the_text():
    scorer = Scorer(mixed_examples(), n_resamples=10)
    assert scorer.response_length("e") == 28
    with pytest.raises(ValueError, match=r"\[20, 25\) ends past the response \(length 24\)"):
        Prediction(id="a", spans=[[20, 25]]).check_inside(scorer.response_length("a"))


def write_examples(path, examples: list[Example]) -> None:
    path.write_text("".join(e.model_dump_json(exclude_none=True) + "\n" for e in examples), encoding="utf-8")


def reading(path):
    """The examples of a file as `shambench score` reads them, counting the reads."""
    from shambench.runs.selection import read_selection
    from shambench.runs.spec import Selection
    from shambench.scoring.scorer import UNSCORED_EXAMPLE_FIELDS

    reads = []

    def read():
        reads.append(path)
        return read_selection(Selection(examples_file=path), UNSCORED_EXAMPLE_FIELDS)[0]

    return read, reads


def _ranges(lists: list[list[tuple[int, int, float]]]) -> corpus_module.Ranges:
    builder = corpus_module._RangesBuilder()
    for listed in lists:
        builder.add(listed)
    return builder.ranges()


def test_taken_ranges_repeat_and_reorder_whole_lists():
    table = _ranges([[(1, 2, 0.5), (3, 4, np.nan)], [], [(0, 1, 1.0), (4, 5, 2.0), (8, 9, 3.0)]])
    taken = table.taken(np.array([2, 0, 1, 2], np.int64))
    assert taken.bounds.tolist() == [0, 3, 5, 5, 8]
    assert taken.starts.tolist() == [0, 4, 8, 1, 3, 0, 4, 8]
    assert taken.ends.tolist() == [1, 5, 9, 2, 4, 1, 5, 9]
    assert taken.values[:4].tolist() == [1.0, 2.0, 3.0, 0.5] and np.isnan(taken.values[4])
    none = table.taken(np.array([], np.int64))
    assert none.bounds.tolist() == [0] and len(none.starts) == 0


range_lists = st.lists(
    st.lists(st.tuples(st.integers(0, 50), st.integers(51, 99), st.floats(0, 1)), max_size=4), min_size=1, max_size=6
)


@given(range_lists, st.data())
def test_taken_ranges_equal_the_picked_lists(lists, data):
    table = _ranges(lists)
    picks = data.draw(st.lists(st.integers(0, len(lists) - 1), max_size=10))
    taken = table.taken(np.array(picks, np.int64))
    assert taken.lists(0, len(picks)) == [lists[i] for i in picks]


def test_row_predictions_take_their_labels_and_kept_predictions_along():
    kept = Prediction(id="b", spans=[Span(start=0, end=1, score=0.9)])
    rows = corpus_module.RowPredictions(
        spans=_ranges([[(0, 2, np.nan)], [(0, 1, np.nan)]]), sentence_labels={0: [1, 0]}, kept={1: kept}
    )
    taken = rows.taken(np.array([1, 1, 0], np.int64))
    assert taken.spans.bounds.tolist() == [0, 1, 2, 3]
    assert (taken.spans.starts.tolist(), taken.spans.ends.tolist()) == ([0, 0, 0], [1, 1, 2])
    assert taken.sentence_labels == {2: [1, 0]}
    assert taken.kept == {0: kept, 1: kept}

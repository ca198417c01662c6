"""Per error type recall and typed P/R/F1 (`groups.types`): hand-computed cases and a property against sets."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shambench.schema import Example, Prediction, Span
from shambench.scoring.results import Results
from shambench.scoring.scorer import Scorer, score
from shambench.scoring.typed import _Coverage, tokens_overlapping

# Tokens of "aa bb cc dd": aa [0, 2), bb [3, 5), cc [6, 8), dd [9, 11); of "ee ff": ee [0, 2), ff [3, 5).
EXAMPLES = [
    Example(
        id="a",
        task="summ",
        dataset="toy",
        response="aa bb cc dd",
        hallu_spans=[Span(start=0, end=5, label="x"), Span(start=9, end=11, label="y|x")],
    ),
    Example(id="b", task="qa", dataset="toy", response="ee ff", hallu_spans=[Span(start=3, end=5, label="y")]),
    Example(id="c", task="qa", dataset="toy", response="gg hh", hallu_spans=[Span(start=0, end=2)]),
    Example(id="d", task="qa", dataset="plain", response="ii jj", hallu_spans=[Span(start=0, end=2)]),
]


def test_recall_per_type_and_typed_prf_by_hand():
    predictions = [
        Prediction(id="a", spans=[Span(start=3, end=8, label="x")]),  # "bb cc"
        Prediction(id="b", spans=[Span(start=0, end=5, label="z")]),  # all of "ee ff", a type no gold has
    ]
    group = score(EXAMPLES, predictions, n_resamples=50).groups.types
    assert group is not None and list(group.datasets) == ["toy"]  # `plain` has no typed gold
    toy = group.datasets["toy"]
    assert (toy.n, toy.partitions, toy.untyped_gold_spans, toy.labelled_predictions) == (
        3,
        ["qa/toy", "summ/toy"],
        1,
        2,
    )
    x, y = toy.types["x"], toy.types["y"]
    # x: "aa bb" and "dd" (the span labelled y|x counts for both): 6 characters (the space between aa and bb is not
    # counted), tokens aa, bb, dd. "bb cc" covers "bb" (2 characters) and the token bb.
    assert (x.n_examples, x.gold_spans, x.gold_chars, x.gold_tokens) == (1, 2, 6, 3)
    assert (x.char_recall.recall, x.token_recall.recall) == (2 / 6, 1 / 3)
    # y: "dd" of a (not predicted) and "ff" of b (predicted): 2 of 4 characters, 1 of 2 tokens.
    assert (y.n_examples, y.gold_spans, y.gold_chars, y.gold_tokens) == (2, 2, 4, 2)
    assert (y.char_recall.recall, y.token_recall.recall) == (0.5, 0.5)
    # Typed: the x prediction "bb cc" (4 characters, tokens bb and cc) against x's gold: 2 characters, 1 token shared.
    assert (x.predicted_spans, x.typed_char.precision, x.typed_char.recall) == (1, 2 / 4, 2 / 6)
    assert x.typed_char.f1 == pytest.approx(2 * 2 / (4 + 6))
    assert (x.typed_token.precision, x.typed_token.recall, x.typed_token.f1) == (0.5, 1 / 3, pytest.approx(0.4))
    # Nothing is predicted as y (b's span is z): 0 everywhere.
    assert (y.predicted_spans, y.typed_char.f1, y.typed_token.f1) == (0, 0.0, 0.0)
    assert x.char_recall.ci is not None and 0 <= x.char_recall.ci[0] <= x.char_recall.ci[1] <= 1


def test_everything_predicted_finds_every_type_and_nothing_finds_none():
    everything = [Prediction(id=ex.id, spans=[Span(start=0, end=len(ex.response))]) for ex in EXAMPLES]
    scorer = Scorer(EXAMPLES, n_resamples=50)
    for predictions, expected in ((everything, 1.0), ([], 0.0)):
        toy = scorer.score(predictions).groups.types.datasets["toy"]
        for scores in toy.types.values():
            assert (scores.char_recall.recall, scores.token_recall.recall) == (expected, expected)
            assert scores.char_recall.ci == scores.token_recall.ci == (expected, expected)
            assert scores.typed_char is None and scores.typed_token is None  # unlabelled predictions
        assert toy.labelled_predictions == 0


def test_no_typed_gold_no_group_and_the_group_survives_json():
    plain = [ex for ex in EXAMPLES if ex.dataset == "plain"]
    assert score(plain, [], n_resamples=10).groups.types is None
    results = score(EXAMPLES, [Prediction(id="a", spans=[Span(start=0, end=2, label="x")])], n_resamples=10)
    again = Results.model_validate_json(results.model_dump_json())
    assert again.groups.types == results.groups.types
    assert "types" in results.model_dump(mode="json")["groups"]


def test_rescoring_keeps_the_same_draws():
    scorer = Scorer(EXAMPLES, n_resamples=200)
    predictions = [Prediction(id="a", spans=[Span(start=3, end=8)]), Prediction(id="b", spans=[Span(start=3, end=5)])]
    first = scorer.score(predictions).groups.types
    scorer.score([])  # another prediction set between the two
    assert scorer.score(predictions).groups.types == first
    assert Scorer(EXAMPLES, n_resamples=200).score(predictions).groups.types == first


def test_a_kept_corpus_keeps_its_type_draws_and_scores_the_same(tmp_path, monkeypatch):
    from shambench.runs.selection import corpus_to_score
    from shambench.runs.spec import Selection
    from shambench.scoring import typed

    path = tmp_path / "examples.jsonl"
    path.write_text("".join(e.model_dump_json(exclude_none=True) + "\n" for e in EXAMPLES), encoding="utf-8")
    predictions = [Prediction(id="a", spans=[Span(start=3, end=8)]), Prediction(id="b", spans=[Span(start=3, end=5)])]
    expected = Scorer(EXAMPLES, n_resamples=200).score(predictions).groups.types  # a corpus not kept: drawn
    drawn = []
    real = typed.TypedGold.draws
    monkeypatch.setattr(typed.TypedGold, "draws", lambda self, resamples: drawn.append(1) or real(self, resamples))

    def types():
        corpus = corpus_to_score(Selection(examples_file=path))
        assert corpus.kept is not None
        return Scorer(corpus, n_resamples=200).score(predictions).groups.types, corpus.kept

    for _ in range(2):
        assert types()[0] == expected
    folder = types()[1]
    assert len(drawn) == 1 and [p.name for p in folder.glob("type-draws-*")] == ["type-draws-200-0.bin"]
    # A damaged file is a miss: drawn again, the same figures.
    kept = folder / "type-draws-200-0.bin"
    kept.write_bytes(kept.read_bytes()[:-5])
    with pytest.warns(RuntimeWarning, match="type-draws-200-0.bin not used, computed again"):
        assert types()[0] == expected
    assert len(drawn) == 2 and types()[0] == expected and len(drawn) == 2


WORDS = st.lists(st.sampled_from(["ab", "c", "def", "gh"]), min_size=1, max_size=8)


@st.composite
def _typed_case(draw):
    """Responses of words joined by single spaces (so the tokens are the words), typed gold and predicted spans."""
    examples, predictions = [], []
    for i in range(draw(st.integers(1, 5))):
        text = " ".join(draw(WORDS))
        gold = _spans(draw, text, labels=("p", "q", "p|q", None))
        examples.append(Example(id=f"e{i}", task="summ", dataset="set", response=text, hallu_spans=gold))
        if draw(st.booleans()):
            predictions.append(Prediction(id=f"e{i}", spans=_spans(draw, text, labels=("p", "q", None))))
    return examples, predictions


def _spans(draw, text: str, labels: tuple) -> list[Span]:
    cuts = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=6))))
    return [
        Span(start=a, end=b, label=draw(st.sampled_from(labels)))
        for a, b in zip(cuts[::2], cuts[1::2])
        if a < b and draw(st.booleans())
    ]


def _chars(text: str, spans, label_of) -> set[int]:
    """The non-whitespace characters of the spans that `label_of` picks."""
    return {k for s in spans if label_of(s) for k in range(s.start, s.end) if not text[k].isspace()}


def _tokens(text: str, chars: set[int]) -> set[int]:
    out, start = set(), 0
    for word in text.split(" "):
        if any(k in chars for k in range(start, start + len(word))):
            out.add(start)
        start += len(word) + 1
    return out


def _ratio(part: int, whole: int) -> float:
    """part / whole, 0 when there is nothing (a gold span of white space only has no character to find)."""
    return part / whole if whole else 0.0


@settings(max_examples=60, deadline=None)
@given(_typed_case())
def test_figures_equal_a_computation_on_sets(case):
    examples, predictions = case
    group = score(examples, predictions, n_resamples=20).groups.types
    merged = {ex.id: ex.hallu_spans for ex in examples}  # Example merges touching spans, joining their labels
    types = {t for spans in merged.values() for s in spans if s.label for t in s.label.split("|")}
    if not types:
        assert group is None
        return
    predicted = {p.id: p.spans for p in predictions}
    for t in types:

        def has(s, t=t):
            return s.label is not None and t in s.label.split("|")

        counts = {"gold": 0, "found": 0, "gold_tok": 0, "found_tok": 0, "pred": 0, "shared": 0, "pt": 0, "st": 0}
        for ex in examples:
            gold = _chars(ex.response, merged[ex.id], has)
            every = _chars(ex.response, predicted.get(ex.id, []), lambda s: True)
            typed = _chars(ex.response, predicted.get(ex.id, []), has)
            counts["gold"] += len(gold)
            counts["found"] += len(gold & every)
            gold_tok = _tokens(ex.response, gold)
            counts["gold_tok"] += len(gold_tok)
            counts["found_tok"] += len(gold_tok & _tokens(ex.response, every))
            counts["pred"] += len(typed)
            counts["shared"] += len(typed & gold)
            counts["pt"] += len(_tokens(ex.response, typed))
            counts["st"] += len(_tokens(ex.response, typed) & gold_tok)
        scores = group.datasets["set"].types[t]
        assert (scores.gold_chars, scores.gold_tokens) == (counts["gold"], counts["gold_tok"])
        assert math.isclose(scores.char_recall.recall, _ratio(counts["found"], counts["gold"]))
        assert math.isclose(scores.token_recall.recall, _ratio(counts["found_tok"], counts["gold_tok"]))
        if scores.typed_char is not None:
            assert math.isclose(scores.typed_char.recall, _ratio(counts["shared"], counts["gold"]))
            assert math.isclose(scores.typed_char.precision, _ratio(counts["shared"], counts["pred"]))
            assert math.isclose(scores.typed_token.recall, _ratio(counts["st"], counts["gold_tok"]))
            assert math.isclose(scores.typed_token.precision, _ratio(counts["st"], counts["pt"]))
        else:
            assert not any(s.label for spans in predicted.values() for s in spans)


RANGES = st.lists(st.tuples(st.integers(0, 30), st.integers(0, 6)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(RANGES, RANGES)
def test_a_coverage_counts_the_characters_its_ranges_cover(covering, asked):
    """Overlapping, touching, unsorted or disjoint ranges (the words coverage takes its disjoint tokens as they
    are, any other set is merged): per asked range, its covered characters and its covered parts, against sets."""
    chars = {k for a, n in covering for k in range(a, a + n)}
    cover = _Coverage(*_columns(covering))
    starts, ends = _columns(asked)
    assert cover.within(starts, ends).tolist() == [len(chars & set(range(a, a + n))) for a, n in asked]
    of, lo, hi = cover.pieces(starts, ends)
    parts = [set(range(a, b)) for a, b in zip(lo.tolist(), hi.tolist())]
    assert sum(map(len, parts)) == len({(k, c) for k, part in zip(of.tolist(), parts) for c in part})  # disjoint
    for k, (a, n) in enumerate(asked):
        assert set().union(*(p for j, p in zip(of.tolist(), parts) if j == k)) == chars & set(range(a, a + n))


def _columns(ranges: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """`(start, length)` pairs as start and end columns (int64, as the corpus's offsets)."""
    starts = np.array([a for a, _ in ranges], np.int64)
    return starts, starts + np.array([n for _, n in ranges], np.int64)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=10), RANGES, st.booleans())
def test_the_items_ranges_overlap_are_sorted_and_distinct(lengths, asked, in_order):
    """Items of the given lengths one space apart (as tokens); ranges in order (the gold's, repeats only where two
    share an item) or in any order: the items that any range overlaps by a character, against sets."""
    starts = np.cumsum([0] + [n + 1 for n in lengths[:-1]])
    items = SimpleNamespace(starts=starts, ends=starts + np.array(lengths))
    asked = sorted(asked) if in_order else asked
    a, b = _columns(asked)
    expected = sorted(
        {
            k
            for s, e in zip(a.tolist(), b.tolist())
            for k, (x, y) in enumerate(zip(starts, items.ends))
            if s < y and x < e
        }
    )
    assert tokens_overlapping(items, a, b).tolist() == expected

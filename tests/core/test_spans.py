"""merge_spans: hand cases and properties (idempotent, order-independent, same characters, inside the response)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shambench.schema import Example, Span, merge_spans


def chars(spans) -> set[int]:
    return {c for s in spans for c in range(s.start, s.end)}


def test_merge_hand_cases():
    assert merge_spans([]) == []
    # [5, 7) and [1, 3) are apart; [2, 6) bridges them into [1, 7); [9, 10) touches nothing.
    got = merge_spans([Span(start=5, end=7), Span(start=9, end=10), Span(start=1, end=3), Span(start=2, end=6)])
    assert got == [Span(start=1, end=7), Span(start=9, end=10)]
    # Touching ranges merge: [0, 3) + [3, 5) = [0, 5).
    assert merge_spans([Span(start=3, end=5), Span(start=0, end=3)]) == [Span(start=0, end=5)]


def test_merge_joins_distinct_labels_and_keeps_the_highest_score():
    got = merge_spans(
        [
            Span(start=0, end=4, label="x", score=0.3),
            Span(start=2, end=6, label="y"),
            Span(start=5, end=8, label="x", score=0.9),
        ]
    )
    assert got == [Span(start=0, end=8, label="x|y", score=0.9)]


spans_st = st.lists(
    st.tuples(st.integers(0, 60), st.integers(1, 15)).map(lambda t: Span(start=t[0], end=t[0] + t[1])), max_size=12
)


@given(spans_st)
def test_merge_is_idempotent(spans):
    once = merge_spans(spans)
    assert merge_spans(once) == once


@given(spans_st, st.randoms(use_true_random=False))
def test_merge_does_not_depend_on_order(spans, rnd):
    shuffled = list(spans)
    rnd.shuffle(shuffled)
    assert [(s.start, s.end) for s in merge_spans(shuffled)] == [(s.start, s.end) for s in merge_spans(spans)]


@given(spans_st)
def test_merge_keeps_the_characters_and_leaves_gaps_between_ranges(spans):
    merged = merge_spans(spans)
    assert chars(merged) == chars(spans)
    assert all(a.end < b.start for a, b in zip(merged, merged[1:]))


@given(st.text(min_size=1, max_size=40), st.data())
def test_normalised_spans_never_leave_the_response(response, data):
    n = len(response)
    raw = data.draw(
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(1, n)).filter(lambda t: t[0] < t[1]), max_size=6)
    )
    ex = Example(id="p", dataset="d", task="t", response=response, hallu_spans=[list(t) for t in raw])
    assert all(0 <= s.start < s.end <= n for s in ex.hallu_spans)
    assert chars(ex.hallu_spans) == {c for a, b in raw for c in range(a, b)}

"""Annotations.leave_one_out: each annotator's others (gold and shares) from one count of all the annotators less
the annotator's own marks, equal to building them from the lists of the others (hand cases and a property)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shambench.schema import Annotations, MarkedByMoreThan, SoftSpan, Span, covered_shares, marked_by_more_than


def spans(*pairs: tuple[int, int]) -> list[Span]:
    return [Span(start=a, end=b) for a, b in pairs]


def shares(*triples: tuple[int, int, float]) -> list[SoftSpan]:
    return [SoftSpan(start=a, end=b, prob=p) for a, b, p in triples]


def straightforward(marked: dict[str, list[Span]], share: float) -> list[tuple[list[Span], list[SoftSpan]]]:
    """Per annotator, the rule and the shares applied to the lists of the others (the construction it replaces)."""
    out = []
    for annotator in marked:
        others = [s for other, s in marked.items() if other != annotator]
        soft = [SoftSpan(start=a, end=b, prob=p) for a, b, p in covered_shares(others)]
        out.append((marked_by_more_than(others, share), soft))
    return out


def derived(marked: dict[str, list[Span]], share: float) -> list[tuple[list[Span], list[SoftSpan] | None]]:
    annotations = Annotations.leave_one_out(marked, MarkedByMoreThan(share=share), "rule", soft=True)
    return [(r.others, r.others_soft) for r in annotations.readings]


# Ten characters. Per character, who marked it: 0-1 a; 2-3 a, b, c; 4-5 b; 6-7 nobody; 8-9 c; d marked nothing.
FOUR = {"a": spans((0, 4)), "b": spans((2, 6)), "c": spans((2, 4), (8, 10)), "d": []}
# x marks [0, 6) and y [2, 4) inside it: y's bounds are only y's, so y's others (x, z) run [0, 6) as one share.
THREE = {"x": spans((0, 6)), "y": spans((2, 4)), "z": []}


def test_four_annotators_by_hand():
    # The majority of three others is what two of them marked: only [2, 4) has two others for everyone.
    assert [others for others, _ in derived(FOUR, 0.5)] == [spans((2, 4))] * 4
    # The union of the others.
    assert [others for others, _ in derived(FOUR, 0.0)] == [
        spans((2, 6), (8, 10)),  # a: b, c, d
        spans((0, 4), (8, 10)),  # b: a, c, d
        spans((0, 6)),  # c: a, b, d
        spans((0, 6), (8, 10)),  # d: a, b, c
    ]
    # Shares of three others, split where the others' spans begin or end.
    third, two_thirds = 1 / 3, 2 / 3
    assert [soft for _, soft in derived(FOUR, 0.5)] == [
        shares((2, 4, two_thirds), (4, 6, third), (8, 10, third)),  # a: bounds of b and c at 2, 4, 6, 8, 10
        shares((0, 2, third), (2, 4, two_thirds), (8, 10, third)),  # b: bounds of a and c at 0, 2, 4, 8, 10
        shares((0, 2, third), (2, 4, two_thirds), (4, 6, third)),  # c: bounds of a and b at 0, 2, 4, 6
        shares((0, 2, third), (2, 4, 1.0), (4, 6, third), (8, 10, third)),  # d: everyone's bounds
    ]
    assert derived(FOUR, 0.5) == straightforward(FOUR, 0.5) and derived(FOUR, 0.0) == straightforward(FOUR, 0.0)


def test_three_annotators_by_hand():
    # More than one of two others: only z's others (x and y) both mark [2, 4).
    assert derived(THREE, 0.5) == [
        ([], shares((2, 4, 0.5))),
        ([], shares((0, 6, 0.5))),  # one run: x's [0, 6) is not split at y's own bounds
        (spans((2, 4)), shares((0, 2, 0.5), (2, 4, 1.0), (4, 6, 0.5))),
    ]
    assert [others for others, _ in derived(THREE, 0.0)] == [spans((2, 4)), spans((0, 6)), spans((0, 6))]
    assert derived(THREE, 0.5) == straightforward(THREE, 0.5) and derived(THREE, 0.0) == straightforward(THREE, 0.0)


def test_one_annotator_has_no_others_and_none_has_no_readings():
    assert derived({"a": spans((0, 4))}, 0.5) == [([], [])]
    assert derived({}, 0.5) == []


def test_a_rule_that_does_not_count_is_called_on_the_others():
    """FAVABench's first-matching rule: the gold of the others is the first other's spans."""
    marked = {"a": spans((0, 2)), "b": spans((4, 6)), "c": spans((8, 9))}
    annotations = Annotations.leave_one_out(marked, lambda lists: lists[0] if lists else [], "first", soft=True)
    assert [r.others for r in annotations.readings] == [spans((4, 6)), spans((0, 2)), spans((0, 2))]
    assert [r.others_soft for r in annotations.readings] == [s for _, s in straightforward(marked, 0.0)]


def test_the_rule_counts_as_marked_by_more_than():
    lists = [spans((0, 4)), spans((2, 6)), spans((3, 5))]
    assert MarkedByMoreThan(share=0.5)(lists) == marked_by_more_than(lists, 0.5) == spans((2, 5))
    assert MarkedByMoreThan(share=0.0)(lists) == spans((0, 6))


span_st = st.tuples(st.integers(0, 30), st.integers(1, 8)).map(lambda t: Span(start=t[0], end=t[0] + t[1]))
marked_st = st.lists(st.lists(span_st, max_size=4), max_size=7).map(
    lambda lists: {f"a{i}": spans for i, spans in enumerate(lists)}
)


@given(marked_st, st.sampled_from([0.0, 0.25, 1 / 3, 0.5, 2 / 3, 0.75, 1.0]))
def test_derived_equals_the_construction_from_the_others(marked, share):
    # Spans unsorted, overlapping and touching within a list (merged first, as a reading's are), and across lists.
    assert derived(marked, share) == straightforward(marked, share)
    annotations = Annotations.leave_one_out(marked, MarkedByMoreThan(share=share), "rule", soft=True)
    called = Annotations.leave_one_out(marked, lambda lists: marked_by_more_than(lists, share), "rule", soft=True)
    assert annotations.model_dump_json() == called.model_dump_json()

"""Span location: exact with a moving cursor, case/whitespace-insensitive, fuzzy with a recorded similarity."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shambench.detection.locate import MAX_FUZZY_CELLS, locate, place
from shambench.schema import Span

RESPONSE = "The capital of Australia is Sydney, and Sydney has  a population of 5 million."
#           0123456789012345678901234567890123456789012345678901234567890123456789012345678
#           0         1         2         3         4         5         6         7


def test_exact_match_gives_offsets():
    p = place(RESPONSE, "Sydney")
    # "The capital of Australia is " is 28 characters, so Sydney is [28, 34).
    assert (p.start, p.end, p.method, p.similarity) == (28, 34, "exact", 1.0)


def test_as_span_of_a_placed_string_and_refusal_of_an_unplaced_one():
    assert place(RESPONSE, "Sydney").as_span("city") == Span(start=28, end=34, label="city")
    with pytest.raises(ValueError, match="'Melbourne' was not placed"):
        place(RESPONSE, "Melbourne").as_span()


def test_cursor_maps_a_repeated_string_to_its_next_occurrence():
    first, second = locate(RESPONSE, ["Sydney", "Sydney"])
    # The second "Sydney" follows ", and " (6 characters) after the first one's end at 34: [40, 46).
    assert (first.start, first.end) == (28, 34)
    assert (second.start, second.end) == (40, 46)


def test_a_string_before_the_cursor_is_still_found_anywhere():
    late, early = locate(RESPONSE, ["population", "capital"])
    # "Sydney has  a" ends at 53, then one space: "population" is [54, 64).
    assert (late.start, late.end) == (54, 64)
    assert (early.start, early.end, early.method) == (4, 11, "exact")


def test_case_and_whitespace_insensitive_match_maps_back_to_the_original():
    p = place(RESPONSE, "sydney HAS a")
    # In the response "Sydney has  a" (two spaces) runs from 40 to 53: 6 + 1 + 3 + 2 + 1 = 13 characters.
    assert (p.start, p.end, p.method, p.similarity) == (40, 53, "normalized", 1.0)
    assert RESPONSE[p.start : p.end] == "Sydney has  a"


def test_wrapping_quotes_and_spaces_are_ignored():
    p = place(RESPONSE, ' "Sydney" ')
    assert (p.start, p.end, p.method) == (28, 34, "exact")


def test_fuzzy_match_records_its_similarity():
    p = place(RESPONSE, "5 milion")
    # Best whole-word window "5 million" [68, 77); rapidfuzz ratio = 1 - indel/(len1 + len2)
    # = 1 - 1/(8 + 9) = 16/17 = 0.9412.
    assert (p.start, p.end, p.method) == (68, 77, "fuzzy")
    assert p.similarity == 0.9412


def test_fuzzy_match_snaps_to_whole_words():
    p = place(RESPONSE, "Australa is Sidney")
    assert RESPONSE[p.start : p.end] == "Australia is Sydney"
    assert p.method == "fuzzy" and 0.8 <= p.similarity < 1.0


def test_a_string_not_in_the_response_stays_unplaced_with_its_best_similarity():
    p = place(RESPONSE, "Canberra")
    assert not p.placed and p.start is None and p.method is None
    assert 0.0 < p.similarity < 0.8


def test_threshold_decides_fuzzy_acceptance():
    assert place(RESPONSE, "5 milion", min_similarity=0.95).placed is False
    assert place(RESPONSE, "5 milion", min_similarity=0.9).placed is True


def test_empty_string_is_unplaced():
    assert not place(RESPONSE, "  ").placed


def test_longer_than_the_response_is_unplaced():
    assert not place("short", "a much longer quoted string").placed


@given(
    words=st.lists(st.text(alphabet="abcxyz.,", min_size=1, max_size=6), min_size=1, max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=12), max_size=6),
)
def test_in_order_substrings_are_placed_exactly_and_in_order(words, cuts):
    # Pieces are runs of whole words, so none starts or ends with a space (which quoting would strip): every
    # drawn case is usable and no input is filtered out.
    text = " ".join(words)
    word_starts = [sum(len(w) + 1 for w in words[:k]) for k in range(len(words))]
    bounds = sorted({0, len(words), *(min(c, len(words)) for c in cuts)})
    pieces = [(word_starts[a], " ".join(words[a:b])) for a, b in zip(bounds, bounds[1:])]
    placements = locate(text, [s for _, s in pieces])
    starts = [p.start for p in placements]
    assert all(p.method == "exact" and p.similarity == 1.0 for p in placements)
    assert all(text[p.start : p.end] == s for p, (_, s) in zip(placements, pieces))
    # The cursor never passes a true position: each is found at or before where it was cut from, in order.
    assert all(start <= a for start, (a, _) in zip(starts, pieces))
    assert starts == sorted(starts)


@given(response=st.text(min_size=1, max_size=40), needle=st.text(min_size=1, max_size=15))
def test_every_placement_lies_inside_the_response(response, needle):
    p = place(response, needle)
    if p.placed:
        assert 0 <= p.start < p.end <= len(response)
        assert 0.8 <= p.similarity <= 1.0


def _near_miss(n_chars: int) -> tuple[str, str]:
    """A 3,000-word response and an `n_chars` slice of it with every 20th character changed."""
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
    response = " ".join(words[(i * 7 + i // 3) % len(words)] for i in range(3000))
    piece = response[2000 : 2000 + n_chars]
    return response, "".join("q" if i % 20 == 10 else ch for i, ch in enumerate(piece))


def compared_pairs(monkeypatch) -> list[int]:
    """The character pairs (length times length) of every rapidfuzz comparison made from now on, one per call."""
    from rapidfuzz import fuzz

    pairs: list[int] = []
    for name in ("ratio", "partial_ratio_alignment"):
        compare = getattr(fuzz, name)

        def counted(a, b, *args, compare=compare, **kwargs):
            pairs.append(len(a) * len(b))
            return compare(a, b, *args, **kwargs)

        monkeypatch.setattr(fuzz, name, counted)
    return pairs


def test_a_long_near_miss_gives_up_within_the_budget_instead_of_taking_minutes(monkeypatch):
    response, miss = _near_miss(3000)
    pairs = compared_pairs(monkeypatch)
    p = place(response, miss)
    assert (p.placed, p.gave_up, p.method) == (False, True, None)
    # Without the budget this search compares ~60,000 windows of ~3,000 characters (5e11 pairs: minutes of CPU);
    # with it, one alignment of the needle (2,999 characters once normalized) against the whole response (17,199)
    # and no window.
    assert pairs == [2999 * 17199] and sum(pairs) <= MAX_FUZZY_CELLS


def test_a_short_near_miss_is_still_placed_fuzzily():
    response, miss = _near_miss(200)
    p = place(response, miss)
    assert p.method == "fuzzy" and not p.gave_up and p.similarity >= 0.9
    # The response repeats itself, so the window may be any copy of the piece: it must be about as long.
    assert abs((p.end - p.start) - 200) <= 10


def _one_by_one(response: str, texts: list[str]) -> list:
    """`locate` as it was written first: each string placed on its own, the response normalized every time."""
    cursor, out = 0, []
    for text in texts:
        p = place(response, text, cursor)
        cursor = max(cursor, p.end or 0) if p.placed else cursor
        out.append(p)
    return out


@given(
    words=st.lists(st.sampled_from(["Sydney", "sydney", "the", "  ", "Capital", "ÉTÉ", "ß", "x\n"]), max_size=12),
    picks=st.lists(st.tuples(st.integers(0, 11), st.integers(1, 4), st.booleans()), max_size=6),
)
def test_normalizing_the_response_once_places_every_string_as_before(words, picks):
    # The normalized copy is made once per response (not once per string): the placements are the same.
    response = " ".join(words)
    texts = []
    for start, length, upper in picks:
        quote = " ".join(words[start : start + length]) or "absent"
        texts.append(quote.upper() if upper else quote)
    assert locate(response, texts) == _one_by_one(response, texts)


def test_a_normalized_position_is_the_first_at_or_after_an_original_offset():
    from shambench.detection.locate import _Normalized

    # The runs of whitespace collapse, and İ lowers to two characters (i and a combining dot), both from offset 5.
    norm = _Normalized("A  B\tİ x")
    assert (norm.text, norm.origin) == ("a b i\u0307 x", [0, 1, 3, 4, 5, 5, 6, 7])
    assert [norm.position(i) for i in range(9)] == [0, 1, 2, 2, 3, 4, 6, 7, 8]

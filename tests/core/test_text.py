"""Tokens and sentence units: hand cases, the cache, and agreement with spaCy's own Token and Span objects."""

from __future__ import annotations

import json
from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from shambench import text
from shambench.text import segment, segment_all, sentences, tokens
from tests.conftest import require_shared


def test_tokens_exclude_whitespace_and_split_punctuation():
    t = "Hello  world.\n\nIt costs $3.50!"
    # H-e-l-l-o = [0, 5); two spaces (the second is a whitespace token, dropped); world [7, 12); "." [12, 13);
    # "\n\n" dropped; It [15, 17); costs [18, 23); "$" [24, 25); "3.50" [25, 29); "!" [29, 30).
    assert tokens(t) == [(0, 5), (7, 12), (12, 13), (15, 17), (18, 23), (24, 25), (25, 29), (29, 30)]


def test_sentence_units_run_from_first_to_last_word():
    t = "  First one. Second one?\n\nThird  "
    # Leading spaces and the blank line are no part of any unit: [2, 12), [13, 24), [26, 31).
    assert sentences(t) == [(2, 12), (13, 24), (26, 31)]


def test_empty_and_blank_texts_have_no_units():
    for t in ("", " ", "\n\n\t"):
        assert tokens(t) == []
        assert sentences(t) == []


def test_segmentations_are_cached_per_text_and_cleared_on_demand():
    first = segment("A cached text.")
    assert segment_all(["A cached text.", "A cached text."]) == [first, first]
    assert segment("A cached text.") is first
    text.clear_cache()
    again = segment("A cached text.")
    assert again is not first
    assert again.token_starts.tolist() == first.token_starts.tolist()


@cache
def reference_pipeline():
    """spaCy's own blank English pipeline with its own sentencizer component."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def naive_segmentation(t: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Tokens and sentence units read off spaCy's Token and sentence Span objects one by one."""
    doc = reference_pipeline()(t)
    toks = [(tok.idx, tok.idx + len(tok.text)) for tok in doc if not tok.is_space]
    sents = []
    for sent in doc.sents:
        words = [tok for tok in sent if not tok.is_space]
        if words:
            sents.append((words[0].idx, words[-1].idx + len(words[-1].text)))
    return toks, sents


pieces = st.sampled_from(
    [
        "the",
        "Dr.",
        "U.S.",
        "3.5",
        "km",
        "don't",
        "e-mail",
        "café",
        "!",
        "?",
        ".",
        ",",
        "...",
        '"',
        "(",
        ")",
        "。",
        "？",
        "!?",
        "—",
        ":",
        "'",
    ]
)
separators = st.sampled_from([" ", " ", " ", "  ", "\n", "\n\n", "\t", ""])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(pieces, separators), max_size=25), separators)
def test_vectorised_segmentation_matches_spacy_objects(parts, lead):
    t = lead + "".join(p + s for p, s in parts)
    assert (tokens(t), sentences(t)) == naive_segmentation(t)


def test_real_responses_segment_as_spacys_own_sentencizer():
    path = require_shared("mushroom", "mushroom.en-tst.v1.extra.jsonl")
    texts = [json.loads(line)["model_output_text"] for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(texts) == 154
    for t in texts:
        assert (tokens(t), sentences(t)) == naive_segmentation(t)

"""Tokens and sentence units: hand cases, the cache, and agreement with spaCy's own Token and Span objects."""

from __future__ import annotations

import json
from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from shambench.scoring import text
from shambench.scoring.text import segment, segment_all, segment_mixed, sentences, tokens
from tests.conftest import mushroom_english_responses, require_shared


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
    texts = mushroom_english_responses()
    assert len(texts) == 154
    for t in texts:
        assert (tokens(t), sentences(t)) == naive_segmentation(t)


@cache
def memoless_tokenizer():
    """spaCy's blank English tokenizer keeping no chunk in its cache: every chunk is split by the rules."""
    import spacy

    tokenizer = spacy.blank("en").tokenizer
    tokenizer.max_cache_size = 0
    return tokenizer


def all_tokens(doc) -> list[tuple[int, int, bool]]:
    """Every token of a doc, whitespace tokens included: start, length and whether it is whitespace."""
    return [(tok.idx, len(tok.text), tok.is_space) for tok in doc]


def assert_cache_changes_no_token(texts: list[str]) -> None:
    """Each text, tokenised twice by the scorer's tokenizer (the second time from the chunks the first kept), gives
    the tokens of a tokenizer that keeps no chunk."""
    ours = text._tokenizer()[0]
    assert ours.max_cache_size == text.CHUNK_CACHE
    for t in texts + texts:
        assert all_tokens(ours(t)) == all_tokens(memoless_tokenizer()(t))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(pieces, separators), max_size=12), min_size=1, max_size=6))
def test_the_enlarged_chunk_cache_changes_no_token(texts):
    assert_cache_changes_no_token(["".join(p + s for p, s in parts) for parts in texts])


def test_real_responses_tokenise_with_the_enlarged_cache_as_without_one():
    assert_cache_changes_no_token(mushroom_english_responses())


def _mushroom_text(lang: str, item_id: str) -> str:
    path = require_shared("mushroom", "multilingual", f"mushroom.{lang}-tst.v1.jsonl")
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    return next(r["model_output_text"] for r in rows if r["id"] == item_id)


def test_chinese_is_segmented_per_character_and_split_at_the_ideographic_full_stop():
    t = _mushroom_text("zh", "tst-zh-1")
    # A leading newline, then 63 non-space characters, each its own token; the first sentence ends with "。" at 30.
    assert len(tokens(t, "zh")) == 63 == sum(not c.isspace() for c in t)
    assert sentences(t, "zh") == [(1, 31), (31, 64)]
    # The English tokeniser sees two "words" in the same text (no spaces to split on): why the language matters.
    assert len(tokens(t)) == 2


def test_arabic_comma_is_a_token_and_the_full_stop_ends_a_sentence():
    t = _mushroom_text("ar", "tst-ar-3")
    words = [t[a:b] for a, b in tokens(t, "ar")]
    assert len(words) == 28 and words[6] == "،" and words[13] == "."
    assert sentences(t, "ar") == [(0, 72), (73, 134)]


def test_hindi_danda_is_a_token_and_ends_the_last_sentence():
    t = _mushroom_text("hi", "tst-hi-1")
    assert tokens(t, "hi")[-2:] == [(161, 164), (164, 165)] and t[164] == "।"
    # "?" ends the question the model echoed (at 53); the answer runs to the danda.
    assert sentences(t, "hi") == [(0, 54), (55, 165)]


def test_the_cache_keys_on_the_language():
    t = "你好。世界"
    assert len(tokens(t, "zh")) == 5 and len(tokens(t)) == 1
    # The English entry did not shadow the Chinese one, nor the other way round.
    assert len(tokens(t, "zh")) == 5
    assert segment_mixed([t, t], ["zh", "en"]) == [segment(t, "zh"), segment(t)]


def test_language_of_reads_meta_lang_in_lower_case_and_defaults_to_english():
    assert [text.language_of(m) for m in ({"lang": "ZH"}, {"lang": ""}, {})] == ["zh", "en", "en"]


def test_language_of_keeps_the_primary_subtag_of_regional_and_script_codes():
    codes = ["en-US", "en_GB", "zh_Hans", "zh-Hant-TW", "PT-br", " de "]
    assert [text.language_of({"lang": c}) for c in codes] == ["en", "en", "zh", "zh", "pt", "de"]


def test_usable_languages_are_known_as_such():
    assert text.unknown_language("en") is None and text.unknown_language("zh") is None

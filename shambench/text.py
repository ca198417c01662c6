"""Tokens and sentence units of a response, as the scorer counts them.

Tokeniser: spaCy's rule-based English tokeniser (`spacy.blank("en")`, no model download), whitespace tokens
excluded. Sentence splitter: the rule of spaCy's `sentencizer` (a sentence opens at the first token after its
default sentence-final punctuation that is neither punctuation nor such a character), applied to the token arrays;
a sentence unit runs from its first to its last non-whitespace token. Both are computed once per distinct response text and kept in a process-wide cache, so
rescoring the same responses never tokenises again.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

import numpy as np

TOKENIZER = "spacy.blank('en') rule-based tokenizer; whitespace tokens excluded"
SENTENCE_SPLITTER = (
    "spacy sentencizer rule (default punct_chars) on spacy.blank('en') tokens; examples with steps use the steps "
    "as units"
)

_lock = threading.Lock()
_cache: dict[str, Segmentation] = {}


@dataclass(frozen=True, slots=True)
class Segmentation:
    """Character bounds of the tokens and sentence units of one text (int64 arrays, half-open)."""

    token_starts: np.ndarray
    token_ends: np.ndarray
    sentence_starts: np.ndarray
    sentence_ends: np.ndarray


@cache
def _tokenizer() -> tuple[Any, int]:
    """spaCy's blank English tokenizer, and the id of a lexeme flag marking the sentencizer's final characters."""
    nlp = _import_spacy_without_torch().blank("en")
    from spacy.pipeline import Sentencizer

    # A lexeme flag is computed once per distinct word and read back by `Doc.to_array` with the other columns.
    final = frozenset(Sentencizer.default_punct_chars)
    return nlp.tokenizer, nlp.vocab.add_flag(lambda text: text in final)


def _import_spacy_without_torch() -> ModuleType:
    # thinc (under spaCy) imports torch whenever it is installed, which costs seconds per process, though the
    # rule-based tokeniser never touches it. Hiding torch for the import makes thinc record "no torch"; torch
    # stays importable for everything else afterwards. When torch is already loaded there is nothing to save.
    hide = "torch" not in sys.modules
    if hide:
        sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        import spacy
    finally:
        if hide:
            del sys.modules["torch"]
    return spacy


def _sentence_opens(is_punct: np.ndarray, final: np.ndarray, doc_first: np.ndarray) -> np.ndarray:
    """Which tokens open a sentence under spaCy's `Sentencizer.predict`, for many docs laid end to end.

    The sentencizer walks a doc's tokens with a flag set by a sentence-final character (its default
    `punct_chars`); the next token that is neither punctuation nor such a character opens a sentence and clears
    the flag. So a "plain" token opens a sentence exactly when a sentence-final character lies between it and the
    previous plain token of its doc (or its doc's start). A doc's first token always opens.
    """
    finals_before = np.concatenate([[0], np.cumsum(final)])
    plain = np.flatnonzero(~is_punct & ~final)
    # The reference point of each plain token: the previous plain token, or the start of its own doc.
    doc_start = doc_first[np.searchsorted(doc_first, plain, side="right") - 1]
    previous = np.maximum(np.concatenate([[0], plain[:-1]]), doc_start)
    opens = np.zeros(len(final), bool)
    opens[plain[finals_before[plain] > finals_before[previous]]] = True
    opens[doc_first[doc_first < len(final)]] = True
    return opens


def _segmentations_of(docs: list) -> list[Segmentation]:
    """Tokens and sentence units of many docs, computed on their tokens laid end to end.

    One `to_array` call per doc and a few whole-batch numpy operations: iterating Token objects (or running the
    sentencizer's per-token loop, or even a dozen small numpy calls per doc) cost more than tokenising.
    """
    from spacy.attrs import IDX, IS_PUNCT, IS_SPACE, LENGTH

    flag = _tokenizer()[1]
    arrays = [d.to_array([IDX, LENGTH, IS_SPACE, IS_PUNCT, flag]).view(np.int64).reshape(-1, 5) for d in docs]
    sizes = np.array([len(a) for a in arrays], dtype=np.int64)
    arr = np.concatenate(arrays + [np.empty((0, 5), np.int64)])
    doc_first = np.cumsum(sizes) - sizes
    opens = _sentence_opens(arr[:, 3] == 1, arr[:, 4] == 1, doc_first)
    words = np.flatnonzero(arr[:, 2] == 0)
    starts, ends = arr[words, 0], arr[words, 0] + arr[words, 1]
    first = np.flatnonzero(np.diff(np.cumsum(opens)[words], prepend=0))
    last = np.append(first[1:] - 1, len(words) - 1).astype(np.int64) if len(first) else first
    doc_of_word = np.repeat(np.arange(len(docs)), sizes)[words]
    # Plain slicing per doc (np.split costs more per piece).
    word_cut = _bounds(np.bincount(doc_of_word, minlength=len(docs)))
    sent_cut = _bounds(np.bincount(doc_of_word[first], minlength=len(docs)))
    sent_starts, sent_ends = starts[first], ends[last]
    return [
        Segmentation(starts[wa:wb], ends[wa:wb], sent_starts[sa:sb], sent_ends[sa:sb])
        for (wa, wb), (sa, sb) in zip(word_cut, sent_cut)
    ]


def _bounds(counts: np.ndarray) -> list[tuple[int, int]]:
    """`(start, end)` of consecutive runs of the given lengths."""
    ends = np.cumsum(counts).tolist()
    return list(zip([0, *ends[:-1]], ends))


def segment_all(texts: Iterable[str], batch_size: int = 256) -> list[Segmentation]:
    """Segmentations of the texts, in order; texts seen before come from the cache."""
    texts = list(texts)
    with _lock:
        todo = list(dict.fromkeys(t for t in texts if t not in _cache))
    if todo:
        docs = list(_tokenizer()[0].pipe(todo, batch_size=batch_size))
        fresh = dict(zip(todo, _segmentations_of(docs)))
        with _lock:
            _cache.update(fresh)
    with _lock:
        return [_cache[t] for t in texts]


def remember(texts: Sequence[str], segmentations: Sequence[Segmentation]) -> None:
    """Cache segmentations made by `segment_all` in another process (a sweep segments each dataset only once)."""
    with _lock:
        _cache.update(zip(texts, segmentations))


def segment(text: str) -> Segmentation:
    """The segmentation of one text."""
    return segment_all([text])[0]


def sentences(text: str) -> list[tuple[int, int]]:
    """Sentence units of a text as `(start, end)` pairs: what `Prediction.sentence_labels` must label."""
    seg = segment(text)
    return list(zip(seg.sentence_starts.tolist(), seg.sentence_ends.tolist()))


def tokens(text: str) -> list[tuple[int, int]]:
    """Non-whitespace tokens of a text as `(start, end)` pairs."""
    seg = segment(text)
    return list(zip(seg.token_starts.tolist(), seg.token_ends.tolist()))


def clear_cache() -> None:
    """Forget every cached segmentation (benchmarks use it to measure cold runs)."""
    with _lock:
        _cache.clear()

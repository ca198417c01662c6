"""Tokens and sentence units of a response, as the scorer counts them.

Tokeniser: spaCy's rule-based English tokeniser (`spacy.blank("en")`, no model download), whitespace tokens
excluded. Sentence splitter: spaCy's rule-based `sentencizer`; a sentence unit runs from its first to its last
non-whitespace token. Both are computed once per distinct response text and kept in a process-wide cache, so
rescoring the same responses never tokenises again.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

import numpy as np

TOKENIZER = "spacy.blank('en') rule-based tokenizer; whitespace tokens excluded"
SENTENCE_SPLITTER = "spacy sentencizer on spacy.blank('en'); examples with steps use the steps as units"

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
def _nlp():
    spacy = _import_spacy_without_torch()
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def _import_spacy_without_torch():
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


def _segmentation_of(doc) -> Segmentation:
    # One `to_array` call instead of iterating Token objects: the Python loop cost more than tokenising.
    from spacy.attrs import IDX, IS_SPACE, LENGTH, SENT_START

    arr = doc.to_array([IDX, LENGTH, IS_SPACE, SENT_START]).view(np.int64)
    starts, ends = arr[:, 0], arr[:, 0] + arr[:, 1]
    words = arr[:, 2] == 0
    # spaCy's `doc.sents` opens a sentence at token 0 and at every token whose sent_start is 1.
    opens = arr[:, 3] == 1
    opens[:1] = True
    sentence_of = np.cumsum(opens)[words]
    first = np.flatnonzero(np.diff(sentence_of, prepend=-1))
    last = np.append(first[1:] - 1, len(sentence_of) - 1) if len(first) else first
    w_starts, w_ends = starts[words], ends[words]
    return Segmentation(w_starts, w_ends, w_starts[first], w_ends[last])


def segment_all(texts: Iterable[str], batch_size: int = 256) -> list[Segmentation]:
    """Segmentations of the texts, in order; texts seen before come from the cache."""
    texts = list(texts)
    with _lock:
        todo = list(dict.fromkeys(t for t in texts if t not in _cache))
    if todo:
        fresh = {t: _segmentation_of(d) for t, d in zip(todo, _nlp().pipe(todo, batch_size=batch_size))}
        with _lock:
            _cache.update(fresh)
    with _lock:
        return [_cache[t] for t in texts]


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

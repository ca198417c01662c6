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
def _nlp():
    return _import_spacy_without_torch().blank("en")


@cache
def _sentence_final() -> np.ndarray:
    """Hashes (as int64) of the sentencizer's default sentence-final characters, as they appear in ORTH."""
    from spacy.pipeline import Sentencizer

    strings = _nlp().vocab.strings
    return np.array([strings.add(ch) for ch in Sentencizer.default_punct_chars], dtype=np.uint64).view(np.int64)


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


def _sentence_opens(is_punct: np.ndarray, orth: np.ndarray) -> np.ndarray:
    """Which tokens open a sentence under spaCy's `Sentencizer.predict`, without its per-token Python loop.

    The sentencizer walks the tokens with a flag set by a sentence-final character; the next token that is neither
    punctuation nor such a character opens a sentence and clears the flag. So a "plain" token opens a sentence
    exactly when a sentence-final character lies between it and the previous plain token. Token 0 always opens.
    """
    final = np.isin(orth, _sentence_final())
    plain = np.flatnonzero(~is_punct & ~final)
    finals_before = np.cumsum(final)[plain]
    opens = np.zeros(len(orth), bool)
    opens[plain[np.diff(finals_before, prepend=0) > 0]] = True
    opens[:1] = True
    return opens


def _segmentation_of(doc) -> Segmentation:
    # One `to_array` call instead of iterating Token objects: the Python loops (ours and the sentencizer's) cost
    # more than tokenising.
    from spacy.attrs import IDX, IS_PUNCT, IS_SPACE, LENGTH, ORTH

    arr = doc.to_array([IDX, LENGTH, IS_SPACE, IS_PUNCT, ORTH]).view(np.int64)
    starts, ends = arr[:, 0], arr[:, 0] + arr[:, 1]
    words = arr[:, 2] == 0
    opens = _sentence_opens(arr[:, 3] == 1, arr[:, 4])
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
        fresh = {t: _segmentation_of(d) for t, d in zip(todo, _nlp().tokenizer.pipe(todo, batch_size=batch_size))}
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

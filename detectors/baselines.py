"""Offline baselines: `none`, `all`, `random` and the lexical `overlap` detector.

`overlap` flags response tokens that carry content (content words, numbers, capitalised names) and do not occur
in the question or context. Tokens are the scorer's, in the example's language (`meta["lang"]`); stop words are
the small English list below for English and spaCy's stop-word list of the language otherwise; for Chinese
(one token per character) every character of the question and context counts as known. It needs no model and
is the floor every real detector should beat; on open-domain examples with no context it flags every content
token, which is why it does badly there.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np

from shambench.detection.detector import Detector, detector
from shambench.schema import Example, Span
from shambench.scoring.text import DEFAULT_LANG, language_of, segment

# A small closed-class list (articles, pronouns, auxiliaries, prepositions, conjunctions): words that say nothing
# checkable, so their absence from the context is no evidence of a hallucination.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "it",
        "its",
        "it's",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "he",
        "him",
        "his",
        "she",
        "her",
        "they",
        "them",
        "their",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "doing",
        "have",
        "has",
        "had",
        "having",
        "will",
        "would",
        "shall",
        "should",
        "can",
        "could",
        "may",
        "might",
        "must",
        "of",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "about",
        "against",
        "between",
        "into",
        "through",
        "during",
        "before",
        "after",
        "above",
        "below",
        "to",
        "from",
        "up",
        "down",
        "out",
        "off",
        "over",
        "under",
        "again",
        "further",
        "then",
        "once",
        "and",
        "but",
        "or",
        "nor",
        "so",
        "yet",
        "if",
        "because",
        "as",
        "until",
        "while",
        "than",
        "too",
        "very",
        "just",
        "not",
        "no",
        "also",
        "only",
        "both",
        "each",
        "few",
        "more",
        "most",
        "other",
        "some",
        "such",
        "own",
        "same",
        "all",
        "any",
        "s",
        "t",
        "don",
        "didn",
        "doesn",
        "isn",
        "aren",
        "wasn",
        "weren",
        "won",
        "wouldn",
        "shouldn",
        "couldn",
    ]
)
# spaCy splits contractions off ("do" + "n't"); the clitics carry no checkable content either.
CLITICS = frozenset(c.replace("'", q) for c in ("n't", "'s", "'re", "'ll", "'ve", "'d", "'m") for q in "'\u2019")
_WORD = re.compile(r"\w+", re.UNICODE)


@cache
def stop_words(lang: str) -> frozenset[str]:
    """The stop words of a language: the list above for English, spaCy's list for the others."""
    if lang == DEFAULT_LANG:
        return STOPWORDS | CLITICS
    from spacy.util import get_lang_class

    return frozenset(w.lower() for w in get_lang_class(lang).Defaults.stop_words)


def _content_key(token: str, lang: str = DEFAULT_LANG) -> str | None:
    """The comparison key of a token that carries checkable content, or None for stopwords and punctuation."""
    if not any(ch.isalnum() for ch in token):
        return None
    key = token.lower()
    if key in stop_words(lang):
        return None
    return key


def _spans_of_tokens(starts: np.ndarray, ends: np.ndarray, flags: np.ndarray) -> list[Span]:
    return [Span(start=int(s), end=int(e)) for s, e, f in zip(starts, ends, flags) if f]


class NoneDetector(Detector):
    """Predicts no span."""

    family = "baseline"

    def detect(self, example: Example) -> list[Span]:
        return []


class AllDetector(Detector):
    """Predicts the whole response (from its first to its last non-whitespace character)."""

    family = "baseline"

    def detect(self, example: Example) -> list[Span]:
        stripped = example.response.strip()
        if not stripped:
            return []
        start = example.response.index(stripped)
        return [Span(start=start, end=start + len(stripped))]


class RandomDetector(Detector):
    """Flags each token independently with probability `rate`; seeded per example id, so runs repeat."""

    family = "baseline"

    def __init__(self, rate: float = 0.1, seed: int = 0):
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be in [0, 1], got {rate}")
        self.rate, self.seed = float(rate), int(seed)

    def params(self) -> dict:
        return {"rate": self.rate, "seed": self.seed}

    def detect(self, example: Example) -> list[Span]:
        seg = segment(example.response, language_of(example.meta))
        rng = np.random.default_rng([self.seed, *example.id.encode()])
        flags = rng.random(len(seg.token_starts)) < self.rate
        return _spans_of_tokens(seg.token_starts, seg.token_ends, flags)


class OverlapDetector(Detector):
    """Flags content tokens of the response (words, numbers, names) that appear nowhere in question or context."""

    family = "baseline"

    def detect(self, example: Example) -> list[Span]:
        lang = language_of(example.meta)
        given = example.question + "\n" + example.context
        known = {w.lower() for w in _WORD.findall(given)}
        if lang == "zh":
            known |= set(given)
        seg = segment(example.response, lang)
        flags = []
        for s, e in zip(seg.token_starts, seg.token_ends):
            key = _content_key(example.response[s:e], lang)
            parts = _WORD.findall(key) if key else []
            flags.append(bool(parts) and any(p not in known for p in parts))
        return _spans_of_tokens(seg.token_starts, seg.token_ends, np.array(flags, bool))


@detector("none", reference=True)
def none_detector() -> Detector:
    """Predicts no span (the empty baseline)."""
    return NoneDetector()


@detector("all", reference=True)
def all_detector() -> Detector:
    """Predicts the whole response as hallucinated."""
    return AllDetector()


@detector("random", reference=True)
def random_detector(rate: float = 0.1, seed: int = 0) -> Detector:
    """Flags each token with probability `rate` (seeded).

    Args:
        rate: probability that a token is flagged, between 0 and 1.
        seed: seed of the random draws (the same seed flags the same tokens).
    """
    return RandomDetector(float(rate), int(seed))


@detector("overlap")
def overlap_detector() -> Detector:
    """Lexical baseline: flags content words, numbers and names absent from the question and context."""
    return OverlapDetector()

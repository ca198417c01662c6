"""The offline baselines on hand-made examples."""

from __future__ import annotations

import pytest

from shambench.detection.detector import create_detector
from shambench.schema import Example


def _texts(det_name: str, ex: Example, **params) -> list[str]:
    spans = create_detector(det_name, **params).detect(ex)
    return [ex.response[s.start : s.end] for s in spans]


EX = Example(
    id="x",
    dataset="toy",
    task="context_qa",
    question="When was the bridge in Lyon opened?",
    context="The Pont Lafayette in Lyon opened in 1890 after two years of work.",
    response="  The bridge in Lyon didn't open in 1890; Gustave Eiffel opened it in 1891.\n",
)


def test_none_and_all():
    assert _texts("none", EX) == []
    # `all` covers the response from its first to its last non-whitespace character
    assert _texts("all", EX) == ["The bridge in Lyon didn't open in 1890; Gustave Eiffel opened it in 1891."]
    blank = EX.model_copy(update={"response": "   "})
    assert _texts("all", blank) == []


def test_overlap_flags_content_absent_from_question_and_context():
    # "open" is absent (only "opened" occurs); "Gustave", "Eiffel" and "1891" are absent; "n't", "it", "in",
    # "The" are stopwords or clitics; "bridge", "Lyon", "1890", "opened" occur in the question or context.
    assert _texts("overlap", EX) == ["open", "Gustave", "Eiffel", "1891"]


def test_overlap_without_context_flags_every_content_word():
    ex = Example(id="y", dataset="toy", task="open_qa", response="Paris is the capital.")
    assert _texts("overlap", ex) == ["Paris", "capital"]


def test_random_rate_bounds_and_seeding():
    assert _texts("random", EX, rate=0.0) == []
    # rate 1 flags every non-whitespace token
    assert _texts("random", EX, rate=1.0) == [
        *[
            "The",
            "bridge",
            "in",
            "Lyon",
            "did",
            "n't",
            "open",
            "in",
            "1890",
            ";",
            "Gustave",
            "Eiffel",
            "opened",
            "it",
            "in",
            "1891",
            ".",
        ]
    ]
    a = _texts("random", EX, rate=0.5, seed=3)
    assert a == _texts("random", EX, rate=0.5, seed=3)
    assert any(_texts("random", EX, rate=0.5, seed=s) != a for s in range(4, 10))
    with pytest.raises(ValueError, match="rate must be in"):
        create_detector("random", rate=1.5)


def test_overlap_uses_the_languages_stop_words():
    det = create_detector("overlap")
    ex = Example(id="d", dataset="x", task="open_qa", response="Die Stadt liegt am Rhein.", meta={"lang": "de"})
    # "Die" and "am" are German stop words (spaCy's list); "Stadt" [4, 9), "liegt" [10, 15), "Rhein" [19, 24) are not.
    assert [(s.start, s.end) for s in det.detect(ex)] == [(4, 9), (10, 15), (19, 24)]


def test_overlap_on_chinese_compares_characters():
    det = create_detector("overlap")
    ex = Example(id="z", dataset="x", task="open_qa", question="北京", response="北京在中国。", meta={"lang": "zh"})
    # One token per character; 北 and 京 occur in the question, 在 is a stop word, 中 [3, 4) and 国 [4, 5) are new.
    assert [(s.start, s.end) for s in det.detect(ex)] == [(3, 4), (4, 5)]

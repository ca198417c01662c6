"""LettuceDetect parity: the official `lettucedetect` package and shambench's detector on the same stand-in weights.

Tiny seeded token classifiers laid out as the hub checkpoints are (a ModernBERT as LettuceDetect's, a BERT as a
generic `token-classifier:DIR` in LettuceDetect's format) score real examples through the package's own
`HallucinationDetector(method="transformer").predict` and through shambench; the spans must be the same. The
examples cover RAGTruth QA with three passages, data-to-text and summaries, FaithBench and Mu-SHROOM (responses
that start with a space; Mu-SHROOM has no context), inputs shorter and longer than the max length (512 groups
and truncates, 4096 fits them all).
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from shambench.schema import Example
from tests.conftest import require_shared
from tests.detectors.tiny_models import require_models, save_tiny

IDS = (
    "ragtruth/16464",  # QA, three passages, fits in 512
    "ragtruth/12845",  # QA, three passages, the longest QA prompt: three passage groups at 512
    "ragtruth/12180",  # QA, 532 context tokens
    "ragtruth/8904",  # data-to-text, fits in 512
    "ragtruth/6785",  # data-to-text, 1,335 context tokens: one passage, truncated at 512
    "ragtruth/1343",  # summary, the longest source (2,034 tokens)
    "faithbench/1-10",  # summary whose response starts with a space
    "mushroom/tst-en-1",  # no context; the response starts with a space
)


def require_lettucedetect() -> None:
    """Skip without the `parity` extra; under CI=true its absence is a failure."""
    require_models()
    if importlib.util.find_spec("lettucedetect") is None:
        message = "the parity extra is not installed: pip install -e '.[models,parity]'"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def examples() -> list[Example]:
    import shambench

    data = require_shared("ragtruth").parent
    by_id = {ex.id: ex for ex in shambench.load_benchmark("ragtruth,faithbench,mushroom", data_dir=data).examples}
    return [by_id[i] for i in IDS]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A LettuceDetect-like ModernBERT and a BERT, both two-label token classifiers taking 4,096 positions."""
    require_lettucedetect()
    root = tmp_path_factory.mktemp("parity")
    return {
        kind: save_tiny(
            root / kind,
            "AutoModelForTokenClassification",
            kind=kind,
            seed=7,
            head_scale=40.0,
            attention_scale=30.0,
            num_labels=2,
            max_position_embeddings=4096,
        )  # fmt: skip
        for kind in ("modernbert", "bert")
    }


def merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans with touching or overlapping neighbours joined."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def official_spans(folder, example: Example, max_length: int) -> list[tuple[int, int]]:
    """The package's spans, moved back by the leading whitespace its offsets lose (its bug, not copied)."""
    from lettucedetect.models.inference import HallucinationDetector

    from shambench.detectors.token_classifier import passages_of

    detector = HallucinationDetector(method="transformer", model_path=str(folder), max_length=max_length, device="cpu")
    spans = detector.predict(
        context=passages_of(example.context),
        answer=example.response,
        question=example.question or None,
        output_format="spans",
    )
    shift = len(example.response) - len(example.response.lstrip())
    return merged([(s["start"] + shift, s["end"] + shift) for s in spans])


@pytest.mark.parametrize("max_length", [512, 4096])
@pytest.mark.parametrize("kind", ["modernbert", "bert"])
def test_spans_equal_the_official_package(checkpoints, examples, kind, max_length):
    from shambench.detection.detector import create_detector

    name = "lettucedetect" if kind == "modernbert" else "token-classifier"
    ours = create_detector(f"{name}:{checkpoints[kind]}", max_length=max_length, device="cpu")
    predictions = {p.id: p for p in ours.predict(examples)}
    flagged = 0
    for ex in examples:
        theirs = official_spans(checkpoints[kind], ex, max_length)
        assert merged([(s.start, s.end) for s in predictions[ex.id].spans]) == theirs, ex.id
        flagged += bool(theirs)
    # The comparison means something: most examples have flagged spans, and not everything is flagged.
    assert flagged >= len(examples) // 2
    assert any(sum(s.end - s.start for s in predictions[ex.id].spans) < len(ex.response) // 2 for ex in examples)


def test_the_package_shifts_spans_of_a_response_that_starts_with_a_space(checkpoints, examples):
    """What the shift above undoes: on ' text' the package's offsets are one character left of the tokens."""
    from lettucedetect.models.inference import HallucinationDetector

    from shambench.detection.detector import create_detector

    ex = next(e for e in examples if e.id == "faithbench/1-10")
    assert ex.response.startswith(" ") and not ex.response.startswith("  ")
    detector = HallucinationDetector(method="transformer", model_path=str(checkpoints["modernbert"]), device="cpu")
    theirs = detector.predict(context=[ex.context], answer=ex.response, question=None, output_format="spans")
    [ours] = create_detector(f"lettucedetect:{checkpoints['modernbert']}", device="cpu").predict([ex])
    assert theirs and [(s["start"] + 1, s["end"] + 1) for s in theirs][:3] == [(s.start, s.end) for s in ours.spans][:3]
    # Their text is cut one character early; ours is the flagged tokens' own characters.
    first = ours.spans[0]
    assert theirs[0]["text"] == ex.response[first.start - 1 : first.end - 1] != ex.response[first.start : first.end]

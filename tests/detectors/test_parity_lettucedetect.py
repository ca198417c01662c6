"""LettuceDetect parity: the official `lettucedetect` package and shambench's detector on the same stand-in weights.

Tiny seeded token classifiers laid out as the hub checkpoints are (a ModernBERT as LettuceDetect's, with the MiniLM
WordPiece tokenizer and with a byte-level BPE one of ModernBERT's kind; a BERT as a generic `token-classifier:DIR`
in LettuceDetect's format) score real examples through the package's own
`HallucinationDetector(method="transformer").predict` and through shambench; the spans must be the same. The
examples cover RAGTruth QA with three passages, data-to-text and summaries, FaithBench and Mu-SHROOM (responses
that start with a space; Mu-SHROOM has no context), inputs shorter and longer than the max length (512 groups
and truncates, 4096 fits them all).

Two bugs of the package are not copied, and are undone or pinned here: it shifts the spans of a response whose
first token's offsets start after 0 (a space trimmed off) left by that much; and where passages are grouped, it
pairs the k-th token's prediction with the k-th token that has non-empty offsets, so after a whitespace-only
token with trimmed (empty) offsets every prediction lands one token late.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import pytest

from shambench.schema import Example
from tests.conftest import require_shared
from tests.detectors.tiny_models import bpe_tokenizer, require_models, save_tiny

IDS = (
    "ragtruth/16464",  # QA, three passages, fits in 512
    "ragtruth/12845",  # QA, three passages, the longest QA prompt: three passage groups at 512
    "ragtruth/12180",  # QA, 532 context tokens
    "ragtruth/8904",  # data-to-text, fits in 512
    "ragtruth/6785",  # data-to-text, 1,335 context tokens: one passage, truncated at 512
    "ragtruth/1343",  # summary, the longest source (2,034 tokens)
    "faithbench/1-10",  # summary whose response starts with a space
    "mushroom/tst-en-1",  # no context; the response starts with a space
    "ragtruth/12342",  # QA, three passage groups at 512; " \n" in the response (a lone space token in a BPE)
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
def checkpoints(tmp_path_factory, examples):
    """Two-label token classifiers taking 4,096 positions: LettuceDetect-like ModernBERTs with the WordPiece
    tokenizer, a byte-level BPE one trained on the examples' texts (untrimmed offsets) and the same BPE with
    trimmed offsets (`modernbert-trim`), and a BERT."""
    require_lettucedetect()
    root = tmp_path_factory.mktemp("parity")
    texts = [f"{ex.context}\n{ex.question}\n{ex.response}" for ex in examples]
    tokenizers = {"modernbert-bpe": bpe_tokenizer(texts), "modernbert-trim": bpe_tokenizer(texts, trim_offsets=True)}
    return {
        kind: save_tiny(
            root / kind,
            "AutoModelForTokenClassification",
            kind=kind.split("-")[0],
            seed=7,
            head_scale=40.0,
            attention_scale=30.0,
            num_labels=2,
            max_position_embeddings=4096,
            tok=tokenizers.get(kind),
        )  # fmt: skip
        for kind in ("modernbert", "modernbert-bpe", "modernbert-trim", "bert")
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


@functools.cache
def official_detector(folder, max_length: int):
    """The package's detector on a checkpoint folder (loaded once per folder and max length)."""
    from lettucedetect.models.inference import HallucinationDetector

    return HallucinationDetector(method="transformer", model_path=str(folder), max_length=max_length, device="cpu")


def official_spans(folder, example: Example, max_length: int) -> list[tuple[int, int]]:
    """The package's spans, moved back by its first answer token's start, which it subtracts from every offset
    (its bug, not copied: a WordPiece tokenizer starts " text" at 1)."""
    from shambench.detectors.token_classifier import passages_of

    detector = official_detector(folder, max_length)
    spans = detector.predict(
        context=passages_of(example.context),
        answer=example.response,
        question=example.question or None,
        output_format="spans",
    )
    offsets = detector.detector.tokenizer(example.response, add_special_tokens=False, return_offsets_mapping=True)
    shift = offsets["offset_mapping"][0][0] if offsets["offset_mapping"] else 0
    return merged([(s["start"] + shift, s["end"] + shift) for s in spans])


@pytest.mark.parametrize(
    ("kind", "max_length"),
    [("modernbert", 512), ("modernbert", 4096), ("bert", 512), ("bert", 4096), ("modernbert-bpe", 512)],
)
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


def test_the_package_misaligns_grouped_spans_after_a_token_with_empty_offsets(checkpoints, examples):
    """What shambench does not copy: the package's grouped path puts the k-th token's prediction on the k-th token
    with non-empty offsets. With trimmed offsets the lone space before "\\n" is empty, so after it the package's
    spans are one token late; before it, and with one group, they are the same as shambench's."""
    from shambench.detection.detector import create_detector

    folder = checkpoints["modernbert-trim"]
    ex = next(e for e in examples if e.id == "ragtruth/12342")
    ours = create_detector(f"lettucedetect:{folder}", max_length=512, device="cpu")
    [(enc, probs)] = ours.token_probs([ex])
    assert len(enc.prompt_ids) == 3  # three passage groups
    offsets = [(int(a), int(b)) for a, b in enc.offsets]
    empty = [k for k, (a, b) in enumerate(offsets) if a == b]
    assert empty and ex.response[offsets[empty[0]][0] - 1 : offsets[empty[0]][0] + 1] == " \n"
    # The package's runs of flagged predictions, each put on the token of the same rank among the non-empty ones.
    kept = [o for o in offsets if o[1] > o[0]]
    runs: list[list[int]] = []
    for k, (start, end) in enumerate(kept):
        if probs[k] >= 0.5:
            if runs and runs[-1][2] == k - 1:
                runs[-1][1:] = [end, k]
            else:
                runs.append([start, end, k])
    theirs = official_spans(folder, ex, 512)
    [pred] = ours.predict([ex])
    mine = merged([(s.start, s.end) for s in pred.spans])
    assert theirs == merged([(start, end) for start, end, _ in runs]) != mine
    cut = offsets[empty[0]][0]
    assert [s for s in theirs if s[1] <= cut] == [s for s in mine if s[1] <= cut]
    # At 4096 everything is one group: the package skips the empty token there, and the spans are the same.
    [whole] = create_detector(f"lettucedetect:{folder}", device="cpu").predict([ex])
    assert official_spans(folder, ex, 4096) == merged([(s.start, s.end) for s in whole.spans])

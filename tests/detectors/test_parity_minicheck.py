"""MiniCheck parity: the chunks of real documents, pinned to what MiniCheck's own code makes of them.

MiniCheck (`Liyan06/MiniCheck`) is not on PyPI, so its code cannot run here. The figures below were computed by its
`Inferencer.inference_per_example` at b58b9fa (its Punkt sentences per line, greedy token-counted chunks, the
`" \\n "` fix-up and stripping), with the packaged MiniLM tokenizer counting the tokens as its RoBERTa/DeBERTa path
does, on the documents themselves: the number of chunks, each chunk's length in characters, and a SHA-256 of the
chunks joined by NUL (so no text of the corpus is copied here). The same comparison against the running official
code, with a RoBERTa stand-in scoring every sentence, gave equal labels on all sentences of 52 real examples.
"""

from __future__ import annotations

import hashlib

import pytest

from tests.conftest import require_shared
from tests.detectors.tiny_models import require_models, save_tiny

# (max_length, chunk_size, example id) -> (chunk lengths, SHA-256 prefix of the chunks joined by "\0").
# fmt: off
OFFICIAL_CHUNKS = {
    # RoBERTa's defaults: 512 tokens, chunks of 400.
    (512, 400, "ragtruth/1343"): ([1860, 1800, 1849, 1828, 2019, 556], "41b54d6726c30fcb"),  # the longest summary
    (512, 400, "ragtruth/6785"): ([1462, 1532, 1737, 755], "810be1973bbba35e"),  # data-to-text: 60 newlines kept
    (512, 400, "ragtruth/12845"): ([1603, 801], "9a754bf45a847512"),  # QA, three passages with blank lines
    (512, 400, "faithbench/1-10"): ([137], "0c0ea4dce990efc6"),
    # A short window: chunks of 100 tokens.
    (128, 100, "ragtruth/1343"): (
        [405, 413, 451, 443, 262, 406, 367, 296, 322, 400, 422, 416, 496, 399, 312, 325, 439, 459, 435, 489, 432,
         494, 489, 416, 105],
        "a6452843bf20e627",
    ),
    (128, 100, "ragtruth/6785"): (
        [350, 285, 332, 313, 391, 384, 253, 384, 283, 392, 359, 394, 291, 452, 343, 256],
        "3dd795d301339c2b",
    ),
    (128, 100, "ragtruth/12845"): ([202, 354, 430, 397, 385, 434, 195], "252cd40c3bb23b42"),
}
# fmt: on


@pytest.fixture(scope="module")
def documents() -> dict:
    import shambench

    data = require_shared("ragtruth").parent
    ids = {key[2] for key in OFFICIAL_CHUNKS}
    return {ex.id: ex for ex in shambench.load_benchmark("ragtruth,faithbench", data_dir=data).examples if ex.id in ids}


@pytest.fixture(scope="module")
def detectors(tmp_path_factory) -> dict:
    """MiniCheck on a tiny BERT sequence classifier with the MiniLM tokenizer (its encoder kind), by
    (max_length, chunk_size)."""
    require_models()
    from shambench.detectors.sentence_verifier import MiniCheck

    folder = save_tiny(tmp_path_factory.mktemp("mc"), "AutoModelForSequenceClassification", kind="bert", num_labels=2)
    sizes = {key[:2] for key in OFFICIAL_CHUNKS}
    return {(n, k): MiniCheck(str(folder), max_length=n, chunk_size=k, device="cpu") for n, k in sizes}


@pytest.mark.parametrize(("max_length", "chunk_size", "example_id"), list(OFFICIAL_CHUNKS))
def test_chunks_of_real_documents_are_minichecks(detectors, documents, max_length, chunk_size, example_id):
    chunks = detectors[(max_length, chunk_size)].chunks(documents[example_id])
    lengths, digest = OFFICIAL_CHUNKS[(max_length, chunk_size, example_id)]
    assert [len(c) for c in chunks] == lengths
    assert hashlib.sha256("\0".join(chunks).encode()).hexdigest()[:16] == digest

"""Embedding support: number/name mismatches by hand, and the real all-MiniLM-L6-v2 end to end through eval."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.detectors.embedding_support import _numbers, known_terms, mismatches
from shambench.schema import Example
from tests.detectors.tiny_models import require_models

CONTEXT = "Marie Curie was born in Warsaw in 1867. She moved to Paris to study physics."


def test_numbers_drop_thousands_separators_and_full_stops():
    assert _numbers("It cost 1,000.5 dollars in 1999.") == {"1000.5", "1999"}


def test_mismatches_are_absent_numbers_and_non_initial_names():
    ex = Example(id="a", dataset="d", task="t", context=CONTEXT, response="Curie met Pierre Dupont in Warsaw in 1868.")
    words, numbers = known_terms(ex)
    # "Curie" opens the sentence and is known anyway; "Pierre" [10, 16) and "Dupont" [17, 23) are unknown names;
    # "Warsaw" is known; "1868" [37, 41) is not 1867.
    assert mismatches(ex.response, 0, len(ex.response), words, numbers) == [(10, 16), (17, 23), (37, 41)]
    # Restricted to the first 16 characters, only "Pierre" is inside.
    assert mismatches(ex.response, 0, 16, words, numbers) == [(10, 16)]


def test_eval_with_the_packaged_minilm(tmp_path):
    require_models()
    supported = "Marie Curie was born in Warsaw in 1867."
    unrelated = "Bananas are yellow."
    odd = "Zorblax visited Quimby in 2044."
    response = f"{supported} {unrelated} {odd}"
    examples = [
        Example(id="ctx", dataset="d", task="t", context=CONTEXT, response=response, hallu_spans=[[40, len(response)]]),
        Example(id="open", dataset="d", task="t", response=unrelated),
    ]
    path = tmp_path / "ex.jsonl"
    path.write_text("".join(ex.model_dump_json() + "\n" for ex in examples))
    run = tmp_path / "run"
    result = CliRunner().invoke(
        main,
        ["eval", "--detector", "embedding-support", "--examples", str(path), "--run-dir", str(run), "--no-progress",
         "--bootstrap", "10"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    preds = {p["id"]: p for p in map(json.loads, (run / "predictions.jsonl").read_text().splitlines())}
    support = preds["ctx"]["meta"]["support"]
    # The first sentence is a context sentence verbatim: cosine 1 (up to float error); the others share nothing.
    assert support[0] == pytest.approx(1.0, abs=1e-3)
    assert support[1] < 0.5 and support[2] < 0.5
    # "Bananas are yellow." [40, 59) has no odd number or name: the whole sentence is flagged. In the third,
    # "Zorblax" opens the sentence (not a name by the rule), so the flag narrows to "Quimby" [76, 82) and "2044"
    # [86, 90).
    assert [(s["start"], s["end"]) for s in preds["ctx"]["spans"]] == [(40, 59), (76, 82), (86, 90)]
    # No question or context: nothing supports the sentence, so it is flagged whole.
    assert [(s["start"], s["end"]) for s in preds["open"]["spans"]] == [(0, 19)]


def test_bf16_embeddings_stay_close_to_fp32_on_the_packaged_minilm():
    require_models()
    import numpy as np

    from shambench.detectors.embedding_support import EmbeddingSupport

    texts = ["Marie Curie was born in Warsaw in 1867.", "She won two Nobel prizes.", "The cat sat on the mat."]
    fp32 = EmbeddingSupport(device="cpu").embed(texts)
    bf16 = EmbeddingSupport(device="cpu", bf16=True)
    assert bf16.params()["bf16"] is True
    low = bf16.embed(texts)
    # Unit vectors: the dot product is the cosine; bf16 keeps about three significant digits.
    cosines = [float(np.dot(fp32[t], low[t])) for t in texts]
    assert all(c > 0.99 for c in cosines) and low[texts[0]].dtype == np.float32


def test_texts_are_encoded_once_shortest_first_with_the_longest_in_the_last_batch():
    require_models()
    import numpy as np

    from shambench.detectors.embedding_support import EmbeddingSupport

    long = "A much longer sentence about Marie Curie."
    texts = [long, "Short.", "Medium length one.", "Short.", "Tiny", "Mid one."]
    det = EmbeddingSupport(device="cpu", max_batch_tokens=12)
    encoder = det._encoder()
    seen = []
    encode = encoder.encode
    encoder.encode = lambda part, **kw: seen.append((list(part), kw["batch_size"])) or encode(part, **kw)
    vectors = det.embed(texts)
    # Five distinct texts by tokens, [CLS] and [SEP] included ("Tiny" 3, "Short." 4, "Mid one." 5,
    # "Medium length one." 6, the longest 11: "Curie" is two word pieces), in batches of at most 12 padded tokens:
    # 2 x 4, 2 x 6 (a third text would make 3 x 11), then the longest alone.
    lengths = [
        len(encoder.tokenizer(t)["input_ids"]) for t in ("Tiny", "Short.", "Mid one.", "Medium length one.", long)
    ]
    assert lengths == [3, 4, 5, 6, 11]
    assert seen == [(["Tiny", "Short."], 2), (["Mid one.", "Medium length one."], 2), ([long], 1)]
    # Each vector is the text's own, as encoded alone.
    assert sorted(vectors) == sorted(set(texts))
    for text in set(texts):
        alone = encode([text], normalize_embeddings=True, convert_to_numpy=True)[0]
        assert float(np.dot(vectors[text], alone)) == pytest.approx(1.0, abs=1e-5)

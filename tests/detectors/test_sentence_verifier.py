"""Sentence verifiers: chunking by hand, and tiny MiniCheck / AlignScore models end to end through eval."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.detectors.sentence_verifier import alignscore_chunks, minicheck_chunks
from shambench.errors import DataError
from shambench.schema import Example
from tests.detectors.tiny_models import require_models, save_tiny

RESPONSE = "Ann won the race. Carl was second. Bob fell."
# Sentence units: "Ann won the race." [0, 17), "Carl was second." [18, 34), "Bob fell." [35, 44).
EXAMPLE = Example(
    id="a", dataset="d", task="t", context="Ann won. Bob lost the race today.", response=RESPONSE,
    hallu_spans=[[18, 34]],
)  # fmt: skip


def _words(text: str) -> int:
    return len(text.split())


def test_punkt_splits_as_nltk_english_does():
    require_models()
    from shambench.detectors.sentence_verifier import punkt

    # Punkt's English model knows "Mr." and "U.S." as abbreviations; spaCy's rule-based splitter does not.
    text = 'Mr. Smith went to the U.S. Army base. He said "no." Then he left.'
    assert punkt().tokenize(text) == ["Mr. Smith went to the U.S. Army base.", 'He said "no."', "Then he left."]


def test_minicheck_chunks_by_hand():
    require_models()
    # Lines are split apart and a "\n" item kept between them (0 words; an empty line adds only its "\n").
    text = "Ann won the race. Bob fell down.\nCarl was second again.\n\nDan left."
    # Items: "Ann won the race." 4, "Bob fell down." 3, "\n", "Carl was second again." 4, "\n", "\n", "Dan left." 2,
    # joined with spaces, then " \n " -> "\n" (non-overlapping, as str.replace: "a \n \n b" -> "a\n\n b").
    assert minicheck_chunks(text, 100, _words) == [
        "Ann won the race. Bob fell down.\nCarl was second again.\n\n Dan left."
    ]
    # 4 + 3 + 0 = 7 fits 8; + 4 does not: the first chunk ends with its "\n", stripped.
    assert minicheck_chunks(text, 8, _words) == [
        "Ann won the race. Bob fell down.",
        "Carl was second again.\n\n Dan left.",
    ]
    # A chunk size below a sentence: MiniCheck closes the (empty) chunk and starts a new one with the sentence.
    assert minicheck_chunks("One two three.", 1, _words) == ["One two three."]
    assert minicheck_chunks("", 5, _words) == [""]


def test_alignscore_chunks_by_hand():
    require_models()
    sents = [f"Sentence number {i} is here." for i in range(10)]  # 5 words each, 50 words
    assert alignscore_chunks(" ".join(sents)) == [" ".join(sents)]  # 50 // 350 + 1 = 1 chunk
    long = " ".join(sents * 8)  # 400 words, 80 sentences: 400 // 350 + 1 = 2 chunks of 80 // 2 = 40 sentences
    chunks = alignscore_chunks(long)
    assert len(chunks) == 2 and chunks[0] == chunks[1] == " ".join(sents * 4)
    assert alignscore_chunks("") == [""]


def test_minicheck_chunks_of_a_real_record_keep_its_lines(shared_data):
    """A RAGTruth data-to-text record is one `key: value` line per field, nested fields indented: MiniCheck's
    chunks keep its newlines, each line's sentences as Punkt returns them (trailing spaces gone, indentation
    kept)."""
    require_models()
    import shambench

    [record] = [
        e for e in shambench.load_benchmark("ragtruth", data_dir=shared_data).examples if e.id == "ragtruth/6785"
    ]
    text = record.context
    [whole] = minicheck_chunks(text, 10**6, _words)
    chunks = minicheck_chunks(text, 150, _words)
    # The review line is longer than a chunk: chunks end between its sentences; together they hold every word.
    assert len(chunks) == 8 and [w for c in chunks for w in c.split()] == text.split()
    ours, theirs = whole.split("\n"), text.split("\n")
    assert len(ours) == len(theirs)
    # Each line keeps its words and its indentation; Punkt drops the spaces after a line's last sentence, and a
    # line after an empty one gains a space (MiniCheck's " \n " -> "\n" leaves "\n\n " of " \n \n ").
    indent = lambda line: line[: len(line) - len(line.lstrip())]  # noqa: E731
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert a.split() == b.split() and indent(a) == indent(b) + (" " if k and not theirs[k - 1] else ""), k
    assert sum(not line for line in theirs) >= 2
    assert whole != text
    assert all(_words(c) <= 150 for c in chunks)  # "\n" items count no words


def _eval(tmp_path, spec: str, *params: str) -> tuple[dict, dict]:
    path = tmp_path / "ex.jsonl"
    path.write_text(EXAMPLE.model_dump_json() + "\n")
    run = tmp_path / "run"
    args = ["eval", "--detector", spec, "--examples", str(path), "--run-dir", str(run), "--no-progress"]
    for p in params:
        args += ["-p", p]
    result = CliRunner().invoke(main, [*args, "--bootstrap", "10"])
    assert result.exit_code == 0, result.output
    pred = json.loads((run / "predictions.jsonl").read_text().splitlines()[0])
    return pred, json.loads((run / "results.json").read_text())


@pytest.fixture(scope="module")
def minicheck_dir(tmp_path_factory):
    """A tiny BERT sequence classifier whose head ignores its input: logits (0, 2), so P(supported) = e^2/(1+e^2)."""
    require_models()
    import torch
    from transformers import AutoModelForSequenceClassification

    folder = save_tiny(tmp_path_factory.mktemp("mc"), "AutoModelForSequenceClassification", kind="bert", num_labels=2)
    model = AutoModelForSequenceClassification.from_pretrained(folder)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([0.0, 2.0]))
    model.save_pretrained(folder)
    return folder


SUPPORT = math.exp(2) / (1 + math.exp(2))  # 0.8808


def test_minicheck_labels_every_scorer_sentence(minicheck_dir, tmp_path):
    pred, results = _eval(tmp_path, f"minicheck:{minicheck_dir}")
    assert pred["sentence_labels"] == [0, 0, 0]  # support 0.881 > 0.5 everywhere
    assert [(s["start"], s["end"]) for s in pred["scores"]] == [(0, 17), (18, 34), (35, 44)]
    assert [s["score"] for s in pred["scores"]] == pytest.approx([1 - SUPPORT] * 3, abs=1e-5)
    # Gold marks the second sentence; nothing is predicted: sentence precision/recall/F1 are 0 for this example.
    assert results["partitions"]["t/d"]["sentence"]["f1"] == 0.0


def test_minicheck_threshold_flags_sentences_at_or_below_it(minicheck_dir, tmp_path):
    pred, results = _eval(tmp_path, f"minicheck:{minicheck_dir}", "threshold=0.9")
    assert pred["sentence_labels"] == [1, 1, 1]
    assert [(s["start"], s["end"]) for s in pred["spans"]] == [(0, 17), (18, 34), (35, 44)]
    # Sentences: 1 gold of 3 predicted: P = 1/3, R = 1, F1 = 2 * (1/3) / (4/3) = 0.5.
    assert results["partitions"]["t/d"]["sentence"]["f1"] == pytest.approx(0.5)


class NotAllowed:
    """Any class outside torch's allow-list: unpickling it would run code, so weights_only refuses."""


@pytest.fixture(scope="module")
def alignscore_files(tmp_path_factory):
    """A tiny RoBERTa backbone folder and an AlignScore-style checkpoint whose tri_layer gives logits (1, 0, 0)."""
    require_models()
    import torch
    from transformers import AutoModel

    root = tmp_path_factory.mktemp("align")
    backbone = save_tiny(root / "backbone", "AutoModel", kind="roberta")
    encoder = AutoModel.from_pretrained(backbone)
    state = {f"base_model.{k}": v for k, v in encoder.state_dict().items()}
    state["tri_layer.weight"] = torch.zeros(3, encoder.config.hidden_size)
    state["tri_layer.bias"] = torch.tensor([1.0, 0.0, 0.0])
    torch.save({"state_dict": state, "epoch": 3}, root / "AlignScore-tiny.ckpt")
    torch.save({"state_dict": state, "hyper_parameters": NotAllowed()}, root / "pickled.ckpt")
    return root


def test_alignscore_reads_p_aligned_from_the_tri_layer(alignscore_files, tmp_path):
    ckpt = alignscore_files / "AlignScore-tiny.ckpt"
    pred, _ = _eval(tmp_path, f"alignscore:{ckpt}", f"backbone={alignscore_files / 'backbone'}", "threshold=0.6")
    aligned = math.e / (math.e + 2)  # softmax of (1, 0, 0), class 0 (aligned): 0.576
    assert pred["meta"]["support"] == pytest.approx([aligned] * 3, abs=1e-4)
    assert pred["sentence_labels"] == [1, 1, 1]  # 0.576 <= 0.6


def test_alignscore_refuses_a_checkpoint_that_needs_pickled_code(alignscore_files, tmp_path):
    ckpt = alignscore_files / "pickled.ckpt"
    path = tmp_path / "ex.jsonl"
    path.write_text(EXAMPLE.model_dump_json() + "\n")
    result = CliRunner().invoke(
        main, ["eval", "--detector", f"alignscore:{ckpt}", "-p", f"backbone={alignscore_files / 'backbone'}",
               "--examples", str(path), "--runs", str(tmp_path / "runs"), "--no-progress"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "pickled.ckpt: cannot be read as weights only" in result.output


def _minicheck_logprobs(req) -> dict[str, float]:
    """P(Yes) 0.15 + P(yes) 0.05 = 0.2 for the claim about Carl (" Yes" with its space is not counted, as in
    MiniCheck), P(Yes) = 0.9 for the others."""
    claim = req.body["messages"][1]["content"].split("\nClaim: ")[1]
    if "Carl" in claim:
        return {"Yes": math.log(0.15), "yes": math.log(0.05), " Yes": math.log(0.1), "No": math.log(0.7)}
    return {"Yes": math.log(0.9), "No": math.log(0.1)}


def test_bespoke_minicheck_reads_p_yes_from_logprobs(openai_server, tmp_path):
    openai_server.script = lambda req: "Yes"
    openai_server.top_logprobs = _minicheck_logprobs
    spec = ["bespoke-minicheck", "--base-url", openai_server.base_url]
    path = tmp_path / "ex.jsonl"
    path.write_text(EXAMPLE.model_dump_json() + "\n")
    result = CliRunner().invoke(
        main, ["eval", "--detector", *spec, "--examples", str(path), "--run-dir", str(tmp_path / "run"),
               "--no-progress", "--bootstrap", "10"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    pred = json.loads((tmp_path / "run" / "predictions.jsonl").read_text().splitlines()[0])
    # One chunk (the short context), three claims: three requests.
    assert len(openai_server.log) == 3
    first = openai_server.log[0].body
    assert first["model"] == "bespokelabs/Bespoke-MiniCheck-7B"
    assert first["max_tokens"] == 1 and first["logprobs"] is True and first["top_logprobs"] == 5
    assert first["messages"][0]["content"].startswith("Determine whether the provided claim is consistent")
    claims = sorted(r.body["messages"][1]["content"] for r in openai_server.log)
    assert claims[0] == "Document: Ann won. Bob lost the race today.\nClaim: Ann won the race."
    assert pred["meta"]["support"] == pytest.approx([0.9, 0.2, 0.9])
    assert pred["sentence_labels"] == [0, 1, 0]  # only "Carl was second." [18, 34) is at or below 0.5
    assert [(s["start"], s["end"]) for s in pred["spans"]] == [(18, 34)]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["partitions"]["t/d"]["sentence"]["f1"] == 1.0
    # A second run is answered from the response cache: no new request.
    again = CliRunner().invoke(
        main, ["eval", "--detector", *spec, "--examples", str(path), "--run-dir", str(tmp_path / "run2"),
               "--no-progress", "--bootstrap", "10"],
    )  # fmt: skip
    assert again.exit_code == 0, again.output
    assert len(openai_server.log) == 3


def test_bespoke_minicheck_without_logprobs_fails_the_example_with_the_reason(openai_server, tmp_path):
    openai_server.script = lambda req: "Yes"
    path = tmp_path / "ex.jsonl"
    path.write_text(EXAMPLE.model_dump_json() + "\n")
    result = CliRunner().invoke(
        main, ["eval", "--detector", "bespoke-minicheck", "--base-url", openai_server.base_url, "--examples",
               str(path), "--run-dir", str(tmp_path / "run"), "--no-progress", "--bootstrap", "10"],
    )  # fmt: skip
    assert result.exit_code == 3, result.output  # finished, with a failed prediction
    assert "1 predictions failed:" in result.output
    pred = json.loads((tmp_path / "run" / "predictions.jsonl").read_text().splitlines()[0])
    assert pred["error"].startswith("3 of 3 (chunk, sentence) checks failed: unusable output: the server returned")


def _captured_inputs(minicheck_dir, **params):
    """A MiniCheck detector whose model records the input ids it is given, and the list they go into."""
    import torch

    from shambench.detectors.sentence_verifier import MiniCheck

    det = MiniCheck(str(minicheck_dir), device="cpu", **params)
    tokenizer, real, _ = det._load()
    seen: list[list[int]] = []

    class Recorder:
        config = real.config

        def __call__(self, **enc):
            seen.extend(enc["input_ids"].tolist())
            return type("Out", (), {"logits": torch.zeros(len(enc["input_ids"]), 2)})()

    det._loaded = (tokenizer, Recorder(), torch.device("cpu"))
    return det, tokenizer, seen


LONG_DOC = " ".join(f"word{i}" for i in range(60))  # one context "sentence" far over a 24-token window
CLAIM = "Bob fell down the stairs."


def test_minicheck_truncates_the_joined_text_at_its_end_as_minicheck_does(minicheck_dir):
    det, tokenizer, seen = _captured_inputs(minicheck_dir, max_length=24)
    det.support([(LONG_DOC, CLAIM)])
    # `chunk + [SEP] + claim` as one text, cut at 24 tokens: [CLS] and 22 document tokens, the claim never read.
    [ids] = seen
    assert len(ids) == 24 and ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
    assert tokenizer.decode(ids[1:-1]) == tokenizer.decode(
        tokenizer(LONG_DOC, add_special_tokens=False)["input_ids"][:22]
    )


def test_minicheck_fit_claim_cuts_a_long_chunk_never_the_claim(minicheck_dir):
    det, tokenizer, seen = _captured_inputs(minicheck_dir, max_length=24, fit_claim=True)
    det.support([(LONG_DOC, CLAIM), ("Short doc.", CLAIM)])
    claim_ids = tokenizer(CLAIM, add_special_tokens=False)["input_ids"]
    for ids in seen:
        real = [i for i in ids if i != tokenizer.pad_token_id]
        assert len(real) <= 24
        # [CLS] doc-prefix [SEP] claim [SEP]: the whole claim is read, right before the final special token.
        assert real[-1 - len(claim_ids) : -1] == claim_ids
    # Rows go in length order: the cut long document is one of them.
    assert any(tokenizer.decode(ids).startswith("[CLS] word0 word1") for ids in seen)


def test_minicheck_defaults_follow_the_model_type(minicheck_dir, tmp_path):
    require_models()
    from shambench.detectors.sentence_verifier import MiniCheck

    # A BERT (as RoBERTa): 512 tokens, chunks of 400 tokens; a T5: 2048, chunks of 500 words.
    assert MiniCheck(str(minicheck_dir), device="cpu").params()["max_length"] == 512
    t5 = save_tiny(tmp_path / "t5", "AutoModelForSeq2SeqLM", kind="t5")
    params = MiniCheck(str(t5), device="cpu").params()
    assert (params["max_length"], params["chunk_size"]) == (2048, 500)


def _official_flan_t5_support(folder, doc: str, claim: str, max_len: int, chunk_size: int) -> float:
    """MiniCheck's Flan-T5 support of a claim (Liyan06/MiniCheck b58b9fa, `minicheck/inference.py`, `Inferencer`
    with model_name 'flan-t5-large'), reimplemented from its source: NLTK sentences per line with a "\\n" item
    between lines, chunks of `chunk_size` words, `'predict: ' + chunk + eos + claim` tokenized in batches of 16
    (padding, truncation at `max_len`), one decoder step from zeros, softmax over logits [3, 209], max over chunks."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from shambench.detectors.sentence_verifier import punkt  # NLTK's sent_tokenize on its English model

    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    sents = []
    for block in doc.split("\n"):
        sents += punkt().tokenize(block) + ["\n"]
    sents = sents[:-1] or [""]
    chunks, current, count = [], [], 0
    for sent in sents:
        if count + len(sent.split()) > chunk_size:
            chunks.append(" ".join(current))
            current, count = [sent], len(sent.split())
        else:
            current, count = current + [sent], count + len(sent.split())
    chunks.append(" ".join(current))
    chunks = [c for c in (c.replace(" \n ", "\n").strip() for c in chunks) if c != ""]
    texts = [tokenizer.eos_token.join([chunk, claim]) for chunk in chunks]
    probs = []
    for i in range(0, len(texts), 16):
        batch = ["predict: " + t for t in texts[i : i + 16]]
        enc = tokenizer(batch, max_length=max_len, truncation=True, padding=True, return_tensors="pt")
        with torch.no_grad():
            start = torch.zeros((enc["input_ids"].size(0), 1), dtype=torch.long)
            logits = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], decoder_input_ids=start)
            label_logits = logits.logits.squeeze(1)[:, torch.tensor([3, 209])]
            probs.append(torch.softmax(label_logits, dim=-1))
    return torch.cat(probs)[:, 1].max().item()


def test_minicheck_flan_t5_is_minichecks_first_decoder_step_at_ids_3_and_209(tmp_path):
    require_models()
    from shambench.detectors.sentence_verifier import MiniCheck
    from tests.detectors.tiny_models import T5_PIECES

    folder = save_tiny(tmp_path / "t5", "AutoModelForSeq2SeqLM", kind="t5", attention_scale=8.0)
    det = MiniCheck(str(folder), device="cpu")
    tokenizer = det._load()[0]
    # In T5's layout "1" is the piece 209 and "0" starts with 3, the ids MiniCheck hard-codes.
    assert tokenizer("1")["input_ids"] == [209, 1] and tokenizer("0")["input_ids"] == [3, 632, 1]
    assert (T5_PIECES[3], T5_PIECES[209]) == tuple(tokenizer.convert_ids_to_tokens([3, 209]))
    assert det.texts([("Ann won.", "Ann won the race.")]) == ["predict: Ann won.</s>Ann won the race."]
    doc = "Ann won the race. Bob was born in May.\nCarl was second.\n\nDan fell."
    ex = Example(id="t", dataset="d", task="t", context=doc, response="Ann won. Bob was born in June. Carl won.")
    claims = ["Ann won.", "Bob was born in June.", "Carl won."]
    # MiniCheck's defaults (2048, chunks of 500 words: one chunk), several chunks, and a max length that cuts the
    # claim: the pair is truncated at its end, `predict:` and the document are 37 tokens and `</s>` ends the text,
    # so at 40 only the claim's first token is read.
    results = {}
    for max_len, chunk_size in ((2048, 500), (2048, 4), (40, 500)):
        det = MiniCheck(str(folder), device="cpu", max_length=max_len, chunk_size=chunk_size)
        (pred,) = det.predict([ex])
        support = [1.0 - s.score for s in pred.scores]
        expected = [_official_flan_t5_support(folder, doc, c, max_len, chunk_size) for c in claims]
        assert support == pytest.approx(expected, abs=1e-6)
        assert max(expected) - min(expected) > 1e-4  # the claims matter (100 times the tolerance)
        results[max_len, chunk_size] = expected
    assert len(minicheck_chunks(doc, 4, _words)) == 4  # one per sentence: no two fit in 4 words
    assert abs(results[40, 500][1] - results[2048, 500][1]) > 1e-3  # cutting the claim changes its support


def test_minicheck_deberta_is_a_sequence_classifier_read_as_minicheck_reads_it(tmp_path):
    """MiniCheck's DeBERTa kind (b58b9fa, `Inferencer` with 'deberta-v3-large'): 2048 tokens, chunks of 400,
    `chunk + eos_token + claim` as one text (DeBERTa-v3's eos is `[SEP]`), truncated at its end, P(label 1)."""
    require_models()
    import torch
    from transformers import AutoModelForSequenceClassification

    from shambench.detectors.sentence_verifier import MiniCheck
    from tests.detectors.tiny_models import tokenizer

    tok = tokenizer()
    tok.add_special_tokens({"eos_token": "[SEP]"})  # as DeBERTa-v3's tokenizer has it
    folder = save_tiny(tmp_path / "deberta", "AutoModelForSequenceClassification", kind="deberta-v2", tok=tok,
                       num_labels=2, head_scale=40.0, attention_scale=8.0)  # fmt: skip
    det = MiniCheck(str(folder), device="cpu")
    assert (det.params()["max_length"], det.params()["chunk_size"]) == (2048, 400)
    assert det.texts([("Ann won.", "Ann won the race.")]) == ["Ann won.[SEP]Ann won the race."]
    pairs = [("Ann won the race. Bob was born in May.", claim) for claim in ("Ann won.", "Bob was born in June.")]
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    enc = tok([f"{doc}[SEP]{claim}" for doc, claim in pairs], max_length=2048, truncation=True, padding=True,
              return_tensors="pt")  # fmt: skip
    with torch.no_grad():
        expected = torch.softmax(model(**enc).logits, dim=-1)[:, 1].tolist()
    support, _ = det.support(pairs)
    assert support.tolist() == pytest.approx(expected, abs=1e-6)
    assert abs(expected[0] - expected[1]) > 1e-4  # the claims matter


def test_minicheck_flan_t5_needs_the_t5_vocabulary(tmp_path):
    require_models()
    from shambench.detectors.sentence_verifier import MiniCheck

    folder = save_tiny(tmp_path / "t5", "AutoModelForSeq2SeqLM", kind="t5", vocab_size=200)
    with pytest.raises(DataError, match="a vocabulary of 200 has no id 209"):
        MiniCheck(str(folder), device="cpu").support([("Ann won.", "Ann won.")])

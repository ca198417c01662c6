"""Sentence verifiers: chunking by hand, and tiny MiniCheck / AlignScore models end to end through eval."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.detectors.sentence_verifier import chunk_sentences
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


def test_chunk_sentences_by_hand():
    text = "Ann won the race. Bob fell down. Carl was second again."  # sentences of 4, 3 and 4 words
    first, second, third = "Ann won the race.", "Bob fell down.", "Carl was second again."
    assert chunk_sentences(text, 7, _words) == [f"{first} {second}", third]  # 4 + 3 = 7 fits, + 4 does not
    assert chunk_sentences(text, 6, _words) == [first, second, third]  # 4 + 3 > 6
    assert chunk_sentences(text, 2, _words) == [first, second, third]  # a long sentence stands alone
    assert chunk_sentences("", 5, _words) == [""]


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
    assert results["datasets"]["t/d"]["sentence"]["f1"] == 0.0


def test_minicheck_threshold_flags_sentences_at_or_below_it(minicheck_dir, tmp_path):
    pred, results = _eval(tmp_path, f"minicheck:{minicheck_dir}", "threshold=0.9")
    assert pred["sentence_labels"] == [1, 1, 1]
    assert [(s["start"], s["end"]) for s in pred["spans"]] == [(0, 17), (18, 34), (35, 44)]
    # Sentences: 1 gold of 3 predicted: P = 1/3, R = 1, F1 = 2 * (1/3) / (4/3) = 0.5.
    assert results["datasets"]["t/d"]["sentence"]["f1"] == pytest.approx(0.5)


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
    """P(Yes) 0.2 + P( yes) 0.1 = 0.3 for the claim about Carl, P(Yes) = 0.9 for the others."""
    claim = req.body["messages"][1]["content"].split("\nClaim: ")[1]
    if "Carl" in claim:
        return {"Yes": math.log(0.2), " yes": math.log(0.1), "No": math.log(0.7)}
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
    assert pred["meta"]["support"] == pytest.approx([0.9, 0.3, 0.9])
    assert pred["sentence_labels"] == [0, 1, 0]  # only "Carl was second." [18, 34) is at or below 0.5
    assert [(s["start"], s["end"]) for s in pred["spans"]] == [(18, 34)]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["datasets"]["t/d"]["sentence"]["f1"] == 1.0
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


def test_minicheck_cuts_a_long_chunk_never_the_claim(minicheck_dir):
    import torch

    from shambench.detectors.sentence_verifier import MiniCheckEncoder

    det = MiniCheckEncoder(str(minicheck_dir), max_length=24, device="cpu")
    tokenizer, _, _ = det._load()
    seen = []

    def model(**enc):
        seen.extend(enc["input_ids"].tolist())
        return type("Out", (), {"logits": torch.zeros(len(enc["input_ids"]), 2)})()

    det._loaded = (tokenizer, model, torch.device("cpu"))
    doc = " ".join(f"word{i}" for i in range(60))  # one context "sentence" far over the 24-token window
    claim = "Bob fell down the stairs."
    det.support([(doc, claim), ("Short doc.", claim)])
    claim_ids = tokenizer(claim, add_special_tokens=False)["input_ids"]
    for ids in seen:
        real = [i for i in ids if i != tokenizer.pad_token_id]
        assert len(real) <= 24
        # [CLS] doc-prefix [SEP] claim [SEP]: the whole claim is read, right before the final special token.
        assert real[-1 - len(claim_ids) : -1] == claim_ids
    assert tokenizer.decode(seen[0]).startswith("[CLS] word0 word1")

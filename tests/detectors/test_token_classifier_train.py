"""Training a token classifier: labels, the held-out split, windows, and `shambench train` end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.detectors.token_classifier_train import TrainConfig, split_holdout, token_labels, training_windows
from shambench.schema import Example, Span
from tests.conftest import require_shared
from tests.detectors.test_token_classifier import _synthetic
from tests.detectors.tiny_models import require_models, save_tiny, tokenizer


def test_token_labels_by_hand():
    offsets = np.array([[0, 3], [4, 7], [7, 7], [8, 12], [13, 16]])
    # A span [5, 9) overlaps the tokens [4, 7) and [8, 12); the zero-width token at 7 is never positive.
    assert token_labels(offsets, [Span(start=5, end=9)]).tolist() == [0, 1, 0, 1, 0]
    # A span touching a token's end does not overlap it: [3, 4) sits between the first two tokens.
    assert token_labels(offsets, [Span(start=3, end=4)]).tolist() == [0, 0, 0, 0, 0]


def test_holdout_keeps_responses_to_one_prompt_together():
    examples = [
        Example(id=f"{c}-{r}", dataset="d", task="t", context=f"context {c}", response=f"response {r}")
        for c in range(10)
        for r in range(6)
    ]
    train, held = split_holdout(examples, 0.2, seed=3)
    # 10 prompt groups, ceil(10 * 0.2) = 2 held out, each with its 6 responses.
    assert len(held) == 12 and len(train) == 48
    assert {ex.context for ex in held}.isdisjoint(ex.context for ex in train)
    assert split_holdout(examples, 0.2, seed=3) == (train, held)


def test_training_windows_label_only_answer_tokens():
    require_models()
    from shambench.detectors._models import PairTemplate

    tok = tokenizer()
    ex = Example(
        id="a", dataset="d", task="t", question="Who?", context="Ann.", response="Ann won gold", hallu_spans=[[8, 12]]
    )
    [(ids, types, labels)] = training_windows(tok, PairTemplate.of(tok), ex, "psiloqa", 64)
    # psiloqa input: [CLS] who ? [SEP] ann won gold [SEP]; only the three answer tokens carry labels, "gold" is 1.
    assert tok.convert_ids_to_tokens(ids) == ["[CLS]", "who", "?", "[SEP]", "ann", "won", "gold", "[SEP]"]
    assert labels == [-100, -100, -100, -100, 0, 0, 1, -100]
    assert types == [0, 0, 0, 0, 1, 1, 1, 1]


def test_training_windows_split_a_long_answer_and_drop_no_answer_token():
    require_models()
    from shambench.detectors._models import PairTemplate

    tok = tokenizer()
    response = " ".join(["word"] * 40)
    ex = Example(id="a", dataset="d", task="t", question="q", context="c " * 50, response=response)
    windows = training_windows(tok, PairTemplate.of(tok), ex, "lettucedetect", 24)
    # 21 tokens of room (24 - 3 specials); 40 answer tokens > 21 - 5, so half-budget (10-token) answer windows.
    assert all(len(ids) <= 24 for ids, _, _ in windows)
    assert sum(sum(1 for v in labels if v != -100) for _, _, labels in windows) >= 40


def test_attention_dropout_is_set_on_the_base_config(tmp_path):
    require_models()
    from shambench.detectors.token_classifier_train import load_base

    base = save_tiny(tmp_path / "base", "AutoModel", kind="bert")
    _, model = load_base(TrainConfig(base=str(base), out=str(tmp_path / "o"), attention_dropout=0.0))
    assert model.config.attention_probs_dropout_prob == 0.0 and model.config.num_labels == 2
    _, kept = load_base(TrainConfig(base=str(base), out=str(tmp_path / "o"), attention_dropout=None))
    assert kept.config.attention_probs_dropout_prob == pytest.approx(0.1)  # BertConfig's default


def test_train_cli_writes_model_checkpoints_and_a_holdout_report(tmp_path):
    require_models()
    base = save_tiny(tmp_path / "base", "AutoModel", kind="bert")
    data = tmp_path / "train.jsonl"
    data.write_text("".join(ex.model_dump_json() + "\n" for ex in _synthetic(40, 1)))
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        result = CliRunner().invoke(
            main,
            ["train", "token-classifier", "--base", str(base), "--examples", str(data), "--out", str(out),
             "--epochs", "2", "--lr", "5e-3", "--max-length", "64", "--holdout", "0.2", "--seed", "7",
             "--no-progress"],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert "held-out token F1" in result.output and "random" in result.output and "no prediction" in result.output
        outs.append(out)
    a, b = outs
    for name in ("model.safetensors", "shambench.json", "train_config.json", "holdout.json",
                 "checkpoints/epoch-1/model.safetensors", "checkpoints/epoch-2/model.safetensors"):  # fmt: skip
        assert (a / name).is_file(), name
    assert json.loads((a / "shambench.json").read_text()) == {
        "input_format": "lettucedetect", "max_length": 64, "threshold": 0.5, "token_types": True,
    }  # fmt: skip
    # Same seed, same data: the same weights, byte for byte.
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    report = json.loads((a / "holdout.json").read_text())
    assert report["none"]["partitions"]["t/synth"]["n"] == report["model"]["partitions"]["t/synth"]["n"]
    assert (
        report["model"]["partitions"]["t/synth"]["token"]["f1"]
        > report["random"]["partitions"]["t/synth"]["token"]["f1"]
    )


def test_train_without_data_is_one_clear_error(tmp_path):
    result = CliRunner().invoke(main, ["train", "token-classifier", "--base", "x", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "no training examples" in result.output


def test_real_ragtruth_labels_fall_on_gold_spans():
    root = require_shared("ragtruth")
    require_models()
    from shambench.data.adapter import adapters
    from shambench.detectors.token_classifier import Encoded

    examples = adapters.get("ragtruth").factory().load(root.parent, "train").examples
    tok = tokenizer()
    labelled = [ex for ex in examples if ex.hallu_spans][:40]
    assert len(labelled) == 40
    for ex in labelled:
        offsets = Encoded(tok, [], ex.response).offsets
        labels = token_labels(offsets, ex.hallu_spans)
        for (s, e), label in zip(offsets.tolist(), labels.tolist()):
            overlaps = any(s < span.end and e > span.start for span in ex.hallu_spans) and e > s
            assert bool(label) == overlaps, (ex.id, s, e)
        for span in ex.hallu_spans:
            inside = (offsets[:, 0] < span.end) & (offsets[:, 1] > span.start)
            assert labels[inside].any(), (ex.id, span)

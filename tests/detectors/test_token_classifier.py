"""Token classifiers: prompt formats, window plans, span building, and a tiny model end to end through eval."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from shambench.cli import main
from shambench.detectors.token_classifier import (
    format_passages,
    lettucedetect_groups,
    lettucedetect_prompt,
    passages_of,
    plan_truncated,
    plan_windows,
    psiloqa_prompt,
    spans_of_probs,
)
from shambench.schema import Example
from tests.detectors.tiny_models import require_models, save_tiny, tokenizer


def test_listing_detectors_never_imports_torch():
    code = (
        "import sys; from shambench.detection.detector import detectors; "
        "names = [e.name for e in detectors.entries()]; "
        "assert 'token-classifier' in names and 'lettucedetect' in names, names; "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_lettucedetect_prompt_wraps_the_context_as_numbered_passages():
    ex = Example(id="a", dataset="d", task="t", question="Who won?", context="Ann won.", response="Bob.")
    assert lettucedetect_prompt(ex) == (
        "Briefly answer the following question:\nWho won?\n"
        "Bear in mind that your response should be strictly based on the following 1 passages:\n"
        "passage 1: Ann won.\n"
        "In case the passages do not contain the necessary information to answer the question, please reply "
        'with: "Unable to answer based on given passages."\noutput:'
    )


def test_lettucedetect_prompt_reformats_numbered_passages_as_the_package_does_and_uses_the_summary_template():
    # RAGTruth's QA passages come as "passage 1:In...\n\npassage 2:..."; the package is given them as a list and
    # writes "passage 1: ...\npassage 2: ..." (one newline, a space after the colon).
    numbered = Example(
        id="a", dataset="d", task="t", question="Q?", context="passage 1:x\n\npassage 2: y z\n", response="r"
    )
    assert passages_of(numbered.context) == ["x", "y z"]
    assert "following 2 passages:\npassage 1: x\npassage 2: y z\nIn case" in lettucedetect_prompt(numbered)
    summary = Example(id="b", dataset="d", task="summ", context="The text.", response="r")
    assert lettucedetect_prompt(summary) == "Summarize the following text:\npassage 1: The text.\noutput:"
    # No context: the package's empty passage list, the question kept.
    bare = Example(id="c", dataset="d", task="qa", question="Q?", response="r")
    assert passages_of("") == [] and "Q?\nBear in mind" in lettucedetect_prompt(bare)
    assert "following 0 passages:\n\nIn case" in lettucedetect_prompt(bare)


def test_lettucedetect_groups_by_hand():
    words = lambda text: len(text.split())  # noqa: E731 - a token count of one per word
    # The QA template around one empty passage is 48 words; the answer is 10 tokens; 3 specials.
    overhead = words(format_passages([""], "Q?"))
    passages = ["a " * 20, "b " * 20, "c " * 50, "d " * 5]
    # Everything fits in 200: one group.
    assert lettucedetect_groups(words, passages, "Q?", 10, 200) == [passages]
    # max_length 100: room = 100 - 10 - 3 - overhead; each passage line counts its words + 2 ("passage N:"),
    # plus one per newline after the first of a group.
    room = 100 - 10 - 3 - overhead
    assert overhead == 48 and room == 39
    # a: 22, a+b: 22 + 23 = 45 > 43 -> [a]; b: 22; b+c: 22 + 53 > 43 -> [b]; c: 52 alone (over: truncated later);
    # d: 7 -> [d].
    assert lettucedetect_groups(words, passages, "Q?", 10, 100) == [[passages[0]], [passages[1]], [passages[2]],
                                                                    [passages[3]]]  # fmt: skip
    # No room for any passage beside the instructions and the answer: one group, truncated.
    assert lettucedetect_groups(words, passages, "Q?", 50, 90) == [passages]


def test_plan_truncated_cuts_the_prompt_end_and_never_the_answer():
    # budget 10, answer 4: prompts of 3 and 9 tokens keep 3 and 6 (their first 6, or with left truncation their
    # last 6); an answer of 11 cannot fit (None: the caller windows it).
    assert plan_truncated([3, 9], 4, 10, left=False) == [(0, 0, 3, 0, 4), (1, 0, 6, 0, 4)]
    assert plan_truncated([3, 9], 4, 10, left=True) == [(0, 0, 3, 0, 4), (1, 3, 9, 0, 4)]
    assert plan_truncated([3], 11, 10, left=False) is None


def test_psiloqa_prompt_is_the_question_else_the_context():
    assert psiloqa_prompt(Example(id="a", dataset="d", task="t", question="Q?", context="C", response="r")) == "Q?"
    assert psiloqa_prompt(Example(id="a", dataset="d", task="t", context="C", response="r")) == "C"


def test_plan_windows_by_hand():
    # Fits: 5 prompt + 3 answer tokens <= 10.
    assert plan_windows(5, 3, 10, 2) == [(0, 5, 0, 3)]
    # 20 prompt + 4 answer > 10: the answer (4 <= 10 - 10 // 4 = 8) stays whole, 6 tokens of room for the prompt,
    # windows of 6 with overlap 2 (step 4): starts 0, 4, 8, 12 and the last one flush with the end, 14.
    assert plan_windows(20, 4, 10, 2) == [(lo, lo + 6, 0, 4) for lo in (0, 4, 8, 12, 14)]
    # A 30-token answer > 8: answer windows of 10 // 2 = 5, overlap 2 (step 3): starts 0, 3, ..., 24, then 25;
    # each leaves room 5 >= the 3 prompt tokens.
    assert plan_windows(3, 30, 10, 2) == [(0, 3, lo, lo + 5) for lo in [*range(0, 25, 3), 25]]


@settings(deadline=None)
@given(st.integers(0, 300), st.integers(1, 300), st.integers(8, 64), st.integers(0, 16))
def test_plan_windows_cover_every_answer_token_within_budget(n_prompt, n_answer, budget, overlap):
    windows = plan_windows(n_prompt, n_answer, budget, overlap)
    covered = np.zeros(n_answer, bool)
    for p_lo, p_hi, a_lo, a_hi in windows:
        assert (p_hi - p_lo) + (a_hi - a_lo) <= budget
        covered[a_lo:a_hi] = True
    assert covered.all()


def test_spans_of_probs_by_hand():
    # Tokens "Ann" [0,3) "visited" [4,11) a zero-width special [11,11) "Paris" [12,17) "today" [18,23).
    offsets = np.array([[0, 3], [4, 11], [11, 11], [12, 17], [18, 23]])
    probs = np.array([0.1, 0.7, 0.99, 0.6, 0.2])
    spans, scores = spans_of_probs(offsets, probs, 0.5)
    # The zero-width token is dropped, so "visited" and "Paris" are consecutive flagged tokens: one span [4, 17)
    # scored by its max, 0.7.
    assert [(s.start, s.end, s.score) for s in spans] == [(4, 17, pytest.approx(0.7))]
    assert [(s.start, s.end) for s in scores] == [(0, 3), (4, 11), (12, 17), (18, 23)]
    assert [s.score for s in scores] == pytest.approx([0.1, 0.7, 0.6, 0.2])


def test_pair_template_of_the_minilm_tokenizer():
    require_models()
    from shambench.detectors._models import PairTemplate

    template = PairTemplate.of(tokenizer())
    # BERT: [CLS] a [SEP] b [SEP], token types 0 for the first segment and its [SEP], 1 after.
    assert template.prefix == (101,) and template.middle == (102,) and template.suffix == (102,)
    assert template.build([5, 6], [7]) == ([101, 5, 6, 102, 7, 102], [0, 0, 0, 0, 1, 1], 4)


def _synthetic(n: int, seed: int) -> list[Example]:
    """Responses from a small vocabulary; every odd one has the word `zebra`, annotated as hallucinated."""
    rng = random.Random(seed)
    words = ["the", "cat", "dog", "sat", "ran", "on", "mat", "park", "big", "small", "red", "old"]
    out = []
    for i in range(n):
        ws = [rng.choice(words) for _ in range(rng.randint(4, 9))]
        spans = []
        if i % 2:
            k = rng.randrange(len(ws))
            ws[k] = "zebra"
            start = len(" ".join(ws[:k])) + (1 if k else 0)
            spans = [[start, start + 5]]
        context = "the cat sat on the mat"
        out.append(
            Example(
                id=f"s{seed}-{i}", dataset="synth", task="t", question=f"q{i % 10}", context=context,
                response=" ".join(ws), hallu_spans=spans,
            )
        )  # fmt: skip
    return out


@pytest.fixture(scope="module")
def trained_zebra(tmp_path_factory):
    """A tiny BERT taught (in about two seconds) that `zebra` is the hallucinated word."""
    require_models()
    from shambench.detectors.token_classifier_train import TrainConfig, train_token_classifier

    root = tmp_path_factory.mktemp("zebra")
    base = save_tiny(root / "base", "AutoModel", kind="bert")
    data = root / "train.jsonl"
    data.write_text("".join(ex.model_dump_json() + "\n" for ex in _synthetic(80, 0)))
    config = TrainConfig(
        base=str(base), out=str(root / "model"), examples_file=str(data), epochs=3, learning_rate=5e-3,
        max_length=64, holdout=0.2,
    )  # fmt: skip
    summary = train_token_classifier(config)
    assert summary.holdout_f1 > summary.random_f1
    return root / "model"


def test_eval_flags_exactly_the_zebra_characters_even_when_windowed(trained_zebra, tmp_path):
    context = "the cat sat on the mat. " * 30  # about 180 tokens: many windows at max_length 24
    examples = [
        Example(id="one", dataset="synth", task="t", question="q1", context=context, response="a zebra ran", hallu_spans=[[2, 7]]),
        Example(id="two", dataset="synth", task="t", question="q2", context=context, response="the old zebra sat on the zebra", hallu_spans=[[8, 13], [25, 30]]),
        Example(id="clean", dataset="synth", task="t", question="q3", context=context, response="the red dog ran"),
    ]  # fmt: skip
    path = tmp_path / "ex.jsonl"
    path.write_text("".join(ex.model_dump_json() + "\n" for ex in examples))
    run = tmp_path / "run"
    result = CliRunner().invoke(
        main,
        [
            "eval", "--detector", f"token-classifier:{trained_zebra}", "--examples", str(path), "--run-dir",
            str(run), "-p", "max_length=24", "-p", "windows=true", "-p", "overlap=4", "--no-progress", "--bootstrap", "10",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    preds = {p["id"]: p for p in map(json.loads, (run / "predictions.jsonl").read_text().splitlines())}
    # "a zebra ran": zebra is [2, 7). "the old zebra sat on the zebra": [8, 13) and [25, 30).
    assert [(s["start"], s["end"]) for s in preds["one"]["spans"]] == [(2, 7)]
    assert [(s["start"], s["end"]) for s in preds["two"]["spans"]] == [(8, 13), (25, 30)]
    assert preds["clean"].get("spans", []) == []
    # Every response token keeps its score: "the old zebra sat on the zebra" has 7 WordPiece tokens.
    assert len(preds["two"]["scores"]) == 7
    results = json.loads((run / "results.json").read_text())
    assert results["partitions"]["t/synth"]["token"]["f1"] == pytest.approx(1.0)
    config = json.loads((run / "config.json").read_text())
    assert config["params"]["input_format"] == "lettucedetect" and config["params"]["max_length"] == 24


def test_missing_model_folder_is_one_clear_error(tmp_path):
    require_models()
    path = tmp_path / "ex.jsonl"
    path.write_text(Example(id="a", dataset="d", task="t", response="x").model_dump_json() + "\n")
    result = CliRunner().invoke(
        main, ["eval", "--detector", f"token-classifier:{tmp_path / 'nope'}", "--examples", str(path), "--runs",
               str(tmp_path / "runs"), "--no-progress"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "cannot load the tokenizer" in result.output and "nope" in result.output


def test_lettucedetect_preset_scores_every_token_of_a_modernbert_folder(tmp_path):
    require_models()
    from shambench.detection.detector import create_detector

    folder = save_tiny(tmp_path / "mb", "AutoModelForTokenClassification", kind="modernbert", num_labels=2)
    det = create_detector(f"lettucedetect:{folder}", max_length=32, overlap=4, threshold=0.0)
    assert det.params()["input_format"] == "lettucedetect" and det.params()["max_length"] == 32
    ex = Example(
        id="a", dataset="d", task="t", question="Who?", context="Ann won. " * 40, response="Ann won gold today"
    )
    [pred] = det.predict([ex])
    # Four WordPiece tokens, each a scored range; at threshold 0 all are flagged and merge into one span.
    assert [(s.start, s.end) for s in pred.scores] == [(0, 3), (4, 7), (8, 12), (13, 18)]
    assert all(0.0 <= s.score <= 1.0 for s in pred.scores)
    assert [(s.start, s.end) for s in pred.spans] == [(0, 18)]

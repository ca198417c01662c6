"""Math detectors: baselines scored end to end by `shambench eval --suite` against hand computation, the PRM
backends (a /pooling server on 127.0.0.1 and a tiny transformers model built here), and the prompted critic
against the test OpenAI server."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.data.steps import step_fields
from shambench.detection.detector import create_detector
from shambench.detectors.math import (
    MARKER,
    QWEN_PRM_SYSTEM,
    parse_first_error,
    parse_step_verdicts,
    prm_format,
    prm_input,
    qwen_prm_messages,
)
from shambench.errors import DataError
from shambench.schema import Example
from tests.conftest import require_shared

FIXTURES = Path(__file__).parents[1] / "adapters" / "fixtures"


def example(labels=(1, 0, 0), ident="e") -> Example:
    texts = [f"step number {i} is {'wrong' if v == 0 else 'fine'}" for i, v in enumerate(labels)]
    return Example(
        id=ident, dataset="hard2verify", task="math_step", question="Q?", **step_fields(texts, labels, "\n\n")
    )


def run_suite(tmp_path: Path, *args: str) -> tuple[dict, str]:
    res = CliRunner().invoke(
        main,
        ["eval", *args, "--run-dir", str(tmp_path / "run"), "--no-progress", "--bootstrap", "10"],
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    return json.loads((tmp_path / "run" / "results.json").read_text())["groups"]["math"], res.output


def test_baselines_verdicts_and_spans():
    ex = example()
    assert create_detector("all-correct").detect(ex).step_verdicts == [1, 1, 1]
    wrong = create_detector("first-step-wrong").detect(ex)
    assert (wrong.step_verdicts, wrong.first_error) == ([0, 1, 1], 0)
    assert [(s.start, s.end) for s in wrong.spans] == [(ex.steps[0].start, ex.steps[0].end)]


def test_random_step_is_seeded_and_thresholded_for_spans():
    ex = example()
    a, b = (create_detector("random-step", seed=1).detect(ex) for _ in range(2))
    assert a.step_scores == b.step_scores and all(0 <= s < 1 for s in a.step_scores)
    assert create_detector("random-step", seed=2).detect(ex).step_scores != a.step_scores
    flagged = [i for i, s in enumerate(a.step_scores) if s < 0.5]
    assert [(sp.start, sp.end) for sp in a.spans] == [(ex.steps[i].start, ex.steps[i].end) for i in flagged]


def test_sharp_fixture_baselines_by_hand(tmp_path):
    math_, out = run_suite(
        tmp_path / "fsw", "--suite", "sharp", "--detector", "first-step-wrong", "--data-dir", str(FIXTURES)
    )
    gsm, mth = math_["datasets"]["sharp/gsm8k"], math_["datasets"]["sharp/math"]
    # gsm8k: gold first errors -1, 1, 0; predicted 0, 0, 0 -> acc_cor 0/1, acc_err 1/2 (the last one) -> F1 0
    assert (gsm["first_error"]["tpr"], gsm["first_error"]["tnr"], gsm["first_error"]["balanced_f1"]) == (0, 50, 0)
    # labelled steps, gold -> predicted: [1 1 1] -> [0 1 1]; [1 0] -> [0 1]; [0] -> [0]
    # correct steps 4, predicted correct 2 -> TPR 50; erroneous 2, predicted erroneous 1 -> TNR 50 -> BA = BF1 = 50
    assert (gsm["step"]["balanced_accuracy"], gsm["step"]["balanced_f1"]) == (50, 50)
    # responses: every prediction is "erroneous": TPR 0/1, TNR 2/2 -> BA 50, BF1 0
    assert (gsm["response"]["balanced_accuracy"], gsm["response"]["balanced_f1"]) == (50, 0)
    # math: gold -1, 1; predicted 0, 0 -> both rates 0 -> BA 0, BF1 0 (not a division by zero)
    assert (mth["first_error"]["balanced_accuracy"], mth["first_error"]["balanced_f1"]) == (0, 0)
    assert math_["suites"]["sharp"]["mean_f1"] == 0
    assert "sharp/gsm8k" in out and "mean F1 (2 subsets)" in out and "n/a: not defined" not in out
    math_, _ = run_suite(tmp_path / "ac", "--suite", "sharp", "--detector", "all-correct", "--data-dir", str(FIXTURES))
    gsm = math_["datasets"]["sharp/gsm8k"]
    # every step predicted correct: acc_cor 100, acc_err 0; steps TPR 100, TNR 0 -> BA 50, BF1 0
    assert (gsm["first_error"]["tpr"], gsm["first_error"]["tnr"]) == (100, 0)
    assert (gsm["step"]["balanced_accuracy"], gsm["step"]["balanced_f1"]) == (50, 0)


def test_processbench_baseline_by_hand(tmp_path):
    root = require_shared("processbench").parent
    math_, out = run_suite(
        tmp_path, "--suite", "processbench", "--detector", "first-step-wrong", "--data-dir", str(root), "--limit", "30"
    )
    for subset in ("gsm8k", "math", "olympiadbench", "omnimath"):
        records = json.loads((root / "processbench" / f"{subset}.json").read_text(encoding="utf-8"))[:30]
        erroneous = [r for r in records if r["label"] >= 0]
        got = math_["datasets"][f"processbench/{subset}"]
        # predicted first error 0 everywhere: right exactly on the erroneous samples whose label is 0
        assert got["first_error"]["tnr"] == pytest.approx(
            100 * sum(r["label"] == 0 for r in erroneous) / len(erroneous)
        )
        # never -1, so acc_cor is 0 -- or undefined when the first 30 hold no error-free sample (then so is F1)
        expected = 0 if len(erroneous) < len(records) else None
        assert got["first_error"]["tpr"] == expected and got["first_error"]["balanced_f1"] == expected
        # labelled steps: all steps of a correct sample, steps 0..label of an erroneous one; step 0 predicted wrong
        correct = sum(len(r["steps"]) if r["label"] < 0 else r["label"] for r in records)
        correct_hit = correct - sum(r["label"] != 0 for r in records)  # step 0 is a correct step unless label == 0
        err_hit = sum(r["label"] == 0 for r in records)
        assert got["step"]["tpr"] == pytest.approx(100 * correct_hit / correct)
        assert got["step"]["tnr"] == pytest.approx(100 * err_hit / len(erroneous))
        assert got["n"] == 30
    assert "processbench/omnimath" in out and "mean F1 (4 subsets)" in out
    # the first 30 of every subset are erroneous: the table's n/a cells are explained under it
    assert "n/a: not defined on the examples scored: acc_cor and F1 need a correct solution" in " ".join(out.split())


def test_math_shepherd_sopo_compat_warns_and_reports_both(tmp_path):
    math_, out = run_suite(
        tmp_path,
        "--suite",
        "math-shepherd",
        "--detector",
        "first-step-wrong",
        "--data-dir",
        str(FIXTURES),
        "--sopo-compat",
    )
    got = math_["datasets"]["math-shepherd"]
    # both responses are "Step 1: ..." (18 chars) + "\n" + 24 chars = 43; step 0 with its newline = 19 chars
    # default: predicted [0,19) in both; gold all 43 chars of the second -> tp 19, P 19/38, R 19/43, F1 38/81
    assert got["char"]["precision"] == 50 and got["char"]["f1"] == pytest.approx(100 * 38 / 81)
    # SOPO: suffix from 0 in both (snapped to 0 in the second) -> 86 predicted, 43 right -> P 50, R 100
    assert (got["char_sopo_compat"]["precision"], got["char_sopo_compat"]["recall"]) == (50, 100)
    assert "SOPO compatibility mode" in out and "SOPO char F1 (compat)" in out


def test_suite_and_datasets_together_is_a_usage_error(tmp_path):
    res = CliRunner().invoke(main, ["eval", "--suite", "sharp", "--datasets", "sharp", "--detector", "all-correct"])
    assert res.exit_code == 2 and "a suite selects its own datasets: give a suite, or datasets" in res.output


def test_prm_input_is_sharps_format():
    ex = example((1, 0))
    assert prm_input(ex) == (
        "Question: Q?\n\nSolution:\nstep number 0 is fine" + MARKER + "\n\nstep number 1 is wrong" + MARKER
    )


class _Pooling(BaseHTTPRequestHandler):
    """vLLM's /pooling with the STEP pooler: one [p_incorrect, p_correct] row per marker; records each body."""

    bodies: list = []

    def rows(self, body: dict) -> list:
        return [[0.9, 0.1] if "wrong" in s else [0.2, 0.8] for s in body["input"].split(MARKER)[:-1]]

    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/pooling":
            self.send_error(404)
            return
        type(self).bodies.append(body)
        payload = json.dumps({"data": [{"data": self.rows(body)}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def test_prm_pooling_backend():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pooling)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}/v1"
        det = create_detector("prm:my-prm", base_url=base, format="sharp")
        preds = list(det.predict([example((1, 0, 0))]))
    finally:
        server.shutdown()
    (pred,) = preds
    assert pred.error is None and pred.step_scores == [0.8, 0.1, 0.1]
    assert len(pred.spans) == 2  # below the 0.5 span threshold
    assert [sp.score for sp in pred.scores] == pytest.approx([0.2, 0.9, 0.9])


def test_prm_pooling_backend_that_never_answers_stops_the_run():
    from shambench.errors import ServerUnreachable

    det = create_detector("prm:my-prm", base_url="http://127.0.0.1:9/v1", timeout=1.0, max_retries=1, format="sharp")
    with pytest.raises(ServerUnreachable, match="no server answers at http://127.0.0.1:9/v1"):
        list(det.predict([example()]))


def test_prm_transformers_backend(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["[UNK]", "[PAD]", MARKER, "Question", ":", "Q", "?", "Solution", "step", "number", "0", "1", "2"]
    words += ["is", "fine", "wrong"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(MARKER, "isolated"), pre_tokenizers.Whitespace()])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]")
    fast.add_special_tokens({"additional_special_tokens": [MARKER]})
    config = transformers.BertConfig(
        vocab_size=len(words),
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=1,
        intermediate_size=8,
        num_labels=2,
    )
    model = transformers.BertForTokenClassification(config)
    with torch.no_grad():
        # a head that ignores the tokens: logits (0, ln 3) -> softmax class 1 = 3 / (1 + 3) = 0.75 at every marker
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([0.0, math.log(3)]))
    fast.save_pretrained(tmp_path)
    model.save_pretrained(tmp_path)
    det = create_detector(f"prm:{tmp_path}", backend="transformers", format="sharp")
    (pred,) = det.predict([example((1, 0, 0))])
    assert pred.error is None and pred.step_scores == pytest.approx([0.75, 0.75, 0.75])


@pytest.mark.parametrize(
    "model, fmt",
    [
        ("Qwen/Qwen2.5-Math-PRM-7B", "qwen2.5-math-prm"),
        ("/models/Qwen2.5-Math-PRM-72B", "qwen2.5-math-prm"),
        ("Qwen/Qwen2.5-Math-7B-PRM800K", "qwen2.5-math-prm"),
        ("peiyi9979/math-shepherd-mistral-7b-prm", "math-shepherd"),
        ("/models/Qwen2.5-Math-7B-SHARP-Step", "sharp"),
    ],
)
def test_prm_format_is_picked_from_the_published_names(model, fmt):
    assert prm_format(model) == fmt
    assert prm_format("my-prm", fmt) == fmt


def test_an_unknown_prm_name_or_format_is_refused():
    with pytest.raises(DataError, match="format=qwen2.5-math-prm|math-shepherd|sharp"):
        prm_format("my-prm")
    with pytest.raises(DataError, match="unknown PRM format 'qwen'"):
        prm_format("Qwen/Qwen2.5-Math-PRM-7B", "qwen")


def test_qwen_prm_messages_are_the_model_cards():
    # The card: system prompt, the query as the user turn, "<extra_0>".join(steps) + "<extra_0>" as the assistant's.
    assert qwen_prm_messages(example((1, 0))) == [
        {"role": "system", "content": "Please reason step by step, and put your final answer within \\boxed{}."},
        {"role": "user", "content": "Q?"},
        {"role": "assistant", "content": "step number 0 is fine<extra_0>step number 1 is wrong<extra_0>"},
    ]
    assert QWEN_PRM_SYSTEM == "Please reason step by step, and put your final answer within \\boxed{}."


def test_math_shepherd_input_is_the_card_format():
    assert prm_input(example((1, 0)), "math-shepherd") == "Q? step number 0 is fine ки\nstep number 1 is wrong ки"


def test_math_shepherd_input_rebuilds_the_released_input_field():
    # The card scores f"{question} {output}" with steps ending in " ки" joined by "\n": the data's own `input`.
    from shambench.adapters.math_shepherd import MathShepherdAdapter

    path = require_shared("math_shepherd", "samples_math-shepherd.openr.jsonl")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    examples = MathShepherdAdapter().load(path.parents[1], "sample").examples
    assert len(examples) == len(rows) == 7
    rebuilt = [prm_input(ex, "math-shepherd") for ex in examples]
    assert sum(text == row["input"] for text, row in zip(rebuilt, rows)) == 7


def _word_tokenizer(tmp_path: Path, words: list[str], special: list[str], **extra):
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(["[UNK]", "[PAD]", *special, *words])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    splits = [pre_tokenizers.Split(t, "isolated") for t in special]
    tok.pre_tokenizer = pre_tokenizers.Sequence([*splits, pre_tokenizers.Whitespace()])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", **extra)
    fast.add_special_tokens({"additional_special_tokens": special})
    fast.save_pretrained(tmp_path)
    return fast, len(vocab)


WORDS = ["Q", "?", "step", "number", "0", "1", "2", "is", "fine", "wrong", "+", "-", "ки", "system", "user"]


def test_qwen_prm_transformers_backend_reads_class_1_at_each_marker_of_the_chat(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    template = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    special = [MARKER, "<|im_start|>", "<|im_end|>"]
    fast, size = _word_tokenizer(tmp_path, WORDS + ["assistant"], special, chat_template=template)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=size, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8, num_labels=2
    )
    model = transformers.BertForTokenClassification(config).eval()
    model.save_pretrained(tmp_path)
    ex = example((1, 0, 0))
    # The model card's procedure, written out.
    text = fast.apply_chat_template(qwen_prm_messages(ex), tokenize=False, add_generation_prompt=False)
    ids = fast.encode(text, return_tensors="pt")
    with torch.no_grad():
        probs = torch.softmax(model(input_ids=ids)[0], dim=-1)
    expected = probs[0][ids[0] == fast.encode(MARKER)[0]][:, 1].tolist()
    det = create_detector(
        f"prm:{tmp_path}",
        backend="transformers",
        format="qwen2.5-math-prm",
        auto_class="AutoModelForTokenClassification",
    )
    (pred,) = det.predict([ex])
    assert pred.error is None and len(expected) == 3
    assert pred.step_scores == pytest.approx(expected, abs=1e-6)
    assert det.params()["format"] == "qwen2.5-math-prm"


def test_math_shepherd_transformers_backend_reads_plus_against_minus_at_each_tag(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    fast, size = _word_tokenizer(tmp_path, WORDS, [])
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=size, n_embd=8, n_layer=1, n_head=1, n_positions=64)
    model = transformers.GPT2LMHeadModel(config).eval()
    model.save_pretrained(tmp_path)
    ex = example((1, 0, 1))
    # The card: logits of [+, -] at every position, softmax, the + column, at the ки positions.
    good, bad, tag = (fast.convert_tokens_to_ids(t) for t in ("+", "-", "ки"))
    ids = torch.tensor([fast.encode("Q? " + "\n".join(f"step number {i} is {w} ки" for i, w in
                                                      enumerate(["fine", "wrong", "fine"])))])  # fmt: skip
    with torch.no_grad():
        scores = model(ids).logits[:, :, [good, bad]].softmax(dim=-1)[:, :, 0]
    expected = scores[ids == tag].tolist()
    det = create_detector(f"prm:{tmp_path}", backend="transformers", format="math-shepherd")
    (pred,) = det.predict([ex])
    assert pred.error is None and len(expected) == 3
    assert pred.step_scores == pytest.approx(expected, abs=1e-6)


class _Fixed(_Pooling):
    """Rows (p0, p1) = (0.3, 0.7), (0.6, 0.4), (0.9, 0.1) whatever the input."""

    bodies: list = []

    def rows(self, body: dict) -> list:
        return [[0.3, 0.7], [0.6, 0.4], [0.9, 0.1]]


@pytest.mark.parametrize(
    "model, sent, scores",
    [
        # Qwen's [0, 1] rows: class 1 is correct; the chat goes as messages (the server applies the template).
        ("Qwen/Qwen2.5-Math-PRM-7B", "messages", [0.7, 0.4, 0.1]),
        # Math-Shepherd's [+, -] rows: the last entry is p(-), the score p(+) = 1 - p(-).
        ("peiyi9979/math-shepherd-mistral-7b-prm", "input", [0.3, 0.6, 0.9]),
    ],
)
def test_prm_pooling_backend_by_format(model, sent, scores):
    _Fixed.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Fixed)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        det = create_detector(f"prm:{model}", base_url=f"http://127.0.0.1:{server.server_port}/v1")
        (pred,) = det.predict([example((1, 0, 0))])
    finally:
        server.shutdown()
    assert pred.error is None and pred.step_scores == pytest.approx(scores)
    (body,) = _Fixed.bodies
    if sent == "messages":
        assert body["messages"] == qwen_prm_messages(example((1, 0, 0)))
    else:
        assert body["input"] == prm_input(example((1, 0, 0)), "math-shepherd")


def test_critic_verdict_parsing():
    assert parse_step_verdicts("Reasoning: ...\nVerdict: yes, No, maybe") == [1, 0, -2]
    assert parse_step_verdicts("Verdict: no\nlater\nverdict: yes,yes") == [1, 1]  # the last Verdict line counts
    assert (parse_first_error("Verdict: -1"), parse_first_error("Verdict: 3.")) == (-1, 3)


@pytest.mark.parametrize(
    "text, message",
    [
        ("I think it is fine.", "no 'Verdict:' line"),
        ("Verdict: <yes or no for each step, comma-separated, in order>", "no yes or no"),
    ],
)
def test_a_reply_without_step_verdicts_is_no_answer(text, message):
    with pytest.raises(ValueError, match=message):
        parse_step_verdicts(text)


def test_a_reply_without_a_step_index_is_no_answer():
    with pytest.raises(ValueError, match="no 'Verdict:' line"):
        parse_first_error("The third step looks wrong.")
    with pytest.raises(ValueError, match="no step index"):
        parse_first_error("Verdict: two")


def test_verdictless_critic_replies_fail_and_resume_retries_them(openai_server, tmp_path):
    examples = [example((1, 0), f"v{i}") for i in range(3)]
    path = tmp_path / "ex.jsonl"
    path.write_text("".join(ex.model_dump_json() + "\n" for ex in examples))
    openai_server.script = lambda req: "Step 0 is right and step 1 is wrong, I believe."
    run = tmp_path / "run"
    args = ["eval", "--detector", "critic", "--model", "judge", "--base-url", openai_server.base_url]
    first = CliRunner().invoke(main, [*args, "--examples", str(path), "--run-dir", str(run), "--no-progress"])
    assert first.exit_code == 3, first.output
    journal = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    assert all(p["error"].startswith("unusable output: no 'Verdict:' line") for p in journal)
    assert all(p["raw"] == "Step 0 is right and step 1 is wrong, I believe." for p in journal)
    assert json.loads((run / "results.json").read_text())["failed_predictions"] == 3
    # Not cached: --resume asks again and takes the verdicts now given.
    openai_server.script = lambda req: "Reasoning.\nVerdict: yes, no"
    again = CliRunner().invoke(
        main, ["eval", "--resume", str(run), "--base-url", openai_server.base_url, "--no-progress"]
    )
    assert again.exit_code == 0, again.output
    assert json.loads((run / "results.json").read_text())["failed_predictions"] == 0
    # 3 first + 1 on resume: the three examples share one prompt, so once an answer is accepted (and cached)
    # the other two are cache hits; the rejected replies never were.
    assert len(openai_server.log) == 4


def test_critic_through_the_openai_server(openai_server):
    replies = {"a": "Reasoning: step 1 is off.\nVerdict: yes, no", "b": "Verdict: yes, maybe, no, yes"}
    # the prompt of "b" alone has a step number 2
    openai_server.script = lambda req: replies["b" if "step number 2" in req.prompt else "a"]
    det = create_detector("critic", model="judge", base_url=openai_server.base_url)
    preds = {p.id: p for p in det.predict([example((1, 0), "a"), example((1, 1, 0), "b")])}
    assert preds["a"].step_verdicts == [1, 0] and len(preds["a"].spans) == 1
    assert preds["b"].step_verdicts == [1, -2, 0, 1]  # one extra, one unparseable: the metric's rules apply
    assert openai_server.log and openai_server.log[0].model == "judge"
    openai_server.script = lambda req: "Reasoning: fine until step 1.\nVerdict: 1"
    det = create_detector("critic", model="judge", base_url=openai_server.base_url, mode="first-error", cache=False)
    ex = example((1, 0, 0), "c")
    (pred,) = det.predict([ex])
    assert pred.first_error == 1 and pred.step_verdicts is None
    assert [(s.start, s.end) for s in pred.spans] == [(ex.steps[1].start, ex.steps[1].end)]

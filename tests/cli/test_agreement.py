"""`shambench agreement` and `shambench.agreement()`: the issue's JSON layout, EXAMPLES files, the real sources."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

import shambench
from shambench.cli import main
from shambench.io import write_jsonl
from shambench.schema import Annotations, Example, Span, marked_by_more_than
from tests.conftest import require_shared

TEXT = "The cat sat. The dog ran."
CAT, CAT_SAT = Span(start=4, end=7), Span(start=4, end=11)


def invoke(*args) -> click.testing.Result:
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="shambench")


def _examples(tmp_path):
    marked = {"a": [CAT], "b": [CAT_SAT]}
    annotations = Annotations.leave_one_out(marked, lambda lists: marked_by_more_than(lists, 0.5), "majority")
    path = tmp_path / "examples.jsonl"
    write_jsonl(
        path,
        [
            Example(id="x", task="qa", dataset="toy", response=TEXT, hallu_spans=[CAT], annotations=annotations),
            Example(id="y", task="qa", dataset="plain", response=TEXT, hallu_spans=[CAT]),
        ],
    )
    return path


def test_an_examples_file_gives_the_layout_of_the_issue(tmp_path):
    result = invoke("agreement", "--examples", _examples(tmp_path), "--out", "-", "--bootstrap", 20)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report) == {"partitions", "without_annotators", "conventions"}
    toy = report["partitions"]["qa/toy"]
    assert toy["items"] == 1 and toy["annotators"] == {"min": 2, "max": 2}
    for level in ("token", "sentence", "pooled_token"):
        assert set(toy[level]) == {"p", "r", "f1", "ci"}
    # a against b: P 1, R 1/2; b against a: P 1/2, R 1 (each F1 2/3).
    assert toy["token"]["f1"] == pytest.approx(2 / 3)
    assert toy["iou"] is None and toy["cor"] is None
    assert report["without_annotators"] == ["qa/plain"]
    assert {"leave_one_out", "averaging", "tokenizer", "empty_example", "ci", "iou_cor"} <= set(report["conventions"])
    # The table went to stderr.
    assert "Human agreement" in result.stderr and "qa/toy" in result.stderr


def test_out_file_is_written_and_help_explains(tmp_path):
    out = tmp_path / "agreement.json"
    result = invoke("agreement", "--examples", _examples(tmp_path), "--out", out, "--bootstrap", 20)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["partitions"]["qa/toy"]["items"] == 1
    helped = invoke("agreement", "--help")
    assert helped.exit_code == 0
    assert "the gold that the source's own rule builds from the others" in " ".join(helped.output.split())


def test_an_unknown_dataset_is_one_error_line(tmp_path):
    result = invoke("agreement", "-d", "no-such-source", "--data-dir", tmp_path)
    assert result.exit_code == 2
    assert "no-such-source" in result.stderr


def test_a_selection_without_annotators_is_an_error_not_an_empty_table(tmp_path):
    path = tmp_path / "plain.jsonl"
    write_jsonl(path, [Example(id="y", task="qa", dataset="plain", response=TEXT, hallu_spans=[CAT])])
    result = invoke("agreement", "--examples", path, "--out", tmp_path / "a.json")
    assert result.exit_code == 2  # was an empty table and 0
    assert result.stderr == (
        "error: no annotators released by the partitions selected (qa/plain): nothing to score (the sources that "
        "release theirs are named in `shambench agreement --help`)\n"
    )
    assert not (tmp_path / "a.json").exists()


@pytest.fixture(scope="module")
def real():
    root = require_shared()
    require_shared("xsumfaith")
    return shambench.agreement("faithbench,favabench,zhou,mushroom,ragtruth", data_dir=root, n_resamples=50)


@pytest.mark.parametrize("partition", ["summ/faithbench", "open_qa/favabench", "summ/zhou", "open_qa/mushroom"])
def test_real_sources_give_a_figure_between_0_and_1(real, partition):
    got = real.partitions[partition]
    for level in (got.token, got.sentence, got.pooled_token):
        assert 0 < level.f1 < 1
        assert 0 <= level.ci[0] <= level.f1 <= level.ci[1] <= 1
    assert got.items > 100


def test_real_counts_of_who_annotated_what(real):
    parts = real.partitions
    assert parts["summ/faithbench"].items_by_annotators == {"2": 300, "3": 350, "4": 50, "5": 50}
    assert parts["summ/faithbench"].reproduces_gold.share == 1.0  # the union of everyone is the released gold
    assert parts["open_qa/mushroom"].reproduces_gold.share == 1.0
    assert parts["summ/zhou"].reproduces_gold.reproduced == 1912
    assert parts["open_qa/favabench"].items == 135 and parts["open_qa/favabench"].reproduces_gold is None
    assert (parts["open_qa/mushroom"].annotators.min, parts["open_qa/mushroom"].annotators.max) == (9, 12)
    # Partitions whose sources release no annotators get no figure.
    assert real.without_annotators == ["context_qa/ragtruth", "data2txt/ragtruth", "mt/zhou", "summ/ragtruth"]


def test_score_puts_the_like_for_like_view_in_the_results_also_from_a_kept_corpus(tmp_path):
    examples = _examples(tmp_path)
    predictions = tmp_path / "pred.jsonl"
    predictions.write_text('{"id": "x", "spans": [[4, 7]]}\n')
    # The second scoring reads the EXAMPLES file's corpus kept on disk: the annotators must be kept with it.
    for _ in range(2):
        result = invoke("score", "--examples", examples, "--predictions", predictions, "--json", "--bootstrap", 20)
        assert result.exit_code == 0, result.output
        group = json.loads(result.stdout)["groups"]["agreement"]["partitions"]["qa/toy"]
        # "cat" against b's "cat sat" (a left out): P 1 R 1/2; against a's "cat" (b left out): 1. Mean 5/6.
        assert group["detector"]["token"]["f1"] == pytest.approx(5 / 6)
        assert group["human"]["token"]["f1"] == pytest.approx(2 / 3)
        assert "Like for like" in result.stderr


def test_examples_can_be_given_directly():
    marked = {"a": [CAT], "b": [CAT]}
    annotations = Annotations.leave_one_out(marked, lambda lists: marked_by_more_than(lists, 0.5), "majority")
    example = Example(id="x", task="qa", dataset="toy", response=TEXT, hallu_spans=[CAT], annotations=annotations)
    report = shambench.agreement(examples=[example], n_resamples=10)
    assert report.partitions["qa/toy"].token.f1 == 1.0 and report.without_annotators == []


def _three_annotator_items(tmp_path, n):
    """n items read by a, b and c: a and b mark "cat", c marks nothing; the gold is their majority, "cat"."""
    marked = {"a": [CAT], "b": [CAT], "c": []}
    annotations = Annotations.leave_one_out(marked, lambda lists: marked_by_more_than(lists, 0.5), "majority")
    path = tmp_path / "three.jsonl"
    rows = [
        Example(id=f"x{k:02d}", task="qa", dataset="toy", response=TEXT, hallu_spans=[CAT], annotations=annotations)
        for k in range(n)
    ]
    write_jsonl(path, rows)
    return path


def test_agreement_of_a_run_gives_the_alternative_annotator_test_per_annotator(tmp_path):
    from tests.run_helpers import eval_run

    results = eval_run(_three_annotator_items(tmp_path, 30), "all", tmp_path / "run")
    # The eval's own results hold the test at the default epsilon.
    assert results["groups"]["agreement"]["partitions"]["qa/toy"]["alternative"]["epsilon"] == 0.2
    result = invoke("agreement", "--run", tmp_path / "run", "--out", "-", "--bootstrap", 20, "--alt-epsilon", 0.1)
    assert result.exit_code == 0, result.output
    test = json.loads(result.stdout)["partitions"]["qa/toy"]["alternative"]
    # Left out, a (or b) has the others' gold of b and c: "cat" is marked by one of two, not more than half, so the
    # gold is empty; a's "cat" and `all` both score F1 0 against it: W_f = W_h = 1, d = 0 on every item, no
    # variance, mean 0 > -0.1, p = 0. Left out, c has the gold "cat" of a and b: c (nothing) scores 0, `all` 2/7:
    # d = +1, p = 0. Every annotator is beaten: omega 1, pass.
    assert test["metric"] == "token_f1" and test["epsilon"] == 0.1
    by = {a["annotator"]: a for a in test["annotators"]}
    assert [(by[n]["n"], by[n]["rho_f"], by[n]["rho_h"], by[n]["t"], by[n]["p"]) for n in "abc"] == [
        (30, 1.0, 1.0, None, 0.0),
        (30, 1.0, 1.0, None, 0.0),
        (30, 1.0, 0.0, None, 0.0),
    ]
    assert [(by[n]["p_adjusted"], by[n]["rejected"]) for n in "abc"] == [(0.0, True)] * 3
    assert (test["omega"], test["passed"], test["advantage"], test["untested"]) == (1.0, True, 1.0, {})
    assert "alternative annotator test" in result.stderr and "pass (omega 1.00)" in result.stderr


def test_score_takes_the_alternative_tests_epsilon_for_a_run_and_a_predictions_file(tmp_path):
    from tests.run_helpers import eval_run

    examples = _three_annotator_items(tmp_path, 30)
    eval_run(examples, "all", tmp_path / "run")
    result = invoke("score", tmp_path / "run", "--alt-epsilon", 0.5, "--bootstrap", 20, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["groups"]["agreement"]["partitions"]["qa/toy"]["alternative"]["epsilon"] == 0.5
    predictions = tmp_path / "pred.jsonl"
    predictions.write_text('{"id": "x00", "spans": [[4, 7]]}\n')
    args = ("score", "--examples", examples, "--predictions", predictions, "--alt-epsilon", 0.3, "--json")
    result = invoke(*args, "--bootstrap", 20)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["groups"]["agreement"]["partitions"]["qa/toy"]["alternative"]["epsilon"] == 0.3


def test_eval_and_evaluate_take_the_alternative_tests_epsilon(tmp_path):
    import shambench
    from tests.run_helpers import eval_run

    examples = _three_annotator_items(tmp_path, 30)
    results = eval_run(examples, "all", tmp_path / "run", "--alt-epsilon", "0.4")
    assert results["groups"]["agreement"]["partitions"]["qa/toy"]["alternative"]["epsilon"] == 0.4
    api = shambench.evaluate("all", examples_file=examples, run_dir=tmp_path / "api", n_resamples=20, alt_epsilon=0.3)
    assert api.groups.agreement.partitions["qa/toy"].alternative.epsilon == 0.3


def test_agreement_of_a_run_refuses_a_data_selection_too(tmp_path):
    from tests.run_helpers import eval_run

    eval_run(_three_annotator_items(tmp_path, 3), "none", tmp_path / "run")
    result = invoke("agreement", "--run", tmp_path / "run", "-d", "mushroom")
    assert result.exit_code != 0 and "--run scores the run's own examples" in result.output

"""The missed-span judge: prompt, verdict parsing, and `analyze --categorise` against the local test server."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.reporting.judge import CATEGORIES, messages_for, parse_verdict
from shambench.schema import Example, Span
from tests.run_helpers import eval_run, write_jsonl

EXAMPLES = [
    {
        "id": "a",
        "dataset": "toy",
        "task": "qa",
        "question": "Capital of France?",
        "context": "Paris is the capital.",
        "response": "The capital is Lyon, a big city.",
        "hallu_spans": [[15, 19], [23, 31]],
    },
    {
        "id": "b",
        "dataset": "toy",
        "task": "qa",
        "question": "Who?",
        "context": "Ada wrote it.",
        "response": "Ada wrote it in 1843.",
        "hallu_spans": [[16, 20]],
    },
]


def test_messages_mark_the_span_and_list_every_category():
    ex = Example.model_validate(EXAMPLES[0])
    system, user = messages_for(ex, Span(start=15, end=19))
    assert all(name in system["content"] for name in CATEGORIES)
    assert "The capital is [[Lyon]], a big city." in user["content"]
    assert "Annotated span: 'Lyon'" in user["content"]


def test_parse_verdict_is_tolerant_but_strict_about_names():
    assert parse_verdict('```json\n{"category": "misattribution", "reason": "wrong person"}\n```') == (
        "misattribution",
        "wrong person",
    )
    assert parse_verdict('<think>hmm</think> {"category": "subjective_language"}') == ("subjective_language", "")
    with pytest.raises(ValueError, match="no known category"):
        parse_verdict('{"category": "vibes"}')


def _run(tmp_path):
    eval_run(write_jsonl(tmp_path / "ex.jsonl", EXAMPLES), "none", tmp_path / "run")
    return tmp_path / "run"


@pytest.mark.parametrize(
    "text",
    ['{"category": "<one of the categories>", "reason": "<why>"}', "```python\ncategories = []\n```", ""],
)
def test_a_placeholder_or_missing_category_is_no_verdict(text):
    with pytest.raises(ValueError, match="no known category"):
        parse_verdict(text)


def test_categorise_end_to_end_and_resume(openai_server, tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", "sk-judge")
    run = _run(tmp_path)

    def script(req):
        if "[[Lyon]]" in req.prompt:
            return '{"category": "unsupported_detail", "reason": "the context names Paris"}'
        if "[[1843]]" in req.prompt:
            return '{"category": "unsupported_detail", "reason": "no date in the context"}'
        return "I cannot tell."  # "big city": unparseable every time, recorded as failed after the retries

    openai_server.script = script
    args = [
        "analyze",
        str(run),
        "--no-figures",
        "--categorise",
        "--judge",
        "gpt5mini",
        "--base-url",
        openai_server.base_url,
        "--api-key-env",
        "JUDGE_KEY",
    ]
    res = CliRunner().invoke(main, args)
    # One span could not be judged: the summary names it, and the exit status says so.
    assert res.exit_code == 3, res.output
    assert "1 judgements failed:" in res.output and "a@23-31: unusable output:" in res.output
    data = json.loads((run / "analysis" / "analysis.json").read_text())
    # the `none` detector misses all three gold spans; "big city" gets no verdict
    assert data["runs"][0]["categories"] == {"qa/toy": {"failed": 1, "unsupported_detail": 2}}
    lines = (run / "analysis" / "judgements.jsonl").read_text().splitlines()
    judged = {j["id"]: j for j in map(json.loads, lines)}
    assert judged["a@15-19"]["reason"] == "the context names Paris"
    assert judged["a@23-31"]["error"]
    # a re-run asks only about the span that failed
    openai_server.reset()
    res = CliRunner().invoke(main, [*args, "--allow-failures"])
    assert res.exit_code == 0, res.output
    assert {r.prompt.count("[[big city]]") for r in openai_server.log} == {1}


def test_categorise_without_a_key_is_one_line_before_anything_is_judged(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run = _run(tmp_path)
    res = CliRunner().invoke(main, ["analyze", str(run), "--no-figures", "--categorise", "--judge", "gpt5mini"])
    assert res.exit_code == 2
    assert res.output == (
        "error: no API key: set OPENAI_API_KEY (or name another variable with --api-key-env), or give --base-url "
        "for a server that needs none\n"
    )
    assert not (run / "analysis").exists()

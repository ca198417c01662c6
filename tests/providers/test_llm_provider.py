"""The `llm` context provider against the local OpenAI-compatible server: chat, Responses API, failures, cache."""

from __future__ import annotations

import json

import pytest

from shambench.data.context import ContextStore, add_context, create_provider
from shambench.data.providers.llm import parse_evidence, question_text
from shambench.schema import Example

EVIDENCE = {"evidence": "Mount Etna is an active volcano in Sicily.", "sources": ["https://en.wikipedia.org/wiki/Etna"]}


def _ex(id_, question, **meta):
    return Example(id=id_, dataset="toy", task="open_qa", question=question, response="It is in Peru.", meta=meta)


def test_question_text_names_the_subject_but_never_the_response():
    ex = _ex("a", "Where is Etna?", wikipedia_url="https://en.wikipedia.org/wiki/Mount_Etna")
    assert question_text(ex) == "Question: Where is Etna?\nSubject: Mount Etna"
    assert "Peru" not in question_text(ex)


def test_parse_evidence():
    assert parse_evidence("```json\n" + json.dumps(EVIDENCE) + "\n```") == (EVIDENCE["evidence"], EVIDENCE["sources"])
    with pytest.raises(ValueError, match="no"):
        parse_evidence('{"evidence": ""}')


@pytest.mark.parametrize("web_search", [False, True])
def test_llm_provider_fetches_records_failures_and_reuses_the_cache(openai_server, tmp_path, web_search):
    def script(req):
        return json.dumps(EVIDENCE) if "Etna" in req.prompt else "Sorry, I cannot help with that."

    openai_server.script = script
    examples = [_ex("a", "Where is Etna?"), _ex("b", "What is the secret code?")]
    params = {"base_url": openai_server.base_url, "backoff_base": 0.001, "max_retries": 1, "web_search": web_search}
    provider = create_provider("llm", **params)
    assert add_context(provider, examples, root=tmp_path) == {"fetched": 1, "failed": 1, "cached": 0}
    recs = ContextStore(provider, tmp_path).read()
    assert recs["a"].context == EVIDENCE["evidence"] and recs["a"].source_urls == EVIDENCE["sources"]
    assert recs["a"].meta["usage"]["input_tokens"] > 0
    assert "unusable output" in recs["b"].error  # a refusal: recorded, context left empty
    paths = {r.path for r in openai_server.log}
    assert paths == ({"/v1/responses"} if web_search else {"/v1/chat/completions"})
    if web_search:
        assert all(r.body["tools"] == [{"type": "web_search"}] for r in openai_server.log)
    # a re-run asks only about the failed example
    openai_server.reset()
    assert add_context(provider, examples, root=tmp_path) == {"fetched": 0, "failed": 1, "cached": 1}
    assert all("secret code" in r.prompt for r in openai_server.log)


def test_eval_with_llm_context_params_records_them_and_rescoring_asks_nothing(openai_server, tmp_path):
    from click.testing import CliRunner

    from shambench.cli import main
    from tests.run_helpers import eval_run, write_jsonl

    openai_server.script = lambda req: json.dumps(EVIDENCE) if "Etna" in req.prompt else '{"incorrect_spans": []}'
    ex = write_jsonl(
        tmp_path / "ex.jsonl",
        [{"id": "a", "dataset": "toy", "task": "open_qa", "question": "Where is Etna?", "response": "In Sicily."}],
    )
    params = ["--context-param", f"base_url={openai_server.base_url}", "--context-param", "max_words=50"]
    results = eval_run(ex, "overlap", tmp_path / "run", "--context", "llm", *params)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["context_params"] == {"base_url": openai_server.base_url, "max_words": 50}
    part = results["run"]["context_provenance"]["open_qa/toy"]
    assert part["n_with_context"] == 1 and part["params"]["max_words"] == 50
    # "Sicily" is in the evidence, so overlap flags nothing
    assert results["partitions"]["open_qa/toy"]["token"]["f1"] == 1.0
    openai_server.reset()
    res = CliRunner().invoke(main, ["score", str(tmp_path / "run"), "--bootstrap", "20"])
    assert res.exit_code == 0, res.output
    assert openai_server.log == []


@pytest.mark.parametrize("evidence", ["<text>", "  ", "...", "N/A", "[evidence]"])
def test_placeholder_or_empty_evidence_is_no_evidence(evidence):
    with pytest.raises(ValueError, match="empty or a placeholder"):
        parse_evidence(json.dumps({"evidence": evidence, "sources": ["<url>"]}))


def test_placeholder_sources_are_dropped():
    reply = json.dumps({"evidence": "Etna is in Sicily.", "sources": ["<url>", "https://x.org/etna", "..."]})
    assert parse_evidence(reply) == ("Etna is in Sicily.", ["https://x.org/etna"])


def test_placeholder_evidence_fails_and_the_run_says_so(openai_server, tmp_path):
    from click.testing import CliRunner

    from shambench.cli import main
    from tests.run_helpers import write_jsonl

    # The model echoes the prompt's template for one question: a failed fetch, reported in the run's output.
    openai_server.script = lambda req: (
        '{"evidence": "<text>", "sources": ["<url>", ...]}' if "secret" in req.prompt else json.dumps(EVIDENCE)
    )
    rows = [
        {"id": "a", "dataset": "toy", "task": "open_qa", "question": "Where is Etna?", "response": "In Sicily."},
        {"id": "b", "dataset": "toy", "task": "open_qa", "question": "The secret code?", "response": "1234."},
    ]
    ex = write_jsonl(tmp_path / "ex.jsonl", rows)
    params = ["--context-param", f"base_url={openai_server.base_url}", "--context-param", "backoff_base=0.001"]
    args = ["eval", "--detector", "overlap", "--examples", str(ex), "--run-dir", str(tmp_path / "run")]
    out = CliRunner().invoke(main, [*args, "--context", "llm", *params, "--no-progress", "--bootstrap", "10"])
    assert out.exit_code == 0, out.output
    assert "open_qa/toy: 1 failed, 0 not fetched" in out.output
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    part = results["run"]["context_provenance"]["open_qa/toy"]
    assert (part["n_with_context"], part["n_failed"]) == (1, 1)

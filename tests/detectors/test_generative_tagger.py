"""Generative taggers against the local OpenAI-compatible test server: prompts, tag parsing, placement, resume."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.detection.detector import create_detector
from shambench.errors import DataError
from shambench.schema import Example
from tests.conftest import require_shared

CONTEXT = "Marie Curie was born in Warsaw in 1867."


def _run(tmp_path, server, spec: str, examples: list[Example], *extra: str):
    path = tmp_path / "ex.jsonl"
    path.write_text("".join(ex.model_dump_json() + "\n" for ex in examples))
    run = tmp_path / "run"
    result = CliRunner().invoke(
        main, ["eval", "--detector", spec, "--base-url", server.base_url, "--examples", str(path), "--run-dir",
               str(run), "--no-progress", "--bootstrap", "10", *extra],
    )  # fmt: skip
    preds = {p["id"]: p for p in map(json.loads, (run / "predictions.jsonl").read_text().splitlines())}
    # Exit status 3 exactly when a prediction failed.
    assert result.exit_code == (3 if any(p.get("error") for p in preds.values()) else 0), result.output
    return preds, run


def test_fava_tags_become_typed_spans(openai_server, tmp_path):
    exact = Example(id="exact", dataset="d", task="t", context=CONTEXT, response="Curie was born in Warsaw in 1868.")
    rewritten = Example(
        id="rewritten", dataset="d", task="t", context=CONTEXT, response="Curie was born in 1868 in Warsaw, Poland."
    )
    replies = {
        # Reproduces the response: "1868" [28, 32) by alignment.
        exact.response: "Curie was born in Warsaw in <entity><mark>1867</mark><delete>1868</delete></entity>.",
        # Drops ", Poland": the tagged "1868" is placed in the response instead, at [18, 22).
        rewritten.response: "Curie was born in <entity><delete>1868</delete><mark>1867</mark></entity> in Warsaw.",
    }
    openai_server.script = lambda req: next(v for k, v in replies.items() if f"[Text] {k}\n" in req.body["prompt"])
    preds, _ = _run(tmp_path, openai_server, "fava", [exact, rewritten])
    assert [(s["start"], s["end"], s["label"]) for s in preds["exact"]["spans"]] == [(28, 32, "entity")]
    assert [(s["start"], s["end"], s["label"]) for s in preds["rewritten"]["spans"]] == [(18, 22, "entity")]
    body = next(r.body for r in openai_server.log if "1868." in r.body["prompt"])
    assert openai_server.log[0].path == "/v1/completions"
    assert body["model"] == "fava-uw/fava-model" and body["max_tokens"] == 1024
    assert body["prompt"] == (
        f"Read the following references:\n{CONTEXT}\nPlease identify all the errors in the following text using the "
        "information in the references provided and suggest edits if necessary:\n"
        "[Text] Curie was born in Warsaw in 1868.\n[Edited] "
    )


def test_ragtruth_tagger_places_listed_spans_and_resumes_failures(openai_server, tmp_path):
    qa = Example(
        id="qa", dataset="d", task="context_qa", question="Where was Curie born?", context=CONTEXT,
        response="She was born in Warsaw in 1868.", hallu_spans=[[26, 30]],
    )  # fmt: skip
    d2t = Example(id="d2t", dataset="d", task="data2txt", context='{"name": "Cafe"}', response="Cafe is a bar.")
    openai_server.script = lambda req: (
        '{"hallucination list": ["1868", "a phrase that is not there"]}' if "Curie" in req.body["prompt"] else "no idea"
    )
    preds, run = _run(tmp_path, openai_server, "ragtruth-tagger", [qa, d2t], "--model", "rt-13b")
    # "1868" is at [26, 30); the second string is nowhere in the response and is kept as unplaced.
    assert [(s["start"], s["end"]) for s in preds["qa"]["spans"]] == [(26, 30)]
    assert preds["qa"]["meta"]["unplaced"] == ["a phrase that is not there"]
    assert preds["d2t"]["error"].startswith('unusable output: no {"hallucination list": [...]}')
    qa_prompt = next(r.body["prompt"] for r in openai_server.log if "Curie" in r.body["prompt"])
    assert qa_prompt.startswith(
        f"[INST] Below is a question:\nWhere was Curie born?\n\nBelow are related passages:\n{CONTEXT}\n\n"
        "Below is an answer:\nShe was born in Warsaw in 1868.\n\nYour task is to determine"
    )
    d2t_prompt = next(r.body["prompt"] for r in openai_server.log if "Cafe" in r.body["prompt"])
    assert d2t_prompt.startswith("[INST] Below is a structured data in the JSON format:\n")
    assert d2t_prompt.endswith('{"hallucination list": []}.\nOutput: [/INST]')
    body = openai_server.log[0].body
    assert body["temperature"] == 0.05 and body["top_k"] == 40 and body["max_tokens"] == 512
    # Resume asks again only for the failed example, with the detector rebuilt from the run's config.
    asked = len(openai_server.log)
    openai_server.script = lambda req: '{"hallucination list": ["a bar"]}'
    resume = ["eval", "--resume", str(run), "--base-url", openai_server.base_url, "--no-progress", "--bootstrap", "10"]
    result = CliRunner().invoke(main, resume)
    assert result.exit_code == 0, result.output
    assert len(openai_server.log) == asked + 1
    lines = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    assert [(s["start"], s["end"]) for s in lines[-1]["spans"]] == [(8, 13)]  # "Cafe is " is 8 characters


def test_fava_reads_its_training_format_for_contradictory_sentences(openai_server, tmp_path):
    # FAVA's completions close a contradictory sentence with a second opener (swap_error_tags in its utils.py).
    ex = Example(
        id="c", dataset="d", task="t", context=CONTEXT, response="Curie was born in Warsaw. She was Danish. She won."
    )
    openai_server.script = lambda req: (
        "Curie was born in Warsaw. <contradictory><delete>She was Danish.</delete><contradictory> She won."
    )
    preds, _ = _run(tmp_path, openai_server, "fava", [ex])
    assert [(s["start"], s["end"], s["label"]) for s in preds["c"]["spans"]] == [(26, 41, "contradictory")]


def test_fava_real_annotations_in_its_output_format_give_the_gold_spans(openai_server, tmp_path):
    # Real FAVABench annotations, written as FAVA emits them, read back as the adapter's gold spans.
    from shambench.adapters.fava import FavaAdapter

    data = require_shared("fava")
    rows = json.loads((data / "annotations.json").read_text(encoding="utf-8"))
    examples = FavaAdapter().load(data.parent).examples
    chosen = [ex for ex in examples if any(s.label == "contradictory" for s in ex.hallu_spans)][:4]
    replies = {}
    for ex in chosen:
        row = next(r for r in rows if r["output"] == ex.response and "<contradictory>" in r["annotated"])
        replies[ex.response] = row["annotated"].replace("</delete></contradictory>", "</delete><contradictory>")
    gold = {ex.id: [(s.start, s.end, s.label) for s in ex.hallu_spans] for ex in chosen}
    openai_server.script = lambda req: next(v for k, v in replies.items() if f"[Text] {k}\n" in req.body["prompt"])
    # Several annotations of one response can differ: keep those whose annotation is the adapter's choice.
    from shambench.adapters.fava import parse_annotated, spans_on_output

    kept = [ex for ex in chosen if spans_on_output(parse_annotated(
        replies[ex.response].replace("</delete><contradictory>", "</delete></contradictory>")), ex.response)
        == gold[ex.id]]  # fmt: skip
    assert len(kept) >= 2
    preds, _ = _run(tmp_path, openai_server, "fava", kept)
    for ex in kept:
        assert [(s["start"], s["end"], s["label"]) for s in preds[ex.id]["spans"]] == gold[ex.id]


@pytest.mark.parametrize("option, evidence", [((), ""), (("-p", "question_as_evidence=true"), "Who was Curie?")])
def test_fava_sends_an_empty_reference_without_a_context_unless_asked(openai_server, tmp_path, option, evidence):
    ex = Example(id="q", dataset="d", task="t", question="Who was Curie?", response="A chemist.")
    openai_server.script = lambda req: "A chemist."
    _run(tmp_path, openai_server, "fava", [ex], *option)
    assert openai_server.log[0].body["prompt"].startswith(f"Read the following references:\n{evidence}\nPlease")


def test_ragtruth_replies_are_read_as_its_script_reads_them():
    from shambench.detectors.generative_tagger import parse_hallucination_list

    # Its training target: json.dumps(..., indent=2); the script strips and json.loads the whole reply.
    assert parse_hallucination_list('\n{\n  "hallucination list": [\n    "1868"\n  ]\n}\n') == ["1868"]
    assert parse_hallucination_list('{"hallucination list": []}') == []
    chatty = 'Here: {"hallucination list": ["1868"]}'
    with pytest.raises(ValueError, match="as the output"):
        parse_hallucination_list(chatty)
    assert parse_hallucination_list(chatty, lenient=True) == ["1868"]
    det = create_detector("ragtruth-tagger", model="rt", base_url="http://127.0.0.1:9/v1", parse="lenient")
    assert det.params()["parse"] == "lenient"
    with pytest.raises(DataError, match="-p parse='loose'"):
        create_detector("ragtruth-tagger", model="rt", base_url="http://127.0.0.1:9/v1", parse="loose")
    with pytest.raises(DataError, match="unknown parameter 'parse' for --detector fava"):
        create_detector("fava", base_url="http://127.0.0.1:9/v1", parse="lenient")


def test_taggers_need_a_server(tmp_path):
    path = tmp_path / "ex.jsonl"
    path.write_text(Example(id="a", dataset="d", task="t", response="x").model_dump_json() + "\n")
    result = CliRunner().invoke(main, ["eval", "--detector", "fava", "--examples", str(path), "--runs", str(tmp_path)])
    assert result.exit_code == 2 and "needs --base-url" in result.output


def test_generation_overrides_are_checked_like_the_prompted_detectors():
    det = create_detector("ragtruth-tagger", model="rt", base_url="http://127.0.0.1:9/v1", temperature=0, top_p=0.5)
    assert det.generation == {"max_tokens": 512, "temperature": 0, "top_p": 0.5, "extra_body": {"top_k": 40}}
    # A misspelt or non-generation parameter is an error, never a field of the request body.
    for bad in ({"tempreature": 0.3}, {"max_retries": 2}):
        with pytest.raises(DataError, match=f"unknown parameter {next(iter(bad))!r}"):
            create_detector("fava", base_url="http://127.0.0.1:9/v1", **bad)

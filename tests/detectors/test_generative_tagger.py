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
    for bad in ({"tempreature": 0.3}, {"span_threshold": 0.5}):
        with pytest.raises(DataError, match=f"unknown parameter {next(iter(bad))!r}"):
            create_detector("fava", base_url="http://127.0.0.1:9/v1", **bad)
    # An endpoint option goes to the endpoint, as for every API-backed detector (`EndpointOptions`).
    det = create_detector("fava", base_url="http://127.0.0.1:9/v1", max_retries=2, backoff_base=0.5)
    assert (det.endpoint.max_retries, det.endpoint.backoff_base) == (2, 0.5) and "max_retries" not in det.generation


# RAGTruth's baseline as ParticleMedia/RAGTruth c103204 writes it, reimplemented here from its source:
# `baseline/dataset.py` (TEMPLATES, process_dialog_to_single_turn), `baseline/prepare_dataset.py` (read_ragtruth_split,
# get_json_data) and `baseline/predict_and_evaluate.py` (generate_response).
_OFFICIAL_TASK = (
    "Your task is to determine whether the summary contains either or both of the following two types of "
    "hallucinations:\n1. conflict: instances where the summary presents direct contraction or opposition to the "
    "original news;\n2. baseless info: instances where the generated summary includes information which is not "
    "substantiated by or inferred from the original news. \nThen, compile the labeled hallucinated spans into a JSON "
    'dict, with a key "hallucination list" and its value is a list of hallucinated spans. If there exist potential '
    'hallucinations, the output should be in the following JSON format: {{"hallucination list": [hallucination '
    'span1, hallucination span2, ...]}}. Otherwise, leave the value as a empty list as following: {{"hallucination '
    'list": []}}.\nOutput:'
)
_OFFICIAL_TEMPLATES = {
    "QA": "Below is a question:\n{question}\n\nBelow are related passages:\n{reference}\n\nBelow is an answer:\n"
    "{response}\n\n" + _OFFICIAL_TASK,
    "Summary": "Below is the original news:\n{reference}\n\nBelow is a summary of the news:\n{response}\n"
    + _OFFICIAL_TASK,
    "Data2txt": "Below is a structured data in the JSON format:\n{reference}\n\nBelow is an overview article written "
    "in accordance with the structured data:\n{response}\n\n" + _OFFICIAL_TASK,
}


def _official_ragtruth_prompts(root) -> dict[str, str]:
    """The prompt RAGTruth's scripts send for each test response, by shambench example id, from the released files."""
    import csv
    import io
    import sys

    import pandas as pd

    csv.field_size_limit(sys.maxsize)
    table = root / "constrainedreasoner_test"
    with (table / "RAGTruth_responselevel_test.tsv").open(encoding="utf-8", newline="") as fh:
        responses = list(csv.DictReader(fh, delimiter="\t"))
    # source_info.jsonl as released (a Summary's source_info is the article; the others a JSON object), read with
    # pandas as `read_ragtruth_split` reads it: its JSON parser is what turns a data-to-text record into a dict.
    lines = []
    for sid, task in {r["EncounterID"]: r["task_type"] for r in responses}.items():
        text = (table / "groundingsources" / f"{sid}.txt").read_text(encoding="utf-8")
        info = text if task == "Summary" else json.loads(text)
        lines.append(json.dumps({"source_id": sid, "task_type": task, "source_info": info}))
    sources = pd.read_json(io.StringIO("\n".join(lines)), lines=True, dtype=False)
    info_of = dict(zip(sources["source_id"].astype(str), sources["source_info"]))
    prompts = {}
    for row in responses:
        info, task = info_of[row["EncounterID"]], row["task_type"]
        if task == "QA":
            reference, question = info["passages"], info["question"]
        elif task == "Summary":
            reference, question = info, None
        else:
            reference, question = f"{info}", None
        fields = {"reference": reference, "response": row["response"]}
        prompt = _OFFICIAL_TEMPLATES[task].format(**fields, **({"question": question} if task == "QA" else {}))
        prompts[f"ragtruth/{row['id']}"] = f"[INST] {prompt.strip()} [/INST]"
    return prompts


def test_ragtruth_tagger_prompts_are_the_official_scripts_on_the_real_test_split(openai_server, tmp_path):
    from shambench.adapters.ragtruth import RAGTruthAdapter

    root = require_shared("ragtruth", "constrainedreasoner_test").parent
    official = _official_ragtruth_prompts(root)
    examples = RAGTruthAdapter().load(root.parent).examples
    assert len(official) == len(examples) == 2675
    det = create_detector("ragtruth-tagger", model="rt", base_url="http://127.0.0.1:9/v1")
    assert [ex.id for ex in examples if det.prompt(ex) != official[ex.id]] == []
    # The reference is the released one, not the context: every QA passage list (875 responses) and 100 of the 150
    # articles (600 responses) end in white space that the context strips; every data-to-text record is a dict repr.
    by_task = {task: [ex for ex in examples if ex.task == task] for task in ("context_qa", "summ", "data2txt")}
    for task, n in (("context_qa", 875), ("summ", 600)):
        assert sum(ex.meta["reference"] != ex.context for ex in by_task[task]) == n
        assert all(ex.meta["reference"].strip() == ex.context for ex in by_task[task])
    assert all(ex.meta["reference"].startswith("{'name': ") for ex in by_task["data2txt"])
    # And on the wire: the request bodies a local server receives, for examples of each task.
    chosen = [
        *[ex for ex in by_task["context_qa"] if ex.meta["reference"] != ex.context][:2],
        *[ex for ex in by_task["summ"] if ex.meta["reference"] != ex.context][:2],
        *by_task["data2txt"][:2],
    ]
    openai_server.script = lambda req: '{"hallucination list": []}'
    preds, _ = _run(tmp_path, openai_server, "ragtruth-tagger", chosen, "--model", "rt-13b")
    assert all(preds[ex.id]["spans"] == [] and not preds[ex.id].get("error") for ex in chosen)
    sent = sorted(r.body["prompt"] for r in openai_server.log)
    assert sent == sorted(official[ex.id] for ex in chosen)


def test_a_ragtruth_tagger_run_with_the_old_reference_is_not_resumed():
    from shambench.detectors.generative_tagger import FAVA_TEMPLATE, RAGTRUTH_TEMPLATES, template_hash

    det = create_detector("ragtruth-tagger", model="rt", base_url="http://127.0.0.1:9/v1")
    # The hash covers how {reference} is filled: runs made when it was the context have the templates' hash alone.
    old = template_hash(*RAGTRUTH_TEMPLATES.values())
    assert det.params()["prompt_hash"] != old
    from shambench.errors import RunDirError
    from shambench.runs.lifecycle import resumed_detector
    from shambench.runs.rundir import stamped_config

    config = stamped_config("ragtruth-tagger", "generative-tagger", det.params() | {"prompt_hash": old}, [])
    with pytest.raises(RunDirError, match="resuming would change prompt_hash"):
        resumed_detector(config, {"base_url": "http://127.0.0.1:9/v1"})
    # FAVA's filling never changed: its hash is its template's.
    assert create_detector("fava", base_url="http://127.0.0.1:9/v1").params()["prompt_hash"] == template_hash(
        FAVA_TEMPLATE
    )

"""Prompted detectors end to end against the local OpenAI-compatible server: parsing, placement, eval, faults,
cache, resume after SIGKILL, and no secrets on disk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import assume, given
from hypothesis import strategies as st

from shambench.cli import main
from shambench.detection.detector import create_detector, detectors
from shambench.detectors.prompted import presets
from shambench.detectors.prompts import (
    PROMPT_HASH,
    WORKED_EXAMPLES,
    ParsedReply,
    messages_for,
    parse_reply,
    parse_spans,
)
from shambench.errors import DataError
from shambench.llm.cache import cache_path
from shambench.schema import Example
from tests.conftest import require_shared
from tests.openai_server import Fault, fail_rate
from tests.run_helpers import wait_until

FAST = ["-p", "backoff_base=0.001", "--bootstrap", "10", "--no-progress"]
SECRET = "sk-test-DO-NOT-LEAK-4242"


def answer_of(req) -> str:
    """The response under test, as the prompt shows it."""
    user = req.body["messages"][-1]["content"]
    return user.split("<answer>\n", 1)[1].rsplit("\n</answer>", 1)[0]


def scripted(replies: dict[str, str]):
    """A server script replying by the response under test (empty list for any other)."""
    return lambda req: replies.get(answer_of(req), '{"incorrect_spans": []}')


def write_examples(path: Path, examples: list[Example]) -> Path:
    path.write_text("".join(ex.model_dump_json() + "\n" for ex in examples), encoding="utf-8")
    return path


def invented(n: int) -> list[Example]:
    """n invented open-QA examples; in each, the town name (the last word) is the gold error."""
    out = []
    for i in range(n):
        response = f"The river Ilsa{i} flows through Varn{i}."
        start = response.index(f"Varn{i}")
        out.append(
            Example(
                id=f"toy/{i}",
                dataset="toy",
                task="open_qa",
                question=f"Which town does the river Ilsa{i} flow through?",
                response=response,
                hallu_spans=[[start, start + len(f"Varn{i}")]],
            )
        )
    return out


def town_replies(examples: list[Example]) -> dict[str, str]:
    return {
        ex.response: json.dumps({"incorrect_spans": [ex.response[ex.hallu_spans[0].start : -1]]}) for ex in examples
    }


def run_eval(*args: str, status: int = 0) -> str:
    """`shambench eval ARGS`'s output, after checking its exit status (3: finished with failed predictions)."""
    result = CliRunner().invoke(main, ["eval", *args], terminal_width=200)
    assert result.exit_code == status, result.output + repr(result.exception)
    return result.output


def results_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


def journal_of(run_dir: Path) -> dict[str, dict]:
    lines = (run_dir / "predictions.jsonl").read_text().splitlines()
    return {row["id"]: row for row in map(json.loads, lines)}


# --- the reply parser -----------------------------------------------------------------------------------------


def test_parse_plain_fenced_prose_and_bare_list():
    assert parse_spans('{"incorrect_spans": ["Sydney", "1926"]}') == ["Sydney", "1926"]
    assert parse_spans('```json\n{"incorrect_spans": ["a b"]}\n```\nDone.') == ["a b"]
    assert parse_spans('Here you go: {"incorrect_spans": []} Hope this helps [1].') == []
    assert parse_spans('{"incorrect_spans": [{"text": "dog"}]}') == ["dog"]
    # The one fallback: a reply that is nothing but a list, marked as such.
    assert parse_reply('["dog"]') == ParsedReply(["dog"], "bare_list")
    assert parse_reply('```json\n["dog"]\n```') == ParsedReply(["dog"], "bare_list")
    assert parse_reply('{"incorrect_spans": ["dog"]}').form == "object"


@pytest.mark.parametrize(
    "text",
    [
        "```python\ndata = []\nfor x in data:\n    print(x)\n```",
        'Sure: ["LYON"]',
        "The spans are [] as far as I can see, i.e. none. [1]",
    ],
)
def test_a_list_amid_code_or_prose_is_no_answer(text):
    with pytest.raises(ValueError, match=r'no \{"incorrect_spans"'):
        parse_spans(text)


def test_parse_skips_the_reasoning_block_and_takes_the_last_answer():
    text = '<think>Maybe {"incorrect_spans": ["x"]}? No.</think>\n{"incorrect_spans": ["y"]}'
    assert parse_spans(text) == ["y"]
    assert parse_spans('{"incorrect_spans": ["draft"]} Correction: {"incorrect_spans": ["final"]}') == ["final"]


@given(spans=st.lists(st.text(max_size=20)), fenced=st.booleans(), prose=st.text(alphabet="abc .:!", max_size=20))
def test_parse_round_trips_any_list_of_strings(spans, fenced, prose):
    assume(not any("<think>" in s or "`" in s for s in spans))  # both would be ambiguous markup
    reply = json.dumps({"incorrect_spans": spans}, ensure_ascii=bool(fenced))
    if fenced:
        reply = f"```json\n{reply}\n```"
    assert parse_spans(f"{prose}{reply}{prose}") == spans


@pytest.mark.parametrize(
    "text, message",
    [
        ("Everything looks fine to me.", 'no {"incorrect_spans"'),
        ('{"incorrect_spans": [1, 2]}', "not a string"),
        ("<think>let me see, the capital", "cut off"),
        ('{"incorrect_spans": ["unterminated', 'no {"incorrect_spans"'),
    ],
)
def test_parse_failures_say_why(text, message):
    with pytest.raises(ValueError, match=message):
        parse_spans(text)


# --- prompt and presets ---------------------------------------------------------------------------------------


def test_prompt_carries_the_task_rules_and_four_worked_examples():
    ex = Example(id="a", dataset="d", task="summ", context="Source text.", response="A summary.")
    system, user = messages_for(ex)
    assert system["role"] == "system" and user["role"] == "user"
    for rule in ('{"incorrect_spans": ["...", "..."]}', "character for character", "in the order", "short"):
        assert rule in system["content"]
    assert system["content"].count("Reply: ") == 4
    assert [spans for *_, spans in WORKED_EXAMPLES] == [["Sydney"], ["1926", "400,000"], ["dog"], []]
    # Each worked example's spans really are substrings of its answer, in order.
    for _, _, answer, spans in WORKED_EXAMPLES:
        positions = [answer.index(s) for s in spans]
        assert positions == sorted(positions)
    assert "<question>\n(none)\n</question>" in user["content"]
    assert "<information>\nSource text.\n</information>" in user["content"]
    assert user["content"].endswith("<answer>\nA summary.\n</answer>")
    assert len(PROMPT_HASH) == 16


def test_presets_are_registered_from_data():
    names = {"gpt5mini", "gpt5mini-reasoning", "qwen3-4b", "qwen3-4b-thinking", "olmo3-7b-instruct", "olmo3-7b-think"}
    assert names | {"openai"} <= set(presets())
    assert names | {"openai"} <= {e.name for e in detectors.entries()}
    thinking = presets()["qwen3-4b-thinking"].generation["extra_body"]["chat_template_kwargs"]
    plain = presets()["qwen3-4b"].generation["extra_body"]["chat_template_kwargs"]
    assert thinking == {"enable_thinking": True} and plain == {"enable_thinking": False}
    assert presets()["gpt5mini"].generation["reasoning_effort"] == "minimal"


def test_factory_overrides_and_errors():
    det = create_detector("qwen3-4b", base_url="http://127.0.0.1:9/v1", enable_thinking=True, temperature=0)
    assert det.generation["extra_body"]["chat_template_kwargs"]["enable_thinking"] is True
    assert det.generation["temperature"] == 0 and det.endpoint.model == "Qwen/Qwen3-4B"
    assert det.params()["prompt_hash"] == PROMPT_HASH
    # The run config names the key's variable, never a key.
    assert set(det.params()) == {
        "model",
        "base_url",
        "api_key_env",
        "generation",
        "structured",
        "min_similarity",
        "prompt_hash",
    }
    with pytest.raises(DataError, match="needs --model"):
        create_detector("openai")
    with pytest.raises(DataError, match="unknown parameter 'temprature'"):
        create_detector("gpt5mini", temprature=0)


def test_a_run_made_with_another_prompt_is_not_resumed():
    from shambench.errors import RunDirError
    from shambench.runs.lifecycle import resumed_detector
    from shambench.runs.rundir import stamped_config

    made = create_detector("gpt5mini").params()
    assert resumed_detector(stamped_config("gpt5mini", "prompted", made, []), {}).params() == made
    old = stamped_config("gpt5mini", "prompted", made | {"prompt_hash": "0" * 16}, [])
    with pytest.raises(RunDirError, match="resuming would change prompt_hash"):
        resumed_detector(old, {})


# --- predictions ----------------------------------------------------------------------------------------------


def test_predictions_place_spans_and_keep_unplaced_strings(openai_server):
    examples = [
        Example(id="a", dataset="d", task="open_qa", response="The capital of France is Lyon."),
        Example(id="b", dataset="d", task="open_qa", response="It opened in 1926 in Elm Street."),
        Example(id="c", dataset="d", task="open_qa", response="The capital of France is Lyon."[:-1] + "!"),
        Example(id="d", dataset="d", task="open_qa", response="Nothing to see."),
    ]
    openai_server.script = scripted(
        {
            "The capital of France is Lyon.": '{"incorrect_spans": ["Lyon"]}',
            "It opened in 1926 in Elm Street.": '```json\n{"incorrect_spans": ["1926", "on Mars"]}\n```',
            "The capital of France is Lyon!": '["LYON"]',
            "Nothing to see.": "```python\ndata = []\nprint(data)\n```",
        }
    )
    det = create_detector("openai", model="m", base_url=openai_server.base_url)
    preds = {p.id: p for p in det.predict(examples)}
    # "The capital of France is " is 25 characters: Lyon is [25, 29) in a and c.
    assert [(s.start, s.end) for s in preds["a"].spans] == [(25, 29)]
    assert preds["a"].meta["placements"][0]["method"] == "exact"
    assert [(s.start, s.end) for s in preds["c"].spans] == [(25, 29)]
    assert preds["c"].meta["placements"][0]["method"] == "normalized"
    assert preds["c"].meta["reply_form"] == "bare_list" and preds["a"].meta["reply_form"] == "object"
    # "It opened in " is 13 characters: 1926 is [13, 17); "on Mars" is nowhere and is kept, not dropped.
    b = preds["b"]
    assert [(s.start, s.end) for s in b.spans] == [(13, 17)]
    assert b.meta["unplaced"] == ["on Mars"] and b.meta["n_unplaced"] == 1
    assert b.meta["parsed"] == ["1926", "on Mars"] and b.raw.startswith("```json")
    d = preds["d"]
    # Code holding an empty list is a failed prediction with its raw text, not an empty answer.
    assert d.error.startswith('unusable output: no {"incorrect_spans"') and d.raw.startswith("```python")
    assert d.meta["usage"]["requests"] == 1
    body = openai_server.log[0].body
    assert body["model"] == "m"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["incorrect_spans"]


def test_unstructured_preset_sends_no_schema(openai_server):
    det = create_detector("qwen3-4b-thinking", base_url=openai_server.base_url)
    list(det.predict(invented(1)))
    body = openai_server.log[0].body
    assert "response_format" not in body
    assert body["chat_template_kwargs"] == {"enable_thinking": True} and body["top_k"] == 20


# --- the eval command -----------------------------------------------------------------------------------------


def test_eval_end_to_end_score_and_cached_rerun(openai_server, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_TEST_KEY", SECRET)
    ok = Example(id="q/1", dataset="toy", task="open_qa", response="Paris is in Spain.", hallu_spans=[[12, 17]])
    clean = Example(id="q/2", dataset="toy", task="open_qa", response="Water boils at 100 C at sea level.")
    wrong = Example(id="q/3", dataset="toy", task="open_qa", response="It opened in 1926.", hallu_spans=[[13, 17]])
    examples = write_examples(tmp_path / "ex.jsonl", [ok, clean, wrong])
    openai_server.script = scripted(
        {ok.response: '{"incorrect_spans": ["Spain"]}', wrong.response: '{"incorrect_spans": ["opened"]}'}
    )
    common = ["--detector", "gpt5mini", "--examples", str(examples), "--base-url", openai_server.base_url]
    common += ["--api-key-env", "MY_TEST_KEY", *FAST]
    out = run_eval(*common, "--run-dir", str(tmp_path / "run1"))
    assert "open_qa/toy" in out and "span F1" in out
    res = results_of(tmp_path / "run1")
    # Per-example token F1: q/1 exact (1.0), q/2 empty vs empty (1.0), q/3 "opened" vs "1926" (0.0) -> 2/3.
    assert res["tasks"]["open_qa"]["token"]["f1"] == pytest.approx(2 / 3)
    assert res["run"]["usage"]["requests"] == 3 == len(openai_server.log)
    assert res["run"]["prompt_hash"] == PROMPT_HASH
    assert all(r.authorization == f"Bearer {SECRET}" for r in openai_server.log)

    openai_server.reset()
    rescored = CliRunner().invoke(main, ["score", str(tmp_path / "run1"), "--bootstrap", "10"])
    assert rescored.exit_code == 0 and len(openai_server.log) == 0
    assert results_of(tmp_path / "run1")["tasks"] == res["tasks"]

    out2 = run_eval(*common, "--run-dir", str(tmp_path / "run2"))
    res2 = results_of(tmp_path / "run2")
    assert len(openai_server.log) == 0
    assert res2["run"]["usage"]["cache_hit"] == 3 and res2["run"]["usage"]["requests"] == 0
    assert res2["tasks"] == res["tasks"]

    # The key reaches the server and nothing else: not the run dirs, the cache, or the output.
    stored = [p.read_bytes() for run in ("run1", "run2") for p in (tmp_path / run).iterdir()]
    stored += [p.read_bytes() for p in cache_path().parent.iterdir() if p.is_file()]
    assert stored and not any(SECRET.encode() in blob for blob in stored)
    assert SECRET not in out + out2 + rescored.output


def test_twenty_percent_failures_are_accounted_exactly(openai_server, tmp_path):
    examples = invented(40)
    path = write_examples(tmp_path / "ex.jsonl", examples)
    openai_server.script = scripted(town_replies(examples))
    # 20% of attempts fail with 500 or 429, and the first example always fails, so that at least one example
    # ends failed (max_retries=1) whatever the prompt's wording does to the seeded draw.
    random_faults = fail_rate(0.2, seed=5)
    openai_server.faults = lambda req: Fault("500") if answer_of(req) == examples[0].response else random_faults(req)
    run = tmp_path / "run"
    args = ["--detector", "openai", "--model", "m", "--examples", str(path), "--base-url", openai_server.base_url]
    out = run_eval(*args, "--run-dir", str(run), "-p", "max_retries=1", *FAST, status=3)
    res, journal = results_of(run), journal_of(run)
    failed = [row for row in journal.values() if row.get("error")]
    usage = res["run"]["usage"]
    faults = openai_server.count(status=500) + openai_server.count(status=429)
    assert set(journal) == {ex.id for ex in examples}
    assert failed and all(row["error"].startswith(("HTTP 500", "HTTP 429")) for row in failed)
    assert all("after 2 attempts" in row["error"] for row in failed)
    assert res["failed_predictions"] == len(failed)
    assert usage["requests"] == len(openai_server.log)
    # Every fault was either retried or ended an example: faults = retries + final failures.
    assert faults == usage["retries"] + len(failed)
    assert usage["retries"] > 1 and journal["toy/0"]["error"] == "HTTP 500: internal error after 2 attempts"
    # The failure summary: how many, by reason, the first reasons, and the command that retries them.
    assert f"{len(failed)} predictions failed:" in out
    assert "toy/0: HTTP 500: internal error after 2 attempts" in out
    assert f"shambench eval --resume {run} --base-url {openai_server.base_url}" in out

    # Resuming (against the same server, named again) re-asks only the failed examples.
    openai_server.reset()
    openai_server.faults = None
    run_eval("--resume", str(run), "--base-url", openai_server.base_url, *FAST)
    assert len(openai_server.log) == len(failed)
    final = results_of(run)
    assert final["failed_predictions"] == 0
    # Every answer names its town exactly: span F1 is 1.0 for all 40.
    assert final["tasks"]["open_qa"]["token"]["f1"] == 1.0


def test_sigkill_then_resume_matches_an_uninterrupted_run(openai_server, tmp_path):
    examples = invented(20)
    path = write_examples(tmp_path / "ex.jsonl", examples)
    openai_server.script = scripted(town_replies(examples))
    args = ["--detector", "openai", "--model", "m", "--examples", str(path), "--base-url", openai_server.base_url]
    args += ["--max-concurrency", "3"]
    run_eval(*args, "--run-dir", str(tmp_path / "straight"), "-p", "cache=false", *FAST)
    assert len(openai_server.log) == 20
    openai_server.reset()

    # Answer 6 requests, then hold every further one open: 3 are in flight when the run is killed.
    openai_server.faults = lambda req: Fault("hang") if req.n > 6 else None
    killed = tmp_path / "killed"
    cmd = [sys.executable, "-m", "shambench", "eval", *args, "--run-dir", str(killed), *FAST]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy())
    journal = killed / "predictions.jsonl"
    try:
        wait_until(lambda: journal.exists() and len(journal.read_text().splitlines()) == 6, "6 journaled", proc)
        wait_until(lambda: len(openai_server.held()) == 3, "3 requests held", proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    openai_server.release()
    openai_server.faults = None

    run_eval("--resume", str(killed), "--base-url", openai_server.base_url, *FAST)
    straight, resumed = results_of(tmp_path / "straight"), results_of(killed)
    for key in ("partitions", "tasks", "overall", "missing_predictions", "failed_predictions"):
        assert resumed[key] == straight[key]
    # 6 answered before the kill + 3 lost in flight + 14 asked on resume = 23 requests; 20 answered with no
    # retries, so requests answered = examples + retries, and the journal's usage agrees.
    assert len(openai_server.log) == 23
    assert openai_server.count(status=200) == 20 == resumed["run"]["usage"]["requests"]
    assert resumed["run"]["usage"]["retries"] == 0


def test_real_mushroom_through_the_server(openai_server, tmp_path):
    data = require_shared("mushroom").parent
    run = tmp_path / "run"
    args = ["--detector", "gpt5mini", "--datasets", "mushroom", "--data-dir", str(data), "--limit", "5"]
    out = run_eval(*args, "--base-url", openai_server.base_url, "--run-dir", str(run), *FAST)
    assert "open_qa/mushroom" in out
    res = results_of(run)
    assert res["n_examples"] == 5 and res["run"]["usage"]["requests"] == 5 == len(openai_server.log)
    assert res["failed_predictions"] == 0


def test_missing_key_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    path = write_examples(tmp_path / "ex.jsonl", invented(1))
    args = ["eval", "--detector", "gpt5mini", "--examples", str(path), "--runs", str(tmp_path / "runs"), *FAST]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "error: no API key: set OPENAI_API_KEY" in result.output
    # missed before anything is written: the same command runs once the key is set
    assert not (tmp_path / "runs").exists()


def test_listing_presets_imports_no_http_client():
    code = (
        "import sys; from shambench.detection.detector import detectors; detectors.entries(); "
        "print(sorted(m for m in ('aiohttp', 'openai', 'torch', 'rapidfuzz') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_failure_reasons_suggest_the_fix(openai_server):
    det = create_detector("openai", model="m", base_url=openai_server.base_url)
    openai_server.script = lambda req: '{"incorrect_spans": ["Varn'
    openai_server.finish_reason = "length"
    (cut,) = det.predict(invented(1))
    assert "hit the token limit" in cut.error and cut.raw == '{"incorrect_spans": ["Varn'
    forced = create_detector("openai", model="m", base_url=openai_server.base_url, structured="json_schema")
    openai_server.accepted_formats = frozenset({"text", "json_object"})
    openai_server.finish_reason = "stop"
    (rejected,) = forced.predict(invented(2)[1:])
    # A forced mode the server rejects is not negotiated away: the reason names the fix.
    assert rejected.error.startswith("HTTP 500") and "-p structured=MODE" in rejected.error
    assert "json_object+schema" in rejected.error and rejected.meta["usage"]["requests"] == 1


def test_the_prompt_keeps_the_answers_language_and_quotes_verbatim():
    from shambench.detectors.prompts import SYSTEM

    assert "keep the answer's language" in SYSTEM and "verbatim" in SYSTEM

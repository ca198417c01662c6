"""Runs by OpenAI's Batch API against the local batch server (tests/batch_server.py): same results as direct
requests, detach and resume, failed and expired items, no second batch, dry-run estimates and budgets."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.detection.detector import create_detector
from shambench.detectors.prompts import RESPONSE_FORMAT, messages_for
from shambench.llm.batch import BatchRecord, answer_of, custom_id, key_of
from shambench.llm.pricing import cost_of
from shambench.runs.batch import load_state, state_path
from tests.batch_server import BatchServer
from tests.conftest import require_shared
from tests.detectors.test_prompted import answer_of as answer_in_prompt
from tests.detectors.test_prompted import invented, scripted, town_replies, write_examples
from tests.run_helpers import unless_hung, wait_until

FAST = ["--bootstrap", "10", "--no-progress", "--poll", "0.01", "-p", "backoff_base=0.001"]
COMPARED = ("partitions", "tasks", "overall", "n_examples", "missing_predictions", "failed_predictions")


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), terminal_width=200)


def eval_ok(*args: str) -> str:
    result = invoke("eval", *args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def results_of(run: Path) -> dict:
    return json.loads((run / "results.json").read_text())


def journal_of(run: Path) -> dict[str, dict]:
    rows = map(json.loads, (run / "predictions.jsonl").read_text().splitlines())
    return {row["id"]: row for row in rows}


def toy_args(server: BatchServer, tmp_path: Path, n: int = 5) -> list[str]:
    """`--detector openai` on n invented examples whose answers name their gold span exactly."""
    examples = invented(n)
    server.script = scripted(town_replies(examples))
    path = write_examples(tmp_path / "ex.jsonl", examples)
    return ["--detector", "openai", "--model", "gpt-5-mini", "--examples", str(path), "--base-url", server.base_url]


def lines_of(server: BatchServer, batch_id: str) -> int:
    return server.batches[batch_id]["request_counts"]["total"]


# --- the line formats ---------------------------------------------------------------------------------------


def test_custom_ids_carry_the_example_and_the_request_key():
    key = "ab" * 32
    assert custom_id("mushroom/en#3", key) == f"mushroom/en#3#{key}"
    assert key_of(custom_id("mushroom/en#3", key)) == key


def test_output_and_error_lines_become_answers_or_reasons():
    ok = {"custom_id": "a#k", "response": {"status_code": 200, "body": {"choices": []}}, "error": None}
    refused = {
        "custom_id": "b#k",
        "response": {"status_code": 400, "body": {"error": {"message": "bad schema"}}},
        "error": None,
    }
    expired = {"custom_id": "c#k", "response": None, "error": {"code": "batch_expired", "message": "too late"}}
    assert answer_of(ok).body == {"choices": []} and answer_of(ok).error is None
    assert answer_of(refused).error == "batch item failed: HTTP 400: bad schema"
    assert answer_of(expired).error == "batch item failed: batch_expired: too late"


# --- same results as direct requests ------------------------------------------------------------------------


def longest_word(req) -> str:
    """A deterministic answer: the longest word of the response under check (ties: the first)."""
    words = answer_in_prompt(req).split()
    return json.dumps({"incorrect_spans": [max(words, key=len)] if words else []})


def test_full_mushroom_by_batch_matches_direct_requests(batch_server, tmp_path):
    data = require_shared("mushroom").parent
    batch_server.script = longest_word
    base = ["--detector", "gpt5mini", "--datasets", "mushroom", "--data-dir", str(data)]
    base += ["--base-url", batch_server.base_url, *FAST]
    eval_ok(*base, "--batch", "--run-dir", str(tmp_path / "batch"))
    # Only batches: no direct chat request, one batch with one line per example.
    assert batch_server.log == [] and list(batch_server.batches) == ["batch_0001"]
    by_batch = results_of(tmp_path / "batch")
    assert by_batch["n_examples"] == 154 == lines_of(batch_server, "batch_0001") == len(batch_server.batch_log)
    assert by_batch["failed_predictions"] == 0

    # The same answers fetched directly (cache off, so every request goes over HTTP).
    eval_ok(*base, "-p", "cache=false", "--run-dir", str(tmp_path / "direct"))
    assert len(batch_server.log) == 154
    direct = results_of(tmp_path / "direct")
    for key in COMPARED:
        assert by_batch[key] == direct[key], key
    # Batch answers are billed at half price: same tokens, half the cost.
    usage_b, usage_d = by_batch["run"]["usage"], direct["run"]["usage"]
    assert usage_b["input_tokens"] == usage_d["input_tokens"] > 0
    assert usage_b["cost"] == pytest.approx(usage_d["cost"] / 2)
    journal_b, journal_d = journal_of(tmp_path / "batch"), journal_of(tmp_path / "direct")
    assert {k: v["spans"] for k, v in journal_b.items()} == {k: v["spans"] for k, v in journal_d.items()}

    # A re-run by batch creates no new batch: every answer is in the response cache.
    eval_ok(*base, "--batch", "--run-dir", str(tmp_path / "again"))
    assert list(batch_server.batches) == ["batch_0001"] and len(batch_server.log) == 154
    assert results_of(tmp_path / "again")["tasks"] == by_batch["tasks"]


# --- detach, kill and resume --------------------------------------------------------------------------------


def _recorded_id(run: Path) -> str | None:
    try:
        batches = load_state(run).batches
    except Exception:  # a half-written file is never seen (writes are atomic), but be safe while polling
        return None
    return batches[0].id if batches else None


def test_kill_during_polling_then_resume_finishes_without_a_second_batch(batch_server, tmp_path):
    args = toy_args(batch_server, tmp_path, 6)
    batch_server.hold = True
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "shambench", "eval", *args, "--batch", "--run-dir", str(run), *FAST]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy())
    try:
        wait_until(lambda: _recorded_id(run) is not None and batch_server.status_checks >= 3, "polled thrice", proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert load_state(run).batches[0].status == "in_progress"
    assert not (run / "predictions.jsonl").exists() or journal_of(run) == {}
    batch_server.hold = False

    out = eval_ok("--resume", str(run), "--base-url", batch_server.base_url, *FAST)
    assert "batch batch_0001: completed 6/6 done" in out
    assert list(batch_server.batches) == ["batch_0001"] and batch_server.log == []
    res = results_of(run)
    assert res["failed_predictions"] == 0 and res["tasks"]["open_qa"]["token"]["f1"] == 1.0
    assert load_state(run).batches[0].applied
    # Resuming a finished run sends nothing and creates no batch.
    eval_ok("--resume", str(run), "--base-url", batch_server.base_url, *FAST)
    assert list(batch_server.batches) == ["batch_0001"]


def submitted(server: BatchServer, tmp_path: Path, n: int = 5) -> Path:
    """A run by batch submitted with --no-wait (exit 4: submitted, not finished); its batch is held."""
    run = tmp_path / "run"
    server.hold = True
    result = invoke("eval", *toy_args(server, tmp_path, n), "--batch", "--no-wait", "--run-dir", str(run), *FAST)
    assert result.exit_code == 4, result.output
    server.hold = False
    return run


def test_no_wait_submits_and_resume_collects(batch_server, tmp_path):
    run = tmp_path / "run"
    batch_server.polls = 3
    result = invoke("eval", *toy_args(batch_server, tmp_path), "--batch", "--no-wait", "--run-dir", str(run), *FAST)
    # Submitted, not finished: a status of its own (4), never 0, and no results.
    assert result.exit_code == 4, result.output
    assert "batch batch_0001: 5 requests submitted" in result.output
    resume = f"shambench eval --resume {run} --base-url {batch_server.base_url}"
    assert f"submitted, not finished: batch batch_0001 is running; no results yet. Finish the run with: {resume}" in (
        " ".join(result.output.split())
    )
    assert not (run / "results.json").exists() and _recorded_id(run) == "batch_0001"

    dry = invoke("eval", "--resume", str(run), "--base-url", batch_server.base_url, "--dry-run")
    assert "requests to send      0  (5 more already in a submitted batch)" in dry.output, dry.output

    # The run was made against --base-url: `batch status` needs it again, as --resume does.
    refused = invoke("batch", "status", str(run))
    assert refused.exit_code == 2 and f"the run was made with base_url={batch_server.base_url};" in refused.output
    status = invoke("batch", "status", str(run), "--base-url", batch_server.base_url)
    assert status.exit_code == 0, status.output
    assert "batch_0001  in_progress" in status.output and "(answers not applied yet)" in status.output
    # The command it prints works as printed.
    assert f"finish the run with: {resume}" in " ".join(status.output.split())
    eval_ok(*resume.split()[2:], *FAST)
    assert results_of(run)["failed_predictions"] == 0 and len(batch_server.batches) == 1
    # Every batch applied: nothing to ask the API, so no --base-url is needed to show them.
    assert "(answers applied)" in invoke("batch", "status", str(run)).output


def test_batch_recorded_before_its_id_is_found_again_not_made_twice(batch_server, tmp_path):
    run = submitted(batch_server, tmp_path)
    # As if the process had died after creating the batch and before writing its id.
    state = load_state(run)
    state.batches[0].id = None
    state_path(run).write_text(state.model_dump_json())
    eval_ok("--resume", str(run), "--base-url", batch_server.base_url, *FAST)
    assert list(batch_server.batches) == ["batch_0001"] and load_state(run).batches[0].id == "batch_0001"
    assert results_of(run)["failed_predictions"] == 0


# --- failures -----------------------------------------------------------------------------------------------


def test_failed_items_exit_3_and_resume_retries_only_them(batch_server, tmp_path):
    args = toy_args(batch_server, tmp_path, 6)
    failing = {"The river Ilsa1 flows through Varn1.", "The river Ilsa4 flows through Varn4."}
    batch_server.item_faults = lambda req: 500 if answer_in_prompt(req) in failing else None
    run = tmp_path / "run"
    result = invoke("eval", *args, "--batch", "--run-dir", str(run), *FAST)
    assert result.exit_code == 3, result.output
    assert "2 predictions failed:" in result.output
    journal = journal_of(run)
    failed = {k: v["error"] for k, v in journal.items() if v.get("error")}
    assert failed == {
        "toy/1": "batch item failed: HTTP 500: internal error",
        "toy/4": "batch item failed: HTTP 500: internal error",
    }
    assert results_of(run)["failed_predictions"] == 2

    batch_server.item_faults = None
    eval_ok("--resume", str(run), "--base-url", batch_server.base_url, *FAST)
    assert list(batch_server.batches) == ["batch_0001", "batch_0002"]
    assert lines_of(batch_server, "batch_0002") == 2 and batch_server.log == []
    retried = {answer_in_prompt(r) for r in batch_server.batch_log[6:]}
    assert retried == failing
    assert results_of(run)["failed_predictions"] == 0


def test_expired_batch_is_reported_and_its_unanswered_items_fail(batch_server, tmp_path):
    batch_server.final_status, batch_server.answer_limit = "expired", 2
    run = tmp_path / "run"
    result = invoke("eval", *toy_args(batch_server, tmp_path), "--batch", "--run-dir", str(run), *FAST)
    assert result.exit_code == 3
    assert "batch batch_0001 expired" in result.output and "3 predictions failed:" in result.output
    errors = [v["error"] for v in journal_of(run).values() if v.get("error")]
    assert (
        errors
        == [
            "batch item failed: batch_expired: This request could not be executed before the completion window expired."
        ]
        * 3
    )

    batch_server.final_status = "completed"
    eval_ok("--resume", str(run), "--base-url", batch_server.base_url, *FAST)
    assert lines_of(batch_server, "batch_0002") == 3 and results_of(run)["failed_predictions"] == 0


def test_cancelled_batch_leaves_its_requests_failed(batch_server, tmp_path):
    batch_server.final_status, batch_server.answer_limit = "cancelled", 1
    run = tmp_path / "run"
    result = invoke("eval", *toy_args(batch_server, tmp_path, 3), "--batch", "--run-dir", str(run), *FAST)
    assert result.exit_code == 3 and "batch batch_0001 cancelled" in result.output
    errors = sorted(v["error"] for v in journal_of(run).values() if v.get("error"))
    assert errors == ["batch batch_0001 cancelled without answering it"] * 2


def test_batch_needs_a_chat_detector_and_a_key(batch_server, tmp_path, monkeypatch):
    path = write_examples(tmp_path / "ex.jsonl", invented(1))
    runs = ["--runs", str(tmp_path / "runs"), "--no-progress"]
    for option, what in ((["--batch"], "--batch"), (["--max-cost", "1"], "a cost budget")):
        result = invoke("eval", "--detector", "overlap", "--examples", str(path), *option, *runs)
        assert result.exit_code == 2
        assert result.stderr == (
            f"error: {what} needs a detector that sends chat completions (prompted presets, openai, miprov2:PROGRAM); "
            "'overlap' does not\n"
        )
        assert not (tmp_path / "runs").exists()  # refused before the run directory is written
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    result = invoke("eval", "--detector", "gpt5mini", "--examples", str(path), "--batch", *FAST)
    assert result.exit_code == 2 and "no API key: set OPENAI_API_KEY" in result.output


# --- dry run and budget -------------------------------------------------------------------------------------


def hand_tokens(example) -> int:
    """Input tokens by the documented rule: ceil(characters / 4) per message and for the schema, +4 per message."""
    messages = messages_for(example)
    parts = [m["content"] for m in messages] + [json.dumps(RESPONSE_FORMAT)]
    return sum(math.ceil(len(p) / 4) for p in parts) + 4 * len(messages)


def test_dry_run_counts_requests_after_the_cache_and_sends_nothing(batch_server, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # the characters rule, whatever is installed
    examples = invented(4)
    batch_server.script = scripted(town_replies(examples))
    write_examples(tmp_path / "two.jsonl", examples[:2])
    path = write_examples(tmp_path / "four.jsonl", examples)
    common = ["--detector", "gpt5mini", "--base-url", batch_server.base_url]
    eval_ok(*common, "--examples", str(tmp_path / "two.jsonl"), "--run-dir", str(tmp_path / "warm"), *FAST)
    batch_server.reset()

    result = invoke("eval", *common, "--examples", str(path), "--dry-run", "--runs", str(tmp_path / "runs"))
    assert result.exit_code == 0, result.output
    assert batch_server.log == [] and batch_server.batches == {} and not (tmp_path / "runs").exists()
    tokens = sum(hand_tokens(ex) for ex in examples[2:])
    out = result.output
    assert "examples to run       4  (2 answered by the response cache)" in out
    assert "requests to send      2" in out
    assert f"input tokens          {tokens:,}  (4 characters per token + 4 per message)" in out
    # gpt-5-mini: $0.25 / $2.00 per million tokens; 100 output tokens per reply assumed; batch at half price.
    expected = (tokens * 0.25 + 2 * 100 * 2.00) / 1e6
    ceiling = (tokens * 0.25 + 2 * 4000 * 2.00) / 1e6
    assert f"expected cost         ${expected:.2f} direct, ${expected / 2:.2f} by --batch" in out
    assert f"ceiling               ${ceiling:.2f} direct, ${ceiling / 2:.2f} by --batch" in out
    assert "note:" not in out  # a server on this machine needs no key


def test_dry_run_says_when_the_run_would_have_no_api_key(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    path = write_examples(tmp_path / "one.jsonl", invented(1))
    args = ["eval", "--detector", "gpt5mini", "--examples", str(path), "--dry-run"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == (
        "  note: no API key: set OPENAI_API_KEY (or name another variable with --api-key-env), or give --base-url "
        "for a server that needs none"
    )
    remote = invoke(*args, "--base-url", "http://10.9.8.7:8000/v1")
    assert remote.output.splitlines()[-1] == (
        "  note: $OPENAI_API_KEY is not set: requests to http://10.9.8.7:8000/v1 carry no key (a server that needs "
        "one answers 401)"
    )
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert "note:" not in invoke(*args).output


def test_max_cost_stops_direct_requests_and_resume_continues(batch_server, tmp_path):
    args = toy_args(batch_server, tmp_path, 6)
    # The server bills prompt words as input and reply words as output; all six prompts cost the same.
    det = create_detector("openai", model="gpt-5-mini", base_url=batch_server.base_url)
    list(det.predict(invented(1), None))
    req = batch_server.log[0]
    one = cost_of("gpt-5-mini", len(req.prompt.split()), len(batch_server.script(req).split()))
    batch_server.reset()

    run = tmp_path / "run"
    budget = f"{2.5 * one:.10f}"
    result = invoke(
        "eval", *args, "-p", "cache=false", "--max-concurrency", "1", "--max-cost", budget, "--run-dir", str(run), *FAST
    )
    assert result.exit_code == 3, result.output
    # Sent while the accounted cost was below the budget: after 1 and 2 requests (1x, 2x < 2.5x), not after 3.
    assert len(batch_server.log) == 3
    assert "3 predictions failed:" in result.output and "  not run\n" in result.output
    not_run = [v["error"] for v in journal_of(run).values() if v.get("error")]
    assert len(not_run) == 3 and all(e.startswith("not run: the --max-cost budget of $") for e in not_run)

    eval_ok("--resume", str(run), "--base-url", batch_server.base_url, "--max-cost", "1", *FAST)
    assert len(batch_server.log) == 6 and results_of(run)["failed_predictions"] == 0


def test_max_cost_by_batch_submits_only_what_the_estimate_fits(batch_server, tmp_path, monkeypatch):
    from shambench.llm.batch import DEFAULT_OUTPUT_TOKENS, TokenCounter, request_cost

    monkeypatch.setitem(sys.modules, "tiktoken", None)
    args = toy_args(batch_server, tmp_path, 5)
    det = create_detector("openai", model="gpt-5-mini")
    body = {"messages": messages_for(invented(1)[0]), **det.body()}
    one = request_cost("gpt-5-mini", TokenCounter(), body, DEFAULT_OUTPUT_TOKENS)
    run = tmp_path / "run"
    result = invoke("eval", *args, "--batch", "--max-cost", f"{2.5 * one:.10f}", "--run-dir", str(run), *FAST)
    assert result.exit_code == 3, result.output
    assert (
        lines_of(batch_server, "batch_0001") == 2
        and "3 predictions failed:" in result.output
        and "  not run\n" in result.output
    )
    record: BatchRecord = load_state(run).batches[0]
    assert record.estimated_cost == pytest.approx(2 * one)

    eval_ok("--resume", str(run), "--base-url", batch_server.base_url, *FAST)
    assert lines_of(batch_server, "batch_0002") == 3 and results_of(run)["failed_predictions"] == 0


# --- sweeps -------------------------------------------------------------------------------------------------


def test_sweep_cell_with_batch_true_runs_by_batch_once(batch_server, tmp_path):
    from shambench.runs.sweep import SUMMARY, plan_sweep

    examples = invented(4)
    batch_server.script = scripted(town_replies(examples))
    batch_server.polls = 0
    write_examples(tmp_path / "toy.jsonl", examples)
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "examples: [toy.jsonl]\nbootstrap: 10\nleaderboard: false\ndetectors:\n"
        "  - detector: openai\n    params: {model: gpt-5-mini}\n    batch: true\n  - none\n"
    )
    endpoint = {"base_url": batch_server.base_url}
    plan = plan_sweep(spec, endpoint=endpoint)
    # The command line's endpoint goes to the detector that takes one, and never into the cell's folder name.
    batched, plain = (cell.spec for cell in plan.cells)
    assert batched.execution.batch and batched.base_url == batch_server.base_url and plain.base_url is None
    assert batched.detector_params() == {"model": "gpt-5-mini", **endpoint} and plain.detector_params() == {}
    assert plan.cells[0].run_dir.name == "openai_model=-gpt-5-mini"
    args = ["sweep", str(spec), "--base-url", batch_server.base_url, "--workers", "1", "--no-progress"]
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    cell = json.loads((plan.runs / SUMMARY).read_text())["cells"][0]
    assert cell["status"] == "done" and cell["predicted"] == 4 and cell["failed_predictions"] == 0
    assert cell["token_f1"] == 1.0
    assert batch_server.log == [] and list(batch_server.batches) == ["batch_0001"]
    assert load_state(plan.cells[0].run_dir).batches[0].applied
    assert invoke(*args).exit_code == 0
    assert json.loads((plan.runs / SUMMARY).read_text())["cells"][0]["status"] == "skipped"
    assert len(batch_server.batches) == 1


def test_a_lost_batch_id_is_found_on_a_later_page_of_the_list(batch_server, monkeypatch):
    import shambench.llm.batchapi as batchapi
    from shambench.llm.batchapi import BatchAPI
    from shambench.llm.endpoint import Endpoint

    with BatchAPI(Endpoint(model="gpt-5-mini", base_url=batch_server.base_url)) as api:
        files = [api.upload(['{"custom_id": "a#k", "method": "POST"}\n'], f"in{i}.jsonl") for i in range(5)]
        for file_id in files:
            api.create(file_id, "/v1/chat/completions", "run")
        monkeypatch.setattr(batchapi, "LIST_PAGE", 2)
        # Listed newest first, two per page: the oldest batch is on the third page.
        assert api.find(files[0]).id == "batch_0001"
        assert api.find("file-none") is None


def test_a_server_without_the_batch_api_is_one_clear_error(openai_server, tmp_path):
    examples = invented(2)
    path = write_examples(tmp_path / "ex.jsonl", examples)
    args = ["--detector", "openai", "--model", "m", "--examples", str(path), "--base-url", openai_server.base_url]
    result = invoke("eval", *args, "--batch", "--run-dir", str(tmp_path / "run"), *FAST)
    assert result.exit_code == 2, result.output
    assert f"error: Batch API at {openai_server.base_url}: uploading the requests failed: HTTP 404" in result.output
    # The intent was recorded before the upload (so a resume stays a batch run); no batch was.
    state = load_state(tmp_path / "run")
    assert openai_server.log == [] and state.by_batch and state.batches == []


def test_batch_prices_are_half_unless_the_price_file_gives_them(tmp_path, monkeypatch):
    from shambench.llm.pricing import Price, load_prices

    assert Price(input=1.0, output=2.0).per_token(batch=True) == (0.5, 1.0)
    assert Price(input=1.0, output=2.0, batch_input=0.3).per_token(batch=True) == (0.3, 1.0)
    # gpt-5-mini: $0.25 / $2.00 per million; 1M input + 1M output = $2.25 direct, $1.125 by batch.
    assert cost_of("gpt-5-mini", 1_000_000, 1_000_000) == pytest.approx(2.25)
    assert cost_of("gpt-5-mini", 1_000_000, 1_000_000, batch=True) == pytest.approx(1.125)
    prices = tmp_path / "pricing.yaml"
    prices.write_text("my-model:\n  input: 1.0\n  output: 4.0\n  batch_input: 0.8\n  batch_output: 3.0\n")
    monkeypatch.setenv("SHAMBENCH_PRICING", str(prices))
    load_prices.cache_clear()
    try:
        assert cost_of("my-model", 1_000_000, 1_000_000, batch=True) == pytest.approx(3.8)
    finally:
        monkeypatch.delenv("SHAMBENCH_PRICING")
        load_prices.cache_clear()


def test_miprov2_programs_run_by_batch_with_their_own_prompt(batch_server, tmp_path):
    from shambench.detectors.miprov2 import render
    from tests.detectors.test_miprov2 import PROMPT, program_file, save

    examples = invented(3)
    batch_server.script = lambda req: '{"incorrect_spans": []}'
    program = save(tmp_path / "p.json", program_file(base="openai", model="gpt-5-mini", generation={}))
    path = write_examples(tmp_path / "ex.jsonl", examples)
    args = ["--detector", f"miprov2:{program}", "--examples", str(path), "--base-url", batch_server.base_url]
    eval_ok(*args, "--batch", "--run-dir", str(tmp_path / "run"), *FAST)
    assert batch_server.log == [] and list(batch_server.batches) == ["batch_0001"]
    sent = sorted(json.dumps(r.body["messages"]) for r in batch_server.batch_log)
    assert sent == sorted(json.dumps(render(PROMPT)(ex)) for ex in examples)
    assert results_of(tmp_path / "run")["run"]["prompt_hash"] == PROMPT.hash


# --- files and servers that lie -----------------------------------------------------------------------------


def answered(server: BatchServer, batch_id: str = "batch_0001") -> dict[str, bytes]:
    """Answer a held batch now; its output lines by example id (what a test then doctors)."""
    batch = server.batches[batch_id]
    server._finish(batch, "completed")
    data = server.files[batch["output_file_id"]]["data"]
    return {json.loads(line)["custom_id"].split("#")[0]: line for line in data.splitlines()}


def test_lying_output_lines_fail_their_items_and_the_rest_are_applied(batch_server, tmp_path, monkeypatch):
    monkeypatch.setenv("SHAMBENCH_MAX_RESPONSE_BYTES", "4096")
    run = submitted(batch_server, tmp_path, 8)
    lines = answered(batch_server)
    wrapper = json.loads(lines["toy/1"])
    big = {**wrapper, "response": {**wrapper["response"], "body": {**wrapper["response"]["body"], "pad": "x" * 20000}}}
    doctored = [
        lines["toy/0"][: len(lines["toy/0"]) // 2],  # torn
        json.dumps({**wrapper, "custom_id": json.loads(lines["toy/2"])["custom_id"], "response": "ok"}).encode(),
        json.dumps({**json.loads(lines["toy/3"]), "response": {"status_code": "200", "body": {}}}).encode(),
        lines["toy/4"],
        lines["toy/4"],  # the same custom_id twice
        lines["toy/5"],
        lines["toy/6"],
        json.dumps(big).encode(),  # toy/1, past the 4096-byte limit of a reply
        b"[1, 2, 3]",  # not an object
        json.dumps({**wrapper, "custom_id": "toy/9#" + "f" * 64}).encode(),  # a request never sent
    ]
    batch = batch_server.batches["batch_0001"]
    batch_server.files[batch["output_file_id"]]["data"] = b"\n".join(doctored) + b"\n"
    # An error line for a request the output file answered: it must not silently replace the answer.
    error = {"custom_id": json.loads(lines["toy/5"])["custom_id"], "response": None, "error": {"code": "x"}}
    batch["error_file_id"] = batch_server._store("err.jsonl", "batch_output", json.dumps(error).encode())["id"]

    result = invoke("eval", "--resume", str(run), "--base-url", batch_server.base_url, *FAST)
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    errors = {k: v.get("error") for k, v in journal_of(run).items()}
    assert errors["toy/0"].startswith(
        "batch output: batch file file-0002:1: not valid JSON (Unterminated string starting at column "
    )
    assert (
        errors["toy/1"] == "batch output: the answer is larger than the 4096-byte limit ($SHAMBENCH_MAX_RESPONSE_BYTES)"
    )
    assert errors["toy/2"] == "batch output: the line's response is a string, not an object"
    assert errors["toy/3"] == "batch output: the line's status_code is a string, not a number"
    assert errors["toy/4"] == errors["toy/5"] == "batch output: 2 lines answer this request (duplicate custom_id)"
    assert errors["toy/6"] is None and errors["toy/7"].startswith("batch batch_0001 completed without answering it")
    note = (
        "lines with an unknown custom_id: 1, lines without a readable custom_id: 1, requests answered more than once: 2"
    )
    assert f"warning: batch batch_0001: {note} (output lines applied to no request" in " ".join(result.output.split())
    # The good answer is applied, with the same span as a direct reply; the batch is used up, not re-downloaded.
    assert journal_of(run)["toy/6"]["spans"] == [{"start": 30, "end": 35}]  # "Varn6", its gold span
    assert load_state(run).batches[0].applied
    checks = batch_server.status_checks
    eval_ok("--resume", str(run), "--base-url", batch_server.base_url, *FAST)
    assert lines_of(batch_server, "batch_0002") == 7 and results_of(run)["failed_predictions"] == 0
    assert batch_server.status_checks > checks and batch_server.log == []


def test_an_output_file_past_the_whole_file_limit_is_refused_and_kept_for_later(batch_server, tmp_path, monkeypatch):
    run = submitted(batch_server, tmp_path, 3)
    answered(batch_server)
    monkeypatch.setenv("SHAMBENCH_MAX_BATCH_FILE_BYTES", "1000")
    result = invoke("eval", "--resume", str(run), "--base-url", batch_server.base_url, *FAST)
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: Batch API at {batch_server.base_url}: downloading file-0002 failed: malformed reply: larger than the "
        "1000-byte limit ($SHAMBENCH_MAX_BATCH_FILE_BYTES); nothing of it was applied: raise "
        "$SHAMBENCH_MAX_BATCH_FILE_BYTES to accept it, then resume\n"
    )
    assert not load_state(run).batches[0].applied and journal_of(run) == {}
    monkeypatch.delenv("SHAMBENCH_MAX_BATCH_FILE_BYTES")
    eval_ok("--resume", str(run), "--base-url", batch_server.base_url, *FAST)
    assert results_of(run)["failed_predictions"] == 0 and len(batch_server.batches) == 1


def test_a_batch_that_never_finishes_stops_at_the_timeout_resumably(batch_server, tmp_path):
    batch_server.hold = True
    run = tmp_path / "run"
    args = [*toy_args(batch_server, tmp_path, 2), "--batch", "--batch-timeout", "1s", "--run-dir", str(run), *FAST]
    result = unless_hung(lambda: invoke("eval", *args), "a batch run past its --batch-timeout")
    assert result.exit_code == 4, result.output
    assert "batch batch_0001 is still running after --batch-timeout 1s" in " ".join(result.output.split())
    assert load_state(run).batches[0].id == "batch_0001" and not (run / "results.json").exists()
    batch_server.hold = False
    eval_ok("--resume", str(run), "--base-url", batch_server.base_url, *FAST)
    assert results_of(run)["failed_predictions"] == 0 and len(batch_server.batches) == 1
    refused = invoke("eval", "--resume", str(run), "--batch-timeout", "soon")
    assert refused.exit_code == 2 and "expected a duration such as 90m, 26h or 3600s, got 'soon'" in refused.output


def test_killed_after_the_upload_the_resume_stays_a_batch_run(batch_server, tmp_path, monkeypatch):
    from shambench.llm.batchapi import BatchAPI

    real = BatchAPI.upload

    def upload_then_die(self, lines, name):
        real(self, lines, name)
        raise KeyboardInterrupt  # as a kill between the upload and batches.json

    monkeypatch.setattr(BatchAPI, "upload", upload_then_die)
    run = tmp_path / "run"
    result = invoke("eval", *toy_args(batch_server, tmp_path, 3), "--batch", "--run-dir", str(run), *FAST)
    assert result.exit_code == 130 and load_state(run).by_batch and not load_state(run).batches
    monkeypatch.setattr(BatchAPI, "upload", real)
    eval_ok("--resume", str(run), "--base-url", batch_server.base_url, *FAST)
    # Never sent directly at full price: a batch of the three requests (the orphaned upload is never used).
    assert batch_server.log == [] and list(batch_server.batches) == ["batch_0001"]
    assert lines_of(batch_server, "batch_0001") == 3 and results_of(run)["failed_predictions"] == 0


def test_batch_status_never_sends_the_key_where_config_json_says(batch_server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-right-place")
    monkeypatch.setenv("SHAMBENCH_TEST_OTHER_SECRET", "sk-must-not-leave")
    run = submitted(batch_server, tmp_path)
    with BatchServer() as attacker:
        config = json.loads((run / "config.json").read_text())
        config["params"].update(base_url=attacker.base_url, api_key_env="SHAMBENCH_TEST_OTHER_SECRET")
        (run / "config.json").write_text(json.dumps(config))
        plain = invoke("batch", "status", str(run))
        named = invoke("batch", "status", str(run), "--base-url", batch_server.base_url)
        assert attacker.seen == []
    for result in (plain, named):
        assert result.exit_code == 2, result.output
        assert f"the run was made with api_key_env=SHAMBENCH_TEST_OTHER_SECRET, base_url={attacker.base_url};" in (
            result.output
        )
    assert {auth for _, _, auth in batch_server.seen} == {"Bearer sk-right-place"}


@pytest.mark.parametrize(
    "change",
    [{"id": "../files/file-0001"}, {"endpoint": "https://elsewhere.example/v1/chat/completions"}],
)
def test_a_doctored_batches_json_is_refused(batch_server, tmp_path, change):
    run = submitted(batch_server, tmp_path, 2)
    state = json.loads(state_path(run).read_text())
    state["batches"][0].update(change)
    state_path(run).write_text(json.dumps(state))
    checks = batch_server.status_checks
    result = invoke("eval", "--resume", str(run), "--base-url", batch_server.base_url, *FAST)
    assert result.exit_code == 2 and f"{state_path(run)}: not a batch record" in result.output
    assert batch_server.status_checks == checks


def test_a_linked_batches_json_is_refused_and_its_target_untouched(batch_server, tmp_path):
    run = submitted(batch_server, tmp_path, 2)
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes(state_path(run).read_bytes())
    state_path(run).unlink()
    state_path(run).symlink_to(outside)
    before = outside.read_bytes()
    result = invoke("eval", "--resume", str(run), "--base-url", batch_server.base_url, *FAST)
    assert result.exit_code == 2 and "is a symbolic link" in result.output
    assert outside.read_bytes() == before


def test_lines_are_split_within_bounds_whatever_the_chunks():
    from shambench.llm.batch import HEAD_BYTES, split_lines

    data = b'{"a": 1}\n\n' + b'{"custom_id": "x#k", "pad": "' + b"y" * 5000 + b'"}\n{"b": 2}'
    for size in (1, 7, 4096, len(data)):
        chunks = [data[i : i + size] for i in range(0, len(data), size)]
        got = list(split_lines(chunks, 2000))
        assert [(n, whole) for n, _, whole in got] == [(1, True), (3, False), (4, True)]
        assert got[0][1] == b'{"a": 1}' and got[2][1] == b'{"b": 2}' and len(got[1][1]) == HEAD_BYTES


def test_evaluate_takes_the_batch_dry_run_and_cost_options_of_eval(batch_server, tmp_path):
    import shambench
    from shambench.runs.batch import Estimate
    from tests.run_helpers import without_times

    examples = invented(4)
    batch_server.script = scripted(town_replies(examples))
    path = write_examples(tmp_path / "ex.jsonl", examples)
    api = {"model": "gpt-5-mini", "examples_file": path, "base_url": batch_server.base_url}
    fast = {"n_resamples": 10, "poll": 0.01, "params": {"backoff_base": 0.001, "cache": False}}

    estimate = shambench.evaluate("openai", dry_run=True, run_dir=tmp_path / "dry", **api, **fast)
    assert isinstance(estimate, Estimate) and (estimate.examples, estimate.requests) == (4, 4)
    assert batch_server.log == [] and batch_server.batches == {} and not (tmp_path / "dry").exists()

    run = tmp_path / "api"
    assert shambench.evaluate("openai", batch=True, wait=False, run_dir=run, **api, **fast) is None
    assert list(batch_server.batches) == ["batch_0001"] and not (run / "results.json").exists()
    done = shambench.evaluate(resume=True, run_dir=run, base_url=batch_server.base_url, **fast)
    assert done.failed_predictions == 0 and done.tasks["open_qa"].token.f1 == 1.0

    cli = tmp_path / "cli"
    args = ["--detector", "openai", "--model", "gpt-5-mini", "--examples", str(path)]
    eval_ok(*args, "--base-url", batch_server.base_url, "--batch", "--run-dir", str(cli), *FAST, "-p", "cache=false")
    assert without_times(results_of(cli)) == without_times(results_of(run))

    # A budget of nothing: no request is sent, every example is a failed prediction a resume would run.
    spent = shambench.evaluate("openai", max_cost=0, run_dir=tmp_path / "budget", **api, **fast)
    assert spent.failed_predictions == 4 and len(batch_server.log) == 0


# --- a hostile Batch API: every call bounded, every failure one line, nothing lost ---------------------------

HOSTILE = ["-p", "timeout=2", "-p", "max_retries=1"]
"""A request's deadline short enough for a test, one retry; long enough for the honest requests around the lie (a
status check before a download) on a busy machine, and far short of the lies' 60 s."""


def resumed(server: BatchServer, run: Path, *extra: str):
    return invoke("eval", "--resume", str(run), "--base-url", server.base_url, *FAST, *extra)


def one_error_line(result, message: str) -> None:
    """The command failed with exit status 2 and printed exactly `error: <message>`, no traceback."""
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {message}\n"
    assert isinstance(result.exception, SystemExit)


def finishes_untouched(server: BatchServer, run: Path) -> None:
    """The run lost nothing: its batch was not applied, nothing was journaled, and an honest server finishes it
    from the same batch."""
    assert not load_state(run).batches[0].applied and journal_of(run) == {}
    server.lies.clear()
    eval_ok("--resume", str(run), "--base-url", server.base_url, *FAST)
    assert results_of(run)["failed_predictions"] == 0 and list(server.batches) == ["batch_0001"]


@pytest.mark.parametrize("gzip", [False, True], ids=["plain", "gzip bomb"])
def test_an_endless_output_file_stops_at_the_cap(batch_server, tmp_path, monkeypatch, gzip):
    from tests.batch_server import endless

    run = submitted(batch_server, tmp_path, 3)
    answered(batch_server)
    line = batch_server.files["file-0002"]["data"].splitlines(keepends=True)[0]
    batch_server.lies["content"] = endless(line, gzip=gzip)
    monkeypatch.setenv("SHAMBENCH_MAX_BATCH_FILE_BYTES", "1000000")
    result = resumed(batch_server, run)
    one_error_line(
        result,
        f"Batch API at {batch_server.base_url}: downloading file-0002 failed: malformed reply: larger than the "
        "1000000-byte limit ($SHAMBENCH_MAX_BATCH_FILE_BYTES); nothing of it was applied: raise "
        "$SHAMBENCH_MAX_BATCH_FILE_BYTES to accept it, then resume",
    )
    # The client hung up at the cap: the server never reached its own bound.
    wait_until(lambda: batch_server.lied == ["cut off"], "the endless body cut off")
    monkeypatch.delenv("SHAMBENCH_MAX_BATCH_FILE_BYTES")
    finishes_untouched(batch_server, run)


@pytest.mark.parametrize(
    ("route", "what", "why"),
    [
        ("retrieve", "checking batch batch_0001", "no complete reply within 2 s, 2 attempt(s)"),
        ("content", "downloading file-0002", "no complete reply within 2 s (plus 1 s per 16384 bytes received)"),
    ],
)
def test_a_server_that_trickles_is_cut_off_at_the_deadline(batch_server, tmp_path, route, what, why):
    from tests.batch_server import trickle

    run = submitted(batch_server, tmp_path, 2)
    answered(batch_server)
    batch_server.lies[route] = trickle
    result = resumed(batch_server, run, *HOSTILE)
    one_error_line(result, f"Batch API at {batch_server.base_url}: {what} failed: {why}")
    # Every attempt was abandoned by the client (a status check is retried once; a download's body is not).
    attempts = 2 if route == "retrieve" else 1
    wait_until(lambda: batch_server.lied == ["cut off"] * attempts, "every trickle cut off")
    finishes_untouched(batch_server, run)


def test_a_status_check_that_outlives_the_wait_leaves_the_run_resumable(batch_server, tmp_path):
    from tests.batch_server import silent

    batch_server.lies["retrieve"] = silent
    run = tmp_path / "run"
    args = [*toy_args(batch_server, tmp_path, 2), "--batch", "--batch-timeout", "1s", "--run-dir", str(run), *FAST]
    result = invoke("eval", *args)
    # Submitted, not finished (the server never said otherwise): exit status 4, the batch recorded for --resume.
    assert result.exit_code == 4, result.output
    assert "batch batch_0001 is still running after --batch-timeout 1s" in " ".join(result.output.split())
    assert load_state(run).batches[0].id == "batch_0001" and not (run / "results.json").exists()
    finishes_untouched(batch_server, run)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ((b"{}", {"Content-Encoding": "br"}), "malformed reply: its body is in 'br', a coding not asked for"),
        ((b"{}", {"Content-Encoding": "gzip"}), "malformed reply: not valid gzip data"),
        (
            b'{"id": "batch_0001", "status": ' + nested(100).encode() + b"}",
            "the reply: nested deeper than 64 levels; expected a batch object",
        ),
        (b'{"id": "batch_0001", "status": ' + nested(100_000).encode() + b"}", "nested deeper than 64 levels"),
        (
            b'{"id": "batch_0001", "status": "completed", "output_file_id": "../../v1/models"}',
            "the reply's output_file_id: String should match pattern",
        ),
        (b'{"id": "batch_0001"}', "the reply's status: Field required; expected a batch object"),
        (b'{"id": "batch_0001", "status": "completed\\nerror: forged"}', "the reply's status: String should match"),
        (b"[]", "the reply: Input should be a valid dictionary"),
        (b'{"id": "batch_0001", "status": NaN}', "not valid JSON"),
        (b"\xff\xfe", "not UTF-8 text"),
    ],
    ids=[
        "brotli",
        "not gzip",
        "deep",
        "very deep",
        "id leaving the API",
        "no status",
        "status with a new line",
        "not an object",
        "NaN",
        "not UTF-8",
    ],
)
def test_a_lying_status_reply_is_one_error_line(batch_server, tmp_path, reply, why):
    from tests.batch_server import replying

    run = submitted(batch_server, tmp_path, 2)
    body, headers = reply if isinstance(reply, tuple) else (reply, None)
    batch_server.lies["retrieve"] = replying(body, headers=headers)
    result = resumed(batch_server, run)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: Batch API at {batch_server.base_url}: checking batch batch_0001 failed: ")
    assert why in line, line
    finishes_untouched(batch_server, run)


def test_an_endless_status_reply_stops_at_the_object_cap(batch_server, tmp_path):
    from shambench.llm.batchapi import MAX_OBJECT_BYTES
    from tests.batch_server import endless

    run = submitted(batch_server, tmp_path, 2)
    batch_server.lies["retrieve"] = endless(b"[" * 1000)
    one_error_line(
        resumed(batch_server, run),
        f"Batch API at {batch_server.base_url}: checking batch batch_0001 failed: malformed reply: larger than the "
        f"{MAX_OBJECT_BYTES}-byte limit",
    )
    finishes_untouched(batch_server, run)


def test_deeply_nested_output_lines_fail_their_items_and_the_rest_are_applied(batch_server, tmp_path):
    run = submitted(batch_server, tmp_path, 3)
    lines = answered(batch_server)

    def buried(line: bytes, depth: int) -> bytes:
        row = json.loads(line)
        return (
            json.dumps({**row, "response": {"status_code": 200, "body": {"pad": "@"}}})
            .encode()
            .replace(b'"@"', nested(depth).encode())
        )

    batch = batch_server.batches["batch_0001"]
    batch_server.files[batch["output_file_id"]]["data"] = b"\n".join(
        [buried(lines["toy/0"], 100), buried(lines["toy/1"], 3000), lines["toy/2"]]
    )
    result = resumed(batch_server, run)
    assert result.exit_code == 3, result.output
    errors = {k: v.get("error") for k, v in journal_of(run).items()}
    expected = "nested deeper than 64 levels; expected a Batch API output line"
    assert errors == {
        "toy/0": f"batch output: batch file file-0002:1: {expected}",
        "toy/1": f"batch output: batch file file-0002:2: {expected}",
        "toy/2": None,
    }


def test_a_key_echoed_by_the_batch_server_is_written_and_printed_nowhere(batch_server, tmp_path, monkeypatch):
    from tests import leaks
    from tests.batch_server import replying

    # The key has no key shape: only knowing the key in use can mask it; each answer carries it in every encoding.
    key = leaks.ODD_KEY
    monkeypatch.setenv("ECHO_TEST_KEY", key)
    batch_server.script = lambda req: json.dumps({"incorrect_spans": leaks.echo_spans(req.authorization or "", key)})
    path = write_examples(tmp_path / "ex.jsonl", invented(3))
    run = tmp_path / "run"
    endpoint = ["--base-url", batch_server.base_url, "--api-key-env", "ECHO_TEST_KEY"]
    args = ["--detector", "openai", "--model", "gpt-5-mini", "--examples", str(path), *endpoint]
    batch_server.hold = True
    shown = [invoke("eval", *args, "--batch", "--no-wait", "--run-dir", str(run), *FAST)]
    assert shown[0].exit_code == 4, shown[0].output
    # A status check whose error reply echoes the key: the error line masks it.
    batch_server.lies["retrieve"] = replying(
        lambda request: json.dumps({"error": {"message": f"bad key {request.headers['Authorization']}"}}).encode(),
        status=400,
    )
    shown.append(invoke("batch", "status", str(run), *endpoint))
    assert shown[-1].exit_code == 2 and shown[-1].stderr == (
        f"error: Batch API at {batch_server.base_url}: checking batch batch_0001 failed: HTTP 400: bad key Bearer ***\n"
    )
    batch_server.lies.clear()
    batch_server.hold = False
    shown.append(invoke("eval", "--resume", str(run), *endpoint, *FAST))
    assert shown[-1].exit_code == 0, shown[-1].output
    assert {auth for _, _, auth in batch_server.seen} == {f"Bearer {key}"}
    cache = Path(os.environ["SHAMBENCH_CACHE_DIR"])
    written = [p for root in (run, cache) for p in root.rglob("*") if p.is_file()]
    assert (run / "predictions.jsonl") in written and any(p.is_relative_to(cache) for p in written)
    assert leaks.leaks(key, written, [result.output + result.stderr for result in shown]) == []
    assert "Bearer ***" in (run / "predictions.jsonl").read_text()

"""`shambench optimize` end to end: a real MIPROv2 `light` compile against the local OpenAI-compatible server,
scripted so that instructions carrying a marker word get correct answers; the saved program is reloaded and
evaluated through `shambench eval`, and no connection leaves the loopback."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.detectors.miprov2 import base_prompt, load_program
from shambench.detectors.miprov2_compile import OptimizeConfig, TokenF1, split_share, train_and_heldout
from shambench.detectors.prompts import SYSTEM
from shambench.llm.pricing import cost_of
from shambench.schema import Example
from tests.conftest import require_shared

MARKER = "PINPOINT"
GOOD = f"Name the town the answer gets wrong; {MARKER} it."
BAD = "List every phrase that sounds doubtful."


def output_fields(system: str) -> list[str]:
    """The output fields DSPy's JSON adapter asks for, from its system message."""
    listed = system.split("Your output fields are:", 1)[1].split("All interactions", 1)[0]
    return re.findall(r"^\d+\. `(\w+)`", listed, re.M)


class Script:
    """The server's answers: the span task is answered right only when the instructions carry the marker; the
    instruction proposer proposes the good and the bad instruction in turn (so both are offered whatever the
    prompt's wording; a hash of the prompt made the test depend on every word of the span prompt)."""

    def __init__(self, gold: dict[str, list[str]] | None = None):
        self.gold = gold
        """Correct strings by response; None: the town, the last word."""
        self.proposed: list[str] = []

    def correct(self, answer: str) -> list[str]:
        return self.gold[answer] if self.gold is not None else [answer.rstrip(".").split()[-1]]

    def __call__(self, req) -> str:
        system = req.body["messages"][0]["content"]
        fields = output_fields(system)
        if fields == ["incorrect_spans"]:
            case = req.body["messages"][-1]["content"]
            answer = case.split("[[ ## answer ## ]]\n", 1)[1].rsplit("\n\nRespond with", 1)[0]
            return json.dumps({"incorrect_spans": self.correct(answer) if MARKER in system else answer.split()[:2]})
        reply = {name: "An observation." for name in fields}
        if "proposed_instruction" in fields:
            good = len(self.proposed) % 2 == 0
            reply["proposed_instruction"] = GOOD if good else BAD
            self.proposed.append(reply["proposed_instruction"])
        return json.dumps(reply)


def invented(lo: int, hi: int, dataset: str = "toy") -> list[Example]:
    """Invented open-QA examples; in each, the town (the last word) is the gold error."""
    out = []
    for i in range(lo, hi):
        response = f"The river Ilsa{i} flows through Varn{i}."
        start = response.index(f"Varn{i}")
        out.append(
            Example(
                id=f"{dataset}/{i}",
                dataset=dataset,
                task="open_qa",
                question=f"Which town does the river Ilsa{i} flow through?",
                response=response,
                hallu_spans=[[start, start + len(f"Varn{i}")]],
            )
        )
    return out


def write_examples(path: Path, examples: list[Example]) -> Path:
    path.write_text("".join(ex.model_dump_json() + "\n" for ex in examples), encoding="utf-8")
    return path


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), terminal_width=200)


@pytest.fixture
def loopback_only(monkeypatch):
    """Fail any socket connection that is not to the loopback, and record the attempt."""
    outside: list[object] = []
    connect = socket.socket.connect

    def guarded(sock, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and sock.family != socket.AF_UNIX:
            outside.append(address)
            raise OSError(f"test forbids a connection to {address}")
        return connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    return outside


def test_light_compile_saves_reloads_and_evaluates_the_optimised_instructions(
    openai_server, tmp_path, loopback_only, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    script = Script()
    openai_server.script = script
    trainset = write_examples(tmp_path / "train.jsonl", invented(0, 8))
    out = tmp_path / "program.json"
    endpoint = ["--base", "openai", "--model", "m", "--base-url", openai_server.base_url]
    args = ["optimize", *endpoint, "--trainset", str(trainset), "--heldout", "0.25", "--auto", "light"]
    result = invoke(*args, "--out", str(out), "--no-progress")
    assert result.exit_code == 0, result.output + repr(result.exception)

    # The proposer offered both kinds of instruction; MIPROv2 kept a marked one, which answers every case right.
    assert GOOD in script.proposed and BAD in script.proposed
    program = load_program(out)
    assert program.instructions == GOOD
    assert program.base == "openai" and program.model == "m" and program.auto == "light" and program.seed == 0
    assert program.dspy_version == __import__("dspy").__version__
    assert sorted(program.trainset_ids + program.heldout_ids) == [f"toy/{i}" for i in range(8)]
    assert len(program.heldout_ids) == 2 and not set(program.heldout_ids) & set(program.trainset_ids)
    # The base program (the prompted system prompt) has no marker: F1 0 everywhere; the optimised one: F1 1.
    assert (program.train.base, program.train.optimized) == (0.0, 1.0)
    assert (program.heldout_scores.base, program.heldout_scores.optimized) == (0.0, 1.0)
    assert program.train.n == 6 and program.heldout_scores.n == 2
    assert all(d.incorrect_spans == [d.answer.rstrip(".").split()[-1]] for d in program.demos)
    # Every call went through shambench's client: the server saw exactly the requests counted.
    assert program.usage.requests == len(openai_server.log) > 20
    assert program.usage.lm_calls == program.usage.requests + program.usage.cache_hit
    assert program.usage.cache_hit > 0  # the score reports replay the compile's requests from the cache
    assert "held-out" in result.output and "training" in result.output and "+1.000" in result.output
    assert f"LM calls: {program.usage.lm_calls}" in result.output
    assert not loopback_only

    # Evaluation on unseen examples sends the optimised instructions and demos, and scores them.
    openai_server.reset()
    fresh = write_examples(tmp_path / "fresh.jsonl", invented(20, 24))
    run_dir = tmp_path / "run"
    result = invoke(
        "eval",
        "--detector",
        f"miprov2:{out}",
        "--base-url",
        openai_server.base_url,
        "--examples",
        str(fresh),
        "--run-dir",
        str(run_dir),
        "--bootstrap",
        "10",
        "--no-progress",
    )
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert len(openai_server.log) == 4
    for req in openai_server.log:
        messages = req.body["messages"]
        assert messages[0]["role"] == "system" and messages[0]["content"].endswith(GOOD)
        assert SYSTEM not in messages[0]["content"]
        shown = [json.loads(m["content"])["incorrect_spans"] for m in messages if m["role"] == "assistant"]
        assert shown == [d.incorrect_spans for d in program.demos]
        assert "response_format" not in req.body
    results = json.loads((run_dir / "results.json").read_text())
    assert results["partitions"]["open_qa/toy"]["token"]["f1"] == 1.0
    config = json.loads((run_dir / "config.json").read_text())
    assert config["params"]["prompt_hash"] == program.prompt.hash and config["params"]["base"] == "openai"
    assert not loopback_only


def test_cost_is_priced_and_a_rerun_with_the_same_seed_replays_from_the_cache(openai_server, tmp_path):
    openai_server.script = Script()
    trainset = write_examples(tmp_path / "train.jsonl", invented(0, 6))
    config = dict(
        base="openai",
        trainset=str(trainset),
        heldout="0.34",
        endpoint={"model": "gpt-5-mini", "base_url": openai_server.base_url},
    )
    from shambench.detectors.miprov2_compile import optimize

    first = optimize(OptimizeConfig(out=str(tmp_path / "a.json"), **config))
    sent = len(openai_server.log)
    assert first.usage.requests == sent and first.usage.input_tokens > 0
    assert first.usage.cost == pytest.approx(cost_of("gpt-5-mini", first.usage.input_tokens, first.usage.output_tokens))
    assert first.usage.cost > 0
    second = optimize(OptimizeConfig(out=str(tmp_path / "b.json"), **config))
    assert len(openai_server.log) == sent  # nothing new was asked
    assert second.usage.requests == 0 and second.usage.cache_hit == second.usage.lm_calls
    assert (second.instructions, second.demos) == (first.instructions, first.demos)


# --- example selection and the metric ------------------------------------------------------------------------


def test_share_split_holds_out_per_partition_and_is_seeded():
    examples = invented(0, 5, "a") + invented(0, 10, "b")
    train, held = split_share(examples, 0.2, seed=0)
    assert sorted(ex.dataset for ex in held) == ["a", "b", "b"]
    assert len(train) + len(held) == 15 and not {e.id for e in train} & {e.id for e in held}
    assert split_share(examples, 0.2, seed=0) == (train, held)
    assert [e.id for e in split_share(examples, 0.2, seed=1)[1]] != [e.id for e in held]


def test_token_f1_metric_scores_placed_strings_with_the_scorer():
    import dspy

    from shambench.detection.detector import Monitor

    ex = invented(0, 1)[0]  # "The river Ilsa0 flows through Varn0."
    metric = TokenF1([ex], Monitor())
    gold = dspy.Example(id=ex.id)
    assert metric(gold, dspy.Prediction(incorrect_spans=["Varn0"])) == 1.0
    assert metric(gold, dspy.Prediction(incorrect_spans=["varn0"])) == 1.0  # placed case-insensitively
    # Tokens: The river Ilsa0 flows through Varn0 . -> predicted {river, Varn0}, gold {Varn0}: P 1/2, R 1, F1 2/3.
    assert metric(gold, dspy.Prediction(incorrect_spans=["river", "Varn0"])) == pytest.approx(2 / 3)
    assert metric(gold, dspy.Prediction(incorrect_spans=["Atlantis"])) == 0.0
    assert metric(gold, dspy.Prediction(incorrect_spans=None)) == 0.0


def test_heldout_from_a_file_leaves_out_trainset_ids(tmp_path):
    train = write_examples(tmp_path / "t.jsonl", invented(0, 4))
    held = write_examples(tmp_path / "h.jsonl", invented(2, 7))
    tr, he, described = train_and_heldout(
        OptimizeConfig(base="openai", out="x", trainset=str(train), heldout=str(held))
    )
    assert [e.id for e in tr] == [f"toy/{i}" for i in range(4)]
    assert [e.id for e in he] == ["toy/4", "toy/5", "toy/6"] and described == str(held)


@pytest.mark.parametrize(
    "lines, extra, message",
    [
        (0, [], "holds no examples"),
        (1, ["--heldout", "0.5"], "at least 2 training examples"),
        (4, ["--heldout", "1.5"], "between 0 and 1"),
        (4, ["--heldout", "SAME"], "no example outside the trainset"),
    ],
)
def test_bad_trainsets_give_one_clear_error(openai_server, tmp_path, lines, extra, message):
    trainset = write_examples(tmp_path / "train.jsonl", invented(0, lines))
    extra = [str(trainset) if a == "SAME" else a for a in extra]
    result = invoke(
        "optimize", "--base", "openai", "--model", "m", "--base-url", openai_server.base_url,
        "--trainset", str(trainset), *extra, "--out", str(tmp_path / "p.json"), "--no-progress",
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and message in result.output
    assert not openai_server.log and not (tmp_path / "p.json").exists()


def test_optimize_help_explains_the_options():
    result = invoke("optimize", "--help")
    assert result.exit_code == 0
    for option in ("--base", "--trainset", "--heldout", "--auto", "--out", "--model", "--base-url", "--api-key-env"):
        assert option in result.output
    assert "light" in result.output and "per-example token F1" in result.output


@pytest.mark.shared_data
def test_light_compile_on_the_real_mushroom_dev_set(openai_server, tmp_path):
    from shambench.data.benchmark import load_benchmark
    from shambench.detectors.miprov2 import gold_strings

    data = require_shared("mushroom")
    examples = (
        load_benchmark("mushroom", "dev", data.parent).examples
        + load_benchmark("mushroom", "test", data.parent).examples
    )
    openai_server.script = Script({ex.response: gold_strings(ex) for ex in examples})
    out = tmp_path / "program.json"
    result = invoke(
        "optimize", "--base", "openai", "--model", "m", "--base-url", openai_server.base_url,
        "--trainset", "dev", "--datasets", "mushroom", "--data-dir", str(data.parent),
        "--heldout-limit", "3", "--max-demos", "0", "--out", str(out), "--no-progress",
    )  # fmt: skip
    assert result.exit_code == 0, result.output + repr(result.exception)
    program = load_program(out)
    dev_ids = [ex.id for ex in load_benchmark("mushroom", "dev", data.parent).examples]
    assert program.trainset_ids == dev_ids and len(dev_ids) == 5
    assert len(program.heldout_ids) == 3 and not set(program.heldout_ids) & set(dev_ids)
    assert program.heldout == "test, first 3 per partition"
    assert program.demos == base_prompt().demos  # instructions-only: the worked examples stay
    assert MARKER in program.instructions
    assert (
        program.train.optimized > program.train.base and program.heldout_scores.optimized > program.heldout_scores.base
    )
    assert program.train.optimized == pytest.approx(1.0) and program.heldout_scores.optimized == pytest.approx(1.0)


class OneBadProposal(Script):
    """The script above, except that the first instruction proposal is prose DSPy's JSON adapter cannot read."""

    def __init__(self):
        super().__init__()
        self.spoiled: str | None = None

    def __call__(self, req) -> str:
        fields = output_fields(req.body["messages"][0]["content"])
        if "proposed_instruction" in fields and self.spoiled in (None, req.key):
            self.spoiled = req.key
            return "Sure! Here is a better instruction: be precise."
        return super().__call__(req)


def test_an_unparsable_proposal_is_a_failed_trial_and_a_rerun_asks_again(openai_server, tmp_path):
    script = OneBadProposal()
    openai_server.script = script
    trainset = write_examples(tmp_path / "train.jsonl", invented(0, 8))
    endpoint = ["--base", "openai", "--model", "m", "--base-url", openai_server.base_url]
    args = ["optimize", *endpoint, "--trainset", str(trainset), "--heldout", "0.25", "--auto", "light", "--no-progress"]
    first = invoke(*args, "--out", str(tmp_path / "a.json"))
    assert first.exit_code == 0, first.output + repr(first.exception)
    program = load_program(tmp_path / "a.json")
    assert (program.usage.unparsed, program.usage.failed_proposals) == (1, 1)
    assert "1 model replies could not be parsed (1 of them instruction proposals)" in first.output
    # The good instruction was still proposed and kept.
    assert program.instructions == GOOD
    # The bad reply was not cached: a re-run asks that request again (and only requests not answered before).
    asked = [r for r in openai_server.log if r.key == script.spoiled]
    openai_server.reset()
    second = invoke(*args, "--out", str(tmp_path / "b.json"))
    assert second.exit_code == 0, second.output + repr(second.exception)
    assert len(asked) == 1 and [r.key for r in openai_server.log] == [script.spoiled]
    assert load_program(tmp_path / "b.json").usage.failed_proposals == 1


class GarbledProposals(Script):
    """The script above, except that every instruction proposal is prose DSPy's JSON adapter cannot read."""

    def __call__(self, req) -> str:
        if output_fields(req.body["messages"][0]["content"]) == ["proposed_instruction"]:
            return "Sure! Here is a better instruction: be precise."
        return super().__call__(req)


def test_a_server_garbling_every_proposal_leaves_the_run_going_on_the_current_instructions(openai_server, tmp_path):
    openai_server.script = GarbledProposals()
    trainset = write_examples(tmp_path / "train.jsonl", invented(0, 8))
    out = tmp_path / "p.json"
    endpoint = {"model": "m", "base_url": openai_server.base_url}
    config = OptimizeConfig(base="openai", out=str(out), trainset=str(trainset), heldout="0.25", endpoint=endpoint)
    from shambench.detectors.miprov2_compile import optimize

    program = optimize(config)
    fields = [output_fields(r.body["messages"][0]["content"]) for r in openai_server.log]
    proposals = [r for r, asked in zip(openai_server.log, fields) if asked == ["proposed_instruction"]]
    # Every proposal failed, each was counted once (and as an unparsed reply), and MIPROv2 still searched and
    # finished: its candidates are all the base instructions, so the program keeps them and scores as before.
    assert len(proposals) > 1 and all(r.attempt == 1 for r in proposals)
    assert program.usage.failed_proposals == program.usage.unparsed == len(proposals)
    assert program.instructions == base_prompt().instructions
    assert (program.train.base, program.train.optimized) == (0.0, 0.0)
    assert load_program(out).usage.failed_proposals == len(proposals)
    assert program.usage.failed_calls == 0  # the proposals' HTTP calls themselves succeeded


def test_failed_calls_are_counted_with_their_first_reasons():
    from shambench.detectors.miprov2 import OptimisationUsage
    from shambench.detectors.miprov2_compile import add_usage, score_prompts
    from shambench.llm.wire import Usage
    from shambench.schema import Prediction

    class Failing:
        def predict(self, examples, monitor):
            for i, ex in enumerate(examples):
                error = f"HTTP 500: boom {i}" if i % 2 else None
                yield Prediction(id=ex.id, error=error, meta={"usage": {"requests": 2 if error else 1}})

    examples = invented(0, 14)
    _, usage = score_prompts([Failing()], examples, None, OptimisationUsage())
    # 7 of the 14 predictions failed; the program file keeps the first five reasons.
    assert (usage.lm_calls, usage.requests, usage.failed_calls) == (14, 21, 7)
    assert usage.failures == [f"HTTP 500: boom {i}" for i in (1, 3, 5, 7, 9)]
    more = add_usage(usage, Usage(requests=1), failures=["timeout"])
    assert more.failed_calls == 8 and len(more.failures) == 5


class DeepProposals(Script):
    """The script above, except that every instruction proposal is JSON nested past Python's recursion limit."""

    def __call__(self, req) -> str:
        if output_fields(req.body["messages"][0]["content"]) == ["proposed_instruction"]:
            return '{"proposed_instruction": ' + "[" * 5000 + "]" * 5000 + "}"
        return super().__call__(req)


def test_a_proposal_nested_too_deep_is_an_unparsable_proposal_not_a_crash(openai_server, tmp_path):
    openai_server.script = DeepProposals()
    trainset = write_examples(tmp_path / "train.jsonl", invented(0, 8))
    endpoint = {"model": "m", "base_url": openai_server.base_url}
    config = OptimizeConfig(base="openai", out=str(tmp_path / "p.json"), trainset=str(trainset), heldout="0.25",
                            endpoint=endpoint)  # fmt: skip
    from shambench.detectors.miprov2_compile import optimize

    program = optimize(config)
    proposals = [
        r for r in openai_server.log if output_fields(r.body["messages"][0]["content"]) == ["proposed_instruction"]
    ]
    # As a garbled proposal: each counted once, unparsed, and the run kept the current instructions.
    assert len(proposals) > 1 and program.usage.failed_proposals == program.usage.unparsed == len(proposals)
    assert program.instructions == base_prompt().instructions


def test_a_call_miprov2_cannot_go_without_failing_for_good_is_one_error_line(openai_server, tmp_path, monkeypatch):
    from tests.openai_server import Fault

    monkeypatch.setattr("shambench.llm.client.backoff", lambda *args: 0.0)  # the fault repeats: no need to wait
    openai_server.faults = lambda req: Fault("malformed")
    trainset = write_examples(tmp_path / "train.jsonl", invented(0, 8))
    endpoint = ["--base", "openai", "--model", "m", "--base-url", openai_server.base_url]
    result = invoke("optimize", *endpoint, "--trainset", str(trainset), "--out", str(tmp_path / "p.json"),
                    "--no-progress")  # fmt: skip
    assert result.exit_code == 2 and (result.exception is None or isinstance(result.exception, SystemExit))
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: MIPROv2 stopped: a call it needs failed for good: malformed reply: the reply:1: not valid JSON "
        "(Expecting value at column 25); expected a completion as JSON after 7 attempts"
    ]
    assert not (tmp_path / "p.json").exists()

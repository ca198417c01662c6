"""The MIPROv2 span program and its detector: rendering (the same messages DSPy sends), program files and their
errors, endpoint overrides, resume checks and the `<base>-miprov2` presets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.detection.detector import create_detector, detectors
from shambench.detectors.miprov2 import (
    Demo,
    OptimisationUsage,
    ProgramFile,
    Prompt,
    Scores,
    base_prompt,
    dspy_version,
    load_program,
    render,
    span_program,
)
from shambench.detectors.prompts import SYSTEM, WORKED_EXAMPLES
from shambench.errors import DataError, RunDirError
from shambench.runs.lifecycle import resumed_detector
from shambench.runs.rundir import stamped_config
from shambench.schema import Example

EXAMPLE = Example(
    id="x/1",
    dataset="x",
    task="context_qa",
    question="When did the library open?",
    context="The Harwick Library opened in 1962.",
    response="It opened in 1926.",
    hallu_spans=[[13, 17]],
)
PROMPT = Prompt(
    instructions="Mark the wrong years.",
    demos=[Demo(question="(none)", context="(none)", answer="Rome is in Spain.", incorrect_spans=["Spain"])],
)


def program_file(**changes) -> ProgramFile:
    fields = dict(
        dspy_version=dspy_version(),
        shambench_version="0.1.0",
        created_at="2026-01-01T00:00:00+00:00",
        base="gpt5mini-reasoning",
        model="gpt-5-mini",
        api_key_env="OPENAI_API_KEY",
        generation={"reasoning_effort": "medium", "max_completion_tokens": 32000},
        instructions=PROMPT.instructions,
        demos=PROMPT.demos,
        auto="light",
        seed=0,
        max_demos=4,
        trainset="dev",
        trainset_ids=["a", "b"],
        heldout="test, first 5 per partition",
        heldout_ids=["c"],
        train=Scores(n=2, base=0.2, optimized=0.5),
        heldout_scores=Scores(n=1, base=0.3, optimized=0.25),
        usage=OptimisationUsage(lm_calls=10, requests=8, cache_hit=2),
    )
    return ProgramFile(**{**fields, **changes})


def save(path: Path, program: ProgramFile | dict | str) -> Path:
    text = (
        program
        if isinstance(program, str)
        else json.dumps(program.model_dump() if isinstance(program, ProgramFile) else program)
    )
    path.write_text(text, encoding="utf-8")
    return path


def test_base_program_is_the_prompted_prompt_with_its_worked_examples():
    prompt = base_prompt()
    assert prompt.instructions == SYSTEM
    assert [(d.answer, d.incorrect_spans) for d in prompt.demos] == [(a, s) for _, _, a, s in WORKED_EXAMPLES]
    assert prompt.demos[0].context == "(none)"  # an open-domain worked example shows no information


def test_rendered_messages_are_the_ones_dspy_sends():
    import dspy
    from dspy.utils.dummies import DummyLM

    lm = DummyLM([{"incorrect_spans": ["1926"]}], adapter=dspy.JSONAdapter())
    program = span_program(PROMPT)
    inputs = {"question": EXAMPLE.question, "context": EXAMPLE.context, "answer": EXAMPLE.response}
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        out = program(**inputs)
    assert out.incorrect_spans == ["1926"]
    sent = lm.history[-1]["messages"]
    assert render(PROMPT)(EXAMPLE) == sent
    # Instructions close the system message; the demo is a user/assistant pair; the case comes last.
    assert sent[0]["content"].endswith("Mark the wrong years.")
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert json.loads(sent[2]["content"]) == {"incorrect_spans": ["Spain"]}
    assert "[[ ## answer ## ]]\nIt opened in 1926." in sent[3]["content"]


def test_prompt_hash_follows_instructions_and_demos():
    assert PROMPT.hash == Prompt(**PROMPT.model_dump()).hash and len(PROMPT.hash) == 16
    assert Prompt(instructions="Other.", demos=PROMPT.demos).hash != PROMPT.hash
    assert Prompt(instructions=PROMPT.instructions).hash != PROMPT.hash


def test_detector_takes_the_program_endpoint_and_the_command_line_overrides(tmp_path):
    path = save(tmp_path / "p.json", program_file())
    det = create_detector(f"miprov2:{path}")
    assert det.endpoint.model == "gpt-5-mini" and det.endpoint.base_url is None
    assert det.generation == {"reasoning_effort": "medium", "max_completion_tokens": 32000}
    assert det.endpoint.timeout == 600  # from the base preset gpt5mini-reasoning
    assert det.body() == det.generation  # no response_format: the adapter's prompt states the format
    assert det.prompt_hash == PROMPT.hash and det.params()["base"] == "gpt5mini-reasoning"
    other = create_detector(f"miprov2:{path}", model="m", base_url="http://127.0.0.1:9/v1", temperature=0)
    assert (other.endpoint.model, other.endpoint.base_url) == ("m", "http://127.0.0.1:9/v1")
    assert other.generation["temperature"] == 0
    # What `--resume` rebuilds is the same detector, and a changed program (another prompt) is refused.
    made = stamped_config(f"miprov2:{path}", "miprov2", det.params(), [])
    assert resumed_detector(made, {}).params() == det.params()
    with pytest.raises(RunDirError, match="resuming would change prompt_hash"):
        resumed_detector(stamped_config(f"miprov2:{path}", "miprov2", det.params() | {"prompt_hash": "0" * 16}, []), {})
    with pytest.raises(DataError, match="optimised from 'gpt5mini-reasoning'"):
        resumed_detector(stamped_config(f"miprov2:{path}", "miprov2", det.params() | {"base": "qwen3-4b"}, []), {})


def test_evaluation_places_the_returned_strings(openai_server, tmp_path):
    openai_server.script = lambda req: '{"incorrect_spans": ["1926", "on Mars"]}'
    path = save(tmp_path / "p.json", program_file(base="openai", model="m", generation={}))
    det = create_detector(f"miprov2:{path}", base_url=openai_server.base_url)
    [pred] = det.predict([EXAMPLE])
    assert [(s.start, s.end) for s in pred.spans] == [(13, 17)]
    assert pred.meta["unplaced"] == ["on Mars"] and pred.meta["prompt_hash"] == PROMPT.hash
    assert pred.meta["usage"]["requests"] == 1
    assert openai_server.log[0].body["messages"] == render(PROMPT)(EXAMPLE)


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"format": "shambench-miprov2", "dspy_version": ', "p.json:1: not valid JSON"),
        (
            '{"metadata": {"dependency_versions": {"dspy": "3.0.0"}}, "predict": {}}',
            'expected a JSON object with "format"',
        ),
        ("[1, 2]", 'expected a JSON object with "format"'),
        ("OTHER_VERSION", "optimised with DSPy 2.6.0 but DSPy"),
        ("NO_INSTRUCTIONS", "instructions: Field required"),
    ],
)
def test_bad_program_files_give_one_clear_error(tmp_path, content, message):
    data = program_file().model_dump()
    if content == "OTHER_VERSION":
        content = json.dumps({**data, "dspy_version": "2.6.0"})
    elif content == "NO_INSTRUCTIONS":
        content = json.dumps({k: v for k, v in data.items() if k != "instructions"})
    path = save(tmp_path / "p.json", content)
    with pytest.raises(DataError, match=message) as err:
        load_program(path)
    assert str(path) in str(err.value)
    result = CliRunner().invoke(main, ["eval", "--detector", f"miprov2:{path}", "--examples", str(path)])
    assert result.exit_code == 2 and f"error: {path}" in result.output and message in result.output


def test_missing_program_and_missing_argument(tmp_path):
    with pytest.raises(DataError, match="program file not found"):
        create_detector(f"miprov2:{tmp_path / 'nope.json'}")
    with pytest.raises(DataError, match="needs a program file"):
        create_detector("miprov2")


def test_optimised_presets_read_the_program_optimize_saves(tmp_path, monkeypatch):
    monkeypatch.setenv("SHAMBENCH_PROGRAMS_DIR", str(tmp_path))
    names = {e.name for e in detectors.entries()}
    assert {"miprov2", "gpt5mini-miprov2", "gpt5mini-reasoning-miprov2", "qwen3-4b-miprov2"} <= names
    assert "openai-miprov2" not in names  # the generic preset has no model to optimise for
    with pytest.raises(DataError, match="shambench optimize --base gpt5mini-reasoning --trainset dev"):
        create_detector("gpt5mini-reasoning-miprov2")
    save(tmp_path / "gpt5mini-reasoning-miprov2.json", program_file())
    det = create_detector("gpt5mini-reasoning-miprov2")
    assert det.prompt_hash == PROMPT.hash and det.endpoint.model == "gpt-5-mini"


def test_listing_detectors_imports_neither_dspy_nor_torch():
    code = (
        "import sys\nfrom shambench.detection.detector import detectors\nnames = [e.name for e in detectors.entries()]\n"
        "assert 'miprov2' in names\nprint(sorted(m for m in ('dspy', 'torch', 'litellm') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_program_file_never_routes_the_key(tmp_path):
    """A program naming another server or key variable is refused until the command line names it too."""
    path = save(tmp_path / "p.json", program_file(base_url="http://127.0.0.1:9/v1"))
    with pytest.raises(DataError, match=r"pass --base-url http://127.0.0.1:9/v1 to evaluate against that server"):
        create_detector(f"miprov2:{path}")
    assert create_detector(f"miprov2:{path}", base_url="http://127.0.0.1:9/v1").endpoint.base_url
    path = save(tmp_path / "q.json", program_file(api_key_env="AWS_SECRET_ACCESS_KEY"))
    with pytest.raises(DataError, match=r"pass --api-key-env AWS_SECRET_ACCESS_KEY to use it"):
        create_detector(f"miprov2:{path}")
    named = create_detector(f"miprov2:{path}", api_key_env="AWS_SECRET_ACCESS_KEY")
    assert named.endpoint.api_key_env == "AWS_SECRET_ACCESS_KEY"

"""MIPROv2-optimised prompted detectors: a DSPy span-detection program, saved by `shambench optimize`.

The program is one `dspy.Predict` over the signature question, context, answer -> incorrect_spans (a list of
verbatim substrings), rendered by DSPy's JSON adapter, so the model answers `{"incorrect_spans": [...]}` as the
prompted detectors' model does. Before optimisation its instructions are the prompted detectors' system prompt
and its demos their four worked examples; MIPROv2 replaces both.

Evaluation does not go through DSPy's LM: each example's messages are rendered by the same adapter and sent by
the prompted detector's client, so caching, retries, `--resume`, usage and cost work as for `gpt5mini`, and the
returned strings are placed by `shambench.detection.locate`. No `response_format` is sent by default: the adapter's prompt
states the format, and the requests are then byte for byte those of the compile, whose answers the cache holds.

    shambench optimize --base gpt5mini-reasoning --trainset dev --auto light --out program.json
    shambench eval --detector miprov2:program.json --datasets ragtruth
    shambench eval --detector gpt5mini-reasoning-miprov2        # the program `optimize` saved for that base

A program file records the DSPy version that rendered it; another version may render another prompt, so it is
refused rather than silently evaluated with different text.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from platformdirs import user_data_dir
from pydantic import Field, ValidationError

from shambench.detection.detector import detectors
from shambench.errors import DataError
from shambench.llm.wire import Usage
from shambench.paths import cache_dir
from shambench.schema import NAMES_A_KEY, Example, Model
from shambench.structured import json_file

from .prompted import PromptedDetector, make_prompted, presets
from .prompts import SYSTEM, WORKED_EXAMPLES

FORMAT: Final = "shambench-miprov2"
PROGRAMS_ENV = "SHAMBENCH_PROGRAMS_DIR"
INPUTS = ("question", "context", "answer")
NONE = "(none)"
"""What an empty question or context is shown as (the prompted detectors' convention)."""


class Demo(Model):
    """One worked example shown to the model before the case."""

    question: str
    """The question or instruction (`(none)` when the task has none)."""
    context: str
    """The grounding information (`(none)` for open-domain examples)."""
    answer: str
    """The response under check."""
    incorrect_spans: list[str]
    """Its unsupported substrings, in order."""


class Prompt(Model):
    """What a DSPy span program shows the model: its instructions and demos."""

    instructions: str
    """The signature's instructions (the part MIPROv2 rewrites)."""
    demos: list[Demo] = Field(default_factory=list)
    """Few-shot demos, in the order they are shown."""

    @property
    def hash(self) -> str:
        """16 hex digits identifying the rendered template (instructions, demos, adapter and its version)."""
        text = json.dumps([dspy_version(), "JSONAdapter", self.model_dump()], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class OptimisationUsage(Usage):
    """What an optimisation consumed (`Usage`: requests, tokens, cost, cache hits), and how its calls went."""

    lm_calls: int = 0
    """Calls DSPy made to the model (answered by the server or by the response cache)."""
    unparsed: int = 0
    """Replies DSPy could not parse: each is a failed trial, demo or proposal (and is not kept in the cache)."""
    failed_proposals: int = 0
    """Of those, instruction proposals: the predictor keeps its current instructions for that candidate."""
    failed_calls: int = 0
    """Calls that failed for good (DSPy scored those examples as wrong; so do the score reports)."""
    failures: list[str] = Field(default_factory=list)
    """The reasons of the first few failed calls."""


class Scores(Model):
    """Per-example token F1 (SHAM-Bench), averaged over a set of examples, before and after optimisation."""

    n: int
    """Examples."""
    base: float
    """The unoptimised program (prompted system prompt and worked examples)."""
    optimized: float
    """The optimised program."""


class ProgramFile(Model):
    """A saved MIPROv2 span program (`shambench optimize --out`), read by `--detector miprov2:FILE`."""

    format: Literal["shambench-miprov2"] = FORMAT
    """Marks the file as a shambench MIPROv2 program."""
    dspy_version: str
    """DSPy version that rendered and optimised the prompt; loading needs the same one."""
    shambench_version: str
    """shambench version that wrote the file."""
    created_at: str
    """UTC time the file was written."""
    base: str
    """The prompted preset the program was optimised from (endpoint and generation defaults)."""
    model: str
    """Model the program was optimised with."""
    base_url: str | None = None
    """Endpoint it was optimised against (None: OpenAI); `--base-url` overrides it at evaluation."""
    api_key_env: Annotated[str, NAMES_A_KEY]
    """Environment variable that held the key (never the key)."""
    generation: dict[str, Any] = Field(default_factory=dict)
    """Request-body parameters used during optimisation and, by default, evaluation."""
    instructions: str
    """The optimised instructions."""
    demos: list[Demo] = Field(default_factory=list)
    """The optimised few-shot demos."""
    auto: str
    """MIPROv2 budget: light, medium or heavy."""
    seed: int
    """MIPROv2 seed."""
    max_demos: int
    """Largest number of bootstrapped and of labelled demos MIPROv2 could choose."""
    trainset: str
    """How the training examples were selected (`dev`, a split or a file)."""
    trainset_ids: list[str]
    """Ids of the examples MIPROv2 optimised on."""
    heldout: str
    """How the held-out examples were selected."""
    heldout_ids: list[str]
    """Ids of the held-out examples, never shown to MIPROv2."""
    train: Scores
    """Scores on the training examples."""
    heldout_scores: Scores
    """Scores on the held-out examples: a large gap to `train` means over-adaptation."""
    usage: OptimisationUsage
    """LM calls, requests, tokens and cost of the optimisation (including the score reports)."""

    @property
    def prompt(self) -> Prompt:
        """The instructions and demos."""
        return Prompt(instructions=self.instructions, demos=self.demos)


def import_dspy() -> Any:
    """DSPy, imported offline: LiteLLM's packaged price map instead of a download, DSPy's disk cache inside
    shambench's cache directory (unless the environment already says otherwise)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("DSPY_CACHEDIR", str(cache_dir() / "dspy"))
    import dspy

    return dspy


def dspy_version() -> str:
    """The installed DSPy version (read from package metadata, without importing DSPy)."""
    return metadata.version("dspy")


def base_prompt() -> Prompt:
    """The unoptimised program: the prompted detectors' system prompt and their worked examples as demos."""
    demos = [
        Demo(question=q or NONE, context=c or NONE, answer=a, incorrect_spans=spans)
        for q, c, a, spans in WORKED_EXAMPLES
    ]
    return Prompt(instructions=SYSTEM, demos=demos)


def inputs_of(example: Example) -> dict[str, str]:
    """The program's inputs for one example."""
    return {
        "question": example.question.strip() or NONE,
        "context": example.context.strip() or NONE,
        "answer": example.response,
    }


def gold_strings(example: Example) -> list[str]:
    """The gold spans of an example as the substrings the program should return."""
    return [example.response[s.start : s.end] for s in example.hallu_spans]


def span_signature(instructions: str) -> Any:
    """The DSPy signature question, context, answer -> incorrect_spans, with the given instructions."""
    dspy = import_dspy()
    return dspy.Signature(
        {
            "question": (str, dspy.InputField(desc="the question or instruction the answer responds to")),
            "context": (str, dspy.InputField(desc="information the answer must be based on, if any")),
            "answer": (str, dspy.InputField(desc="the answer to check")),
            "incorrect_spans": (
                list[str],
                dspy.OutputField(desc="unsupported substrings of the answer, copied verbatim, in order"),
            ),
        },
        instructions,
    )


def span_program(prompt: Prompt) -> Any:
    """A `dspy.Predict` span program showing `prompt`'s instructions and demos."""
    dspy = import_dspy()
    program = dspy.Predict(span_signature(prompt.instructions))
    program.demos = [dspy.Example(**demo.model_dump()) for demo in prompt.demos]
    return program


def prompt_of(program: Any) -> Prompt:
    """The instructions and demos of a (compiled) span program."""
    demos = [Demo(**{k: demo[k] for k in Demo.model_fields}) for demo in program.demos]
    return Prompt(instructions=program.signature.instructions, demos=demos)


def render(prompt: Prompt) -> Any:
    """A function giving an example's chat messages as DSPy's JSON adapter renders the program for it."""
    dspy = import_dspy()
    adapter = dspy.JSONAdapter()
    signature = span_signature(prompt.instructions)
    demos = [dspy.Example(**demo.model_dump()) for demo in prompt.demos]
    return lambda example: adapter.format(signature, demos, inputs_of(example))


def programs_dir() -> Path:
    """Where the programs of the `*-miprov2` presets live: `$SHAMBENCH_PROGRAMS_DIR`, else the user data dir."""
    return Path(os.environ.get(PROGRAMS_ENV) or Path(user_data_dir("shambench")) / "programs").expanduser()


def preset_program_path(base: str) -> Path:
    """The program file of the `BASE-miprov2` preset (where `shambench optimize --base BASE` saves by default)."""
    return programs_dir() / f"{base}-miprov2.json"


def load_program(path: str | Path) -> ProgramFile:
    """A saved program; DataError naming the file when it is missing, corrupt, not a program or from another DSPy."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: program file not found (create one with `shambench optimize --out {path}`)")
    data = json_file(path, "a program file (JSON, as `shambench optimize` writes)", named=True)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DataError(f'{path}: not a program file: expected a JSON object with "format": "{FORMAT}"')
    if data.get("dspy_version") != dspy_version():
        raise DataError(
            f"{path}: the program was optimised with DSPy {data.get('dspy_version')} but DSPy {dspy_version()} "
            "is installed; another version may render another prompt: install that version or run "
            "`shambench optimize` again"
        )
    try:
        return ProgramFile.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        raise DataError(f"{path}: not a program file: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


class MIPROv2Detector(PromptedDetector):
    """A prompted detector whose prompt is a DSPy span program, rendered by DSPy's JSON adapter."""

    def __init__(self, base: PromptedDetector, prompt: Prompt, base_name: str):
        super().__init__(base.endpoint, base.generation, base.structured, base.min_similarity, base.use_cache)
        self.prompt = prompt
        self.base_name = base_name
        self.prompt_hash = prompt.hash
        self._render = render(prompt)

    def params(self) -> dict[str, Any]:
        return {**super().params(), "base": self.base_name}

    def messages(self, example: Example) -> list[dict[str, str]]:
        return self._render(example)


def program_detector(
    prompt: Prompt,
    base: str,
    model: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    generation: dict[str, Any] | None = None,
    structured: bool | str | None = None,
    **options: Any,
) -> MIPROv2Detector:
    """A detector showing `prompt`, on the endpoint of preset `base` with the given overrides (see `make_prompted`)."""
    if base not in presets():
        raise DataError(f"unknown base preset {base!r} (known: {', '.join(sorted(presets()))})")
    prompted = make_prompted(
        base,
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        generation=generation,
        structured=False if structured is None else structured,
        **options,
    )
    return MIPROv2Detector(prompted, prompt, base)


def make_miprov2(
    program: str,
    model: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    generation: dict[str, Any] | None = None,
    base: str | None = None,
    **options: Any,
) -> MIPROv2Detector:
    """An optimised DSPy span program from a `shambench optimize` file (`miprov2:PROGRAM.json`).

    The file never routes the API key: the variable comes from the command line or the base preset, and a
    `base_url` or `api_key_env` other than the preset's must be given again with --base-url / --api-key-env."""
    saved = load_program(program)
    if base is not None and base != saved.base:
        raise DataError(f"the run used base preset {base!r} but {program} was optimised from {saved.base!r}")
    if base_url is None and saved.base_url and saved.base_url != presets()[saved.base].base_url:
        raise DataError(
            f"{program} was optimised against {saved.base_url}; the API key is sent only where the command line "
            f"says, so pass --base-url {saved.base_url} to evaluate against that server (or another --base-url)"
        )
    preset = presets().get(saved.base)
    if api_key_env is None and preset is not None and saved.api_key_env != preset.api_key_env:
        raise DataError(
            f"{program} was optimised with the key in ${saved.api_key_env}; a file never chooses which variable's "
            f"secret is sent, so pass --api-key-env {saved.api_key_env} to use it (or another --api-key-env)"
        )
    return program_detector(
        saved.prompt,
        saved.base,
        model=model or saved.model,
        base_url=base_url,
        api_key_env=api_key_env,
        generation=saved.generation if generation is None else generation,
        **options,
    )


@detectors.register("miprov2", family="prompted")
def miprov2(program: str | None = None, **params: Any) -> MIPROv2Detector:
    """A MIPROv2-optimised DSPy span program: miprov2:PROGRAM.json (from `shambench optimize`)."""
    if not program:
        raise DataError("--detector miprov2 needs a program file: --detector miprov2:PROGRAM.json")
    return make_miprov2(program, **params)


def make_preset(name: str, **params: Any) -> MIPROv2Detector:
    """The optimised program saved for a base preset (`<base>-miprov2`)."""
    base = name.removesuffix("-miprov2")
    path = preset_program_path(base)
    if not path.is_file():
        raise DataError(
            f"--detector {name} needs {path}: create it with "
            f"`shambench optimize --base {base} --trainset dev --auto light` (or set ${PROGRAMS_ENV})"
        )
    return make_miprov2(str(path), **params)


def _register() -> None:
    # The paper's optimised rows: one `<base>-miprov2` name per preset with a fixed model.
    for base, preset in presets().items():
        if preset.model:
            name = f"{base}-miprov2"
            description = f"{base} with its MIPROv2-optimised prompt (from `shambench optimize --base {base}`)"
            detectors.add(name, functools.partial(make_preset, name), description, __name__, family="prompted")


_register()

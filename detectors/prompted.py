"""Prompted detectors: a chat model over an OpenAI-compatible API marks the unsupported spans of each response.

Each preset in `presets.yaml` registers one detector name (`gpt5mini`, `qwen3-4b-thinking`, ..., and `openai`
for any model). The model gets the prompt of `prompts.py`, answers `{"incorrect_spans": [...]}`, and every
string is placed in the response by `shambench.locate` (exact, then case/whitespace-insensitive, then fuzzy).
Each prediction keeps in `meta` the prompt hash, the parsed strings, their placements, the unplaced strings and
the usage; failures keep their reason in `error` and are retried by `shambench eval --resume`.

    shambench eval --detector gpt5mini --datasets mushroom
    shambench eval --detector qwen3-4b --base-url http://gpu-box:8000/v1 -p temperature=0
    shambench eval --detector openai --model my-model --base-url http://127.0.0.1:8080/v1 -p structured=false
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator, Sequence
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel, Field

from shambench.detector import Detector, Monitor, detectors
from shambench.io import DataError
from shambench.schema import Example, Prediction

from .prompts import PROMPT_HASH, RESPONSE_FORMAT, messages_for, parse_spans

# Request-body parameters a preset or `-p` may set (anything else is a typo until proven otherwise).
GENERATION_KEYS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "reasoning_effort",
        "verbosity",
        "seed",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "extra_body",
    }
)


class Preset(BaseModel):
    """A named configuration of the prompted detector, read from `presets.yaml`."""

    description: str
    """One line for `shambench list detectors`."""
    model: str | None = None
    """Model name as the server knows it; None means the user must give --model."""
    base_url: str | None = None
    """OpenAI-compatible base URL; None means OpenAI's API."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key."""
    max_concurrency: int = Field(default=16, ge=1)
    """Requests in flight at once."""
    timeout: float = Field(default=120.0, gt=0)
    """Seconds per request."""
    structured: bool = True
    """Ask for structured output (`response_format` with the JSON schema)."""
    generation: dict[str, Any] = Field(default_factory=dict)
    """Request-body parameters (temperature, max_tokens, reasoning_effort, extra_body, ...)."""


@functools.cache
def presets() -> dict[str, Preset]:
    """The presets shipped in `presets.yaml`, by name."""
    text = resources.files(__package__).joinpath("presets.yaml").read_text(encoding="utf-8")
    return {name: Preset.model_validate(entry) for name, entry in yaml.safe_load(text).items()}


def generation_params(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`base` updated by `overrides`; `enable_thinking` goes to `extra_body.chat_template_kwargs`."""
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if key == "enable_thinking":
            out.setdefault("extra_body", {}).setdefault("chat_template_kwargs", {})["enable_thinking"] = bool(value)
        elif key in GENERATION_KEYS:
            out[key] = value
        else:
            known = ", ".join(sorted(GENERATION_KEYS | {"enable_thinking"}))
            raise DataError(f"unknown parameter {key!r} for a prompted detector (known: {known})")
    return out


class PromptedDetector(Detector):
    """Asks a chat model for the unsupported spans of each response and places them in the response."""

    family = "prompted"
    prompt_hash = PROMPT_HASH
    """Hash of the prompt template, recorded with every prediction (a subclass with its own prompt sets its own)."""

    def __init__(
        self,
        endpoint: Any,
        generation: dict[str, Any],
        structured: bool,
        min_similarity: float,
        use_cache: bool = True,
    ):
        self.endpoint = endpoint
        self.generation = generation
        self.structured = structured
        self.min_similarity = min_similarity
        self.use_cache = use_cache

    def params(self) -> dict[str, Any]:
        # Everything that fixes the output, in the factory's own keywords, so `--resume` rebuilds this detector.
        return {
            **self.endpoint.identity(),
            "generation": self.generation,
            "structured": self.structured,
            "min_similarity": self.min_similarity,
            "prompt_hash": self.prompt_hash,
        }

    def messages(self, example: Example) -> list[dict[str, str]]:
        """The chat messages asking for the incorrect spans of one example (the hook a subclass's prompt uses)."""
        return messages_for(example)

    def _explained(self, reason: str) -> str:
        """A failure reason, with the likely fix when a server rejected the structured-output request."""
        if self.structured and reason.startswith(("HTTP 400", "HTTP 422")):
            return f"{reason} (if the server does not support structured outputs, rerun with -p structured=false)"
        return reason

    def body(self) -> dict[str, Any]:
        """The generation parameters sent with every request."""
        return {**self.generation, "response_format": RESPONSE_FORMAT} if self.structured else dict(self.generation)

    def predict(self, examples: Sequence[Example], monitor: Monitor | None = None) -> Iterator[Prediction]:
        from shambench.llm import map_endpoint

        work = functools.partial(self._predict_one, body=self.body())
        yield from map_endpoint(self.endpoint, examples, work, monitor, self.use_cache)

    async def _predict_one(self, client: Any, example: Example, body: dict[str, Any]) -> Prediction:
        from shambench.llm import LLMError
        from shambench.locate import locate

        meta: dict[str, Any] = {"prompt_hash": self.prompt_hash}
        try:
            reply = await client.chat(self.messages(example), body, accept=spans_of_reply)
        except LLMError as err:
            meta["usage"] = err.usage.model_dump()
            return Prediction(id=example.id, error=self._explained(err.reason), raw=err.text, meta=meta)
        placements = locate(example.response, reply.parsed, self.min_similarity)
        unplaced = [p.text for p in placements if not p.placed]
        if unplaced:
            client.on_count("unplaced", len(unplaced))
        meta.update(
            request=reply.key,
            usage=reply.usage.model_dump(),
            finish_reason=reply.finish_reason,
            parsed=reply.parsed,
            placements=[p.model_dump(exclude={"text"}) for p in placements],
            unplaced=unplaced,
            n_unplaced=len(unplaced),
        )
        spans = [p.as_span() for p in placements if p.placed]
        return Prediction(id=example.id, spans=spans, raw=reply.text, meta=meta)


def spans_of_reply(reply: Any) -> list[str]:
    """The quoted strings of a model reply; the ValueError says when the reply was cut off by the token limit."""
    try:
        return parse_spans(reply.text)
    except ValueError as err:
        if reply.finish_reason == "length":
            raise ValueError(
                f"{err}; the reply hit the token limit (raise -p max_tokens or max_completion_tokens)"
            ) from None
        raise


def make_prompted(
    preset_name: str,
    model: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    max_concurrency: int | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
    backoff_base: float | None = None,
    structured: bool | None = None,
    min_similarity: float | None = None,
    cache: bool = True,
    generation: dict[str, Any] | None = None,
    prompt_hash: str | None = None,
    **overrides: Any,
) -> PromptedDetector:
    """A prompted detector from a preset, with command-line overrides."""
    from shambench.llm import Endpoint
    from shambench.locate import MIN_SIMILARITY

    preset = presets()[preset_name]
    if prompt_hash is not None and prompt_hash != PROMPT_HASH:
        raise DataError(
            f"the run was made with prompt {prompt_hash} but this shambench has prompt {PROMPT_HASH}; "
            "resuming would mix two prompts: start a new run"
        )
    model = model or preset.model
    if not model:
        raise DataError(f"--detector {preset_name} needs --model NAME (and usually --base-url URL)")
    given: dict[str, Any] = {"max_retries": max_retries, "backoff_base": backoff_base}
    endpoint = Endpoint(
        model=model,
        base_url=base_url or preset.base_url,
        api_key_env=api_key_env or preset.api_key_env,
        max_concurrency=max_concurrency or preset.max_concurrency,
        timeout=timeout or preset.timeout,
        **{k: v for k, v in given.items() if v is not None},
    )
    return PromptedDetector(
        endpoint,
        generation_params(preset.generation if generation is None else generation, overrides),
        preset.structured if structured is None else bool(structured),
        MIN_SIMILARITY if min_similarity is None else float(min_similarity),
        use_cache=bool(cache),
    )


def _register() -> None:
    for name, preset in presets().items():
        detectors.add(name, functools.partial(make_prompted, name), preset.description, __name__, family="prompted")


_register()

"""Model presets: a named endpoint and generation settings (`presets.yaml`), shared by everything that asks a model.

The prompted detectors register one detector per preset; the LLM judge (`shambench analyze --judge`), the `llm`
context provider and the math critic take a preset name for their own requests. A preset fixes the model, where
it is served, the key variable, concurrency and timeouts, the structured-output setting and the request body.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from importlib import resources
from typing import Annotated, Any

from pydantic import Field

from shambench.errors import DataError
from shambench.llm.endpoint import Endpoint, EndpointOptions, endpoint_of, endpoint_options
from shambench.llm.negotiation import STRUCTURED_SETTINGS
from shambench.schema import NAMES_A_KEY, Model
from shambench.structured import yaml_value

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


class Preset(Model):
    """A named model configuration, read from `presets.yaml`."""

    description: str
    """One line for `shambench list detectors`."""
    model: str | None = None
    """Model name as the server knows it; None means the user must give --model."""
    base_url: str | None = None
    """OpenAI-compatible base URL; None means OpenAI's API."""
    api_key_env: Annotated[str, NAMES_A_KEY] = "OPENAI_API_KEY"
    """Environment variable holding the API key."""
    max_concurrency: int = Field(default=16, ge=1)
    """Requests in flight at once."""
    timeout: float = Field(default=120.0, gt=0)
    """Seconds per request."""
    structured: bool | str = "auto"
    """Structured output: `auto` (negotiated with the server, see `shambench.llm.negotiation.STRUCTURED_MODES`), one mode
    to force, or false for the prompt alone (true means auto)."""
    generation: dict[str, Any] = Field(default_factory=dict)
    """Request-body parameters (temperature, max_tokens, reasoning_effort, extra_body, ...)."""

    def endpoint_defaults(self) -> EndpointOptions:
        """The endpoint options this preset fixes, in place of those a caller does not give."""
        return {
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "max_concurrency": self.max_concurrency,
            "timeout": self.timeout,
        }

    def defaults(self) -> dict[str, Any]:
        """What each parameter of a detector made from this preset is when not given (`list detectors NAME`)."""
        endpoint = Endpoint.model_fields
        options = {name: endpoint[name].default for name in EndpointOptions.__annotations__}
        return {
            "model": self.model or "required (-p model=NAME)",
            **options,
            **self.endpoint_defaults(),
            "base_url": self.base_url or "OpenAI's API ($OPENAI_BASE_URL)",
            "structured": self.structured,
            "generation": self.generation,
        }


@functools.cache
def presets() -> dict[str, Preset]:
    """The presets shipped in `presets.yaml`, by name."""
    text = resources.files(__package__).joinpath("presets.yaml").read_text(encoding="utf-8")
    entries = yaml_value(text, "presets.yaml", "a mapping of preset name to preset")
    return {name: Preset.model_validate(entry) for name, entry in entries.items()}


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


def structured_setting(value: bool | str) -> str:
    """The structured-output setting of `-p structured=VALUE`: true is `auto`, false is `prompt`, or a mode."""
    if isinstance(value, bool):
        return "auto" if value else "prompt"
    text = str(value).strip().lower()
    named = {"true": "auto", "false": "prompt", "none": "prompt"}.get(text, text)
    if named not in STRUCTURED_SETTINGS:
        raise DataError(f"structured={value!r}: expected true, false or one of {', '.join(STRUCTURED_SETTINGS)}")
    return named


@dataclass(frozen=True)
class ModelSettings:
    """What a preset (with overrides) fixes of the requests: where they go and what their body holds."""

    endpoint: Endpoint
    """Model, server, key variable, concurrency, timeouts and retries."""
    generation: dict[str, Any]
    """Request-body parameters sent with every request."""
    structured: str
    """Structured-output setting: `auto`, `prompt` or one forced mode."""


def preset_settings(
    preset_name: str,
    model: str | None = None,
    structured: bool | str | None = None,
    generation: dict[str, Any] | None = None,
    **overrides: Any,
) -> ModelSettings:
    """The settings of preset `preset_name` with the caller's overrides (`overrides`: endpoint options, see
    `EndpointOptions`, and generation parameters)."""
    if preset_name not in presets():
        raise DataError(f"unknown preset {preset_name!r} (known: {', '.join(sorted(presets()))})")
    preset = presets()[preset_name]
    model = model or preset.model
    if not model:
        raise DataError(f"--detector {preset_name} needs --model NAME (and usually --base-url URL)")
    options, generation_overrides = endpoint_options(overrides)
    return ModelSettings(
        endpoint_of(model, preset.endpoint_defaults(), **options),
        generation_params(preset.generation if generation is None else generation, generation_overrides),
        structured_setting(preset.structured if structured is None else structured),
    )

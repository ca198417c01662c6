"""Prompted detectors: a chat model over an OpenAI-compatible API marks the unsupported spans of each response.

Each preset in `shambench/llm/presets.yaml` registers one detector name (`gpt5mini`, `qwen3-4b-thinking`, ..., and `openai`
for any model). The model gets the prompt of `prompts.py`, answers `{"incorrect_spans": [...]}`, and every
string is placed in the response by `shambench.detection.locate` (exact, then case/whitespace-insensitive, then fuzzy).
Each prediction keeps in `meta` the prompt hash, the parsed strings, their placements, the unplaced strings and
the usage; failures keep their reason in `error` and are retried by `shambench eval --resume`.

    shambench eval --detector gpt5mini --datasets mushroom
    shambench eval --detector qwen3-4b --base-url http://gpu-box:8000/v1 -p temperature=0
    shambench eval --detector openai --model my-model --base-url http://127.0.0.1:8080/v1 -p structured=prompt
"""

from __future__ import annotations

import functools
from typing import Any

from shambench.detection.detector import detectors
from shambench.detection.locate import MIN_SIMILARITY, locate
from shambench.llm.api import APIDetector
from shambench.llm.endpoint import EndpointOptions, takes_endpoint_options
from shambench.llm.presets import preset_settings, presets
from shambench.schema import Example, Prediction

from .prompts import PROMPT_HASH, RESPONSE_FORMAT, ParsedReply, messages_for, parse_reply


class PromptedDetector(APIDetector):
    """Asks a chat model for the unsupported spans of each response and places them in the response."""

    family = "prompted"
    prompt_hash = PROMPT_HASH
    """Hash of the prompt template, recorded with every prediction (a subclass with its own prompt sets its own)."""

    def __init__(
        self,
        endpoint: Any,
        generation: dict[str, Any],
        structured: str,
        min_similarity: float,
        use_cache: bool = True,
    ):
        super().__init__(endpoint, use_cache)
        self.generation = generation
        self.structured = structured
        self.min_similarity = min_similarity

    def params(self) -> dict[str, Any]:
        # Everything that fixes the output, in the factory's own keywords, so `--resume` rebuilds this detector.
        return {
            **super().params(),
            "generation": self.generation,
            "structured": self.structured,
            "min_similarity": self.min_similarity,
            "prompt_hash": self.prompt_hash,
        }

    def messages(self, example: Example) -> list[dict[str, str]]:
        """The chat messages asking for the incorrect spans of one example (the hook a subclass's prompt uses)."""
        return messages_for(example)

    def body(self) -> dict[str, Any]:
        """The generation parameters sent with every request (the client puts `response_format` in the
        negotiated structured-output mode)."""
        if self.structured == "prompt":
            return dict(self.generation)
        return {**self.generation, "response_format": RESPONSE_FORMAT}

    async def predict_one(self, client: Any, example: Example) -> Prediction:
        """Ask for the example's incorrect spans and place each quoted string in the response."""
        from shambench.llm.client import LLMError

        meta: dict[str, Any] = {"prompt_hash": self.prompt_hash}
        try:
            reply = await client.chat(self.messages(example), self.body(), accept=spans_of_reply)
        except LLMError as err:
            meta["usage"] = err.usage.model_dump()
            return Prediction(id=example.id, error=err.reason, raw=err.text, meta=meta)
        parsed: ParsedReply = reply.parsed
        placements = locate(example.response, parsed.spans, self.min_similarity)
        unplaced = [p.text for p in placements if not p.placed]
        if unplaced:
            client.on_count("unplaced", len(unplaced))
        meta.update(
            request=reply.key,
            usage=reply.usage.model_dump(),
            finish_reason=reply.finish_reason,
            served_model=reply.served_model,
            structured=reply.structured,
            parsed=parsed.spans,
            reply_form=parsed.form,
            placements=[p.model_dump(exclude={"text"}) for p in placements],
            unplaced=unplaced,
            n_unplaced=len(unplaced),
        )
        spans = [p.as_span() for p in placements if p.placed]
        return Prediction(id=example.id, spans=spans, raw=reply.text, meta=meta)


def spans_of_reply(reply: Any) -> ParsedReply:
    """The quoted strings of a model reply; the ValueError says when the reply was cut off by the token limit."""
    try:
        return parse_reply(reply.text)
    except ValueError as err:
        if reply.finish_reason == "length":
            raise ValueError(
                f"{err}; the reply hit the token limit (raise -p max_tokens or max_completion_tokens)"
            ) from None
        raise


@takes_endpoint_options
def make_prompted(
    preset_name: str,
    model: str | None = None,
    structured: bool | str | None = None,
    min_similarity: float | None = None,
    cache: bool = True,
    generation: dict[str, Any] | None = None,
    *,
    endpoint: EndpointOptions,
    **overrides: Any,
) -> PromptedDetector:
    """A prompted detector from a preset, with command-line overrides.

    Args:
        model: model name sent to the endpoint (default: the preset's).
        structured: ask for JSON-schema structured output (default: the preset's).
        min_similarity: fuzzy-match threshold (0-1) for placing a quoted span in the response.
        cache: reuse cached answers to identical requests.
        generation: generation settings sent with each request (temperature, max_tokens, ...).
    """
    settings = preset_settings(preset_name, model, structured, generation, **endpoint, **overrides)
    return PromptedDetector(
        settings.endpoint,
        settings.generation,
        settings.structured,
        MIN_SIMILARITY if min_similarity is None else float(min_similarity),
        use_cache=bool(cache),
    )


def _register() -> None:
    for name, preset in presets().items():
        detectors.add(
            name,
            functools.partial(make_prompted, name),
            preset.description,
            __name__,
            family="prompted",
            defaults={**preset.defaults(), "min_similarity": MIN_SIMILARITY},
        )


_register()

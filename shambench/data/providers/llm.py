"""`llm`: evidence retrieved by a model over an OpenAI-compatible API, as SHAM-Bench did with GPT-5.

The model sees the question (and the subject the source names, when it names one), never the response under
test, and writes the encyclopedic evidence needed to check an answer, with the URLs it drew on. It runs through
the prompted-detector machinery: a preset's endpoint and generation settings, the response cache, retries with
backoff, and usage and cost in each record's `meta`. With `web_search=true` the request goes to OpenAI's
Responses API with its web-search tool, so the evidence comes from live pages rather than the model's memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from shambench.data.context import ContextProvider, ContextRecord, context_provider
from shambench.data.providers.wikipedia import page_title
from shambench.detection.detector import Monitor
from shambench.schema import Example

if TYPE_CHECKING:
    from shambench.llm.client import Completion

SYSTEM = (
    "You gather evidence for fact-checking. Given a question (and sometimes the subject it is about), write the "
    "factual background an expert would need to check any answer to it: the relevant facts, names, dates and "
    "numbers, in neutral encyclopedic prose of at most {max_words} words. Do not answer beyond what the evidence "
    'says and do not guess. Reply with JSON only: {{"evidence": "<text>", "sources": ["<url>", ...]}}.'
)


# A value that only stands for one: the prompt's own `<text>`/`<url>`, an ellipsis, or a bracketed blank.
_PLACEHOLDER = re.compile(r"\s*(<[^<>]*>|\.\.\.|…|\[[^\[\]]*\]|\{[^{}]*\}|n/?a|none|null)?\s*", re.IGNORECASE)


def is_placeholder(text: str) -> bool:
    """Whether a value is empty or a placeholder rather than content (`<text>`, `...`, `N/A`, ...)."""
    return _PLACEHOLDER.fullmatch(text) is not None


def parse_evidence(text: str) -> tuple[str, list[str]]:
    """`(evidence, source URLs)` from a reply; ValueError when it holds no evidence, or only a placeholder such as
    the prompt's own `<text>` (placeholder URLs such as `<url>` are dropped from the sources)."""
    from shambench.llm.replies import reply_json_values

    placeholders = []
    for value in reversed(reply_json_values(text)):
        if isinstance(value, dict) and isinstance(value.get("evidence"), str):
            if is_placeholder(value["evidence"]):
                placeholders.append(value["evidence"].strip())
                continue
            sources = [s.strip() for s in value.get("sources") or [] if isinstance(s, str) and not is_placeholder(s)]
            return value["evidence"].strip(), sources
    if placeholders:
        raise ValueError(f"the evidence is empty or a placeholder ({placeholders[0]!r}), not text")
    raise ValueError('no {"evidence": ...} object in the reply')


def question_text(example: Example) -> str:
    """What the model is asked about: the question, and the subject the source names."""
    subject = page_title(example)
    return f"Question: {example.question}" + (f"\nSubject: {subject}" if subject else "")


class LLMProvider(ContextProvider):
    """Asks a chat model (or OpenAI's Responses API with web search) for the evidence behind each question."""

    def __init__(self, preset: str = "gpt5mini", web_search: bool = False, max_words: int = 400, **overrides: Any):
        from shambench.llm.presets import preset_settings

        settings = preset_settings(preset, **overrides)
        self.preset, self.web_search, self.max_words = preset, bool(web_search), int(max_words)
        self.endpoint, self.generation = settings.endpoint, settings.generation

    def params(self) -> dict[str, Any]:
        return {
            "preset": self.preset,
            "model": self.endpoint.model,
            "base_url": self.endpoint.base_url,
            "generation": self.generation,
            "web_search": self.web_search,
            "max_words": self.max_words,
        }

    def fetch(self, examples: Sequence[Example], monitor: Monitor | None = None) -> Iterator[ContextRecord]:
        from shambench.llm.client import map_endpoint

        yield from map_endpoint(self.endpoint, examples, self._one, monitor)

    async def _one(self, client: Any, example: Example) -> ContextRecord:
        from shambench.llm.client import LLMError

        system = SYSTEM.format(max_words=self.max_words)

        def accept(completion: Completion) -> tuple[str, list[str]]:
            return parse_evidence(completion.text)

        try:
            if self.web_search:
                body = {**self.generation, "instructions": system, "tools": [{"type": "web_search"}]}
                reply = await client.respond(question_text(example), body, accept=accept)
            else:
                messages = [{"role": "system", "content": system}, {"role": "user", "content": question_text(example)}]
                reply = await client.chat(messages, self.generation, accept=accept)
        except LLMError as err:
            return self.record(example, error=err.reason, meta={"usage": err.usage.model_dump(), "raw": err.text})
        evidence, sources = reply.parsed
        return self.record(example, evidence, source_urls=sources, meta={"usage": reply.usage.model_dump()})


@context_provider("llm")
def llm_provider(**params: Any) -> ContextProvider:
    """Evidence written by a model for each question (a prompted preset; `-p web_search=true` for OpenAI)."""
    return LLMProvider(**params)

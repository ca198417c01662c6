"""The OpenAI wire format: request bodies as sent, and every reply validated into text, usage and logprobs."""

from __future__ import annotations

import json
import math
from typing import Any, Self

from shambench.errors import (
    MalformedReply,
)
from shambench.io import json_type
from shambench.llm.pricing import cost_of
from shambench.schema import Model
from shambench.structured import json_value

# A token count above this in one reply is a server's garbage, not a bill.
MAX_REPLY_TOKENS = 100_000_000


class Usage(Model):
    """What answering one item consumed in this run (a cache hit consumes no tokens and costs nothing), or, added
    up (`plus`), what many did."""

    input_tokens: int = 0
    """Prompt tokens billed."""
    output_tokens: int = 0
    """Completion tokens billed (reasoning tokens included, as OpenAI counts them)."""
    reasoning_tokens: int = 0
    """Of the output tokens, how many were hidden reasoning."""
    cost: float = 0.0
    """US dollars, from the price table; 0 for models it does not list."""
    requests: int = 0
    """HTTP requests sent (attempts, including retries)."""
    retries: int = 0
    """Attempts after the first."""
    cache_hit: int = 0
    """Answers that came from the response cache (for one item, 1 when its answer did)."""

    def plus(self, other: Usage) -> Self:
        """This usage (of its own class, with its other fields) with `other`'s counts added."""
        return self.model_copy(update={name: getattr(self, name) + getattr(other, name) for name in Usage.model_fields})


class Reply(Model):
    """The validated content of one HTTP-200 completion body."""

    text: str
    """The message content (chat), completion text, or joined `output_text` parts (responses)."""
    reasoning: str | None = None
    """Reasoning text returned beside the content, when any."""
    finish_reason: str | None = None
    """Why generation stopped, when the server said."""
    top_logprobs: dict[str, float] | None = None
    """The first generated token's alternatives, when the body carries log-probabilities."""
    served_model: str | None = None
    """The model name the reply reports (a string `model` field), when it has one."""
    usage: Usage
    """Tokens and cost of this reply."""


def parse_reply(kind: str, body: str, model: str) -> Reply:
    """The completion in an HTTP-200 body of request kind `kind`; MalformedReply (a one-line reason) for
    anything else. Only the transport-level shape is checked here: what the text means is the caller's."""
    try:
        response = json_value(body, "the reply", "a completion as JSON")
    except ValueError as err:
        raise MalformedReply(f"malformed reply: {err}") from None
    return reply_of(kind, response, model)


def reply_of(kind: str, response: Any, model: str, batch: bool = False) -> Reply:
    """The completion in a decoded response body (an HTTP-200 body, or a Batch API output line's `body`), priced
    at Batch API prices when `batch`; MalformedReply (a one-line reason) for anything that is not one."""
    if not isinstance(response, dict):
        raise MalformedReply(f"malformed reply: expected a JSON object, got {json_type(response)}")
    error = response.get("error")
    if error and "choices" not in response and "output" not in response:
        message = error.get("message") if isinstance(error, dict) else error
        raise MalformedReply(f"malformed reply: an error in an HTTP-200 body ({message})")
    text, reasoning, finish = message_parts(kind, response)
    return Reply(
        text=text,
        reasoning=reasoning,
        finish_reason=finish,
        top_logprobs=first_token_logprobs(kind, response),
        served_model=response["model"] if isinstance(response.get("model"), str) else None,
        usage=usage_of(model, response, batch),
    )


def _expect(value: Any, types: type | tuple[type, ...], where: str) -> Any:
    """`value` when it is one of `types`; MalformedReply naming the field otherwise."""
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
        raise MalformedReply(f"malformed reply: {where} is {json_type(value)}")
    return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _token_count(value: Any, where: str) -> int:
    """A token count from a usage record: a whole number in [0, MAX_REPLY_TOKENS]."""
    if value is None:
        return 0
    _expect(value, (int, float), where)
    if value != value or not 0 <= value <= MAX_REPLY_TOKENS or value != int(value):
        raise MalformedReply(f"malformed reply: {where} = {value!r} is not a plausible token count")
    return int(value)


def usage_of(model: str, response: dict[str, Any], batch: bool = False) -> Usage:
    """The token usage of a response body, in Chat Completions or Responses API names (zeros when absent), priced
    at Batch API prices when `batch`; MalformedReply when it is not a record of plausible whole numbers."""
    u = _expect(response.get("usage") or {}, dict, "usage")
    inp = _token_count(u.get("prompt_tokens", u.get("input_tokens")), "usage.prompt_tokens")
    out = _token_count(u.get("completion_tokens", u.get("output_tokens")), "usage.completion_tokens")
    details = u.get("completion_tokens_details") or u.get("output_tokens_details") or {}
    details = _expect(details, dict, "usage.completion_tokens_details")
    reasoning = _token_count(details.get("reasoning_tokens"), "usage.reasoning_tokens")
    return Usage(input_tokens=inp, output_tokens=out, reasoning_tokens=reasoning, cost=cost_of(model, inp, out, batch))


def _responses_parts(response: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """(text, reasoning summary, status) of a Responses API body: its `output_text` parts, joined."""
    output = _expect(response.get("output"), list, "output")
    texts, summaries = [], []
    for item in output:
        _expect(item, dict, "an output item")
        if item.get("type") == "message":
            for part in _expect(item.get("content") or [], list, "a message's content"):
                if _expect(part, dict, "a content part").get("type") == "output_text":
                    texts.append(_expect(part.get("text", ""), str, "output_text.text"))
        elif item.get("type") == "reasoning":
            for part in _expect(item.get("summary") or [], list, "a reasoning summary"):
                summaries.append(_expect(_expect(part, dict, "a summary part").get("text", ""), str, "summary text"))
    status = _expect(response.get("status"), (str, type(None)), "status")
    return "".join(texts), "\n".join(summaries) or None, status


def message_parts(kind: str, response: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """(text, reasoning, finish_reason) of the first choice; MalformedReply when the body has none, or when its
    content or finish reason is not a string."""
    if kind == "responses":
        return _responses_parts(response)
    if kind == "pooling":
        return _pooling_text(response), None, None
    choices = _expect(response.get("choices"), list, "choices")
    if not choices:
        raise MalformedReply("malformed reply: choices is empty")
    choice = _expect(choices[0], dict, "choices[0]")
    finish = _expect(choice.get("finish_reason"), (str, type(None)), "finish_reason")
    if kind == "completions":
        return _expect(choice.get("text") or "", str, "choices[0].text"), None, finish
    message = _expect(choice.get("message"), dict, "choices[0].message")
    text = _expect(message.get("content") or "", str, "message content")
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return text, reasoning if isinstance(reasoning, str) else None, finish


def _pooling_text(response: dict[str, Any]) -> str:
    """The scores of a pooling reply (`data[0].data`: a number, or a list whose last item is the score, per
    pooled position) as a JSON list of floats; MalformedReply for any other shape."""
    data = _expect(response.get("data"), list, "data")
    if not data:
        raise MalformedReply("malformed reply: data is empty")
    rows = _expect(_expect(data[0], dict, "data[0]").get("data"), list, "data[0].data")
    scores = []
    for row in rows:
        value = row[-1] if isinstance(row, list) and row else row
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise MalformedReply("malformed reply: a pooled score is not a finite number")
        scores.append(float(value))
    return json.dumps(scores)


def _logprob(value: Any, where: str) -> float:
    """A finite log-probability."""
    _expect(value, (int, float), where)
    if not math.isfinite(value):
        raise MalformedReply(f"malformed reply: {where} = {value!r} is not a finite number")
    return float(value)


def first_token_logprobs(kind: str, response: dict[str, Any]) -> dict[str, float] | None:
    """Token -> log-probability of the first generated token's alternatives, from either endpoint's body; None
    when the body has none, MalformedReply when they have the wrong shape."""
    if kind in ("responses", "pooling"):
        return None
    choice = response["choices"][0]
    logprobs = _expect(choice.get("logprobs") or {}, dict, "logprobs")
    if kind == "completions":
        top = _expect(logprobs.get("top_logprobs") or [None], list, "logprobs.top_logprobs")
        first = _expect(top[0] if top else None, (dict, type(None)), "logprobs.top_logprobs[0]")
        return {str(k): _logprob(v, "a top log-probability") for k, v in first.items()} if first else None
    content = _expect(logprobs.get("content") or [None], list, "logprobs.content")
    first = _expect(content[0] if content else None, (dict, type(None)), "logprobs.content[0]")
    if not first:
        return None
    out = {}
    for alt in _expect(first.get("top_logprobs") or [], list, "top_logprobs"):
        token = _expect(_expect(alt, dict, "a top_logprobs entry").get("token"), str, "top_logprobs token")
        out[token] = _logprob(alt.get("logprob"), "top_logprobs logprob")
    return out


def wire_body(model: str, body: dict[str, Any]) -> dict[str, Any]:
    """The JSON sent: the model, the body, and `extra_body` merged in (as the openai SDK does)."""
    out = {"model": model, **{k: v for k, v in body.items() if k != "extra_body"}}
    out.update(body.get("extra_body") or {})
    return out


def error_message(status: int, text: str) -> str:
    """`HTTP status: message`, the message taken from an OpenAI-style error body when there is one (in full:
    secrets are redacted before it is shortened)."""
    try:
        err = json_value(text, "the error body", "JSON").get("error")
        message = err.get("message") if isinstance(err, dict) else err
    except (ValueError, AttributeError, RecursionError):
        message = None
    return f"HTTP {status}: {message or text or 'no body'}"

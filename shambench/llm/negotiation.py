"""Structured-output negotiation: the modes a JSON-schema request can be sent in, and which rejections name the format."""

from __future__ import annotations

import re
from typing import Any

# Structured-output modes, most to least constrained; `auto` starts at the first and falls back on rejection.
STRUCTURED_MODES = ("json_schema", "json_object+schema", "json_object", "prompt")


STRUCTURED_SETTINGS = ("auto", *STRUCTURED_MODES)


# Statuses with which servers reject a request body they cannot take (llama-cpp-python answers 500).
REJECTION_STATUS = frozenset({400, 422, 500})


# A server error body that is a request-validation message (pydantic's, FastAPI's): the same request fails again.
_VALIDATION = re.compile(
    r"validation error|literal_error|input should be|field required|extra_forbidden|value_error|unprocessable",
    re.IGNORECASE,
)


def is_validation_error(text: str) -> bool:
    """Whether an error body is a request-validation message: a deterministic rejection, whatever its status."""
    return bool(_VALIDATION.search(text))


def with_structured_mode(body: dict[str, Any], mode: str) -> dict[str, Any]:
    """The body with its `response_format` expressed in `mode` (see `STRUCTURED_MODES`); unchanged without one."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict) or mode == "json_schema":
        return body
    rest = {k: v for k, v in body.items() if k != "response_format"}
    if mode == "prompt":
        return rest
    schema = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else fmt.get("schema")
    if mode == "json_object+schema" and schema is not None:
        return {**rest, "response_format": {"type": "json_object", "schema": schema}}
    return {**rest, "response_format": {"type": "json_object"}}


def next_mode(mode: str) -> str | None:
    """The structured-output mode to fall back to after `mode` was rejected; None after the last."""
    i = STRUCTURED_MODES.index(mode)
    return STRUCTURED_MODES[i + 1] if i + 1 < len(STRUCTURED_MODES) else None

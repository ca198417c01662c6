"""Reading JSON out of model replies: what every API-backed detector, the judge and the evidence provider share.

Models wrap JSON in code fences, put it after a `<think>` block or amid prose; the helpers here find it, and
never guess beyond what is there: each caller decides which value is its answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

FENCE = re.compile(r"```[A-Za-z]*\s*\n?(.*?)```", re.DOTALL)
"""A fenced code block; group 1 is its content."""
THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
"""A reasoning block that some models emit before their answer."""


def json_values(text: str) -> list[Any]:
    """Every JSON object or array that starts at a `{` or `[` of the text and parses, in order."""
    decoder = json.JSONDecoder()
    found = []
    i = 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = decoder.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            found.append(value)
            i = end
        else:
            i += 1
    return found


def reply_json_values(text: str) -> list[Any]:
    """The JSON values of a model reply, after any `<think>` block: those inside code fences when there are
    any, else all in the text. ValueError when the reasoning block never ended (the output was cut off)."""
    if "<think>" in text and "</think>" not in text:
        raise ValueError("the reasoning block never ended (</think> missing): the output was probably cut off")
    text = THINK.sub("", text)
    return [v for block in FENCE.findall(text) for v in json_values(block)] or json_values(text)


def preview(text: str, limit: int = 80) -> str:
    """The reply on one line, cut to `limit` characters, quoted (for failure reasons)."""
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "…")

"""A key of no known shape, the encodings a text may carry a key in and a check that none is in files or output:
what the redactor's tests and every sink's (run folder, response cache, terminal) look for.

The encodings are made with the encoders themselves (json, orjson, urllib, base64, repr), not with the
redactor's code, so a convention the redactor misses shows here.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote, quote_plus

import orjson

ODD_KEY = 'Zq9x"LEAK/canary+7731=\\tail'
"""A key no key shape matches, with a quote, a backslash, a slash and URL-reserved characters (valid in a header)."""


def _json(text: str, **options: bool) -> str:
    return json.dumps(text, **options)[1:-1]


def _orjson(text: str) -> str:
    return orjson.dumps(text).decode()[1:-1]


def _base64_after(prefix: bytes, key: str) -> str:
    """What of base64(prefix + key) depends on the key alone: the characters mixing its bytes with the prefix's
    (or with what would follow) left out."""
    raw = prefix + key.encode()
    body = base64.b64encode(raw).decode().rstrip("=")
    start = {0: 0, 1: 2, 2: 3}[len(prefix) % 3] + len(prefix) // 3 * 4
    return body[start : len(body) - (len(raw) % 3 != 0)]


def encodings(key: str) -> dict[str, str]:
    """Each way a server or a writer may encode `key` in a text, by name."""
    return {
        "plain": key,
        "JSON (json, ASCII)": _json(key),
        "JSON (json, non-ASCII kept)": _json(key, ensure_ascii=False),
        "JSON (orjson)": _orjson(key),
        "JSON, / escaped (PHP)": _json(key).replace("/", "\\/"),
        "JSON twice (json)": _json(_json(key)),
        "JSON twice (orjson in json)": _json(_orjson(key), ensure_ascii=False),
        "JSON twice, / escaped inside": _json(_json(key).replace("/", "\\/")),
        "JSON three times": _json(_json(_json(key))),
        "Python literal of JSON": repr(_json(key))[1:-1],
        "JSON of a Python literal": _json(repr(key)[1:-1]),
        "URL (quote)": quote(key, safe=""),
        "URL (quote, / kept)": quote(key),
        "URL (quote_plus)": quote_plus(key),
        "URL of JSON": quote(_json(key), safe=""),
        "URL twice": quote(quote(key, safe=""), safe=""),
        "base64": base64.b64encode(key.encode()).decode().rstrip("="),
        "base64 (URL-safe)": base64.urlsafe_b64encode(key.encode()).decode().rstrip("="),
        "base64 of a Bearer header": _base64_after(b"Bearer ", key),
        "base64 of Basic credentials": _base64_after(b"user:", key),
    }


def echo_spans(authorization: str, key: str) -> list[str]:
    """A reply's spans carrying the request's Authorization value and the key in every encoding."""
    return [authorization, json.dumps({"auth": authorization}), *encodings(key).values()]


def leaks(key: str, files: Iterable[Path], outputs: Iterable[str]) -> list[str]:
    """Which encodings of `key` (by name, and where) are in the files or the outputs."""
    found = []
    bodies = {str(p): p.read_bytes() for p in files}
    for name, form in encodings(key).items():
        found += [f"{name} in {where}" for where, body in bodies.items() if form.encode() in body]
        found += [f"{name} printed" for text in outputs if form in text]
    return found

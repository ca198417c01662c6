"""The one redactor every string passes before it is written to a run folder, a cache, a log or a terminal.

It knows two kinds of secret:

- the keys in use: the values of the environment variables that hold keys (`$OPENAI_API_KEY`, `$HF_TOKEN`, and
  every variable named with `--api-key-env`, which `remember_key_env` adds) and any value handed to `remember`
  (a token read from `hf auth login`'s file), found in every encoding a text may carry them in: as they are,
  JSON-escaped, URL-encoded and base64-encoded;
- common key shapes, whoever's they are: OpenAI (`sk-...`), Hugging Face (`hf_...`), GitHub (`ghp_...`,
  `github_pat_...`), AWS access key ids, Google API keys, and the token of a `Bearer` credential.

A server can echo the request's `Authorization` header into its reply's content or its error; a reply's content is
written to the run's journal and printed. Redacting at the writers (`shambench.io`, the caches, the terminal
streams the CLI installs, warnings) rather than where each string enters keeps a new surface from reopening the
hole: whatever reaches a sink passes here.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from urllib.parse import quote, quote_plus

MASK = "***"
"""What stands in for a secret."""

KEY_ENVS = ("OPENAI_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
"""Variables whose values are always treated as secrets (the default key variable and the hub's)."""

MIN_SECRET_CHARS = 8
"""Shorter values are placeholders a local server ignores (`x`, `EMPTY`, `none`): masking every occurrence of them
would mangle every message ("e***pected") and hide nothing."""

# Each shape keeps its recognisable prefix and masks the rest, so a reader still sees which kind of key was there.
KEY_SHAPES = re.compile(
    # 16 key characters or more, or a key a server echoed masked (`sk-proj-****abcd`); `sk-learn` is no key
    r"\b(?P<prefix>sk-|hf_|gh[pousr]_|github_pat_)(?:[A-Za-z0-9_\-]{16,}|[A-Za-z0-9_\-]*\*[A-Za-z0-9_\-*]*)"
    r"|\b(?P<aws>AKIA)[0-9A-Z]{16}\b"
    r"|\b(?P<google>AIza)[0-9A-Za-z_\-]{35}"
    # a Bearer credential's token: 16 characters or more with a digit among them ("Bearer instruments" is prose)
    r"|(?P<bearer>\bBearer\s+)(?=[A-Za-z._~+/=\-]*[0-9])[A-Za-z0-9._~+/=\-]{16,}"
)

# Every shape starts with one of these: a text holding none of them (almost every text) is not scanned by the full
# expression, which costs several times more per character.
SHAPE_MARKS = re.compile("sk-|hf_|gh[pousr]_|github_pat_|AKIA|AIza|Bearer")

_lock = threading.Lock()
_remembered: set[str] = set()
_key_envs: tuple[str, ...] = KEY_ENVS
# The forms of the secrets, and what they were made from (the remembered values and the key variables' values).
_cached: tuple[object, tuple[str, ...]] = (None, ())


def remember(value: str | None) -> None:
    """Treat `value` as a secret from now on in this process (ignored when shorter than MIN_SECRET_CHARS)."""
    if value and len(value) >= MIN_SECRET_CHARS:
        with _lock:
            _remembered.add(value)


def remember_key_env(name: str | None) -> None:
    """Treat the value of environment variable `name` (an `--api-key-env`) as a secret, now and whenever it is read
    again (the variable may be set after the option is parsed)."""
    global _key_envs
    if name:
        with _lock:
            if name not in _key_envs:
                _key_envs = (*_key_envs, name)


def known_secrets() -> frozenset[str]:
    """The secret values this process knows of: those remembered and the current values of the key variables."""
    with _lock:
        values = set(_remembered) | {os.environ.get(name, "") for name in _key_envs}
    return frozenset(v for v in values if len(v) >= MIN_SECRET_CHARS)


def _sources() -> object:
    """What the known secrets are made of, cheaply compared: checked on every call of `redact`, since a variable
    may be set or changed at any time."""
    return (len(_remembered), _key_envs, tuple(os.environ.get(name) for name in _key_envs))


def encodings(secret: str) -> set[str]:
    """The forms `secret` may take in a text: as it is, JSON-escaped (ASCII or not), URL-encoded, base64."""
    raw = secret.encode("utf-8")
    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote(secret, safe=""),
        quote_plus(secret),
        base64.b64encode(raw).decode("ascii").rstrip("="),
        base64.urlsafe_b64encode(raw).decode("ascii").rstrip("="),
    }
    return {f for f in forms if len(f) >= MIN_SECRET_CHARS}


def _forms() -> tuple[str, ...]:
    """Every encoding of every known secret, longest first (a form inside a longer one is masked after it), kept
    until the secrets change."""
    global _cached
    sources = _sources()
    if sources != _cached[0]:
        forms = {f for s in known_secrets() for f in encodings(s)}
        _cached = (sources, tuple(sorted(forms, key=len, reverse=True)))
    return _cached[1]


def _masked_shape(match: re.Match[str]) -> str:
    kept = match.group("prefix") or match.group("aws") or match.group("google") or match.group("bearer")
    return f"{kept}{MASK}"


def redact(text: str) -> str:
    """`text` with every known secret (in any of its encodings) and every key-shaped string masked."""
    # Substring searches, not one expression of alternatives: several times faster on the journal's lines.
    for form in _forms():
        if form in text:
            text = text.replace(form, MASK)
    if SHAPE_MARKS.search(text):
        text = KEY_SHAPES.sub(_masked_shape, text)
    return text

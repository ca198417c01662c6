"""The one redactor every string passes before it is written to a run folder, a cache, a log or a terminal.

It knows two kinds of secret:

- the keys in use: the values of the environment variables that hold keys (`$OPENAI_API_KEY`, `$HF_TOKEN`, and
  every variable named with `--api-key-env`, which `remember_key_env` adds) and any value handed to `remember`
  (a token read from `hf auth login`'s file), found in every encoding a text may carry them in: as they are,
  escaped once or twice by the conventions of JSON's encoders (json, orjson, PHP's `\\/`, .NET's and Go's `\\u`
  escapes), Python's literals and URL encoders (a reply's span holding JSON, kept as a JSON string in the journal;
  a span shown as a Python literal), JSON-escaped up to `DEEPEST_JSON` times, and base64-encoded at any offset (an
  `Authorization` or Basic credential encoded whole); all of them matched by one expression built once per set of
  keys;
- common key shapes, whoever's they are: OpenAI (`sk-...`), Hugging Face (`hf_...`), GitHub (`ghp_...`,
  `github_pat_...`), AWS access key ids, Google API keys, the token of a `Bearer` credential, and the user name and
  password of a URL (`http://user:pass@host`: the tool refuses such a base URL, but one read back from a doctored
  config.json is quoted by the refusal).

A server can echo the request's `Authorization` header into its reply's content or its error; a reply's content is
written to the run's journal and printed. Redacting at the writers (`shambench.io`, the caches, the terminal
streams the CLI installs, warnings) rather than where each string enters keeps a new surface from reopening the
hole: whatever reaches a sink passes here.
"""

from __future__ import annotations

import base64
import itertools
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
    # a URL's user information, up to the `@` that ends it within the authority (a path's `@` is not one)
    r"|(?P<url>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#@\[\]]+(?=@)"
)

# Every shape holds one of these where it starts (a URL's user information: "://", then an "@"): a text holding none
# of them (almost every text) is not scanned by the full expression, which costs several times more per character.
# Substring searches, not one expression of them: the expression tested each character against the set of the
# marks' first letters, 27k instructions for a 460-character journal line against 12k.
SHAPE_MARKS = ("sk-", "hf_", "github_pat_", "AKIA", "AIza", "Bearer")
GITHUB_MARKS = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")
"""GitHub's other marks, looked for only in a text holding "gh" (common in prose: `high`, `right`)."""

DEEPEST_JSON = 4
"""How many times over a secret is looked for JSON-escaped by json.dumps's and orjson's conventions (a server's
reply may itself nest JSON strings, which the journal and the cache escape once more); every other escaping is
looked for applied once and twice."""

OPENING_CHARS = 4
"""How many leading characters of a secret's form are searched for before the whole forms are."""

_lock = threading.Lock()
_remembered: set[str] = set()
_key_envs: tuple[str, ...] = KEY_ENVS
# The openings of the secrets' forms and the expression matching them, and what they were made from (the
# remembered values and the key variables' values).
_cached: tuple[object, tuple[tuple[str, ...], re.Pattern[str]] | None] = (None, None)


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


def registered_key_env(name: str | None) -> str | None:
    """`name`, once `remember_key_env` has made its value a secret: the validator of every field that names a key
    variable (`shambench.schema.NAMES_A_KEY`)."""
    remember_key_env(name)
    return name


def known_secrets() -> frozenset[str]:
    """The secret values this process knows of: those remembered and the current values of the key variables."""
    with _lock:
        values = set(_remembered) | {os.environ.get(name, "") for name in _key_envs}
    return frozenset(v for v in values if len(v) >= MIN_SECRET_CHARS)


def _sources() -> object:
    """What the known secrets are made of, cheaply compared: checked on every call of `redact`, since a variable
    may be set or changed at any time."""
    return (len(_remembered), _key_envs, _key_env_values())


# The key variables' names as `os.environ` stores them (`_key_env_values`), and the names they were made from.
_stored_names: tuple[tuple[str, ...], tuple[object, ...]] = ((), ())


def _key_env_values() -> tuple[object, ...]:
    """The key variables' values as `os.environ` stores them (undecoded; None when unset), to compare with the last
    ones. Read from its mapping (`_data`, which every change to it updates) rather than by `os.environ.get`, which
    encodes the name and raises and catches a KeyError for each variable not set: 31k of the 87k instructions of
    a `redact` call, twice a request. Where `os.environ` has no such mapping, `get` it is."""
    global _stored_names
    stored, encode = getattr(os.environ, "_data", None), getattr(os.environ, "encodekey", None)
    names = _key_envs
    if type(stored) is not dict or encode is None:
        return tuple(map(os.environ.get, names))
    made_from, keys = _stored_names
    if made_from != names:
        keys = tuple(map(encode, names))
        _stored_names = (names, keys)
    return tuple(map(stored.get, keys))


# JSON's two-character escapes; a character without one is written as itself unless an encoder escapes it as \uXXXX.
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_HTML_ESCAPED = frozenset("\"\\<>&'+`")
# The characters encodeURI leaves as they are, beyond those every URL encoder leaves (letters, digits, `-_.~`).
_URI_SAFE = ";,/?:@&=+$#!'()*"
_PERCENT_HEX = re.compile("%[0-9A-F]{2}")


def _u_escape(ch: str, upper: bool) -> str:
    """`ch` as JSON's `\\uXXXX` (a surrogate pair beyond the Basic Multilingual Plane), its hex digits in either
    case."""
    code = ord(ch)
    units = [code] if code < 0x10000 else [0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)]
    return "".join(f"\\u{unit:04X}" if upper else f"\\u{unit:04x}" for unit in units)


def _json_escaped(text: str, ascii_only: bool, slash: bool, html: bool, upper: bool) -> str:
    """`text` as the body of a JSON string under one encoder's conventions: non-ASCII as it is or escaped (orjson,
    json.dumps), `/` as `\\/` (PHP, some Java), quotes, backslashes and `<>&'+`` ` `` as `\\u` escapes (.NET, Go's
    HTML-safe mode), hex digits in either case."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch == "/" and slash:
            out.append("\\/")
        elif (html and ch in _HTML_ESCAPED) or (ascii_only and code > 126) or (code < 32 and ch not in _SHORT):
            out.append(_u_escape(ch, upper))
        else:
            out.append(_SHORT.get(ch, ch))
    return "".join(out)


def _python_literals(text: str) -> list[str]:
    """`text` as the body of a Python string literal (`repr`, `ascii`; quoted either way), as a message or a table
    cell showing a list of strings prints it."""
    # A text holding both quotes is quoted with `'`, escaping it: adding both shows the other way of quoting.
    both = "'\""
    return [repr(text)[1:-1], ascii(text)[1:-1], repr(text + both)[1:-4], ascii(text + both)[1:-4]]


def _url_encoded(text: str) -> list[str]:
    """`text` URL-encoded as encoders write it: every reserved character or some left as they are (quote's `/`,
    encodeURIComponent's, encodeURI's), a space as `+` or `%20`, hex digits in either case."""
    forms = [quote(text, safe=safe, errors="surrogatepass") for safe in ("", "/", "!'()*", _URI_SAFE)]
    forms += [quote_plus(text, safe=safe, errors="surrogatepass") for safe in ("", "/")]
    return forms + [_PERCENT_HEX.sub(lambda m: m.group(0).lower(), f) for f in forms]


def _escapes(text: str) -> set[str]:
    """`text` under every text encoding a writer or a server may apply once: JSON, Python literals, URLs."""
    forms = {_json_escaped(text, *flags) for flags in itertools.product((False, True), repeat=4)}
    return forms | set(_python_literals(text)) | set(_url_encoded(text))


def _base64_forms(raw: bytes) -> set[str]:
    """What of base64 (standard or URL-safe) depends on `raw` alone, wherever `raw` starts among the encoded bytes
    (its offset modulo 3 shifts every character): the characters mixing its bytes with others' are left out."""
    forms = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        forms.add(encode(raw).decode("ascii").rstrip("="))
        for offset, mixed_at_start in ((0, 0), (1, 2), (2, 3)):
            mixed_at_end = (offset + len(raw)) % 3 != 0
            body = encode(b"\0" * offset + raw).decode("ascii").rstrip("=")
            forms.add(body[mixed_at_start : len(body) - mixed_at_end])
    return forms


def encodings(secret: str) -> set[str]:
    """The forms `secret` may take in a text: as it is; escaped once or twice (a JSON string inside a JSON string,
    a span's JSON shown as a Python literal, a URL in a URL) by JSON's, Python's and URL encoders' conventions, and
    up to DEEPEST_JSON times as json.dumps and orjson escape; base64 at any offset."""
    once = _escapes(secret)
    forms = {secret} | once | {twice for form in once for twice in _escapes(form)}
    nested = {secret}
    for _ in range(DEEPEST_JSON):
        nested = {
            _json_escaped(form, ascii_only, False, False, False) for form in nested for ascii_only in (False, True)
        }
        forms |= nested
    forms |= _base64_forms(secret.encode("utf-8", "surrogatepass"))
    return {f for f in forms if len(f) >= MIN_SECRET_CHARS}


def _matcher() -> tuple[tuple[str, ...], re.Pattern[str]] | None:
    """The openings of every encoding of every known secret, and one expression matching those encodings (longest
    first: a form inside a longer one at the same place is masked with it), built once per set of secrets; None
    when there is none."""
    global _cached
    sources = _sources()
    if sources != _cached[0]:
        forms = sorted({f for s in known_secrets() for f in encodings(s)}, key=len, reverse=True)
        openings = tuple(sorted({f[:OPENING_CHARS] for f in forms}))
        _cached = (sources, (openings, re.compile("|".join(map(re.escape, forms)))) if forms else None)
    return _cached[1]


def _masked_shape(match: re.Match[str]) -> str:
    kept = match.group("prefix") or match.group("aws") or match.group("google") or match.group("bearer")
    kept = kept or match.group("url")
    return f"{kept}{MASK}"


def _holds_form(text: str, matcher: tuple[tuple[str, ...], re.Pattern[str]]) -> bool:
    """Whether one of the secrets' forms is in `text`: the expression tried only where one of the forms' openings
    is (every form starts with its opening). A text holding an opening but no form (a key opening like a word of
    the text: `bench-key` in every line naming the model `bench-model`) is not scanned whole by the expression."""
    openings, pattern = matcher
    for opening in filter(text.__contains__, openings):
        at = text.find(opening)
        while at >= 0:
            if pattern.match(text, at):
                return True
            at = text.find(opening, at + 1)
    return False


def may_hold_shape(text: str) -> bool:
    """Whether `text` holds a mark a key shape starts with (`SHAPE_MARKS`, `GITHUB_MARKS`, a URL with an `@`):
    False means that `KEY_SHAPES` matches nothing in it."""
    if any(map(text.__contains__, SHAPE_MARKS)):
        return True
    if "gh" in text and any(map(text.__contains__, GITHUB_MARKS)):
        return True
    return "://" in text and "@" in text


def redact(text: str) -> str:
    """`text` with every known secret (in any of its encodings) and every key-shaped string masked."""
    matcher = _matcher()
    # The expression alone scans a text a few times slower than substring searches for the forms' openings (a
    # secret's forms share a few: its leading characters under each escaping, its base64 at each offset), and
    # almost no text holds one.
    if matcher is not None and _holds_form(text, matcher):
        pattern = matcher[1]
        # Masking again until nothing matches: a form overlapping an earlier match (found leftmost) is masked too.
        text, found = pattern.subn(MASK, text)
        while found:
            text, found = pattern.subn(MASK, text)
    if may_hold_shape(text):
        text = KEY_SHAPES.sub(_masked_shape, text)
    return text

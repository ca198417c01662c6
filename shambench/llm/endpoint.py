"""Which server and model an API-backed detector calls, and the rules about them that hold before any request:
a base URL is an http(s) URL without credentials (`check_base_url`), a server's identity in cache keys
(`endpoint_url`), a reply's model is the requested one or a dated snapshot of it (`same_model`), and the key read
is known to the redactor (`shambench.secrets`), so that it is never written or printed."""

from __future__ import annotations

import functools
import os
import urllib.parse
from typing import Any

from pydantic import BaseModel, Field, field_validator

from shambench.errors import DataError, EndpointError
from shambench.secrets import remember_key_env

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
OPENAI_URL = "https://api.openai.com/v1"
# Sent to servers that need no key (vLLM, llama.cpp): some still insist on an Authorization header.
PLACEHOLDER_KEY = "EMPTY"
# Replies larger than this many bytes are refused (`Endpoint.max_response_bytes`, default from this variable).
MAX_RESPONSE_BYTES_ENV = "SHAMBENCH_MAX_RESPONSE_BYTES"
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024


def check_base_url(url: str | None, origin: str = "--base-url") -> str | None:
    """`url` unchanged; EndpointError when it is not an http(s) URL or carries a user name or password (which
    would be written to run configs, results and logs). The message never repeats the URL."""
    if url is None:
        return None
    parts = urllib.parse.urlsplit(url.strip())
    if "@" in parts.netloc:
        raise EndpointError(
            f"{origin} must not contain credentials (user:password@host): they would be written to the run's "
            "records. Put the key in an environment variable and name it with --api-key-env"
        )
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or not port_ok:
        raise EndpointError(f"{origin}: expected an http(s) URL such as http://127.0.0.1:8000/v1, got {url!r}")
    return url


@functools.lru_cache(maxsize=64)  # a pure function of the URL, asked for on every request's cache key
def endpoint_url(url: str) -> str:
    """A server's identity in cache keys: scheme, lower-cased host, port unless the scheme's default, and path
    without a trailing slash; never credentials, query or fragment."""
    parts = urllib.parse.urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = parts.port
    netloc = host if port is None or port == {"http": 80, "https": 443}.get(scheme) else f"{host}:{port}"
    return urllib.parse.urlunsplit((scheme, netloc, parts.path.rstrip("/"), "", ""))


def default_max_response_bytes() -> int:
    """`$SHAMBENCH_MAX_RESPONSE_BYTES`, else 4 MiB."""
    value = os.environ.get(MAX_RESPONSE_BYTES_ENV)
    if not value:
        return DEFAULT_MAX_RESPONSE_BYTES
    if not value.isdigit() or int(value) < 1024:
        raise DataError(f"${MAX_RESPONSE_BYTES_ENV}: expected a number of bytes of at least 1024, got {value!r}")
    return int(value)


class Endpoint(BaseModel):
    """Which server and model to call, and how hard to push it (nothing here changes a model's answer)."""

    model: str
    """Model name as the server knows it, e.g. `gpt-5-mini` or `Qwen/Qwen3-4B`."""
    base_url: str | None = None
    """OpenAI-compatible base URL ending in `/v1`; None means OpenAI's own API."""
    api_key_env: str = DEFAULT_KEY_ENV
    """Environment variable holding the API key (the key itself is never stored)."""
    max_concurrency: int = Field(default=16, ge=1)
    """Requests in flight at once."""
    timeout: float = Field(default=120.0, gt=0)
    """Seconds before one request is abandoned (and retried)."""
    max_retries: int = Field(default=6, ge=0)
    """Further attempts after a retryable failure, before the item is recorded as failed."""
    backoff_base: float = Field(default=1.0, ge=0)
    """Backoff before retry n is between half and all of `backoff_base * 2**(n-1)` seconds (equal jitter)."""
    backoff_max: float = Field(default=60.0, ge=0)
    """Longest wait before a retry, including waits asked for by `Retry-After`."""
    max_response_bytes: int = Field(default_factory=default_max_response_bytes, ge=1024)
    """Largest reply body accepted; a larger one is a malformed reply ($SHAMBENCH_MAX_RESPONSE_BYTES, 4 MiB)."""
    auth_failures_to_stop: int = Field(default=5, ge=1)
    """Consecutive 401/403 replies after which the whole run stops (`AuthenticationStopped`)."""

    @field_validator("base_url")
    @classmethod
    def _no_credentials(cls, url: str | None) -> str | None:
        return check_base_url(url)

    def identity(self) -> dict[str, Any]:
        """Model, server and key variable: the part an API-backed detector records in its params, in the
        keywords its factory takes, so that `--resume` rebuilds it against the same server."""
        return {"model": self.model, "base_url": self.base_url, "api_key_env": self.api_key_env}

    def api_key(self) -> str:
        """The key from the environment; a placeholder for a custom server; DataError for OpenAI without one."""
        remember_key_env(self.api_key_env)  # its value is masked wherever it would be written or printed
        key = os.environ.get(self.api_key_env)
        if key:
            return key
        if self.base_url:
            return PLACEHOLDER_KEY
        raise DataError(
            f"no API key: set {self.api_key_env} (or name another variable with --api-key-env), "
            "or give --base-url for a server that needs none"
        )

    def key_note(self) -> str | None:
        """What a run would say of its API key before it sends anything (for a dry run): the missing key that
        stops it, or the note that its requests carry none; None when a key is set or none is needed."""
        try:
            self.api_key()
        except DataError as err:
            return str(err)
        return self.missing_key_note()

    def missing_key_note(self) -> str | None:
        """What to say when requests to a server that is not on this machine will carry no key (a local vLLM or
        llama.cpp server needs none, so saying it there would only be noise)."""
        if os.environ.get(self.api_key_env):
            return None
        host = urllib.parse.urlsplit(self.url()).hostname or ""
        if host == "localhost" or host.startswith("127.") or host == "::1":
            return None
        return (
            f"${self.api_key_env} is not set: requests to {endpoint_url(self.url())} carry no key "
            "(a server that needs one answers 401)"
        )

    def url(self) -> str:
        """The endpoint's base URL: as given, else `$OPENAI_BASE_URL`, else OpenAI's (EndpointError when the
        variable holds credentials or no http(s) URL)."""
        if self.base_url:
            return self.base_url.rstrip("/")
        from_env = check_base_url(os.environ.get("OPENAI_BASE_URL") or None, "$OPENAI_BASE_URL")
        return (from_env or OPENAI_URL).rstrip("/")


def endpoint_of(
    model: str,
    base_url: str | None = None,
    api_key_env: str | None = None,
    max_concurrency: int | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
    backoff_base: float | None = None,
) -> Endpoint:
    """The endpoint of a detector, judge or provider, as its options (the command line's, or the caller's own
    defaults in their place) give it: each option given is taken, the others are `Endpoint`'s defaults (the key in
    `$OPENAI_API_KEY`, OpenAI's API or `$OPENAI_BASE_URL`). Where requests and the key go is never read from a
    file here. EndpointError for a base URL with credentials or not http(s), before anything records it."""
    check_base_url(base_url or None)
    given: dict[str, Any] = {
        "base_url": base_url or None,
        "api_key_env": api_key_env or None,
        "max_concurrency": max_concurrency,
        "timeout": timeout,
        "max_retries": max_retries,
        "backoff_base": backoff_base,
    }
    return Endpoint(model=model, **{name: value for name, value in given.items() if value is not None})


def same_model(requested: str, served: str | None) -> bool:
    """Whether a reply's model is the requested one: the same name, or a dated snapshot of it (OpenAI answers
    `gpt-5-mini-2025-08-07` for `gpt-5-mini`)."""
    return served is None or served == requested or served.startswith(requested + "-")

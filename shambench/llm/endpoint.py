"""Which server and model an API-backed detector calls, and the rules about them that hold before any request:
a base URL is an http(s) URL without credentials (`check_base_url`), a server's identity in cache keys
(`endpoint_url`), a reply's model is the requested one or a dated snapshot of it (`same_model`), and the key read
is known to the redactor (`shambench.secrets`), so that it is never written or printed."""

from __future__ import annotations

import functools
import inspect
import os
import typing
import urllib.parse
from collections.abc import Callable
from typing import Annotated, Any, TypedDict, TypeVar, Unpack

from pydantic import ConfigDict, Field, field_validator

from shambench.errors import DataError, EndpointError
from shambench.schema import NAMES_A_KEY, Model
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


class Endpoint(Model):
    """Which server and model to call, and how hard to push it (nothing here changes a model's answer)."""

    model_config = ConfigDict(use_attribute_docstrings=True)  # the docstrings document the factories' options

    model: str
    """Model name as the server knows it, e.g. `gpt-5-mini` or `Qwen/Qwen3-4B`."""
    base_url: str | None = None
    """OpenAI-compatible base URL ending in `/v1`; None means OpenAI's own API."""
    api_key_env: Annotated[str, NAMES_A_KEY] = DEFAULT_KEY_ENV
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


class EndpointOptions(TypedDict, total=False):
    """What of an `Endpoint` its caller may give beside the model: each is `Endpoint`'s field of its name (whose
    docstring documents it), and one left out or None is the caller's default, else `Endpoint`'s."""

    base_url: str | None
    api_key_env: str | None
    max_concurrency: int | None
    timeout: float | None
    max_retries: int | None
    backoff_base: float | None


def endpoint_of(model: str, defaults: EndpointOptions | None = None, **options: Unpack[EndpointOptions]) -> Endpoint:
    """The endpoint of a detector, judge or provider, as its options (the command line's) give it: each option
    given is taken, else the caller's own default in `defaults` (a preset's), else `Endpoint`'s (the key in
    `$OPENAI_API_KEY`, OpenAI's API or `$OPENAI_BASE_URL`); an empty URL or variable name is not given. Where
    requests and the key go is never read from a file here. EndpointError for a base URL with credentials or not
    http(s), before anything records it."""
    check_base_url(options.get("base_url") or None)
    given = {name: value for name, value in options.items() if value is not None and value != ""}
    chosen: dict[str, Any] = {k: v for k, v in {**(defaults or {}), **given}.items() if v is not None}
    return Endpoint(model=model, **chosen)


def endpoint_options(given: dict[str, Any]) -> tuple[EndpointOptions, dict[str, Any]]:
    """The endpoint options among the keywords `given` (as given, None included), and the other keywords."""
    names = EndpointOptions.__annotations__
    options = {name: value for name, value in given.items() if name in names}
    return typing.cast(EndpointOptions, options), {name: value for name, value in given.items() if name not in names}


Factory = TypeVar("Factory", bound=Callable[..., Any])


def takes_endpoint_options(factory: Factory) -> Factory:
    """`factory` (which takes a keyword `endpoint: EndpointOptions`) taking the endpoint options as keywords of its
    own instead: its signature lists them (before its `**` parameter), each with its type and a default of None,
    and its docstring's `Args:` (last, or added) describes them with `Endpoint`'s docstrings, which is what
    `shambench list detectors NAME` shows and `-p KEY=VALUE` is checked against. The options given reach `factory`
    as its `endpoint`, as given."""
    types = typing.get_type_hints(EndpointOptions)
    signature = inspect.signature(factory)
    own = [p for p in signature.parameters.values() if p.name != "endpoint" and p.kind is not p.VAR_KEYWORD]
    more = [p for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD]
    keywords = [
        inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=t) for n, t in types.items()
    ]

    @functools.wraps(factory)
    def with_options(*args: Any, **kwargs: Any) -> Any:
        endpoint, rest = endpoint_options(kwargs)
        return factory(*args, endpoint=endpoint, **rest)

    with_options.__signature__ = signature.replace(parameters=[*own, *keywords, *more])  # type: ignore[attr-defined]
    with_options.__annotations__ = {k: v for k, v in factory.__annotations__.items() if k != "endpoint"} | types
    with_options.__doc__ = documented(factory.__doc__ or "", types)
    return typing.cast(Factory, with_options)


def documented(doc: str, options: dict[str, Any]) -> str:
    """`doc` (a factory's docstring) with a line under its `Args:` for each of `options`, from `Endpoint`'s
    docstring of its name (a new `Args:` section when it has none)."""
    doc = inspect.cleandoc(doc)
    lines = [f"    {name}: {Endpoint.model_fields[name].description}" for name in options]
    has_args = any(line.strip() == "Args:" for line in doc.splitlines())
    return "\n".join([doc, *([] if has_args else ["", "Args:"]), *lines])


def same_model(requested: str, served: str | None) -> bool:
    """Whether a reply's model is the requested one: the same name, or a dated snapshot of it (OpenAI answers
    `gpt-5-mini-2025-08-07` for `gpt-5-mini`)."""
    return served is None or served == requested or served.startswith(requested + "-")

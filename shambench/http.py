"""The one HTTP stack of the package: aiohttp sessions, the proxy that applies to a URL, and reply bodies read
within a byte limit.

The requests to OpenAI-compatible servers go out through aiohttp rather than the openai SDK: the SDK's request
transformation and its httpx transport cost several milliseconds of CPU per request, which on a 2-core machine
caps a run far below what a local vLLM server or OpenAI's rate limits allow (see benchmarks/bench_api.py). The
openai SDK is kept for the Batch API only (`shambench.llm.batch`).
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from typing import Any

from shambench.errors import MalformedReply

# Bytes read from a reply at a time.
CHUNK_BYTES = 64 * 1024


def proxy_for(url: str) -> str | None:
    """The HTTP(S)_PROXY that applies to `url` (NO_PROXY honoured), looked up once by the caller rather than by
    aiohttp's `trust_env` on every request, which costs more CPU than the request itself."""
    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def open_session(connections: int, timeout: float, headers: dict[str, str]) -> Any:
    """An aiohttp session of the running event loop with at most `connections` connections, sending `headers`
    with every request, whose requests are abandoned after `timeout` seconds without a reply."""
    import aiohttp

    # The timeout runs from when the request is written: `sock_read` bounds the wait for the reply, and no
    # total/connect limit counts the time spent waiting for a free connection of the pool.
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connections),
        timeout=aiohttp.ClientTimeout(total=None, connect=None, sock_connect=min(30.0, timeout), sock_read=timeout),
        headers=headers,
    )


async def read_body(reply: Any, limit: int, hint: str = "") -> bytes:
    """The body of an aiohttp reply; MalformedReply as soon as it is known to exceed `limit` bytes (from its
    Content-Length, or while reading), so a huge reply is never held in memory whole. `hint` ends the message
    (where the limit is set)."""
    too_big = MalformedReply(f"malformed reply: larger than the {limit}-byte limit{hint}")
    if reply.content_length is not None and reply.content_length > limit:
        raise too_big
    chunks, size = [], 0
    async for chunk in reply.content.iter_chunked(CHUNK_BYTES):
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)

"""`wikipedia`: the plain text of the Wikipedia page an example points to, through the MediaWiki API.

The page comes from the example's own pointer: `meta["wikipedia_url"]` (Mu-SHROOM), else the subject the source
names (`meta["wikipedia_title"]`, `meta["subject"]` or `meta["entity"]`: FAVA and HalluEntity). Requests are
spaced by `min_interval` seconds (Wikimedia asks clients to be gentle) and retried with exponential backoff on 429,
5xx and timeouts, honouring Retry-After. A page that does not exist is recorded as an error, not retried.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import unquote, urlparse

from shambench.data.context import ContextProvider, ContextRecord, context_provider
from shambench.errors import MalformedReply
from shambench.http import Client, HTTPError, Timeout
from shambench.schema import Example

USER_AGENT = "shambench (https://github.com/shambench/shambench; hallucination benchmark evidence retrieval)"
TITLE_KEYS = ("wikipedia_title", "subject", "entity")
# The largest API answer read (a page's extract is cut to `max_chars` afterwards).
MAX_REPLY_BYTES = 16 * 2**20


def page_title(example: Example) -> str | None:
    """The Wikipedia page title an example points to, or None."""
    url = example.meta.get("wikipedia_url")
    if url:
        return unquote(urlparse(url).path.rsplit("/", 1)[-1]).replace("_", " ") or None
    return next((str(example.meta[k]) for k in TITLE_KEYS if example.meta.get(k)), None)


class WikipediaProvider(ContextProvider):
    """Fetches page extracts (plain text) through the MediaWiki API."""

    def __init__(
        self,
        api_url: str = "https://en.wikipedia.org/w/api.php",
        max_chars: int = 20000,
        min_interval: float = 0.2,
        retries: int = 4,
        timeout: float = 20.0,
        backoff: float = 1.0,
    ):
        self.api_url, self.max_chars = api_url, int(max_chars)
        self.min_interval, self.retries, self.backoff = float(min_interval), int(retries), float(backoff)
        self.client = Client(timeout=timeout, headers={"User-Agent": USER_AGENT})
        self._last = 0.0

    def params(self) -> dict:
        return {"api_url": self.api_url, "max_chars": self.max_chars}

    def _wait_turn(self) -> None:
        delay = self._last + self.min_interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        self._last = time.monotonic()

    def _query(self, title: str) -> dict:
        """The API's JSON answer for a title; raises the last error once retries are spent."""
        params = {
            "action": "query",
            "format": "json",
            "formatversion": "2",
            "prop": "extracts",
            "explaintext": "1",
            "redirects": "1",
            "titles": title,
        }
        for attempt in range(self.retries + 1):
            self._wait_turn()
            try:
                with self.client.get(self.api_url, params=params) as resp:
                    if resp.status == 429 or resp.status >= 500:
                        if attempt == self.retries:
                            resp.raise_for_status()
                        retry_after = resp.headers.get("Retry-After", "")
                        wait = float(retry_after) if retry_after.isdigit() else self.backoff * 2**attempt
                    else:
                        resp.raise_for_status()
                        return resp.json(MAX_REPLY_BYTES)
            except Timeout:
                if attempt == self.retries:
                    raise
                wait = self.backoff * 2**attempt
            time.sleep(wait)
        raise RuntimeError("unreachable")

    def fetch_one(self, example: Example) -> ContextRecord:
        title = page_title(example)
        if not title:
            return self.record(example, error="the example names no Wikipedia page (no wikipedia_url or subject)")
        try:
            pages = self._query(title).get("query", {}).get("pages", [])
        except (HTTPError, MalformedReply, ValueError) as err:
            return self.record(example, error=f"{type(err).__name__}: {err}")
        page: dict[str, Any] = pages[0] if pages else {"missing": True}
        if page.get("missing") or page.get("invalid"):
            return self.record(example, error=f"Wikipedia page {title!r} does not exist")
        text = (page.get("extract") or "")[: self.max_chars]
        if not text.strip():
            return self.record(example, error=f"Wikipedia page {page.get('title', title)!r} has no text")
        url = f"https://en.wikipedia.org/wiki/{page.get('title', title).replace(' ', '_')}"
        return self.record(example, text, source_urls=[url])

    def close(self) -> None:
        self.client.close()


@context_provider("wikipedia")
def wikipedia_provider(**params: Any) -> ContextProvider:
    """The Wikipedia page the example points to (MediaWiki API; rate-limited, retried)."""
    return WikipediaProvider(**params)

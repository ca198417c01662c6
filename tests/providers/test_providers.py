"""Context providers: the file provider, the Wikipedia provider against a local MediaWiki-like server, the store."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from shambench.data.context import ContextStore, add_context, content_hash, create_provider, providers, with_context
from shambench.data.providers.wikipedia import page_title
from shambench.errors import DataError
from shambench.schema import Example

PAGES = {"Ada Lovelace": "Ada Lovelace was an English mathematician.", "Mount Etna": "Etna is a volcano in Sicily."}


def _ex(id_, **meta):
    return Example(id=id_, dataset="toy", task="open_qa", question="q?", response="An answer.", meta=meta)


class _Wiki(BaseHTTPRequestHandler):
    """A MediaWiki `action=query&prop=extracts` stand-in; the first request for `Flaky` answers 503."""

    log: list[str] = []
    flaky_seen = False

    def do_GET(self):  # noqa: N802 (http.server's naming)
        title = parse_qs(urlparse(self.path).query)["titles"][0]
        _Wiki.log.append(title)
        if title == "Flaky" and not _Wiki.flaky_seen:
            _Wiki.flaky_seen = True
            self.send_response(503)
            self.send_header("Retry-After", "0")
            self.end_headers()
            return
        page = {"title": title, "extract": PAGES[title]} if title in PAGES else {"title": title, "missing": True}
        if title == "Flaky":
            page = {"title": "Flaky", "extract": "Recovered after a retry."}
        body = json.dumps({"query": {"pages": [page]}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def wiki():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Wiki)
    _Wiki.log, _Wiki.flaky_seen = [], False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/w/api.php"
    server.shutdown()


def test_page_title_from_url_or_subject():
    assert page_title(_ex("a", wikipedia_url="https://en.wikipedia.org/wiki/Ada_Lovelace")) == "Ada Lovelace"
    assert page_title(_ex("b", wikipedia_url="https://en.wikipedia.org/wiki/Caf%C3%A9")) == "Café"
    assert page_title(_ex("c", subject="Mount Etna")) == "Mount Etna"
    assert page_title(_ex("d")) is None


def test_wikipedia_provider_records_text_failures_and_retries(wiki, tmp_path):
    examples = [
        _ex("a", wikipedia_url="https://en.wikipedia.org/wiki/Ada_Lovelace"),
        _ex("b", subject="No Such Page"),
        _ex("c"),
        _ex("d", subject="Flaky"),
    ]
    provider = create_provider("wikipedia", api_url=wiki, min_interval=0, backoff=0)
    counts = add_context(provider, examples, root=tmp_path)
    assert counts == {"fetched": 2, "failed": 2, "cached": 0}
    recs = ContextStore(provider, tmp_path).read()
    assert recs["a"].context == PAGES["Ada Lovelace"]
    assert recs["a"].content_hash == content_hash(PAGES["Ada Lovelace"])
    assert recs["a"].source_urls == ["https://en.wikipedia.org/wiki/Ada_Lovelace"]
    assert recs["b"].error == "Wikipedia page 'No Such Page' does not exist"
    assert "names no Wikipedia page" in recs["c"].error
    assert recs["d"].context == "Recovered after a retry."
    assert _Wiki.log.count("Flaky") == 2  # one 503, one success
    # a re-run fetches only what has no successful record: b (missing page) is asked again, c has no title
    _Wiki.log.clear()
    again = add_context(provider, examples, root=tmp_path)
    assert again == {"fetched": 0, "failed": 2, "cached": 2}
    assert _Wiki.log == ["No Such Page"]


def test_file_provider_and_provenance(tmp_path):
    evidence = tmp_path / "evidence.jsonl"
    evidence.write_text(
        json.dumps({"id": "a", "context": "Ada wrote the first program.", "source_urls": ["http://x"]}) + "\n"
    )
    examples = [_ex("a"), _ex("b")]
    provider = create_provider(f"file:{evidence}")
    assert add_context(provider, examples, root=tmp_path) == {"fetched": 1, "failed": 1, "cached": 0}
    out, prov = with_context(examples, provider, root=tmp_path)
    assert [e.context for e in out] == ["Ada wrote the first program.", ""]
    part = prov["open_qa/toy"]
    assert part["provider"] == f"file:{evidence}"
    assert (part["n_with_context"], part["n_failed"], part["n_missing"]) == (1, 1, 0)
    pairs = sorted([("a", content_hash("Ada wrote the first program.")), ("b", "")])
    assert part["content_hash"] == hashlib.sha256(json.dumps(pairs).encode()).hexdigest()


def test_file_provider_rejects_bad_lines(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "context": "ok"}\n{"id": 3}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: expected"):
        create_provider(f"file:{bad}")
    with pytest.raises(DataError, match="needs a path"):
        create_provider("file")


def test_unknown_provider_suggests():
    with pytest.raises(KeyError, match="did you mean 'wikipedia'"):
        providers.get("wikipedya")

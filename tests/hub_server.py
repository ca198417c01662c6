"""A stand-in of the Hugging Face hub's HTTP API on 127.0.0.1, for `HF_ENDPOINT`: what `huggingface_hub` calls.

- `GET /api/datasets/<repo>/revision/<rev>`: the repository's info with `sha`, the commit `rev` names.
- `GET /api/datasets/<repo>/commits/<rev>`: the commits reachable from `rev`, newest first.
- `GET /api/datasets/<repo>/tree/<rev>[/<path>]?recursive=..`: files with `oid` (git blob id), `size`, and `lfs`
  (`oid` = SHA-256, `size`, `pointerSize`) for LFS files.
- `HEAD|GET /datasets/<repo>/resolve/<rev>/<path>`: a small file is served there with `ETag` (its blob id) and
  `X-Repo-Commit`; an LFS file answers 302 to a second server (the "CDN", another origin, as the hub's is) with
  `X-Linked-Etag` (its SHA-256), `X-Linked-Size` and `X-Repo-Commit`, and the CDN serves the bytes (with `Range`).
- A gated repository answers resolve requests 401 without a token and 403 with a token that has not accepted its
  conditions, with `X-Error-Code: GatedRepo`, as the hub does; `accepted` tokens get the file.
- Faults: `cut[path] = n` drops the connection after n bytes of the next response for `path`; `html` paths are answered with an error page sent as 200 (by the CDN, or with `lying_mirror` also in the
  HEAD's size, as a misconfigured mirror would); `short` paths are sent a third short with a `Content-Length`
  that says so (a cleanly ended body).
- Hostile bodies (`hostile[path]`, for a file's bytes wherever they are served): `endless` (no Content-Length,
  bytes until the client leaves), `longer` (twice the listed bytes, no Content-Length), `announced` (the listed
  bytes, with a Content-Length announcing a gigabyte), `trickle` (a byte every 20 ms until the client leaves).
- Hostile listings (`listing_fault[repo]`, for its tree route): `endless`, `deep` (arrays nested 200 levels),
  `trickle`, `not-a-listing` (JSON of another shape).
- Pages: with `page_size`, the tree route answers that many entries a page, the next one named by a `Link`
  header at `next_origin` (default: the hub itself).
- `cdn_host`: the host the hub redirects LFS files to (default 127.0.0.1, on the CDN's port).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

import pytest

HTML = b"<!DOCTYPE html>\n<html><head><title>503</title></head><body>Service unavailable</body></html>\n"


def blob_id(data: bytes) -> str:
    """The git blob id of a file's content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    """A dataset repository: commits (newest last) of whole file trees, and branches naming commits."""

    commits: list[tuple[str, dict[str, bytes]]] = field(default_factory=list)
    branches: dict[str, str] = field(default_factory=dict)
    lfs: set[str] = field(default_factory=set)
    gated: bool = False

    def commit(self, files: dict[str, bytes], branch: str = "main", sha: str | None = None) -> str:
        """Add a commit holding `files` on `branch` (with the id `sha`, else one derived from them); its id."""
        sha = (
            sha or hashlib.sha1(f"{len(self.commits)}:{sorted(files)}".encode() + b"".join(files.values())).hexdigest()
        )
        self.commits.append((sha, dict(files)))
        self.branches[branch] = sha
        return sha

    def resolve(self, rev: str) -> str | None:
        """The commit `rev` names (a branch or a full commit id), or None."""
        if rev in self.branches:
            return self.branches[rev]
        return rev if any(sha == rev for sha, _ in self.commits) else None

    def files(self, sha: str) -> dict[str, bytes]:
        return next(files for commit, files in self.commits if commit == sha)


class Hub:
    """The stand-in: two servers on 127.0.0.1 (the hub and its CDN) sharing the repositories and the faults."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.accepted: set[str] = set()
        self.html: set[str] = set()
        self.short: set[str] = set()
        self.cut: dict[str, int] = {}
        self.lying_mirror = False
        self.hostile: dict[str, str] = {}
        self.listing_fault: dict[str, str] = {}
        self.page_size: int | None = None
        self.next_origin: str | None = None
        self.cdn_host = "127.0.0.1"
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Authorization)
        self.ranges: list[tuple[str, str | None]] = []  # (path, Range) of each GET
        self.api = _Server(self)
        self.cdn = _Server(self)
        for srv in (self.api, self.cdn):
            threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.api.server_address[1]}"

    def close(self) -> None:
        for srv in (self.api, self.cdn):
            srv.shutdown()
            srv.server_close()

    def repo(self, repo_id: str, gated: bool = False) -> Repo:
        return self.repos.setdefault(repo_id, Repo(gated=gated))

    def downloads(self, name: str) -> int:
        """How many GET requests fetched a file whose path ends with `name`."""
        return sum(1 for method, path, _ in self.requests if method == "GET" and path.endswith(name))


class _Server(ThreadingHTTPServer):
    def __init__(self, hub: Hub) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hub = hub


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args) -> None:  # keep the test output quiet
        pass

    def do_HEAD(self) -> None:
        self._route(head=True)

    def do_GET(self) -> None:
        self._route(head=False)

    def _route(self, head: bool) -> None:
        hub = self.server.hub
        url = urlparse(self.path)
        path = unquote(url.path)
        hub.requests.append((self.command, path, self.headers.get("Authorization")))
        if self.command == "GET":
            hub.ranges.append((path, self.headers.get("Range")))
        if path.startswith("/cdn/"):
            self._cdn(path.removeprefix("/cdn/"), head)
            return
        match = re.fullmatch(r"/api/datasets/([^/]+/[^/]+)/(revision|commits|tree)/([^/]+)(/.*)?", path)
        if match:
            self._api(*match.groups(), cursor=int(parse_qs(url.query).get("cursor", ["0"])[0]))
            return
        match = re.fullmatch(r"/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if match:
            self._resolve(*match.groups(), head=head)
            return
        self._error(404, "RepoNotFound", "not a route of this stand-in")

    def _error(self, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, obj: object, link: str | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if link:
            self.send_header("Link", f'<{link}>; rel="next"')
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, head: bytes, unit: bytes, every: float = 0.0, length: int | None = None) -> None:
        """A 200 whose body is `head`, then `unit` again and again until the client leaves (a second `every`
        seconds apart; at most 1 GiB, or 60 s of a trickle, so that nothing here outlives a test)."""
        self.send_response(200)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        self.close_connection = True
        sent, stop = 0, threading.Event()
        try:
            self.wfile.write(head)
            while sent < 1 << 30 and sent * every < 60:
                self.wfile.write(unit)
                self.wfile.flush()
                sent += len(unit)
                if every:
                    stop.wait(every)
        except OSError:  # the client left
            pass

    def _repo_at(self, repo_id: str, rev: str) -> tuple[Repo, str] | None:
        repo = self.server.hub.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
            return None
        sha = repo.resolve(rev)
        if sha is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return None
        return repo, sha

    def _listing_fault(self, fault: str) -> None:
        if fault == "endless":
            self._stream(b"[", b'{"type": "directory", "path": "d", "oid": "0"}, ' * 100)
        elif fault == "trickle":
            self._stream(b"[", b" ", every=0.02)
        elif fault == "deep":
            self._json(json.loads("[" * 200 + "]" * 200))
        else:
            self._json({"files": "none"})

    def _api(self, repo_id: str, kind: str, rev: str, sub: str | None, cursor: int = 0) -> None:
        found = self._repo_at(repo_id, rev)
        if found is None:
            return
        repo, sha = found
        if kind == "revision":
            self._json({"id": repo_id, "sha": sha, "private": False, "gated": "manual" if repo.gated else False})
        elif kind == "commits":
            upto = [c for c, _ in repo.commits].index(sha)
            self._json(
                [
                    {
                        "id": c,
                        "authors": [{"user": "someone"}],
                        "date": "2024-01-14T00:00:00.000Z",
                        "title": "up",
                        "message": "",
                    }
                    for c, _ in reversed(repo.commits[: upto + 1])
                ]
            )
        elif repo_id in self.server.hub.listing_fault:
            self._listing_fault(self.server.hub.listing_fault[repo_id])
        else:
            prefix = (sub or "").strip("/")
            entries = []
            for name, data in sorted(repo.files(sha).items()):
                if prefix and not name.startswith(prefix + "/"):
                    continue
                entry: dict = {"type": "file", "oid": blob_id(data), "size": len(data), "path": name}
                if name in repo.lfs:
                    digest = hashlib.sha256(data).hexdigest()
                    entry["lfs"] = {"oid": digest, "size": len(data), "pointerSize": 134}
                entries.append(entry)
            hub = self.server.hub
            if hub.page_size is None:
                self._json(entries)
                return
            page = entries[cursor : cursor + hub.page_size]
            there = hub.next_origin or hub.endpoint
            more = cursor + hub.page_size < len(entries)
            link = f"{there}/api/datasets/{repo_id}/tree/{rev}?recursive=true&cursor={cursor + hub.page_size}"
            self._json(page, link if more else None)

    def _resolve(self, repo_id: str, rev: str, name: str, head: bool) -> None:
        hub = self.server.hub
        found = self._repo_at(repo_id, rev)
        if found is None:
            return
        repo, sha = found
        token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        if repo.gated and not token:
            self._error(401, "GatedRepo", f"Access to dataset {repo_id} is restricted. Please log in.")
            return
        if repo.gated and token not in hub.accepted:
            self._error(403, "GatedRepo", f"Access to dataset {repo_id} is restricted: accept its conditions.")
            return
        files = repo.files(sha)
        if name not in files:
            self._error(404, "EntryNotFound", f"{name} does not exist on {rev}")
            return
        data = self._served(name, files[name])
        if name in repo.lfs:
            digest = hashlib.sha256(files[name]).hexdigest()
            size = len(data) if hub.lying_mirror else len(files[name])
            self.send_response(302)
            self.send_header("Location", f"http://{hub.cdn_host}:{hub.cdn.server_address[1]}/cdn/{digest}/{name}")
            self.send_header("X-Repo-Commit", sha)
            self.send_header("X-Linked-Etag", f'"{digest}"')
            self.send_header("X-Linked-Size", str(size))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._body(data, etag=blob_id(files[name]), commit=sha, head=head, name=name)

    def _served(self, name: str, data: bytes) -> bytes:
        hub = self.server.hub
        if name in hub.html:
            return HTML
        if name in hub.short:
            return data[: len(data) * 2 // 3]
        return data

    def _cdn(self, rest: str, head: bool) -> None:
        digest, _, name = rest.partition("/")
        for repo in self.server.hub.repos.values():
            for _, files in repo.commits:
                if name in files and hashlib.sha256(files[name]).hexdigest() == digest:
                    self._body(self._served(name, files[name]), etag=digest, commit=None, head=head, name=name)
                    return
        self.send_error(404)

    def _hostile(self, fault: str, data: bytes) -> None:
        if fault == "endless":
            self._stream(b"", b"x" * 65536)
        elif fault == "trickle":
            self._stream(b"", b"x", every=0.02)
        else:  # `longer` and `announced`: a body ended by closing the connection
            self.send_response(200)
            if fault == "announced":
                self.send_header("Content-Length", str(1 << 30))
            self.end_headers()
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.wfile.write(data + data if fault == "longer" else data)

    def _body(self, data: bytes, etag: str, commit: str | None, head: bool, name: str) -> None:
        if not head and name in self.server.hub.hostile:
            self._hostile(self.server.hub.hostile[name], data)
            return
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if match and int(match.group(1)) < len(data):
            start = int(match.group(1))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        if commit:
            self.send_header("X-Repo-Commit", commit)
        self.send_header("ETag", f'"{etag}"')
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        if head:
            return
        cut = self.server.hub.cut.pop(name, None)
        self.wfile.write(data[start:] if cut is None else data[start : start + cut])
        if cut is not None:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """The stand-in, with HF_ENDPOINT pointing at it, offline mode off, every hub folder under tmp_path, and every
    connection but those to 127.0.0.1 refused."""
    import huggingface_hub.constants as constants

    stand_in = Hub()
    home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_ENDPOINT", stand_in.endpoint)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setattr(constants, "HF_HOME", str(home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"))
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    connect = socket.create_connection

    def loopback_only(address, *args, **kwargs):
        assert address[0] == "127.0.0.1", f"a test tried to reach {address[0]}"
        return connect(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", loopback_only)  # huggingface_hub's httpx2 connects through it
    sock_connect = socket.socket.connect

    def connect_loopback_only(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            assert address[0] in ("127.0.0.1", "::1"), f"a test tried to reach {address[0]}"
        return sock_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect_loopback_only)  # aiohttp's (asyncio's) connections
    yield stand_in
    stand_in.close()
    assert not (home / "hub").exists() or not any((home / "hub").iterdir())  # nothing went to the user cache

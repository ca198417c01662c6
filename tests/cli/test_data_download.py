"""`shambench data download` of every registered source through the URLs its adapter pins, and with no network.

GitHub files go through a server on 127.0.0.1 that stands in for raw.githubusercontent.com (the download's client
sends it every URL it asks for) and answers only the exact pinned URLs (any other URL is a 404, so a wrong constant
fails its file); Hugging Face files go through the
hub stand-in (`tests/hub_server.py`, reached through `HF_ENDPOINT`), holding each repository at its pinned commit
only. Both serve the copies in ../shared/data; a source whose copy is not there is served from its fixture in
`tests/adapters/fixtures/` (in the released layout; a dataset card they lack is served empty), and where a fixture's bytes are not the file a checksum pins
(RAGTruth's two files), the test expects exactly that checksum failure, after the request reached the pinned URL.
"""

from __future__ import annotations

import fnmatch
import hashlib
import socket
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.data import download
from shambench.data.adapter import Adapter, HubFiles, RemoteFile, adapters
from shambench.data.benchmark import DEFAULT_SUITE
from shambench.http import Client
from tests.hub_server import Hub

FIXTURES = Path(__file__).parents[1] / "adapters" / "fixtures"
TOKEN = "hf_accepted_by_the_test"


def copy_root(adapter: Adapter, shared: Path, wanted: list[str]) -> Path:
    """Where a source's released files are served from: ../shared/data when it holds any of `wanted`, else the
    source's fixture folder."""
    folder = adapter.root(shared)
    return folder if any((folder / path).is_file() for path in wanted) else FIXTURES / folder.name


def hub_copies(adapter: Adapter, spec: HubFiles, shared: Path) -> dict[str, bytes]:
    """The files of a hub repository as served: those of the source's copy (below `spec.into`) that its patterns
    match, by their path in the repository."""
    for root in (adapter.root(shared), FIXTURES / adapter.root(shared).name):
        base = root / spec.into
        files = {
            str(p.relative_to(base)): p.read_bytes()
            for p in sorted(base.rglob("*"))
            if p.is_file()
            and p.name != download.MANIFEST
            and any(fnmatch.fnmatchcase(str(p.relative_to(base)), pattern) for pattern in spec.files)
        }
        if files:
            # the fixture folders keep no dataset card: an exact name they lack is served as an empty one
            exact = [pattern for pattern in spec.files if not download.GLOB.search(pattern)]
            return {name: b"---\n---\n" for name in exact} | files
    raise AssertionError(f"no copy of {spec.repo_id} in ../shared/data or the fixtures")


def pinned_commit(spec: HubFiles) -> str | None:
    """The commit a repository is held at: the pinned one (a short id padded to a full one), None when unpinned."""
    return spec.revision.ljust(40, "0") if spec.revision else None


class _Raw(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's naming)
        url = unquote(self.path[1:])
        self.server.asked.append(url)  # type: ignore[attr-defined]
        body = self.server.files.get(url)  # type: ignore[attr-defined]
        if body is None:
            self.send_error(404, "not a pinned URL")
            return
        self.send_response(200)
        self.send_header("ETag", f'"{hashlib.sha1(body).hexdigest()}"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class PinnedRaw(ThreadingHTTPServer):
    """Stands in for raw.githubusercontent.com on 127.0.0.1: the bytes of each pinned URL, and every URL asked for."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Raw)
        self.files: dict[str, bytes] = {}
        self.asked: list[str] = []

    def client(self) -> Client:
        """The download's client, sending every URL it asks for here."""
        return Through(f"http://127.0.0.1:{self.server_address[1]}")


class Through(Client):
    """A download client that sends every request to one server, the URL it was for as the path."""

    def __init__(self, server: str):
        super().__init__(timeout=30, decompress=False)
        self.server = server

    def get(self, url, headers=None, params=None):
        return super().get(f"{self.server}/{quote(url, safe='')}", headers, params)


@pytest.fixture
def raw():
    server = PinnedRaw()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def expected_outcome(remote: RemoteFile, body: bytes) -> str:
    """`fetched`, or the failure a fixture whose bytes are not the pinned file must give."""
    sha, blob = hashlib.sha256(body).hexdigest(), hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()
    if remote.sha256 not in (None, sha):
        return f"failed: {remote.url}: SHA-256 mismatch"
    if remote.git_blob not in (None, blob):
        return f"failed: {remote.url}: git blob id mismatch"
    return "fetched"


def test_every_source_downloads_through_its_pinned_urls(shared_data, hub: Hub, raw: PinnedRaw, monkeypatch, tmp_path):
    monkeypatch.setattr(download, "make_client", raw.client)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub.accepted.add(TOKEN)
    sources = [entry.factory() for entry in adapters.entries()]
    installed: dict[tuple[str, str], bytes] = {}  # (folder, path) -> bytes that must land there
    expected: dict[str, str] = {}  # source/path -> outcome
    commits: dict[str, str] = {}  # repository -> the commit its files must be asked at
    for adapter in sources:
        plain = [r for r in adapter.remote_files if isinstance(r, RemoteFile)]
        root = copy_root(adapter, shared_data, [r.path for r in plain])
        for remote in plain:
            raw.files[remote.url] = body = (root / remote.path).read_bytes()
            expected[f"{adapter.name}/{remote.path}"] = expected_outcome(remote, body)
            if expected[f"{adapter.name}/{remote.path}"] == "fetched":
                installed[(adapter.root(tmp_path).name, remote.path)] = body
        for spec in (r for r in adapter.remote_files if isinstance(r, HubFiles)):
            files = hub_copies(adapter, spec, shared_data)
            repo = hub.repo(spec.repo_id, gated=spec.gated)
            commits[spec.repo_id] = repo.commit(files, sha=pinned_commit(spec))
            repo.lfs |= {name for name in files if name.endswith(".parquet")}
            for name, body in files.items():
                path = str(Path(spec.into) / name) if spec.into else name
                expected[f"{adapter.name}/{path}"] = "fetched"
                installed[(adapter.root(tmp_path).name, path)] = body
    default = [a.name for a in sources if a.suite == DEFAULT_SUITE]
    others = [a.name for a in sources if a.suite != DEFAULT_SUITE]
    assert default and others
    got: dict[str, str] = {}
    for names in ([], others):  # what a user types first, then the sources outside the default suite by name
        result = CliRunner().invoke(
            main, ["data", "download", *names, "--data-dir", str(tmp_path), "--no-progress"], catch_exceptions=False
        )
        failing = {label.split("/")[0] for label, want in expected.items() if want.startswith("failed")}
        assert result.exit_code == (2 if failing & set(names or default) else 0), result.output
        for line in result.stderr.splitlines():
            label, _, status = line.removeprefix("failed: ").partition(": ")
            if line.startswith("failed: "):
                got[label] = "failed: " + status
            elif status.split(" (")[0] in ("fetched", "present"):
                got[label] = status.split(" (")[0]
    assert got.keys() == expected.keys()
    for label, want in expected.items():
        assert got[label].startswith(want), (label, got[label])
    assert {label.split("/")[0] for label in got} == {a.name for a in sources}
    for (folder, path), body in installed.items():
        assert (tmp_path / folder / path).read_bytes() == body, f"{folder}/{path} is not the served copy"
    assert sorted(set(raw.asked)) == sorted(raw.files)  # each pinned URL asked for, and no other
    asked_at = {
        (parts[2] + "/" + parts[3], parts[5])
        for method, path, _ in hub.requests
        if (parts := path.split("/"))[1] == "datasets" and parts[4] == "resolve"
    }
    assert asked_at == set(commits.items())  # every hub file asked for at its repository's pinned commit


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (a connection there is refused, as with no network)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_with_no_network_every_file_is_tried_and_listed_and_the_exit_is_2(hub, monkeypatch, tmp_path):
    import huggingface_hub.utils._http as hub_http

    nowhere = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setattr(download, "make_client", lambda: Through(nowhere))
    monkeypatch.setenv("HF_ENDPOINT", nowhere)
    # huggingface_hub retries a refused connection five times, sleeping 1+2+4+8+8 s: its own policy, not shambench's
    monkeypatch.setattr(hub_http, "time", types.SimpleNamespace(sleep=lambda seconds: None))
    result = CliRunner().invoke(
        main, ["data", "download", "--data-dir", str(tmp_path), "--no-progress"], catch_exceptions=False
    )
    sources = [e.factory() for e in adapters.entries()]
    tried = [
        f"{a.name}/{r.path if isinstance(r, RemoteFile) else r.repo_id}"
        for a in sources
        if a.suite == DEFAULT_SUITE
        for r in a.remote_files
    ]
    failed = [line for line in result.stderr.splitlines() if line.startswith("failed: ")]
    assert [line.removeprefix("failed: ").split(": ")[0] for line in failed] == tried
    assert all("ConnectError" in line for line in failed)
    assert "Traceback" not in result.output
    assert result.exit_code == 2
    assert (
        result.stderr.splitlines()[-1] == f"error: {len(tried)} of {len(tried)} files failed (0 installed); see above"
    )

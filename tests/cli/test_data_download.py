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
from pathlib import Path

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.data import download
from shambench.data.adapter import Adapter, HubFiles, RemoteFile, adapters
from shambench.data.benchmark import DEFAULT_SUITE
from shambench.http import Client
from tests.data.test_download import FileServer
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


class Through(Client):
    """A download client that sends every request for the internet (GitHub's files) to one server, the URL it was
    for as the path (in hex, which no URL normalisation changes); those to 127.0.0.1 (the hub's stand-in, at
    `HF_ENDPOINT`) go where they are addressed."""

    def __init__(self, server: str, timeout: float = 30):
        super().__init__(timeout=timeout, decompress=False)
        self.server = server

    def get(self, url, headers=None, params=None):
        local = url.startswith("http://127.0.0.1:")
        return super().get(url if local else f"{self.server}/{url.encode().hex()}", headers, params)


@pytest.fixture
def raw():
    """Stands in for raw.githubusercontent.com on 127.0.0.1: `pin(url, body)` serves a pinned URL's bytes (any
    other URL is a 404), `asked()` lists every URL asked for."""
    stand_in = FileServer()
    thread = threading.Thread(target=stand_in.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield types.SimpleNamespace(
        pin=lambda url, body: stand_in.files.__setitem__(f"/{url.encode().hex()}", body),
        pinned=lambda: sorted(bytes.fromhex(path[1:]).decode() for path in stand_in.files),
        asked=lambda: sorted({bytes.fromhex(path[1:]).decode() for path, _, _ in stand_in.requests}),
        client=lambda timeout=30: Through(stand_in.url(""), timeout),
    )
    stand_in.shutdown()
    stand_in.server_close()


def expected_outcome(remote: RemoteFile, body: bytes) -> str:
    """`fetched`, or the failure a fixture whose bytes are not the pinned file must give."""
    sha, blob = hashlib.sha256(body).hexdigest(), hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()
    if remote.sha256 not in (None, sha):
        return f"failed: {remote.url}: SHA-256 mismatch"
    if remote.git_blob not in (None, blob):
        return f"failed: {remote.url}: git blob id mismatch"
    return "fetched"


def test_every_source_downloads_through_its_pinned_urls(shared_data, hub: Hub, raw, monkeypatch, tmp_path):
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
            body = (root / remote.path).read_bytes()
            raw.pin(remote.url, body)
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
    assert raw.asked() == raw.pinned()  # each pinned URL asked for, and no other
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
    nowhere = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setattr(download, "make_client", lambda timeout=30: Through(nowhere, timeout))
    monkeypatch.setenv("HF_ENDPOINT", nowhere)
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

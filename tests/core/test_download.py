"""Downloads against a local HTTP server on 127.0.0.1 that honours Range and can cut a transfer short."""

from __future__ import annotations

import hashlib
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from shambench.data.adapter import RemoteFile
from shambench.data.download import fetch, make_client, part_path
from shambench.errors import DownloadError

CONTENT = b"".join(b"line %03d of an invented released file\n" % i for i in range(200))  # 38 bytes x 200 = 7600


class FileServer(ThreadingHTTPServer):
    """Serves `files`; `cut[path] = n` makes the next response for `path` stop after n body bytes."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.files: dict[str, bytes] = {}
        self.cut: dict[str, int] = {}
        self.ignore_range: set[str] = set()
        self.requests: list[tuple[str, str | None]] = []

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


class Handler(BaseHTTPRequestHandler):
    server: FileServer

    def log_message(self, *args) -> None:  # keep the test output quiet
        pass

    def do_GET(self) -> None:
        srv = self.server
        srv.requests.append((self.path, self.headers.get("Range")))
        body = srv.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if match and self.path not in srv.ignore_range:
            start = int(match.group(1))
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        payload = body[start:]
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        cut = srv.cut.pop(self.path, None)
        self.wfile.write(payload if cut is None else payload[:cut])
        if cut is not None:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True


@pytest.fixture
def server():
    srv = FileServer()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def client():
    with make_client(timeout=5) as c:
        yield c


def _remote(server, path="/data/file.jsonl", sha=None) -> RemoteFile:
    server.files[path] = CONTENT
    return RemoteFile(url=server.url(path), path="file.jsonl", sha256=sha)


SHA = hashlib.sha256(CONTENT).hexdigest()


def test_full_download_checks_the_sha_and_reports_progress(server, client, tmp_path):
    dest = tmp_path / "src" / "file.jsonl"
    seen = []
    assert fetch(client, _remote(server, sha=SHA), dest, lambda done, total: seen.append((done, total)))
    assert dest.read_bytes() == CONTENT
    assert not part_path(dest).exists()
    assert seen[0] == (0, 7600) and seen[-1] == (7600, 7600)
    # A second call finds the file current and makes no request.
    assert not fetch(client, _remote(server, sha=SHA), dest)
    assert server.requests == [("/data/file.jsonl", None)]


def test_interrupted_transfer_resumes_with_a_range_request(server, client, tmp_path):
    remote = _remote(server, sha=SHA)
    server.cut["/data/file.jsonl"] = 3000
    dest = tmp_path / "file.jsonl"
    assert fetch(client, remote, dest)
    assert dest.read_bytes() == CONTENT
    # The first response stopped after 3,000 bytes, so the retry asked for bytes 3000 onwards.
    assert server.requests == [("/data/file.jsonl", None), ("/data/file.jsonl", "bytes=3000-")]


def test_a_later_run_resumes_the_part_left_by_a_failed_one(server, client, tmp_path):
    remote = _remote(server, sha=SHA)
    dest = tmp_path / "file.jsonl"
    server.cut["/data/file.jsonl"] = 1234
    with pytest.raises(DownloadError, match=r"transfer failed after 1 attempts .* keeps 1234 bytes, run the command"):
        fetch(client, remote, dest, attempts=1)
    assert part_path(dest).stat().st_size == 1234 and not dest.exists()
    assert fetch(client, remote, dest)
    assert dest.read_bytes() == CONTENT
    assert server.requests[-1] == ("/data/file.jsonl", "bytes=1234-")


def test_checksum_mismatch_is_rejected_and_nothing_installed(server, client, tmp_path):
    remote = _remote(server, sha="0" * 64)
    dest = tmp_path / "file.jsonl"
    with pytest.raises(DownloadError) as err:
        fetch(client, remote, dest)
    assert f"SHA-256 mismatch for {dest} (expected {'0' * 64}, got {SHA})" in str(err.value)
    assert not dest.exists() and not part_path(dest).exists()


def test_stale_file_with_wrong_checksum_is_fetched_again(server, client, tmp_path):
    dest = tmp_path / "file.jsonl"
    dest.write_bytes(b"an older release")
    assert fetch(client, _remote(server, sha=SHA), dest)
    assert dest.read_bytes() == CONTENT


def test_server_ignoring_range_restarts_from_zero(server, client, tmp_path):
    remote = _remote(server, sha=SHA)
    server.ignore_range.add("/data/file.jsonl")
    dest = tmp_path / "file.jsonl"
    part_path(dest).write_bytes(b"garbage!")
    assert fetch(client, remote, dest)
    # The request asked for byte 8 onwards, the server sent everything with 200, and the part was overwritten.
    assert server.requests == [("/data/file.jsonl", "bytes=8-")]
    assert dest.read_bytes() == CONTENT


def test_complete_part_is_installed_after_a_416(server, client, tmp_path):
    remote = _remote(server, sha=SHA)
    dest = tmp_path / "file.jsonl"
    part_path(dest).write_bytes(CONTENT)
    assert fetch(client, remote, dest)
    assert server.requests == [("/data/file.jsonl", "bytes=7600-")]
    assert dest.read_bytes() == CONTENT


def test_http_error_names_the_url(server, client, tmp_path):
    remote = RemoteFile(url=server.url("/missing.json"), path="missing.json")
    with pytest.raises(DownloadError, match=r"/missing\.json: HTTP 404 Not Found \(expected the file's content\)"):
        fetch(client, remote, tmp_path / "missing.json")


def test_unreachable_server_fails_after_the_attempts(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: connections are refused
        remote = RemoteFile(url=f"http://127.0.0.1:{port}/f", path="f")
        with httpx.Client(timeout=2) as c, pytest.raises(DownloadError, match="transfer failed after 2 attempts"):
            fetch(c, remote, tmp_path / "f", attempts=2)

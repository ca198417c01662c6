"""Downloads of plain-URL (GitHub raw) files against a local HTTP server on 127.0.0.1 that honours Range and
If-Range, sends ETags, and can cut a transfer short, change a file, or answer with an HTML page."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given
from hypothesis import strategies as st

import shambench.fs as fs
from shambench.data import download
from shambench.data.download import (
    MANIFEST,
    Target,
    content_problem,
    digests,
    fetch,
    make_client,
    parse_size,
    part_path,
    read_manifest,
    trusted,
)
from shambench.errors import DownloadError, FolderError
from tests import leaks
from tests.hub_server import HTML, blob_id

CONTENT = b"".join(b'{"line": %03d, "text": "invented row"}\n' % i for i in range(200))  # 38 bytes x 200 = 7600
NEWER = CONTENT.replace(b"invented", b"reworded")
SHA = hashlib.sha256(CONTENT).hexdigest()


class FileServer(ThreadingHTTPServer):
    """Serves `files` with a strong ETag (the content's SHA-1); `cut[path] = n` makes the next response for `path`
    stop after n body bytes; `no_length` paths are sent without Content-Length."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.files: dict[str, bytes] = {}
        self.cut: dict[str, int] = {}
        self.ignore_range: set[str] = set()
        self.no_length: set[str] = set()
        self.trickle: set[str] = set()  # sent a byte every 20 ms (for at most 5 s)
        self.requests: list[tuple[str, str | None, str | None]] = []  # (path, Range, If-Range)
        self.etag_echo = ""  # put in every ETag (a server echoing the token)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


def etag_of(body: bytes) -> str:
    return '"' + hashlib.sha1(body).hexdigest() + '"'


class Handler(BaseHTTPRequestHandler):
    server: FileServer

    def log_message(self, *args) -> None:  # keep the test output quiet
        pass

    def do_GET(self) -> None:
        srv = self.server
        srv.requests.append((self.path, self.headers.get("Range"), self.headers.get("If-Range")))
        body = srv.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if_range = self.headers.get("If-Range")
        # RFC 9110: a Range whose If-Range validator no longer matches is ignored, and the whole file is sent.
        honoured = match and self.path not in srv.ignore_range and (if_range is None or if_range == etag_of(body))
        if honoured:
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
        self.send_header("ETag", etag_of(body) + srv.etag_echo)
        if self.path not in srv.no_length:
            self.send_header("Content-Length", str(len(payload)))
        else:
            self.close_connection = True
        self.end_headers()
        cut = srv.cut.pop(self.path, None)
        if self.path in srv.trickle:
            for byte in payload[:250]:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.02)
            self.close_connection = True
            return
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


def _target(server, path="/data/file.jsonl", sha=SHA, body=CONTENT, **kw) -> Target:
    server.files[path] = body
    return Target(url=server.url(path), path="file.jsonl", sha256=sha, **kw)


def test_full_download_checks_the_sha_records_it_and_reports_progress(server, client, tmp_path):
    seen = []
    assert fetch(client, _target(server), tmp_path, lambda done, total: seen.append((done, total)))
    assert (tmp_path / "file.jsonl").read_bytes() == CONTENT
    assert not part_path(tmp_path / "file.jsonl").exists()
    assert seen[0] == (0, 7600) and seen[-1] == (7600, 7600)
    entry = read_manifest(tmp_path)["file.jsonl"]
    assert (entry.size, entry.sha256, entry.git_blob) == (7600, SHA, blob_id(CONTENT))
    # A second call trusts the recorded file and makes no request.
    assert not fetch(client, _target(server), tmp_path)
    assert server.requests == [("/data/file.jsonl", None, None)]


def test_a_present_file_is_trusted_from_its_record_without_being_read(server, client, tmp_path, monkeypatch):
    fetch(client, _target(server), tmp_path)
    monkeypatch.setattr(download, "digests", lambda path: pytest.fail("the file was hashed"))
    assert trusted(tmp_path, _target(server))
    # ... but only for the digest it was recorded with.
    assert not trusted(tmp_path, _target(server, sha="0" * 64))


def test_a_present_file_changed_since_it_was_recorded_is_hashed_and_fetched_again(server, client, tmp_path):
    fetch(client, _target(server), tmp_path)
    dest = tmp_path / "file.jsonl"
    dest.write_bytes(CONTENT.replace(b'"line": 001', b'"line": 999'))  # same size, other bytes, a newer mtime
    os.utime(dest, ns=(dest.stat().st_atime_ns, dest.stat().st_mtime_ns + 10**9))
    assert fetch(client, _target(server), tmp_path)
    assert dest.read_bytes() == CONTENT and len(server.requests) == 2


def test_a_file_placed_by_hand_is_hashed_once_then_recorded(server, client, tmp_path):
    (tmp_path / "file.jsonl").write_bytes(CONTENT)
    assert not (tmp_path / MANIFEST).exists()
    assert not fetch(client, _target(server), tmp_path)
    assert server.requests == [] and read_manifest(tmp_path)["file.jsonl"].sha256 == SHA


def test_interrupted_transfer_resumes_with_range_and_if_range(server, client, tmp_path):
    server.cut["/data/file.jsonl"] = 3000
    assert fetch(client, _target(server), tmp_path)
    assert (tmp_path / "file.jsonl").read_bytes() == CONTENT
    # The first response stopped after 3,000 bytes, so the retry asked for bytes 3000 onwards, if still that file.
    assert server.requests == [
        ("/data/file.jsonl", None, None),
        ("/data/file.jsonl", "bytes=3000-", etag_of(CONTENT)),
    ]


def test_a_later_run_resumes_the_part_left_by_a_failed_one(server, client, tmp_path):
    server.cut["/data/file.jsonl"] = 1234
    with pytest.raises(DownloadError, match=r"transfer failed after 1 attempts .* keeps 1234 bytes, run the command"):
        fetch(client, _target(server), tmp_path, attempts=1)
    assert part_path(tmp_path / "file.jsonl").stat().st_size == 1234 and not (tmp_path / "file.jsonl").exists()
    assert fetch(client, _target(server), tmp_path)
    assert (tmp_path / "file.jsonl").read_bytes() == CONTENT
    assert server.requests[-1] == ("/data/file.jsonl", "bytes=1234-", etag_of(CONTENT))


def test_an_upstream_change_between_runs_restarts_the_file(server, client, tmp_path):
    # A part of the old file survives a failed run; the file then changes upstream (another ETag).
    server.cut["/data/file.jsonl"] = 3000
    with pytest.raises(DownloadError):
        fetch(client, _target(server), tmp_path, attempts=1)
    newer = _target(server, body=NEWER, sha=hashlib.sha256(NEWER).hexdigest())
    assert fetch(client, newer, tmp_path)
    # If-Range carried the old ETag, so the server sent the whole new file (200) and the part restarted: without
    # it, bytes 3000- of the new file would have been appended to the old one's first 3,000.
    assert server.requests[-1] == ("/data/file.jsonl", "bytes=3000-", etag_of(CONTENT))
    assert (tmp_path / "file.jsonl").read_bytes() == NEWER


def test_a_token_a_server_echoes_in_its_etag_is_not_written_beside_the_part(server, client, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", leaks.ODD_KEY)
    server.etag_echo = leaks.ODD_KEY
    server.cut["/data/file.jsonl"] = 1234
    with pytest.raises(DownloadError):
        fetch(client, _target(server), tmp_path, attempts=1)
    sidecar = tmp_path / "file.jsonl.part.json"
    assert sidecar.is_file() and '"etag": ' in sidecar.read_text()
    assert leaks.leaks(leaks.ODD_KEY, [sidecar], []) == []
    assert fetch(client, _target(server), tmp_path)  # the masked ETag is no validator: the file starts over
    assert (tmp_path / "file.jsonl").read_bytes() == CONTENT


def test_a_part_without_a_recorded_etag_is_not_resumed(server, client, tmp_path):
    part_path(tmp_path / "file.jsonl").write_bytes(CONTENT[:3000])
    assert fetch(client, _target(server), tmp_path)
    assert server.requests == [("/data/file.jsonl", None, None)]
    assert (tmp_path / "file.jsonl").read_bytes() == CONTENT


def test_checksum_mismatch_is_rejected_and_nothing_installed(server, client, tmp_path):
    with pytest.raises(DownloadError) as err:
        fetch(client, _target(server, sha="0" * 64), tmp_path)
    dest = tmp_path / "file.jsonl"
    assert str(err.value) == (
        f"{server.url('/data/file.jsonl')}: SHA-256 mismatch (expected {'0' * 64}, got {SHA}) for {dest}; "
        "the download was discarded, nothing installed"
    )
    assert not dest.exists() and not part_path(dest).exists() and not (tmp_path / MANIFEST).exists()


def test_git_blob_ids_verify_files_without_a_sha256(server, client, tmp_path):
    good = _target(server, sha=None, git_blob=blob_id(CONTENT))
    assert fetch(client, good, tmp_path)
    with pytest.raises(DownloadError, match="git blob id mismatch"):
        fetch(client, _target(server, path="/other", sha=None, git_blob="1" * 40), tmp_path / "b")


def test_a_file_without_a_checksum_is_refused(server, client, tmp_path):
    with pytest.raises(DownloadError, match="no checksum is declared for this file"):
        fetch(client, _target(server, sha=None), tmp_path)
    assert server.requests == []


def test_an_html_page_sent_with_200_is_named_with_its_url(server, client, tmp_path):
    with pytest.raises(DownloadError) as err:
        fetch(client, _target(server, body=HTML), tmp_path)
    assert str(err.value).startswith(f"{server.url('/data/file.jsonl')}: the server sent an HTML page, not the file")
    assert not (tmp_path / "file.jsonl").exists()


def test_a_cleanly_ended_short_body_is_rejected(server, client, tmp_path):
    with pytest.raises(DownloadError, match="SHA-256 mismatch"):
        fetch(client, _target(server, body=CONTENT[: len(CONTENT) * 2 // 3]), tmp_path)
    assert not (tmp_path / "file.jsonl").exists()


def test_a_file_larger_than_the_cap_is_refused_before_it_is_written(server, client, tmp_path):
    with pytest.raises(DownloadError, match=r"7600 bytes, larger than the size cap of 7000 bytes \(--max-size\)"):
        fetch(client, _target(server), tmp_path, max_bytes=7000)
    assert not part_path(tmp_path / "file.jsonl").exists()
    # Without a Content-Length, the transfer stops once the cap is passed.
    server.no_length.add("/data/file.jsonl")
    with pytest.raises(DownloadError, match="more than the size cap of 7000 bytes"):
        fetch(client, _target(server), tmp_path, max_bytes=7000)
    assert not part_path(tmp_path / "file.jsonl").exists() and not (tmp_path / "file.jsonl").exists()


def test_a_trickling_server_fails_the_file_by_the_deadline_and_the_other_files_still_come(server, tmp_path):
    # A byte every 20 ms for 5 s: within 2 s plus 1 s per 1,000 bytes, each attempt ends long before the file does
    # (a busy machine only slows the trickle), and 2 s is ample for the good file's reply to begin.
    server.trickle.add("/data/slow.jsonl")
    slow = _target(server, path="/data/slow.jsonl")
    with make_client(timeout=2, min_rate=1000) as c:
        with pytest.raises(DownloadError, match=r"transfer failed after 2 attempts \(Timeout: no complete answer"):
            fetch(c, slow, tmp_path, attempts=2)
        assert fetch(c, _target(server), tmp_path)
    assert (tmp_path / "file.jsonl").read_bytes() == CONTENT


def test_server_ignoring_range_restarts_from_zero(server, client, tmp_path):
    server.cut["/data/file.jsonl"] = 8
    server.ignore_range.add("/data/file.jsonl")
    assert fetch(client, _target(server), tmp_path)
    # The retry asked for byte 8 onwards, the server sent everything with 200, and the part was overwritten.
    assert [r[1] for r in server.requests] == [None, "bytes=8-"]
    assert (tmp_path / "file.jsonl").read_bytes() == CONTENT


def test_http_error_names_the_url(server, client, tmp_path):
    target = Target(url=server.url("/missing.json"), path="missing.json", sha256=SHA)
    with pytest.raises(DownloadError, match=r"/missing\.json: HTTP 404 Not Found \(expected the file's content\)"):
        fetch(client, target, tmp_path)


def test_unreachable_server_fails_after_the_attempts(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: connections are refused
        target = Target(url=f"http://127.0.0.1:{port}/f", path="f", sha256=SHA)
        with make_client(timeout=2) as c, pytest.raises(DownloadError, match="transfer failed after 2 attempts"):
            fetch(c, target, tmp_path, attempts=2)


def test_content_checks(tmp_path):
    cases = {
        "a.json": (b"  \n<!doctype HTML><html>", "the server sent an HTML page, not the file"),
        "b.jsonl": (b"Not Found", "the content does not start like JSON (b'Not Found')"),
        "c.parquet": (b"{}", "the content is not Parquet (it starts b'{}')"),
        "d.jsonl": (b'{"id": 1}\n', None),
        "e.parquet.part": (b"PAR1....", None),
        "f.csv": (b"id,text\n", None),
    }
    for name, (body, problem) in cases.items():
        (tmp_path / name).write_bytes(body)
        assert content_problem(tmp_path / name) == problem, name


@given(st.binary(max_size=3000))
def test_digests_match_hashlib_and_git(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("d") / "f"
    path.write_bytes(data)
    assert digests(path) == (len(data), hashlib.sha256(data).hexdigest(), blob_id(data))


def test_git_blob_id_of_a_known_file():
    # `printf 'hello\n' | git hash-object --stdin`
    assert blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_sizes_parse():
    assert [parse_size(s) for s in ("123", "2GB", "500mb", "1.5GiB", "4 KiB")] == [
        123,
        2 * 10**9,
        500 * 10**6,
        int(1.5 * 2**30),
        4096,
    ]
    with pytest.raises(ValueError, match="not a size"):
        parse_size("lots")


def test_a_full_disk_is_a_clear_error_before_a_byte_is_written(server, client, tmp_path, monkeypatch):
    class Usage:
        free = 1000

    monkeypatch.setattr(download.shutil, "disk_usage", lambda where: Usage)
    with pytest.raises(DownloadError, match=f"7600 more bytes needed, only 1000 free on the disk holding {tmp_path}"):
        fetch(client, _target(server), tmp_path)
    assert not part_path(tmp_path / "file.jsonl").exists()


@pytest.mark.parametrize("name", ["../other/file.jsonl", "sub/../../../escape/file.jsonl", "/abs/file.jsonl"])
def test_a_path_leaving_the_folder_is_refused_before_any_folder_is_made(server, client, tmp_path, name):
    folder = tmp_path / "data" / "src"
    target = _target(server).model_copy(update={"path": name})
    with pytest.raises(FolderError, match="leaves"):
        fetch(client, target, folder)
    assert sorted(p.name for p in tmp_path.rglob("*")) == [] and server.requests == []


@pytest.mark.parametrize("planted", ["file.jsonl.part", "file.jsonl.part.json", "file.jsonl"])
def test_a_link_at_a_part_its_record_or_the_file_is_never_written_through(server, client, tmp_path, planted):
    folder, outside = tmp_path / "data" / "src", tmp_path / "outside.txt"
    folder.mkdir(parents=True)
    outside.write_text("keep me\n")
    (folder / planted).symlink_to(outside)
    with pytest.raises(FolderError, match=f"{planted}: is a symbolic link"):
        fetch(client, _target(server), folder)
    assert outside.read_text() == "keep me\n" and (folder / planted).is_symlink()


def test_the_staging_clean_up_deletes_only_its_marked_folder_never_through_a_link(tmp_path):
    staging, outside = tmp_path / "data" / download.HUB_STAGING, tmp_path / "outside"
    (outside / "inner").mkdir(parents=True)
    (outside / download.STAGING_MARK).write_text("a mark at a link's target does not count\n")
    (staging / "owner").mkdir(parents=True)
    (staging / "owner" / "linked").symlink_to(outside)
    (staging / "owner" / "unmarked").mkdir()
    fs.mark(staging / "owner" / "mine", tmp_path / "data", download.STAGING_MARK)
    (staging / "owner" / "mine" / "file").write_text("staged\n")
    download._clear_staging(staging, "owner/linked")
    download._clear_staging(staging, "owner/unmarked")
    assert sorted(p.name for p in outside.rglob("*")) == [download.STAGING_MARK, "inner"]
    assert sorted(p.name for p in (staging / "owner").iterdir()) == ["linked", "mine", "unmarked"]
    download._clear_staging(staging, "owner/mine")
    assert sorted(p.name for p in (staging / "owner").iterdir()) == ["linked", "unmarked"]

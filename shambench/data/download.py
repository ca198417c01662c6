"""Fetching the released files of a source into the data directory (`shambench data download`).

Each `RemoteFile` goes to `<data dir>/<source folder>/<path>` by way of a `.part` file beside it. An interrupted
transfer keeps the bytes that arrived, and the next attempt (in the same call, or a later run) asks only for the
rest with an HTTP `Range: bytes=N-` request; a server that answers 200 instead of 206 sends the whole file, which
then replaces the part. When the adapter gives a SHA-256, the finished file must match it: on a mismatch the part
is deleted and nothing is installed. A file already in place with the right checksum is not fetched again.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from pathlib import Path

import httpx

from shambench.data.adapter import Adapter, RemoteFile
from shambench.errors import DownloadError

CHUNK = 1 << 16
ATTEMPTS = 3
# (bytes so far, total bytes or None when the server does not say)
ProgressHook = Callable[[int, "int | None"], None]


def make_client(timeout: float = 60.0) -> httpx.Client:
    """An HTTP client that follows redirects (the Hugging Face hub redirects to its CDN)."""
    return httpx.Client(follow_redirects=True, timeout=httpx.Timeout(timeout, connect=15.0))


def sha256_of(path: Path) -> str:
    """The hex SHA-256 of a file's content."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def part_path(dest: Path) -> Path:
    """Where the bytes of an unfinished download of `dest` are kept."""
    return dest.with_name(dest.name + ".part")


def is_current(dest: Path, remote: RemoteFile) -> bool:
    """Whether `dest` is present and, when a checksum is known, matches it."""
    return dest.is_file() and (remote.sha256 is None or sha256_of(dest) == remote.sha256)


def fetch(
    client: httpx.Client,
    remote: RemoteFile,
    dest: Path,
    on_progress: ProgressHook | None = None,
    attempts: int = ATTEMPTS,
) -> bool:
    """Download `remote` to `dest`, resuming a partial file; False when `dest` was already current."""
    if is_current(dest, remote):
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(dest)
    for attempt in range(1, attempts + 1):
        try:
            _transfer(client, remote.url, part, on_progress or (lambda done, total: None))
            break
        except httpx.TransportError as err:
            if attempt == attempts:
                kept = part.stat().st_size if part.exists() else 0
                raise DownloadError(
                    f"{remote.url}: transfer failed after {attempts} attempts ({err.__class__.__name__}: {err}); "
                    f"{part} keeps {kept} bytes, run the command again to resume"
                ) from None
    _verify(part, remote, dest)
    os.replace(part, dest)
    return True


def _transfer(client: httpx.Client, url: str, part: Path, on_progress: ProgressHook) -> None:
    have = part.stat().st_size if part.exists() else 0
    # Identity encoding, so that byte ranges count the file's own bytes and not a compressed stream's.
    headers = {"Accept-Encoding": "identity", **({"Range": f"bytes={have}-"} if have else {})}
    with client.stream("GET", url, headers=headers) as resp:
        if resp.status_code == 416 and _range_total(resp) == have:
            return  # the part already holds every byte
        if resp.status_code not in (200, 206):
            if resp.status_code == 416:
                part.unlink()
            raise DownloadError(f"{url}: HTTP {resp.status_code} {resp.reason_phrase} (expected the file's content)")
        if resp.status_code == 206 and _range_start(resp) != have:
            raise DownloadError(f"{url}: the server resumed at the wrong offset (asked for byte {have})")
        start = have if resp.status_code == 206 else 0
        length = resp.headers.get("Content-Length")
        total = start + int(length) if length is not None else None
        done = start
        on_progress(done, total)
        with part.open("ab" if start else "wb") as fh:
            for chunk in resp.iter_raw():  # written as they arrive, so an interruption loses nothing
                fh.write(chunk)
                done += len(chunk)
                on_progress(done, total)


def _range_start(resp: httpx.Response) -> int | None:
    match = re.match(r"bytes (\d+)-", resp.headers.get("Content-Range", ""))
    return int(match.group(1)) if match else None


def _range_total(resp: httpx.Response) -> int | None:
    match = re.search(r"/(\d+)$", resp.headers.get("Content-Range", ""))
    return int(match.group(1)) if match else None


def _verify(part: Path, remote: RemoteFile, dest: Path) -> None:
    if remote.sha256 is None:
        return
    got = sha256_of(part)
    if got != remote.sha256:
        part.unlink()
        raise DownloadError(
            f"{remote.url}: SHA-256 mismatch for {dest} (expected {remote.sha256}, got {got}); the download was "
            "discarded"
        )


def targets(adapter: Adapter, data_dir: Path) -> list[tuple[RemoteFile, Path]]:
    """Each released file of a source with the path it is saved to."""
    return [(remote, adapter.root(data_dir) / remote.path) for remote in adapter.remote_files]

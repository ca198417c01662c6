"""Fetching and verifying the released files of a source (`shambench data download`, `shambench data verify`).

Every file is checked before it is installed at `<data dir>/<source folder>/<path>`: against the SHA-256 or git
blob id its adapter declares (GitHub files), or against the size and digest the Hugging Face hub reports for the
pinned commit (LFS SHA-256, else git blob id). Content that is plainly not the file (an HTML page where JSON or
Parquet was expected) is an error naming the URL. A file that fails a check is deleted and never installed.

Every file travels the same way, through the one HTTP stack (`shambench.http`): each request ends at the client's
deadline (its `timeout` after it starts, plus a second per `min_rate` bytes received), and its body is written
as it arrives, never more bytes than a cap (`--max-size`; for a hub file, the size the hub's listing reports, so
an endless body or one longer than listed stops there and nothing is installed). A broken transfer is resumed
within the command with `Range` plus `If-Range: <ETag>`, so a file that changed upstream in between is sent whole
and the part restarts (a part without a strong ETag is never resumed). GitHub files go by way of a `.part` file
beside the destination, which also survives to the next run. Hub files are listed through the hub's JSON API
(`shambench.data.hub`) and fetched at the pinned commit's resolve URL, following the hub's redirect to its CDN
(the token, `Authorization: Bearer`, goes to the hub's origin only), staged in `<data dir>/.shambench-hub/` and
removed from there once installed; a repository's staging folder is removed once its files were tried, so a
failed hub file restarts on the next run.

Each source folder keeps `.shambench-downloads.json`: per installed file its size, modification time and
digests. A present file is trusted without reading it when its size and time match that record and the recorded
digest is the expected one; otherwise it is hashed again.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, NamedTuple

import shambench.fs as fs
from shambench.data.adapter import Adapter, HubFiles, RemoteFile
from shambench.data.hub import MAX_REPLY_BYTES, HubAccess, hub_access, listed_files, refusal, resolve_commit
from shambench.errors import DownloadError, FolderError
from shambench.http import MIN_RATE, Client, Reply, TransportError
from shambench.io import write_atomic
from shambench.schema import Model, Name
from shambench.structured import json_file

CHUNK = 1 << 16
ATTEMPTS = 3
DEFAULT_MAX_BYTES = 4 << 30
MANIFEST = ".shambench-downloads.json"
HUB_STAGING = ".shambench-hub"
# The file that marks a repository's staging folder as made by this tool (the only kind its clean-up deletes).
STAGING_MARK = ".shambench-staging"
# (bytes so far, total bytes or None when the server does not say)
ProgressHook = Callable[[int, "int | None"], None]
Status = Literal["fetched", "present", "failed", "ok", "absent", "mismatch", "unrecorded", "refused"]
GLOB = re.compile(r"[*?\[]")


class Target(Model):
    """One released file as the download installs it: where its bytes come from, where they go, what they must be."""

    url: str
    """Where the bytes come from (named in every error)."""
    path: str
    """Where the file goes, relative to the source's folder."""
    size: int | None = None
    """Expected size in bytes, when the origin reports it (the hub does)."""
    sha256: str | None = None
    """Expected SHA-256 of the content."""
    git_blob: str | None = None
    """Expected git blob id of the content."""
    repo_id: Name | None = None
    """The Hugging Face dataset repository, for a hub file."""
    commit: str | None = None
    """The commit a hub file is taken from."""
    filename: str | None = None
    """The file's path in that repository."""


class Recorded(Model):
    """What a source folder's manifest keeps of an installed file, to re-verify it cheaply."""

    size: int
    """Size in bytes when installed."""
    mtime_ns: int
    """Modification time when installed (a later change makes the file be hashed again)."""
    sha256: str
    """SHA-256 of the installed content."""
    git_blob: str
    """Git blob id of the installed content."""
    url: str
    """Where it was fetched from."""
    repo_id: Name | None = None
    """The hub repository it came from, if any."""
    commit: str | None = None
    """The hub commit it came from, if any."""


class Outcome(Model):
    """What happened to one file in `data download` or `data verify`."""

    source: str
    """The adapter's name."""
    path: str
    """The file, relative to the source folder (or the hub repository, when its listing failed)."""
    status: Status
    """fetched / present / failed (download); ok / absent / mismatch / unrecorded / refused (verify: a FIFO, a
    device or a folder where the file should be, as the filesystem gate classifies it)."""
    detail: str = ""
    """The reason of a failure or mismatch, or a note (the commit a hub file was taken from)."""

    @property
    def label(self) -> str:
        """`source/path`, or the source alone when the outcome is about no one file."""
        return f"{self.source}/{self.path}" if self.path else self.source


class Digests(NamedTuple):
    """Size and digests of a file's content."""

    size: int
    sha256: str
    git_blob: str


def digests(path: Path) -> Digests:
    """The size, SHA-256 and git blob id of a file, read once."""
    size = path.stat().st_size
    sha, blob = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % size)
    with fs.open_input(path) as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            sha.update(block)
            blob.update(block)
    return Digests(size, sha.hexdigest(), blob.hexdigest())


def mismatch(target: Target, got: Digests) -> str | None:
    """How `got` differs from what `target` must be, or None when it matches every expectation."""
    if target.size is not None and got.size != target.size:
        return f"size mismatch (expected {target.size} bytes, got {got.size})"
    if target.sha256 is not None and got.sha256 != target.sha256:
        return f"SHA-256 mismatch (expected {target.sha256}, got {got.sha256})"
    if target.git_blob is not None and got.git_blob != target.git_blob:
        return f"git blob id mismatch (expected {target.git_blob}, got {got.git_blob})"
    return None


def content_problem(path: Path) -> str | None:
    """Why a downloaded file is plainly not a released data file of its kind (an HTML page, a JSON file that does
    not start like JSON, a Parquet file without its magic bytes), or None."""
    with fs.open_input(path) as fh:
        head = fh.read(512)
    start = head.lstrip()
    if start[:15].lower().startswith((b"<!doctype html", b"<html", b"<head", b"<body")):
        return "the server sent an HTML page, not the file"
    suffix = path.name.removesuffix(".part").rsplit(".", 1)[-1].lower()
    if suffix in ("json", "jsonl") and start and start[:1] not in (b"{", b"["):
        return f"the content does not start like JSON ({start[:20]!r})"
    if suffix == "parquet" and not head.startswith(b"PAR1"):
        return f"the content is not Parquet (it starts {head[:20]!r})"
    return None


def part_path(dest: Path) -> Path:
    """Where the bytes of an unfinished download of `dest` are kept."""
    return dest.with_name(dest.name + ".part")


def _resume_info(dest: Path) -> Path:
    """The file beside a `.part` that records its URL and ETag (a part is resumed only when both still hold)."""
    return dest.with_name(dest.name + ".part.json")


# --- the per-folder manifest -------------------------------------------------------------------------------------


def read_manifest(folder: Path) -> dict[str, Recorded]:
    """The installed files recorded in a source folder (empty when the folder has no manifest, or it is unreadable)."""
    path = folder / MANIFEST
    try:
        raw = json_file(path, "the folder's manifest")
        return {name: Recorded.model_validate(entry) for name, entry in raw.items()}
    except (ValueError, AttributeError):  # unreadable, not JSON, or not a mapping: as good as none
        return {}


def _record(folder: Path, rel: str, dest: Path, target: Target, got: Digests) -> None:
    entries = read_manifest(folder)
    entries[rel] = Recorded(
        size=got.size,
        mtime_ns=dest.stat().st_mtime_ns,
        sha256=got.sha256,
        git_blob=got.git_blob,
        url=target.url,
        repo_id=target.repo_id,
        commit=target.commit,
    )
    body = {name: entry.model_dump(exclude_none=True) for name, entry in sorted(entries.items())}
    write_atomic(folder / MANIFEST, json.dumps(body, indent=1) + "\n", folder.parent)


def _recorded_matches(entry: Recorded, target: Target) -> bool:
    return (target.sha256 is None or entry.sha256 == target.sha256) and (
        target.git_blob is None or entry.git_blob == target.git_blob
    )


def trusted(folder: Path, target: Target) -> bool:
    """Whether the file `target` names is already installed with the expected content: cheaply when the manifest's
    record still describes it (size and modification time), else by hashing it (and recording it when it fits)."""
    dest = folder / target.path
    if not dest.is_file():
        return False
    stat = dest.stat()
    if target.size is not None and stat.st_size != target.size:
        return False
    entry = read_manifest(folder).get(target.path)
    if entry and entry.size == stat.st_size and entry.mtime_ns == stat.st_mtime_ns:
        return _recorded_matches(entry, target)
    got = digests(dest)
    if mismatch(target, got) is not None:
        return False
    _record(folder, target.path, dest, target, got)
    return True


def destination(folder: Path, target: Target) -> Path:
    """Where `target` is installed, its folders made (no link followed below the data folder); FolderError, before
    anything is made, for a path that leaves the source's folder (`../`, absolute: a hub listing's name)."""
    fs.Root(folder).parts(folder / target.path)
    return fs.make_dirs((folder / target.path).parent, folder.parent) / Path(target.path).name


def install(part: Path, target: Target, folder: Path) -> None:
    """Move a fully downloaded `part` into place once it passes every check; DownloadError (and the part deleted)
    when it does not."""
    dest = folder / target.path
    got = digests(part)
    problem = content_problem(part) or mismatch(target, got)
    if problem is not None:
        fs.unlink(part, folder.parent)
        fs.unlink(_resume_info(dest), folder.parent)
        raise DownloadError(f"{target.url}: {problem} for {dest}; the download was discarded, nothing installed")
    fs.rename(part, dest, folder.parent)
    fs.unlink(_resume_info(dest), folder.parent)
    _record(folder, target.path, dest, target, got)


class Cap(NamedTuple):
    """The most bytes a file's body may have, and what sets that (named when a body passes it)."""

    limit: int
    """The most bytes."""
    reason: str
    """What sets it, as the error names it (`the size cap of N bytes (--max-size)`)."""


def size_cap(max_bytes: int) -> Cap:
    """The cap `--max-size` sets."""
    return Cap(max_bytes, f"the size cap of {max_bytes} bytes (--max-size)")


class Get(NamedTuple):
    """One file's request: where, with which headers, within what cap, and how a reply that is not the file reads."""

    url: str
    """Where the bytes are asked for."""
    headers: dict[str, str]
    """Headers of the request (the hub's token, for the hub's origin only)."""
    cap: Cap
    """The most bytes the body may have."""
    refused: Callable[[Reply], DownloadError]
    """The error of a reply whose status is not the file's content."""


def _check_room(url: str, size: int | None, cap: Cap, where: Path, have: int = 0) -> None:
    """DownloadError unless a file of `size` bytes (of which `have` are already on disk) is within the cap and
    fits on the disk holding `where`."""
    if size is None:
        return
    if size > cap.limit:
        raise DownloadError(f"{url}: {size} bytes, larger than {cap.reason}")
    free = shutil.disk_usage(where).free
    if size - have > free:
        raise DownloadError(f"{url}: {size - have} more bytes needed, only {free} free on the disk holding {where}")


# --- the transfer of one file (GitHub and hub files alike) ---------------------------------------------------------


def make_client(timeout: float = 60.0, min_rate: float = MIN_RATE) -> Client:
    """An HTTP client that follows redirects and hands on a file's bytes as sent (never decompressed, so the size
    cap counts the file's own bytes), each request ending `timeout` seconds after it starts plus the time its bytes
    take at `min_rate` a second."""
    return Client(timeout=timeout, connect_timeout=min(15.0, timeout), decompress=False, min_rate=min_rate)


def _not_the_file(url: str) -> Callable[[Reply], DownloadError]:
    return lambda resp: DownloadError(f"{url}: HTTP {resp.status} {resp.reason} (expected the file's content)")


def fetch(
    client: Client,
    target: Target,
    folder: Path,
    on_progress: ProgressHook | None = None,
    attempts: int = ATTEMPTS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> bool:
    """Download `target` over HTTP into `folder`, resuming a partial file; False when it was already installed."""
    if target.sha256 is None and target.git_blob is None:
        raise DownloadError(
            f"{target.url}: no checksum is declared for this file, and unverified files are not installed"
        )
    dest = destination(folder, target)
    if trusted(folder, target):
        return False
    part = part_path(dest)
    get = Get(target.url, {}, size_cap(max_bytes), _not_the_file(target.url))
    try:
        _retried(client, get, dest, on_progress, folder.parent, attempts)
    except TransportError as err:
        kept = part.stat().st_size if part.exists() else 0
        raise DownloadError(
            f"{target.url}: transfer failed after {attempts} attempts ({err.__class__.__name__}: {err}); "
            f"{part} keeps {kept} bytes, run the command again to resume"
        ) from None
    install(part, target, folder)
    return True


def _retried(client: Client, get: Get, dest: Path, on_progress: ProgressHook | None, root: Path, attempts: int) -> None:
    """`get`'s body in `dest`'s part, the transfer resumed after a broken connection or a deadline up to
    `attempts` times; the last TransportError when every attempt failed."""
    for attempt in range(1, attempts + 1):
        try:
            _transfer(client, get, dest, on_progress or (lambda done, total: None), root)
            return
        except TransportError:
            if attempt == attempts:
                raise


def _resumable(dest: Path, url: str) -> str | None:
    """The ETag to resume `dest`'s part with, or None (no part, another URL, or no strong ETag recorded)."""
    part, info = part_path(dest), _resume_info(dest)
    try:
        meta = json_file(info, "a part's resume record")
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    etag = meta.get("etag")
    ok = part.is_file() and meta.get("url") == url and isinstance(etag, str) and not etag.startswith("W/")
    return etag if ok else None


def _transfer(client: Client, get: Get, dest: Path, on_progress: ProgressHook, root: Path) -> None:
    url, part = get.url, part_path(dest)
    etag = _resumable(dest, url)
    have = part.stat().st_size if etag else 0
    # Identity encoding, so that byte ranges and the cap count the file's own bytes and not a compressed stream's.
    headers = get.headers | {"Accept-Encoding": "identity"}
    if have:
        headers |= {"Range": f"bytes={have}-", "If-Range": etag or ""}
    with client.get(url, headers=headers) as resp:
        if resp.status == 416 and have and _range_total(resp) == have:
            return  # the part already holds every byte
        if resp.status not in (200, 206):
            if resp.status == 416:
                fs.unlink(part, root)
            raise get.refused(resp)
        if resp.status == 206 and _range_start(resp) != have:
            raise DownloadError(f"{url}: the server resumed at the wrong offset (asked for byte {have})")
        start = have if resp.status == 206 else 0
        length = resp.headers.get("Content-Length")
        total = start + int(length) if length is not None else None
        _check_room(url, total, get.cap, dest.parent, have=start)
        # Through the redactor like every text written: a server's ETag is its own words (it may echo the token).
        write_atomic(_resume_info(dest), json.dumps({"url": url, "etag": resp.headers.get("ETag")}), root)
        done = start
        on_progress(done, total)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if start else os.O_TRUNC)
        try:
            with os.fdopen(fs.open_file(part, flags, root), "ab") as fh:
                for chunk in resp.chunks():  # written as they arrive, so an interruption loses nothing
                    done += len(chunk)
                    if done > get.cap.limit:
                        raise DownloadError(f"{url}: more than {get.cap.reason}")
                    fh.write(chunk)
                    on_progress(done, total)
        except DownloadError:
            fs.unlink(part, root)
            raise
        except FolderError:
            raise  # already one line naming the path
        except OSError as err:
            raise DownloadError(f"{url}: could not write {part} ({err.strerror or err})") from None


def _range_start(resp: Reply) -> int | None:
    match = re.match(r"bytes (\d+)-", resp.headers.get("Content-Range", ""))
    return int(match.group(1)) if match else None


def _range_total(resp: Reply) -> int | None:
    match = re.search(r"/(\d+)$", resp.headers.get("Content-Range", ""))
    return int(match.group(1)) if match else None


# --- Hugging Face hub files --------------------------------------------------------------------------------------


def hub_targets(client: Client, hub: HubAccess, spec: HubFiles, max_bytes: int) -> tuple[list[Target], str]:
    """The files of `spec` at its commit, as the hub lists them (size, LFS SHA-256 or git blob id), and a note."""
    from huggingface_hub import hf_hub_url

    limit = min(max_bytes, MAX_REPLY_BYTES)
    commit, note = resolve_commit(client, hub, spec, limit)
    url = hub.api(spec, "tree", commit)
    listing = listed_files(client, hub, spec, commit, limit)
    chosen = {f.path: f for f in listing if any(fnmatch.fnmatchcase(f.path, p) for p in spec.files)}
    exact = [p for p in spec.files if not GLOB.search(p)]
    patterns = [p for p in spec.files if GLOB.search(p)]
    missing = [p for p in exact if p not in chosen]
    if patterns and not any(fnmatch.fnmatchcase(name, p) for name in chosen for p in patterns):
        missing.append(" or ".join(patterns))
    if missing:
        held = ", ".join(sorted(f.path for f in listing)[:20]) or "nothing"
        raise DownloadError(
            f"{url}: no file matches {', '.join(repr(m) for m in missing)} at {commit} (the repository holds: {held})"
        )
    targets = [
        Target(
            url=hf_hub_url(spec.repo_id, f.path, repo_type="dataset", revision=commit, endpoint=hub.endpoint),
            path=str(Path(spec.into) / f.path) if spec.into else f.path,
            size=f.size,
            sha256=f.lfs.oid if f.lfs else None,
            git_blob=None if f.lfs else f.oid,
            repo_id=spec.repo_id,
            commit=commit,
            filename=f.path,
        )
        for f in sorted(chosen.values(), key=lambda f: f.path)
    ]
    return targets, note


def staged_name(target: Target) -> str:
    """The name a hub file is staged under: from a digest of its path in the repository (no name of a listing
    makes a folder there), with its suffix (the content checks read it)."""
    assert target.filename is not None
    return hashlib.sha256(target.filename.encode()).hexdigest()[:32] + Path(target.filename).suffix


def fetch_hub(
    client: Client,
    hub: HubAccess,
    spec: HubFiles,
    target: Target,
    folder: Path,
    staging: Path,
    max_bytes: int = DEFAULT_MAX_BYTES,
    on_progress: ProgressHook | None = None,
) -> bool:
    """Download a hub file at its commit into the staging folder (following the hub's redirect to its CDN, the
    token sent to the hub's origin only), no more bytes than the listing reports, then verify and install it;
    False when it was already installed."""
    root = staging.parent  # the data folder
    dest = destination(folder, target)
    if trusted(folder, target):
        return False
    assert target.size is not None
    _check_room(target.url, target.size, size_cap(max_bytes), root)
    # Marked as this tool's, so that its clean-up (`remove_tree`) deletes it and nothing else.
    fs.mark(staging / spec.repo_id, root, STAGING_MARK)
    staged = staging / spec.repo_id / staged_name(target)
    cap = Cap(target.size, f"the {target.size} bytes the hub lists for it")
    get = Get(target.url, hub.headers(), cap, lambda reply: refusal(spec, target.url, reply))
    try:
        _retried(client, get, staged, on_progress, root, ATTEMPTS)
    except TransportError as err:
        raise DownloadError(
            f"{target.url}: transfer failed after {ATTEMPTS} attempts ({err.__class__.__name__}: {err}); "
            f"nothing installed for {dest}"
        ) from None
    install(part_path(staged), target, folder)
    return True


# --- whole sources -----------------------------------------------------------------------------------------------


def target_of(remote: RemoteFile) -> Target:
    """The target of a file at a plain URL."""
    return Target(url=remote.url, path=remote.path, sha256=remote.sha256, git_blob=remote.git_blob)


def download_sources(
    sources: Sequence[Adapter],
    data_dir: Path,
    client: Client,
    max_bytes: int = DEFAULT_MAX_BYTES,
    progress: Callable[[str], ProgressHook] | None = None,
    report: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Try every released file of every source (a failure never stops the others) and say what became of each."""
    outcomes: list[Outcome] = []

    def done(outcome: Outcome) -> None:
        outcomes.append(outcome)
        if report:
            report(outcome)

    hub = None
    for adapter in sources:
        folder = adapter.root(data_dir)
        if not adapter.remote_files:
            done(Outcome(source=adapter.name, path="", status="failed", detail="no public download location is known"))
        for remote in adapter.remote_files:
            if isinstance(remote, RemoteFile):
                target = target_of(remote)
                label = f"{adapter.name}/{target.path}"
                try:
                    fresh = fetch(client, target, folder, progress(label) if progress else None, max_bytes=max_bytes)
                    done(Outcome(source=adapter.name, path=target.path, status="fetched" if fresh else "present"))
                except (DownloadError, FolderError) as err:
                    done(Outcome(source=adapter.name, path=target.path, status="failed", detail=str(err)))
                continue
            hub = hub or hub_access()
            try:
                hub_files, note = hub_targets(client, hub, remote, max_bytes)
            except (DownloadError, FolderError) as err:
                done(Outcome(source=adapter.name, path=remote.repo_id, status="failed", detail=str(err)))
                continue
            for target in hub_files:
                label = f"{adapter.name}/{target.path}"
                try:
                    hook = progress(label) if progress else None
                    fresh = fetch_hub(client, hub, remote, target, folder, data_dir / HUB_STAGING, max_bytes, hook)
                    status: Status = "fetched" if fresh else "present"
                    done(Outcome(source=adapter.name, path=target.path, status=status, detail=note))
                except (DownloadError, FolderError) as err:
                    done(Outcome(source=adapter.name, path=target.path, status="failed", detail=str(err)))
            _clear_staging(data_dir / HUB_STAGING, remote.repo_id)
    return outcomes


def _clear_staging(staging: Path, repo_id: str) -> None:
    """Remove a repository's staging folder (what is left there is a failed transfer's part, never resumed: the
    next run fetches it anew), and the staging root once empty."""
    with contextlib.suppress(OSError):  # a folder the disk will not let go of stays; nothing else is touched
        fs.remove_tree(staging / repo_id, staging.parent, STAGING_MARK)
    for folder in (staging / repo_id.split("/")[0], staging):
        fs.remove_empty_dir(folder, staging.parent)


def verify_source(adapter: Adapter, data_dir: Path) -> list[Outcome]:
    """Check a source's files in a data folder, offline: GitHub files against their declared checksums, hub files
    against what was recorded when they were downloaded and verified."""
    folder = adapter.root(data_dir)
    manifest = read_manifest(folder)
    outcomes = []
    for remote in adapter.remote_files:
        if isinstance(remote, RemoteFile):
            outcomes.append(_verify_one(adapter.name, folder, target_of(remote)))
            continue
        recorded = {name: entry for name, entry in manifest.items() if entry.repo_id == remote.repo_id}
        for name, entry in sorted(recorded.items()):
            expected = Target(url=entry.url, path=name, size=entry.size, sha256=entry.sha256, commit=entry.commit)
            outcomes.append(_verify_one(adapter.name, folder, expected))
        if not recorded:
            base = folder / remote.into
            present = sorted(
                str(p.relative_to(folder))
                for pattern in remote.files
                for p in base.glob("**/*")
                if not p.is_dir() and fnmatch.fnmatchcase(str(p.relative_to(base)), pattern)
            )
            note = f"not downloaded by shambench, so no digest from {remote.repo_id} to check it against offline"
            outcomes += [_unchecked(adapter.name, folder, p, note) for p in present]
            if not present:
                outcomes.append(Outcome(source=adapter.name, path=remote.repo_id, status="absent"))
    return outcomes


def _refusal(source: str, folder: Path, path: str) -> Outcome | None:
    """The outcome of a file the gate would not read (`fs.irregularity`) or that is missing; None for a regular one."""
    try:
        why = fs.irregularity(folder / path)
    except FileNotFoundError:
        return Outcome(source=source, path=path, status="absent")
    return Outcome(source=source, path=path, status="refused", detail=why) if why else None


def _unchecked(source: str, folder: Path, path: str, note: str) -> Outcome:
    """A file placed by hand: unrecorded (nothing to check it against), or refused by what it is."""
    return _refusal(source, folder, path) or Outcome(source=source, path=path, status="unrecorded", detail=note)


def _verify_one(source: str, folder: Path, target: Target) -> Outcome:
    refused = _refusal(source, folder, target.path)
    if refused:
        return refused
    problem = mismatch(target, digests(folder / target.path))
    if problem:
        return Outcome(source=source, path=target.path, status="mismatch", detail=problem)
    return Outcome(source=source, path=target.path, status="ok")


def parse_size(text: str) -> int:
    """A byte count from `123`, `500MB`, `2GB` or `1.5GiB`; ValueError otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)\s*", text.lower())
    if not match:
        raise ValueError(f"not a size: {text!r} (expected bytes, or a number with KB, MB, GB, TB)")
    unit = match.group(2).rstrip("b")
    power = "kmgt".index(unit[0]) + 1 if unit else 0
    base = 1024 if unit.endswith("i") or not unit else 1000
    return int(float(match.group(1)) * base**power)

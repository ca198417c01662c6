"""The Hugging Face hub's JSON API as `data download` reads it, through the one HTTP stack (`shambench.http`): the
commit a revision names, and the files of a dataset repository at a commit with their sizes and digests.

The endpoints and fields are those huggingface_hub's `HfApi` reads (`dataset_info`, `list_repo_commits`,
`list_repo_tree`): `/api/datasets/{repo}/revision/{rev}` (`sha`), `/api/datasets/{repo}/commits/{rev}` (each
commit's `id`) and `/api/datasets/{repo}/tree/{commit}?recursive=true` (`type`, `path`, `size`, `oid`: the git blob
id, `lfs.oid`: the SHA-256), the last two in pages chained by a `Link: <url>; rel="next"` header. HfApi itself is
not used: its client bounds each read but not a whole request, and reads a reply whole, so a hub (or a mirror at
`$HF_ENDPOINT`) that trickles or sends an endless listing would hold the command or fill its memory. Here every
request has the client's deadline, every reply is read within a byte cap and parsed by the bounded JSON reader
(`shambench.structured`: size and depth), a listing has at most MAX_PAGES pages, and every failure is a
DownloadError of one line naming the URL.

The user's token goes to the endpoint's origin only: a next page elsewhere is refused, and aiohttp drops the
`Authorization` header when a redirect leaves the origin (scheme, host or port), as the hub's to its CDN does.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Iterator
from typing import Any

from pydantic import Field, TypeAdapter, ValidationError

from shambench.data.adapter import HubFiles
from shambench.errors import DownloadError, MalformedReply
from shambench.http import Client, Reply, TransportError
from shambench.schema import BUILT_WHEN_USED, Model
from shambench.secrets import remember
from shambench.structured import MAX_FIELD_CHARS, json_value

COMMIT = re.compile(r"[0-9a-f]{40}")
SHORT_COMMIT = re.compile(r"[0-9a-f]{7,39}")
# Pages of one listing (the hub sends 1,000 files a page): a hub whose pages never end is refused there.
MAX_PAGES = 100
# The most bytes of one reply of the hub's API (and no more than `--max-size`).
MAX_REPLY_BYTES = MAX_FIELD_CHARS
# The `Link` header's next page: `<URL>; rel="next"`.
NEXT_LINK = re.compile(r'<([^>]*)>\s*;\s*rel="?next"?')


class HubAccess(Model):
    """How the hub is reached: its endpoint, and the user's token, which is sent to that endpoint's origin only."""

    endpoint: str
    """The hub's base URL (`$HF_ENDPOINT`, else huggingface_hub's default), without a trailing slash."""
    token: str | None = None
    """The user's token (`$HF_TOKEN` or `hf auth login`'s), or None."""
    offline: bool = False
    """huggingface_hub's offline mode (`$HF_HUB_OFFLINE`): the hub is not asked at all."""

    def headers(self) -> dict[str, str]:
        """The headers of every request to the hub: the token when there is one, and no compression (a byte cap
        then counts the bytes that are kept)."""
        auth = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return {"Accept-Encoding": "identity"} | auth

    def api(self, spec: HubFiles, kind: str, revision: str) -> str:
        """The URL of one of the API's routes (`revision`, `commits`, `tree`) for a repository at a revision."""
        return f"{self.endpoint}/api/datasets/{spec.repo_id}/{kind}/{urllib.parse.quote(revision, safe='')}"


def hub_access() -> HubAccess:
    """The hub `$HF_ENDPOINT` names now (huggingface_hub reads it once, at import) and the user's token, which is
    masked from then on wherever it would be shown."""
    from huggingface_hub import constants, get_token

    token = get_token()
    remember(token)
    endpoint = (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")
    return HubAccess(endpoint=endpoint, token=token, offline=constants.is_offline_mode())


class ListedLfs(Model):
    """What the hub lists of a file kept in LFS."""

    oid: str
    """The SHA-256 of the file's content."""
    size: int = Field(ge=0)
    """The file's size in bytes."""


class Listed(Model):
    """One entry of the hub's listing of a repository's tree."""

    type: str
    """`file` or `directory`."""
    path: str
    """Its path in the repository (unchecked: where it may go is the filesystem gate's decision)."""
    size: int | None = Field(default=None, ge=0)
    """A file's size in bytes."""
    oid: str | None = None
    """A file's git blob id."""
    lfs: ListedLfs | None = None
    """The LFS object of a file kept in LFS."""


_ENTRIES = TypeAdapter(list[Listed], config=BUILT_WHEN_USED)


def gated_message(spec: HubFiles) -> str:
    """The one line that tells a user how to get a gated set."""
    return (
        f"{spec.repo_id} is a gated dataset: accept its conditions at {spec.page} while logged in, then set "
        "$HF_TOKEN or run `hf auth login`"
    )


def refusal(spec: HubFiles, url: str, reply: Reply) -> DownloadError:
    """A hub reply that is not what was asked for, in one line: how to get a gated set, a repository not found, or
    the status with the hub's reason (its `X-Error-Code` and `X-Error-Message`, as huggingface_hub reads them)."""
    code = reply.headers.get("X-Error-Code", "")
    if code == "GatedRepo" or (spec.gated and reply.status in (401, 403)):
        return DownloadError(f"{url}: {gated_message(spec)}")
    if code == "RepoNotFound" or reply.status == 401:
        return DownloadError(f"{url}: repository {spec.repo_id} not found (or private)")
    said = " ".join(reply.headers.get("X-Error-Message", "").split())[:200]
    return DownloadError(f"{url}: HTTP {reply.status} {reply.reason}" + (f" ({said})" if said else ""))


def origin(url: str) -> tuple[str, str, int | None]:
    """A URL's scheme, host and port: where a token may be sent."""
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port


def _page(client: Client, hub: HubAccess, spec: HubFiles, url: str, limit: int) -> tuple[Any, str | None]:
    """One reply of the API as JSON, and the URL of its next page (None when it is the last)."""
    if hub.offline:
        raise DownloadError(f"{url}: not asked, huggingface_hub's offline mode is on ($HF_HUB_OFFLINE)")
    try:
        with client.get(url, headers=hub.headers()) as reply:
            if reply.status != 200:
                raise refusal(spec, url, reply)
            body = reply.read(limit)
            links = ", ".join(reply.headers.getall("Link", []))
    except MalformedReply:
        raise DownloadError(f"{url}: the hub's reply is larger than {limit} bytes; refused") from None
    except TransportError as err:
        raise DownloadError(f"{url}: {type(err).__name__}: {err}") from None
    found = NEXT_LINK.search(links)
    following = urllib.parse.urljoin(url, found.group(1)) if found else None
    return json_value(body, url, "the hub's JSON reply", error=DownloadError), following


def pages(client: Client, hub: HubAccess, spec: HubFiles, url: str, limit: int) -> Iterator[Any]:
    """The JSON replies of an API route that pages its answer, first to last (at most MAX_PAGES, all at the hub's
    origin: a next page elsewhere would be sent the token, and is refused)."""
    page: str | None = url
    for _ in range(MAX_PAGES):
        assert page is not None
        if origin(page) != origin(hub.endpoint):
            raise DownloadError(f"{url}: the hub named a next page at another origin ({page}); refused")
        value, page = _page(client, hub, spec, page, limit)
        yield value
        if page is None:
            return
    raise DownloadError(f"{url}: more than {MAX_PAGES} pages; refused")


def _malformed(url: str, what: str) -> DownloadError:
    return DownloadError(f"{url}: the hub's reply is not {what}")


def resolve_commit(client: Client, hub: HubAccess, spec: HubFiles, limit: int) -> tuple[str, str]:
    """The full commit of `spec` and a note on how it was found (empty for a full pinned commit)."""
    if COMMIT.fullmatch(spec.revision):
        return spec.revision, ""
    if not spec.revision:
        url = hub.api(spec, "revision", "main")
        info, _ = _page(client, hub, spec, url, limit)
        sha = info.get("sha") if isinstance(info, dict) else None
        if not isinstance(sha, str) or not COMMIT.fullmatch(sha):
            raise DownloadError(f"{url}: the hub did not report main's commit")
        return sha, f"no commit is pinned for {spec.repo_id}: took main's {sha}"
    if not SHORT_COMMIT.fullmatch(spec.revision):
        raise DownloadError(f"{spec.repo_id}: revision {spec.revision!r} is not a commit id")
    url = hub.api(spec, "commits", "main")
    found = []
    for page in pages(client, hub, spec, url, limit):
        if not isinstance(page, list) or not all(isinstance(c, dict) and isinstance(c.get("id"), str) for c in page):
            raise _malformed(url, "a list of commits with their ids")
        found += [c["id"] for c in page if c["id"].startswith(spec.revision)]
    if len(found) != 1:
        raise DownloadError(f"{url}: {len(found)} commits of main start with {spec.revision} (expected one)")
    return found[0], ""


def listed_files(client: Client, hub: HubAccess, spec: HubFiles, commit: str, limit: int) -> list[Listed]:
    """Every file of `spec`'s repository at `commit`, as the hub lists them (each with its size and blob id)."""
    url = hub.api(spec, "tree", commit) + "?recursive=true"
    files = []
    for page in pages(client, hub, spec, url, limit):
        try:
            entries = _ENTRIES.validate_python(page)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise _malformed(url, f"a listing of files ({where}: {first['msg']})") from None
        for entry in entries:
            if entry.type == "file" and (entry.size is None or entry.oid is None):
                raise _malformed(url, f"a listing of files ({entry.path!r} has no size or blob id)")
        files += [e for e in entries if e.type == "file"]
    return files

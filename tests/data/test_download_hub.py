"""Hugging Face sources through the one HTTP stack, against the hub stand-in on 127.0.0.1 (`tests/hub_server.py`).

Only these tests turn huggingface_hub's offline mode off (the suite keeps HF_HUB_OFFLINE=1: huggingface_hub only
builds URLs and finds the token here), and each points HF_ENDPOINT at its stand-in and every hub folder (HF_HOME,
the cache, the token file) at tmp_path. The hostile hubs are driven through the command line: each failure one
`failed:` line, the other files still fetched, the staging folder gone, nothing written outside the data folder,
exit status 2."""

from __future__ import annotations

import hashlib
import io
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.data.adapter import Adapter, HubFiles, adapters
from shambench.data.download import HUB_STAGING, download_sources, make_client, read_manifest, verify_source
from shambench.registry import Entry
from tests.hub_server import HTML, blob_id


def parquet_bytes(rows: list[dict]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


ANNOTATIONS = json.dumps([{"prompt": "Who?", "output": "Me.", "annotated": "Me."}]).encode()
TABLE = parquet_bytes([{"question": "1+1?", "steps": ["2"], "step_labels": [1]}])
CARD = b"---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: data/test-*\n---\n# card\n"


def source(name: str, *specs: HubFiles) -> Adapter:
    adapter = Adapter()
    adapter.name = name
    adapter.remote_files = specs
    return adapter


def run(tmp_path, *sources: Adapter, max_bytes: int = 1 << 30):
    with make_client(timeout=5) as client:
        return {(o.source, o.path): o for o in download_sources(sources, tmp_path / "data", client, max_bytes)}


@pytest.fixture
def fava(hub):
    """A repository whose main moved on: the pinned commit has `annotations.json`, main renamed it."""
    repo = hub.repo("org/fava")
    pinned = repo.commit({"annotations.json": ANNOTATIONS, "data/test-00000-of-00001.parquet": TABLE})
    repo.lfs.add("data/test-00000-of-00001.parquet")
    repo.commit({"annotations_v2.json": ANNOTATIONS + b"\n", "data/test-00000-of-00001.parquet": TABLE})
    return pinned


def test_pinned_files_are_fetched_verified_and_recorded_though_main_moved(hub, fava, tmp_path):
    spec = HubFiles(repo_id="org/fava", revision=fava, files=("annotations.json", "data/test-*.parquet"))
    got = run(tmp_path, source("fava", spec))
    assert {k: o.status for k, o in got.items()} == {
        ("fava", "annotations.json"): "fetched",
        ("fava", "data/test-00000-of-00001.parquet"): "fetched",
    }
    folder = tmp_path / "data" / "fava"
    assert (folder / "annotations.json").read_bytes() == ANNOTATIONS
    assert (folder / "data/test-00000-of-00001.parquet").read_bytes() == TABLE
    manifest = read_manifest(folder)
    # the small file is checked by the git blob id the tree lists, the LFS one by its SHA-256; both are recorded
    assert manifest["annotations.json"].git_blob == blob_id(ANNOTATIONS) and manifest["annotations.json"].commit == fava
    assert manifest["data/test-00000-of-00001.parquet"].sha256 == hashlib.sha256(TABLE).hexdigest()
    # the LFS file came from the other origin (the CDN) the hub redirected to
    assert hub.downloads("/cdn/" + hashlib.sha256(TABLE).hexdigest() + "/data/test-00000-of-00001.parquet") == 1
    # Run again: listed again, nothing fetched.
    again = run(tmp_path, source("fava", spec))
    assert {o.status for o in again.values()} == {"present"}
    assert hub.downloads("annotations.json") == 1
    assert [o.status for o in verify_source(source("fava", spec), tmp_path / "data")] == ["ok", "ok"]
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["fava"]  # no staging left behind


def test_a_renamed_file_is_an_error_that_lists_what_the_repository_holds(hub, fava, tmp_path):
    spec = HubFiles(repo_id="org/fava", revision="", files=("annotations.json",))
    (outcome,) = run(tmp_path, source("fava", spec)).values()
    assert outcome.status == "failed" and outcome.path == "org/fava"
    main = hub.repos["org/fava"].branches["main"]
    assert outcome.detail == (
        f"{hub.endpoint}/api/datasets/org/fava/tree/{main}: no file matches 'annotations.json' at {main} "
        "(the repository holds: annotations_v2.json, data/test-00000-of-00001.parquet)"
    )


def test_a_short_commit_is_resolved_and_an_unpinned_source_says_which_commit_it_took(hub, fava, tmp_path):
    short = HubFiles(repo_id="org/fava", revision=fava[:7], files=("annotations.json",))
    assert run(tmp_path, source("a", short))[("a", "annotations.json")].status == "fetched"
    assert (tmp_path / "data" / "a" / "annotations.json").read_bytes() == ANNOTATIONS
    main = hub.repos["org/fava"].branches["main"]
    unpinned = HubFiles(repo_id="org/fava", revision="", files=("annotations_v2.json",))
    outcome = run(tmp_path, source("b", unpinned))[("b", "annotations_v2.json")]
    assert outcome.status == "fetched" and outcome.detail == f"no commit is pinned for org/fava: took main's {main}"
    assert read_manifest(tmp_path / "data" / "b")["annotations_v2.json"].commit == main
    unknown = HubFiles(repo_id="org/fava", revision="abcdef0", files=("annotations.json",))
    (failed,) = run(tmp_path, source("c", unknown)).values()
    assert failed.detail.endswith("0 commits of main start with abcdef0 (expected one)")


def test_a_gated_set_needs_an_accepted_token(hub, tmp_path, monkeypatch):
    repo = hub.repo("org/gated", gated=True)
    repo.commit({"SHARP-GSM8K/test.json": b'[{"question": "q"}]'})
    spec = HubFiles(repo_id="org/gated", revision="", files=("*.json",), gated=True)
    message = (
        "org/gated is a gated dataset: accept its conditions at https://huggingface.co/datasets/org/gated while "
        "logged in, then set $HF_TOKEN or run `hf auth login`"
    )
    (outcome,) = run(tmp_path, source("sharp", spec)).values()
    assert outcome.status == "failed" and outcome.detail.endswith(message)
    assert hub.requests[-1][2] is None  # no token was sent: 401
    monkeypatch.setenv("HF_TOKEN", "hf_not_accepted")
    (outcome,) = run(tmp_path, source("sharp", spec)).values()
    assert outcome.status == "failed" and outcome.detail.endswith(message)  # 403: conditions not accepted
    hub.accepted.add("hf_accepted")
    monkeypatch.setenv("HF_TOKEN", "hf_accepted")
    (outcome,) = run(tmp_path, source("sharp", spec)).values()
    assert outcome.status == "fetched"
    assert hub.requests[-1][2] == "Bearer hf_accepted"
    assert (tmp_path / "data" / "sharp" / "SHARP-GSM8K" / "test.json").read_bytes() == b'[{"question": "q"}]'


def test_bad_bytes_are_never_installed_and_the_other_files_still_come(hub, fava, tmp_path):
    repo = hub.repo("org/fava")
    repo.commit(
        {
            "html.json": b"[" + b" " * 200 + b"]",
            "short.jsonl": b'{"a": 1}\n' * 30,
            "data/html-00000.parquet": TABLE,
            "big.parquet": TABLE * 3,
            "good.json": ANNOTATIONS,
        },
        branch="faults",
    )
    repo.lfs |= {"data/html-00000.parquet", "big.parquet"}
    hub.html |= {"html.json", "data/html-00000.parquet"}
    hub.short.add("short.jsonl")
    spec = HubFiles(repo_id="org/fava", revision=repo.branches["faults"], files=("*",))
    got = run(tmp_path, source("f", spec), max_bytes=len(TABLE) * 2)
    assert {k[1]: o.status for k, o in got.items()} == {
        "big.parquet": "failed",
        "data/html-00000.parquet": "failed",
        "good.json": "fetched",
        "html.json": "failed",
        "short.jsonl": "failed",
    }
    url = f"{hub.endpoint}/datasets/org/fava/resolve/{repo.branches['faults']}"
    folder = tmp_path / "data" / "f"
    # a small file answered by an HTML page (its headers agreeing): named as such, with its URL
    assert got["f", "html.json"].detail.startswith(f"{url}/html.json: the server sent an HTML page, not the file")
    # the CDN sent an error page where the hub lists the LFS file with len(TABLE) bytes
    assert len(HTML) < len(TABLE)
    assert got["f", "data/html-00000.parquet"].detail.startswith(
        f"{url}/data/html-00000.parquet: the server sent an HTML page, not the file"
    )
    assert got["f", "short.jsonl"].detail.startswith(f"{url}/short.jsonl: size mismatch (expected 270 bytes, got 180)")
    assert got["f", "big.parquet"].detail == (
        f"{url}/big.parquet: {3 * len(TABLE)} bytes, larger than the size cap of {2 * len(TABLE)} bytes (--max-size)"
    )
    assert hub.downloads("big.parquet") == 0  # refused before a byte was asked for
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        ".shambench-downloads.json",
        "good.json",
    ]
    assert not (tmp_path / "data" / HUB_STAGING).exists()


def test_a_mirror_that_lies_about_the_size_still_gets_no_html_installed(hub, fava, tmp_path):
    hub.lying_mirror = True
    hub.html.add("data/test-00000-of-00001.parquet")
    spec = HubFiles(repo_id="org/fava", revision=fava, files=("data/*",))
    (outcome,) = run(tmp_path, source("fava", spec)).values()
    assert outcome.status == "failed" and "the server sent an HTML page, not the file" in outcome.detail
    assert not [p for p in (tmp_path / "data" / "fava").rglob("*") if p.is_file()]


def test_verify_reports_a_file_changed_after_download_and_files_placed_by_hand(hub, fava, tmp_path):
    spec = HubFiles(repo_id="org/fava", revision=fava, files=("annotations.json",))
    run(tmp_path, source("fava", spec))
    (tmp_path / "data" / "fava" / "annotations.json").write_bytes(b"[]")
    (outcome,) = verify_source(source("fava", spec), tmp_path / "data")
    assert (outcome.status, outcome.detail) == ("mismatch", f"size mismatch (expected {len(ANNOTATIONS)} bytes, got 2)")
    by_hand = tmp_path / "other" / "fava"
    by_hand.mkdir(parents=True)
    (by_hand / "annotations.json").write_bytes(ANNOTATIONS)
    (outcome,) = verify_source(source("fava", spec), tmp_path / "other")
    assert outcome.status == "unrecorded" and outcome.path == "annotations.json"
    assert [o.status for o in verify_source(source("fava", spec), tmp_path / "none")] == ["absent"]
    (by_hand / "annotations.json").unlink()
    os.mkfifo(by_hand / "annotations.json")  # placed by hand, but not a file the gate would read
    (outcome,) = verify_source(source("fava", spec), tmp_path / "other")
    assert (outcome.status, outcome.detail) == ("refused", "not a regular file (a FIFO)")


def test_a_card_and_json_data_are_fetched_as_listed(hub, tmp_path):
    repo = hub.repo("org/h2v")
    repo.commit({"README.md": CARD, "data/test.json": b'[{"x": 1}]', ".gitattributes": b"*.parquet lfs\n"})
    spec = HubFiles(repo_id="org/h2v", revision="", files=("README.md", "*.parquet", "*.json", "*.jsonl"))
    got = run(tmp_path, source("h2v", spec))
    # none of the data files is Parquet: the patterns together match what is there, and nothing else is fetched
    assert {k[1]: o.status for k, o in got.items()} == {"README.md": "fetched", "data/test.json": "fetched"}
    gone = HubFiles(repo_id="org/h2v", revision="", files=("README.md", "*.parquet"))
    (outcome,) = run(tmp_path, source("gone", gone)).values()
    assert outcome.status == "failed" and "no file matches '*.parquet' at" in outcome.detail


def test_a_dropped_connection_is_resumed_at_the_pinned_file_only(hub, fava, tmp_path):
    """The transfer is resumed within the command, through the hub's redirect to the pinned LFS object (named by
    its SHA-256) from the 100 bytes it kept (`Range` and `If-Range`), and the result is still checked against the
    listing."""
    name = "data/test-00000-of-00001.parquet"
    hub.cut[name] = 100
    spec = HubFiles(repo_id="org/fava", revision=fava, files=(name,))
    assert run(tmp_path, source("fava", spec))[("fava", name)].status == "fetched"
    assert (tmp_path / "data" / "fava" / name).read_bytes() == TABLE
    url = f"/cdn/{hashlib.sha256(TABLE).hexdigest()}/{name}"
    assert [got for got in hub.ranges if got[0].startswith("/cdn/")] == [(url, None), (url, "bytes=100-")]


# --- hostile hubs, through the command line ----------------------------------------------------------------------


def written_outside(tmp_path, data) -> dict[str, tuple[int, int]]:
    """Every file below tmp_path but outside the data folder, with its size and modification time."""
    return {
        str(p): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in tmp_path.rglob("*")
        if p.is_file() and data not in p.parents
    }


def cli(tmp_path, monkeypatch, *sources: Adapter, max_size: str = "1GB", timeout: float = 5.0):
    """`shambench data download` of `sources` (registered for the test) into tmp_path/data: the result, the
    `failed:` lines by label, and whether anything was written outside the data folder."""
    adapters.entries()  # the built-ins first, so that the test's sources join them
    for adapter in sources:
        monkeypatch.setitem(adapters._entries, adapter.name, Entry(adapter.name, lambda a=adapter: a, "test", "tests"))
    data = tmp_path / "data"
    before = written_outside(tmp_path, data)
    args = ["data", "download", *(a.name for a in sources), "--data-dir", str(data), "--no-progress"]
    result = CliRunner().invoke(main, [*args, "--max-size", max_size, "--timeout", str(timeout)])
    failed = {}
    for line in result.stderr.splitlines():
        if line.startswith("failed: "):
            label, _, detail = line.removeprefix("failed: ").partition(": ")
            assert label not in failed, f"two lines for {label}"
            failed[label] = detail
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    assert not (data / HUB_STAGING).exists()  # whatever failed, the staging folder is gone
    return result, failed, written_outside(tmp_path, data) != before


def test_hostile_bodies_fail_their_files_alone_and_the_token_never_leaves_the_hub(hub, tmp_path, monkeypatch):
    """An endless body, one longer than listed (with and without a Content-Length saying so), one that trickles,
    names that leave the folder: one line each; the rest, an LFS file among them whose redirect goes to another
    host, is installed, and that host never saw the token."""
    slow = parquet_bytes([{"question": f"q{i}", "steps": ["s"] * 20, "step_labels": [1] * 20} for i in range(40)])
    repo = hub.repo("org/hostile")
    commit = repo.commit(
        {
            "good.json": ANNOTATIONS,
            "data/test-0.parquet": TABLE,
            "endless.json": ANNOTATIONS,
            "longer.jsonl": b'{"a": 1}\n' * 30,
            "announced.json": ANNOTATIONS,
            "slow.parquet": slow,
            "../escape.json": ANNOTATIONS,
            "/abs.json": ANNOTATIONS,
        }
    )
    repo.lfs |= {"data/test-0.parquet", "slow.parquet"}
    hub.hostile |= {"endless.json": "endless", "longer.jsonl": "longer", "announced.json": "announced"}
    hub.hostile["slow.parquet"] = "trickle"
    hub.cdn_host = "localhost"  # another host than the hub's
    monkeypatch.setenv("HF_TOKEN", "hf_the_users_token_1234")
    spec = HubFiles(repo_id="org/hostile", revision=commit, files=("*",))
    result, failed, outside = cli(tmp_path, monkeypatch, source("hostile", spec), timeout=5.0)
    url = f"{hub.endpoint}/datasets/org/hostile/resolve/{commit}"
    folder = tmp_path / "data" / "hostile"
    assert failed == {
        "hostile/endless.json": f"{url}/endless.json: more than the {len(ANNOTATIONS)} bytes the hub lists for it",
        "hostile/longer.jsonl": f"{url}/longer.jsonl: more than the 270 bytes the hub lists for it",
        "hostile/announced.json": (
            f"{url}/announced.json: {1 << 30} bytes, larger than the {len(ANNOTATIONS)} bytes the hub lists for it"
        ),
        "hostile/slow.parquet": (
            f"{url}/slow.parquet: transfer failed after 3 attempts (Timeout: no complete answer within 5 s (plus 1 s "
            f"per 16384 bytes received)); nothing installed for {folder / 'slow.parquet'}"
        ),
        "hostile/../escape.json": f"{folder / '../escape.json'}: leaves {folder}; refused",
        "hostile//abs.json": f"/abs.json: leaves {folder}; refused",
    }
    assert result.exit_code == 2 and result.stderr.splitlines()[-1] == (
        "error: 6 of 8 files failed (2 installed); see above"
    )
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        ".shambench-downloads.json",
        "data/test-0.parquet",
        "good.json",
    ]
    assert (folder / "data/test-0.parquet").read_bytes() == TABLE
    assert not outside and sorted(p.name for p in (tmp_path / "data").iterdir()) == ["hostile"]
    # the token went with every request to the hub, and with none to the CDN the hub redirected to
    assert {auth for _, path, auth in hub.requests if not path.startswith("/cdn/")} == {
        "Bearer hf_the_users_token_1234"
    }
    assert {auth for _, path, auth in hub.requests if path.startswith("/cdn/")} == {None}
    assert hub.downloads("/cdn/" + hashlib.sha256(TABLE).hexdigest() + "/data/test-0.parquet") == 1


def test_hostile_listings_and_a_gated_set_fail_their_repository_alone(hub, tmp_path, monkeypatch):
    """A listing nested too deep, endless, trickling or of another shape, and a gated set without a token: one line
    per repository; the source beside them is installed."""
    sources = [source("fine", HubFiles(repo_id="org/fine", revision="", files=("*.json",)))]
    hub.repo("org/fine").commit({"a.json": ANNOTATIONS})
    for fault in ("deep", "endless", "trickle", "not-a-listing"):
        hub.repo(f"org/{fault}").commit({"a.json": ANNOTATIONS})
        hub.listing_fault[f"org/{fault}"] = fault
        sources.append(source(fault, HubFiles(repo_id=f"org/{fault}", revision="", files=("*.json",))))
    hub.repo("org/gated", gated=True).commit({"a.json": ANNOTATIONS})
    sources.append(source("gated", HubFiles(repo_id="org/gated", revision="", files=("*.json",), gated=True)))
    result, failed, outside = cli(tmp_path, monkeypatch, *sources, max_size="1MB", timeout=5.0)

    def tree(name: str) -> str:
        return f"{hub.endpoint}/api/datasets/org/{name}/tree/{hub.repos[f'org/{name}'].branches['main']}"

    gated = hub.repos["org/gated"].branches["main"]
    assert failed == {
        "deep/org/deep": f"{tree('deep')}?recursive=true: nested deeper than 64 levels; expected the hub's JSON reply",
        "endless/org/endless": f"{tree('endless')}?recursive=true: the hub's reply is larger than 1000000 bytes; "
        "refused",
        "trickle/org/trickle": f"{tree('trickle')}?recursive=true: Timeout: no complete answer within 5 s (plus 1 s "
        "per 16384 bytes received)",
        "not-a-listing/org/not-a-listing": f"{tree('not-a-listing')}?recursive=true: the hub's reply is not a listing of files "
        "(: Input should be a valid list)",
        "gated/a.json": f"{hub.endpoint}/datasets/org/gated/resolve/{gated}/a.json: org/gated is a gated dataset: "
        "accept its conditions at https://huggingface.co/datasets/org/gated while logged in, then set $HF_TOKEN or "
        "run `hf auth login`",
    }
    assert result.exit_code == 2
    assert (tmp_path / "data" / "fine" / "a.json").read_bytes() == ANNOTATIONS
    installed = [str(p.relative_to(tmp_path / "data")) for p in (tmp_path / "data").rglob("*") if p.is_file()]
    assert not outside and sorted(installed) == ["fine/.shambench-downloads.json", "fine/a.json"]


def test_a_listing_in_pages_is_followed_at_the_hub_only(hub, tmp_path, monkeypatch):
    files = {f"part-{i}.json": ANNOTATIONS for i in range(3)}
    hub.repo("org/paged").commit(files)
    hub.page_size = 1
    spec = HubFiles(repo_id="org/paged", revision="", files=("*.json",))
    result, failed, _ = cli(tmp_path, monkeypatch, source("paged", spec))
    assert result.exit_code == 0 and not failed
    assert sorted(p.name for p in (tmp_path / "data" / "paged").glob("part-*.json")) == sorted(files)
    assert len([path for _, path, _ in hub.requests if "/tree/" in path]) == 3
    # a next page at another origin would be sent the token: refused before it is asked for
    hub.next_origin = f"http://localhost:{hub.cdn.server_address[1]}"
    monkeypatch.setenv("HF_TOKEN", "hf_the_users_token_1234")
    result, failed, _ = cli(tmp_path, monkeypatch, source("elsewhere", spec))
    main_commit = hub.repos["org/paged"].branches["main"]
    assert failed == {
        "elsewhere/org/paged": f"{hub.endpoint}/api/datasets/org/paged/tree/{main_commit}?recursive=true: the hub "
        f"named a next page at another origin ({hub.next_origin}/api/datasets/org/paged/tree/{main_commit}"
        "?recursive=true&cursor=1); refused"
    }
    assert result.exit_code == 2 and len([path for _, path, _ in hub.requests if "/tree/" in path]) == 4


def test_offline_mode_asks_the_hub_nothing(hub, tmp_path, monkeypatch):
    import huggingface_hub.constants as constants

    hub.repo("org/fine").commit({"a.json": ANNOTATIONS})
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    spec = HubFiles(repo_id="org/fine", revision="", files=("*.json",))
    result, failed, outside = cli(tmp_path, monkeypatch, source("fine", spec))
    assert failed == {
        "fine/org/fine": f"{hub.endpoint}/api/datasets/org/fine/revision/main: not asked, huggingface_hub's offline "
        "mode is on ($HF_HUB_OFFLINE)"
    }
    assert result.exit_code == 2 and not hub.requests and not outside

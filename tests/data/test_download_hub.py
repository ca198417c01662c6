"""Hugging Face sources through huggingface_hub, against the hub stand-in on 127.0.0.1 (`tests/hub_server.py`).

Only these tests turn huggingface_hub's offline mode off (the suite keeps HF_HUB_OFFLINE=1), and each points
HF_ENDPOINT at its stand-in and every hub folder (HF_HOME, the cache, the token file) at tmp_path."""

from __future__ import annotations

import hashlib
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shambench.data.adapter import Adapter, HubFiles
from shambench.data.download import HUB_STAGING, download_sources, make_client, read_manifest, verify_source
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
            "html.json": ANNOTATIONS,
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
    # the CDN sent an error page where the hub said the LFS file has len(TABLE) bytes: huggingface_hub's size check
    assert got["f", "data/html-00000.parquet"].detail.startswith(f"{url}/data/html-00000.parquet: OSError: ")
    assert f"should be of size {len(TABLE)} but has size {len(HTML)}" in got["f", "data/html-00000.parquet"].detail
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
    """huggingface_hub retries within the call, at the URL of the pinned LFS object (named by its SHA-256, so it
    cannot have changed; from the bytes it had kept, here none, as its reader had not yet handed the 100 on), and
    the result is still checked against the listing."""
    name = "data/test-00000-of-00001.parquet"
    hub.cut[name] = 100
    spec = HubFiles(repo_id="org/fava", revision=fava, files=(name,))
    assert run(tmp_path, source("fava", spec))[("fava", name)].status == "fetched"
    assert (tmp_path / "data" / "fava" / name).read_bytes() == TABLE
    url = f"/cdn/{hashlib.sha256(TABLE).hexdigest()}/{name}"
    assert [path for path, _ in hub.ranges if path.startswith("/cdn/")] == [url, url]

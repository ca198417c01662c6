"""`shambench data download|stats|dump|export` on the invented fixtures and a local HTTP server."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from shambench.adapters.fava import DUPLICATE, EMPTY, MISMATCH
from shambench.adapters.mushroom import FILES, MushroomAdapter
from shambench.adapters.mushroom_multilingual import MushroomMultilingualAdapter
from shambench.cli import main
from shambench.data.adapter import RemoteFile
from shambench.data.benchmark import example_from_hf, load_benchmark
from shambench.records import read_examples
from tests.data.test_benchmark import ToyAdapter

FIXTURES = Path(__file__).parents[1] / "adapters" / "fixtures"
MINE = "mushroom,favabench,halluentity"


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def fixture_server(monkeypatch):
    """Serves the Mu-SHROOM fixture folder on 127.0.0.1 and points the adapter's remote files at it."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(FIXTURES / "mushroom")))
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    remote = tuple(
        RemoteFile(
            url=f"{base}/{name}",
            path=name,
            sha256=hashlib.sha256((FIXTURES / "mushroom" / name).read_bytes()).hexdigest(),
        )
        for name in FILES.values()
    )
    monkeypatch.setattr(MushroomAdapter, "remote_files", remote)
    yield remote
    srv.shutdown()
    srv.server_close()


def test_download_fetches_verifies_and_skips_what_is_present(fixture_server, tmp_path):
    result = run("data", "download", "mushroom", "--data-dir", str(tmp_path), "--no-progress")
    assert result.exit_code == 0, result.output
    for name in FILES.values():
        assert (tmp_path / "mushroom" / name).read_bytes() == (FIXTURES / "mushroom" / name).read_bytes()
    # The downloaded folder loads like the fixture one.
    assert (
        load_benchmark("mushroom", data_dir=tmp_path).examples == load_benchmark("mushroom", data_dir=FIXTURES).examples
    )
    again = run("data", "download", "mushroom", "--data-dir", str(tmp_path), "--no-progress")
    assert again.exit_code == 0


def test_one_failing_file_does_not_stop_the_others_and_the_exit_says_so(fixture_server, monkeypatch, tmp_path):
    wrong = fixture_server[0].model_copy(update={"sha256": "f" * 64})
    monkeypatch.setattr(MushroomAdapter, "remote_files", (wrong, fixture_server[1]))
    result = run("data", "download", "mushroom", "--data-dir", str(tmp_path), "--no-progress")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert f"mushroom/{FILES['validation']}: fetched" in lines
    failed = [line for line in lines if line.startswith("failed: ")]
    assert len(failed) == 1 and failed[0].startswith(f"failed: mushroom/{FILES['test']}: {wrong.url}: SHA-256 mismatch")
    assert lines[-1] == "error: 1 of 2 files failed (1 installed); see above"
    assert not (tmp_path / "mushroom" / FILES["test"]).exists()
    assert (tmp_path / "mushroom" / FILES["validation"]).is_file()


def test_a_bad_size_cap_is_a_usage_error(tmp_path):
    result = run("data", "download", "mushroom", "--data-dir", str(tmp_path), "--max-size", "lots")
    assert result.exit_code == 2 and "not a size: 'lots'" in result.output


def test_verify_checks_a_downloaded_folder_and_finds_a_changed_file(fixture_server, tmp_path):
    assert run("data", "download", "mushroom", "--data-dir", str(tmp_path), "--no-progress").exit_code == 0
    ok = run("data", "verify", "--data-dir", str(tmp_path))
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.splitlines() == [
        f"        ok  mushroom/{FILES['test']}",
        f"        ok  mushroom/{FILES['validation']}",
        *[f"    absent  mushroom-multilingual/{r.path}" for r in MushroomMultilingualAdapter.remote_files],
        f"data dir: {tmp_path}: 2 ok, 0 unrecorded, 24 absent",
    ]
    (tmp_path / "mushroom" / FILES["test"]).write_text("{}\n")
    bad = run("data", "verify", "mushroom", "--data-dir", str(tmp_path))
    assert bad.exit_code == 2
    assert f"  mismatch  mushroom/{FILES['test']}  size mismatch" not in bad.stdout  # declared files: by SHA-256
    assert f"  mismatch  mushroom/{FILES['test']}  SHA-256 mismatch (expected " in bad.stdout
    assert (
        bad.stderr.strip() == f"error: 1 file(s) in {tmp_path} do not match their checksums: mushroom/{FILES['test']}"
    )


def test_verify_says_a_fifo_or_a_folder_is_not_a_regular_file_and_checks_the_others(fixture_server, tmp_path):
    """A FIFO or a folder where a data file should be is classified as the filesystem gate does (never opened, so
    never waited on), not called absent; the other files are still checked, and the exit is 2."""
    assert run("data", "download", "mushroom", "--data-dir", str(tmp_path), "--no-progress").exit_code == 0
    test, validation = (tmp_path / "mushroom" / FILES[split] for split in ("test", "validation"))
    test.unlink()
    os.mkfifo(test)
    bad = run("data", "verify", "mushroom", "--data-dir", str(tmp_path))
    assert bad.exit_code == 2
    assert bad.stdout.splitlines() == [
        f"   refused  mushroom/{FILES['test']}  not a regular file (a FIFO)",
        f"        ok  mushroom/{FILES['validation']}",
    ]
    assert bad.stderr.strip() == f"error: 1 file(s) in {tmp_path} are not regular files: mushroom/{FILES['test']}"
    validation.write_text("{}\n")
    test.unlink()
    test.mkdir()
    both = run("data", "verify", "mushroom", "--data-dir", str(tmp_path))
    assert f"   refused  mushroom/{FILES['test']}  not a regular file (a folder)" in both.stdout
    assert both.stderr.strip() == (
        f"error: 1 file(s) in {tmp_path} do not match their checksums: mushroom/{FILES['validation']}; "
        f"1 file(s) in {tmp_path} are not regular files: mushroom/{FILES['test']}"
    )


def test_the_shared_data_verifies(shared_data):
    result = run("data", "verify", "--data-dir", str(shared_data))
    assert result.exit_code == 0, result.output
    statuses = [line.split()[0] for line in result.stdout.splitlines()[:-1]]
    assert "mismatch" not in statuses
    # the organisers' 24 Mu-SHROOM files, byte for byte at the pinned commit (their SHA-256s in the adapter)
    for remote in MushroomMultilingualAdapter.remote_files:
        assert f"        ok  mushroom-multilingual/{remote.path}" in result.stdout


def test_stats_json_matches_hand_counts():
    result = run("data", "stats", "--data-dir", str(FIXTURES), "--datasets", MINE, "--json")
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    mushroom = next(p for p in figures["partitions"] if p["dataset"] == "mushroom")
    # Tokens of the six responses (whitespace excluded): 11, 7, 9, 7, 7, 7 = 48, mean 8.0; hallucinated tokens
    # 1 ("1843"), 2 ("Sable runs"), 0, 2 ("2,410 metres"), 0, 1 ("Norwich") = 6, mean 1.0;
    # rate (1/11 + 2/7 + 0 + 2/7 + 0 + 1/7) / 6 = 0.134199; 4 of 6 have a span.
    assert mushroom["count"] == 6 and mushroom["paper_count"] == 154
    assert mushroom["mean_response_tokens"] == pytest.approx(8.0)
    assert mushroom["mean_hallucinated_tokens"] == pytest.approx(1.0)
    assert mushroom["mean_hallucinated_rate"] == pytest.approx((1 / 11 + 2 / 7 + 2 / 7 + 1 / 7) / 6)
    assert mushroom["share_with_span"] == pytest.approx(4 / 6)
    # the paper's count of the same three partitions (154 + 261 + 152), not Table 1's total over all nine
    assert figures["total"]["count"] == 18 and figures["total"]["paper_count"] == 567
    assert figures["total"]["count_source"] == (
        "SHAM-Bench, Table 1, the partitions present (its total, 6461, also has context_qa/ragtruth 875, "
        "data2txt/ragtruth 900, mt/zhou 479, summ/faithbench 745, summ/ragtruth 900, summ/zhou 1995)"
    )
    assert figures["dropped"]["favabench"] == {DUPLICATE: 1, MISMATCH: 1, EMPTY: 1}
    assert figures["dropped"]["mushroom"] == {}
    assert "tokenizer" in figures["conventions"] and "hallucinated_token" in figures["conventions"]


def test_stats_table_shows_the_paper_count_and_the_drops():
    result = run("data", "stats", "--data-dir", str(FIXTURES), "--datasets", MINE)
    assert result.exit_code == 0, result.output
    row = next(line.split() for line in result.output.splitlines() if "halluentity" in line and "open_bio" in line)
    # task, dataset, n, paper n, tokens, hallucinated tokens, rate, share
    assert row[:4] == ["open_bio", "halluentity", "6", "152"]
    assert "hallucinated entity not found in response" in result.output


def test_a_corrupt_source_is_reported_and_the_others_still_load(tmp_path):
    (tmp_path / "fava").symlink_to(FIXTURES / "fava", target_is_directory=True)
    (tmp_path / "halluentity").mkdir()
    bad = tmp_path / "halluentity" / "HalluEntity.jsonl"
    bad.write_text("not json\n")
    result = run("data", "stats", "--data-dir", str(tmp_path), "--datasets", "favabench,halluentity", "--json")
    assert result.exit_code == 0
    assert f"dataset halluentity not loaded: {bad}:1: not valid JSON" in result.stderr
    assert [p["dataset"] for p in json.loads(result.stdout)["partitions"]] == ["favabench"]


def test_no_examples_is_one_clear_error(tmp_path):
    result = run("data", "stats", "--data-dir", str(tmp_path))
    assert result.exit_code == 2
    assert result.output.startswith(
        f"error: no dataset could be loaded for split 'test' from data directory {tmp_path} (given by --data-dir): "
    )
    assert f"ragtruth: {tmp_path / 'ragtruth'}: source files not found" in result.output
    missing = run("data", "stats", "--data-dir", str(tmp_path / "nowhere"))
    assert missing.exit_code == 2
    assert f"data directory {tmp_path / 'nowhere'} (given by --data-dir) does not exist" in missing.output


def test_dump_writes_the_examples_format_with_stable_ids(tmp_path):
    out = tmp_path / "dev.jsonl"
    result = run("data", "dump", "--out", str(out), "--data-dir", str(FIXTURES), "--datasets", MINE, "--split", "dev")
    assert result.exit_code == 0, result.output
    dumped = read_examples(out)
    assert dumped == load_benchmark(MINE, "dev", FIXTURES).examples
    assert len(dumped) == 15 and {ex.split for ex in dumped} == {"dev"}
    first = json.loads(out.read_text().splitlines()[0])
    assert first["id"].startswith("mushroom/val-en-") and "soft_spans" in first
    again = tmp_path / "again.jsonl"
    run("data", "dump", "--out", str(again), "--data-dir", str(FIXTURES), "--datasets", MINE, "--split", "dev")
    assert again.read_bytes() == out.read_bytes()


def test_dump_to_a_dash_writes_the_lines_on_stdout_and_no_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "dev.jsonl"
    run("data", "dump", "--out", str(out), "--data-dir", str(FIXTURES), "--datasets", MINE, "--split", "dev")
    result = run("data", "dump", "--out", "-", "--data-dir", str(FIXTURES), "--datasets", MINE, "--split", "dev")
    assert result.exit_code == 0, result.output
    assert result.stdout == out.read_text() and result.stderr.strip() == "15 examples written to stdout"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.jsonl"]  # no file named '-'


def test_dump_writes_steps_as_start_end_label(tmp_path, monkeypatch):
    from shambench.data.adapter import adapters
    from shambench.registry import Entry
    from tests.data.test_benchmark import ToyAdapter

    adapters.entries()
    monkeypatch.setitem(adapters._entries, "toy", Entry("toy", ToyAdapter, "toy source", __name__))
    out = tmp_path / "toy.jsonl"
    assert run("data", "dump", "--out", str(out), "--datasets", "toy", "--data-dir", str(tmp_path)).exit_code == 0
    line = json.loads(out.read_text())
    assert line["steps"] == [{"start": 0, "end": 6, "label": 1}, {"start": 7, "end": 12, "label": 0}]


def test_export_writes_parquet_and_a_card_that_datasets_reads_back(tmp_path):
    import datasets

    out = tmp_path / "hf"
    result = run("data", "export", "--out", str(out), "--data-dir", str(FIXTURES), "--datasets", MINE)
    assert result.exit_code == 0, result.output
    # its own lines only: no "Creating parquet from Arrow format" bar of datasets' per file
    wrote = [out / "data" / "test.parquet", out / "data" / "dev.parquet", out / "README.md"]
    assert result.stderr.splitlines() == [f"wrote {path}" for path in wrote]
    files = {"test": str(out / "data" / "test.parquet"), "dev": str(out / "data" / "dev.parquet")}
    loaded = datasets.load_dataset("parquet", data_files=files, cache_dir=str(tmp_path / "cache"))
    assert {name: ds.num_rows for name, ds in loaded.items()} == {"test": 18, "dev": 15}
    assert [example_from_hf(row) for row in loaded["test"]] == load_benchmark(MINE, data_dir=FIXTURES).examples
    # The card's configs let `load_dataset(folder)` find the splits too.
    by_card = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "cache2"))
    assert sorted(by_card) == ["dev", "test"]
    card = (out / "README.md").read_text()
    for line in (
        "| favabench | open_qa | CC BY 4.0 | fava-uw/fava-data@d88b835 (annotations.json, 2024-01-14) |",
        "| halluentity | open_bio | MIT | samuelyeh/HalluEntity@00b3e0c (HalluEntity.jsonl) |",
        "| mushroom | open_qa | unstated (no LICENSE file; the authors ask to be cited) | "
        "Helsinki-NLP/mu-shroom@7fea78a0e5af887d196931721147ace5b4c4d9a8 |",
        "| dev | open_qa/mushroom | 5 |",
    ):
        assert line in card


def test_help_lists_the_commands():
    result = run("data", "--help")
    assert result.exit_code == 0
    for command in ("download", "stats", "dump", "export"):
        assert command in result.output


def test_sharp_is_downloaded_through_the_hub_with_an_accepted_token_and_reads_as_released(hub, monkeypatch, tmp_path):
    """The adapter's own declaration against the hub stand-in: gated, no commit pinned, files found by listing."""
    release = {
        str(p.relative_to(FIXTURES / "sharp")): p.read_bytes() for p in sorted((FIXTURES / "sharp").rglob("*.parquet"))
    }
    repo = hub.repo("ZaandaTeika/SHARP", gated=True)
    main = repo.commit({"README.md": b"---\nlicense: other\n---\n# SHARP\n", ".gitattributes": b"", **release})
    repo.lfs |= set(release)
    args = ("data", "download", "sharp", "--data-dir", str(tmp_path), "--no-progress")
    refused = run(*args)
    assert refused.exit_code == 2
    failed = [line for line in refused.stderr.splitlines() if line.startswith("failed: ")]
    assert len(failed) == 5 and all(
        line.endswith(
            "ZaandaTeika/SHARP is a gated dataset: accept its conditions at "
            "https://huggingface.co/datasets/ZaandaTeika/SHARP while logged in, then set $HF_TOKEN or run "
            "`hf auth login`"
        )
        for line in failed
    )
    hub.accepted.add("hf_sharp_user")
    monkeypatch.setenv("HF_TOKEN", "hf_sharp_user")
    result = run(*args)
    assert result.exit_code == 0, result.output
    note = f"(no commit is pinned for ZaandaTeika/SHARP: took main's {main})"
    assert f"sharp/SHARP-Math-SPAN/test-00000-of-00001.parquet: fetched {note}" in result.stderr.splitlines()
    assert load_benchmark("sharp", data_dir=tmp_path).examples == load_benchmark("sharp", data_dir=FIXTURES).examples


def test_verify_says_when_a_source_declares_no_files(tmp_path, monkeypatch):
    from shambench.data.adapter import adapters
    from shambench.registry import Entry

    adapters.entries()  # the built-ins first, so that the toy entry stays
    monkeypatch.setitem(adapters._entries, "toy", Entry("toy", ToyAdapter, "toy source", __name__))
    res = run("data", "verify", "toy", "--data-dir", str(tmp_path))
    assert res.exit_code == 0, res.output
    # it printed only "0 ok, 0 unrecorded, 0 absent"
    assert res.stdout.splitlines()[0] == "toy: its adapter declares no released files, so nothing to check"

"""The SQLite response cache and `shambench cache stats|clear`."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from shambench.cli import main
from shambench.llm.cache import ResponseCache, cache_key, cache_path
from shambench.scoring.segcache import SegmentationStore


def test_key_is_canonical_and_content_sensitive():
    a = cache_key({"model": "m", "body": {"temperature": 0, "messages": [{"role": "user", "content": "x"}]}})
    b = cache_key({"body": {"messages": [{"content": "x", "role": "user"}], "temperature": 0}, "model": "m"})
    c = cache_key({"model": "m", "body": {"temperature": 0, "messages": [{"role": "user", "content": "y"}]}})
    assert a == b != c
    assert len(a) == 64


def json_module_key(parts) -> str:
    """The key as earlier versions made it, with the json module alone."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@given(JSON_VALUES)
def test_keys_are_those_the_json_module_gives(value):
    # Surrogates cannot be encoded either way: no request holds them.
    try:
        old = json_module_key({"body": value})
    except UnicodeEncodeError:
        return
    assert cache_key({"body": value}) == old


def test_keys_of_values_orjson_writes_otherwise_are_still_the_json_modules():
    for value in (1e-05, 2.5e-7, float("nan"), float("inf"), 10**30, {1: "a"}, [0.6, {"t": 1e-9}]):
        assert cache_key({"body": value}) == json_module_key({"body": value})


def test_put_get_and_reopen(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    assert cache.get("k") is None
    cache.put("k", "m1", {"text": "héllo", "finish_reason": "stop"})
    cache.close()
    reopened = ResponseCache(path)
    assert reopened.get("k") == {"text": "héllo", "finish_reason": "stop"}
    reopened.close()


def test_file_lives_under_the_cache_dir_in_wal_mode():
    cache = ResponseCache()
    assert cache.path == cache_path()
    assert str(cache.path).startswith(os.environ["SHAMBENCH_CACHE_DIR"])
    cache.close()
    with sqlite3.connect(cache_path()) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_stats_and_clear_by_model(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    for i in range(3):
        cache.put(f"a{i}", "model-a", {"text": str(i)})
    cache.put("b0", "model-b", {"text": "b"})
    cache.put("a0", "model-a", {"text": "replaced"})  # same key: replaced, not added
    stats = cache.stats()
    assert (stats.entries, stats.by_model) == (4, {"model-a": 3, "model-b": 1})
    assert stats.size_bytes > 0
    assert cache.clear("model-a") == 3
    assert cache.stats().by_model == {"model-b": 1}
    assert cache.clear() == 1
    assert cache.stats().entries == 0
    cache.close()


def test_threads_share_the_one_writer(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")

    def write(t: int) -> None:
        for i in range(50):
            cache.put(f"{t}-{i}", "m", {"text": f"{t}-{i}"})

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    # 4 threads x 50 distinct keys.
    assert cache.stats().entries == 200
    assert cache.get("3-49") == {"text": "3-49"}
    cache.close()


def test_cli_stats_and_clear():
    cache = ResponseCache()
    cache.put("x", "gpt-5-mini", {"text": "1"})
    cache.put("y", "gpt-5-mini", {"text": "2"})
    cache.close()
    runner = CliRunner()
    out = runner.invoke(main, ["cache", "stats"], terminal_width=200)
    assert out.exit_code == 0, out.output
    assert "gpt-5-mini" in out.output and "total" in out.output
    # the path whole on one line, even in a narrow terminal
    narrow = runner.invoke(main, ["cache", "stats"], env={"COLUMNS": "30"})
    assert f"cache: {ResponseCache().path}\n" in narrow.output
    assert f"segmentation cache: {SegmentationStore().path}\n" in narrow.output  # was a table title, cut mid-word
    refused = runner.invoke(main, ["cache", "clear"], input="n\n")
    assert refused.exit_code == 0 and refused.stdout.endswith("nothing removed\n")
    assert ResponseCache().stats().entries == 2
    cleared = runner.invoke(main, ["cache", "clear", "--yes"])
    assert cleared.exit_code == 0 and "deleted 2 cached answers" in cleared.output
    assert ResponseCache().stats().entries == 0


def test_writes_are_batched_but_readable_at_once(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path, batch_seconds=3600)
    cache.put("k", "m", {"text": "1"})
    assert cache.get("k") == {"text": "1"}

    def on_disk() -> int:
        with sqlite3.connect(path) as other:
            return other.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    # One put is pending (a batch commits at 64 puts, or here after an hour); flush commits it for other readers.
    assert on_disk() == 0
    cache.flush()
    assert on_disk() == 1
    for i in range(64):
        cache.put(f"b{i}", "m", {"text": str(i)})
    # The 64th put filled a batch and committed it: 1 + 64 rows.
    assert on_disk() == 65
    cache.close()


def _rows(path) -> dict[str, str]:
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT key, value FROM responses").fetchall())


def _write_row(path, key: str, value: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute("UPDATE responses SET value = ? WHERE key = ?", (value, key))


def test_a_doctored_moved_or_unsealed_row_is_a_miss_with_one_warning(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    for key in ("a", "b", "c", "d"):
        cache.put(key, "m", {"text": f'{{"incorrect_spans": ["{key}"]}}'})
    cache.close()
    stored = _rows(path)
    seal, _, text = stored["a"].partition(":")
    assert json.loads(text) == {"text": '{"incorrect_spans": ["a"]}'} and len(seal) == 32
    # An answer edited in place, one copied under another key, and one in the unsealed form of older versions.
    _write_row(path, "a", f"{seal}:" + text.replace('[\\"a\\"]', '[\\"the\\"]'))
    _write_row(path, "b", stored["c"])
    _write_row(path, "d", text)
    reopened = ResponseCache(path)
    with pytest.warns(RuntimeWarning, match="failed its seal") as caught:
        assert [reopened.get(k) for k in ("a", "b", "d")] == [None, None, None]
    assert len(caught) == 1  # one warning per cache, however many rows fail
    assert reopened.get("c") == {"text": '{"incorrect_spans": ["c"]}'}
    # Asked again and stored again: sealed anew.
    reopened.put("a", "m", {"text": "[]"})
    assert reopened.get("a") == {"text": "[]"}
    reopened.close()
    assert ResponseCache(path).get("a") == {"text": "[]"}


def test_a_doctored_cache_row_does_not_change_a_runs_number(openai_server, tmp_path):
    from tests.run_helpers import write_jsonl

    rows = [{"id": f"e{i}", "dataset": "toy", "task": "qa", "question": "Where?", "response": "Paris is in Italy.",
             "hallu_spans": [[12, 17]]} for i in range(3)]  # fmt: skip
    examples = write_jsonl(tmp_path / "ex.jsonl", [{**r, "response": f"{r['response']} ({r['id']})"} for r in rows])
    run = ["eval", "--detector", "openai", "--model", "m", "--base-url", openai_server.base_url,
           "--examples", str(examples), "--bootstrap", "10"]  # fmt: skip
    first = CliRunner().invoke(main, [*run, "--run-dir", str(tmp_path / "r1")])
    assert first.exit_code == 0, first.output
    stored = _rows(cache_path())
    assert len(stored) == 3
    for key, value in stored.items():
        seal, _, text = value.partition(":")
        record = json.loads(text)
        record["text"] = json.dumps({"incorrect_spans": ["Paris"]})
        _write_row(cache_path(), key, f"{seal}:{json.dumps(record)}")
    n_before = len(openai_server.log)
    with pytest.warns(RuntimeWarning, match="failed its seal"):
        second = CliRunner().invoke(main, [*run, "--run-dir", str(tmp_path / "r2")])
    assert second.exit_code == 0, second.output
    assert len(openai_server.log) - n_before == 3  # every doctored answer asked again, none used
    scores = [json.loads((tmp_path / r / "results.json").read_text())["overall"] for r in ("r1", "r2")]
    assert scores[0] == scores[1]

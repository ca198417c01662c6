"""The on-disk segmentation cache and tokenising on several cores: the same units as tokenising in one process."""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import threading

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shambench.cli import main
from shambench.scoring import segcache, text
from shambench.scoring.segcache import SegmentationStore, decode, encode, store_path, text_key
from shambench.sealing import Sealer
from tests.cli.test_entry import COMMAND_ENDED
from tests.conftest import mushroom_english_responses


def units(segs) -> list[tuple[list[int], ...]]:
    """Plain lists of every bound, for exact comparison."""
    return [
        (s.token_starts.tolist(), s.token_ends.tolist(), s.sentence_starts.tolist(), s.sentence_ends.tolist())
        for s in segs
    ]


def fresh_segmentation(texts: list[str]) -> list:
    """Segmentations tokenised now, in this process, with neither cache."""
    return text._tokenised_flat(list(texts)).split()


def must_not_tokenise(*_args, **_kwargs):
    raise AssertionError("tokenised although the disk cache holds the text")


@pytest.fixture
def disk_for_every_batch(monkeypatch):
    """The disk cache in use for batches of any size, and a clean process cache before and after."""
    monkeypatch.setattr(text, "DISK_MIN_TEXTS", 1)
    text.clear_cache()
    yield
    text.clear_cache()


TEXT = "Two words. And three more!"


def stored(text_: str = TEXT) -> tuple[bytes, bytes]:
    """The key and stored row of a text's segmentation."""
    seg = fresh_segmentation([text_])[0]
    key = text_key(text_)
    return key, encode(key, seg.token_starts, seg.token_ends, seg.sentence_starts, seg.sentence_ends)


def test_stored_form_round_trips():
    key, blob = stored()
    # [n_tokens, n_units, 7 token starts, 7 token ends, 2 unit starts, 2 unit ends] in int32, then a 16-byte seal.
    assert len(blob) == 4 * (2 + 7 + 7 + 2 + 2) + 16
    (back,) = decode([key], [blob], [len(TEXT)])
    assert [a.tolist() for a in back] == list(units(fresh_segmentation([TEXT]))[0])
    assert all(a.dtype == np.int64 for a in back)
    assert encode(key, np.array([2**31]), np.array([2**31 + 1]), np.array([0]), np.array([1])) is None


def resealed(key: bytes, values: list[int]) -> bytes:
    """A row a buggy writer could store: any int32 values, sealed correctly for the key."""
    body = np.array(values, np.int32).tobytes()
    return Sealer.sealed(key, body)


def test_rows_that_fail_their_checks_are_misses():
    key, blob = stored()
    other_key, other = stored("Short one.")
    n = len(TEXT)
    good = np.frombuffer(blob[:-16], np.int32).tolist()  # [7, 2, starts..., ends..., unit starts, unit ends]
    past_end = good.copy()
    past_end[2 + 7 + 6] = n + 1  # the last token ends past the text
    swapped_tokens = good.copy()
    swapped_tokens[2], swapped_tokens[3] = swapped_tokens[3], swapped_tokens[2]  # starts out of order
    doctored = {
        "another text's row": other,
        "a short row": blob[:-20] + blob[-16:],
        "a flipped byte": blob[:5] + bytes([blob[5] ^ 1]) + blob[6:],
        "no seal": blob[:-16],
        "a wrong token count": resealed(key, [8, *good[1:]]),
        "a token past the text": resealed(key, past_end),
        "tokens out of order": resealed(key, swapped_tokens),
        "a negative count": resealed(key, [-1, 2, *good[2:]]),
    }
    rows = decode([key] * len(doctored), list(doctored.values()), [n] * len(doctored))
    assert {why: row for why, row in zip(doctored, rows)} == dict.fromkeys(doctored)
    # The good row beside them is still read, and a text's own row is read for its own key only.
    both = decode([key, other_key, key], [blob, other, other], [n, len("Short one."), n])
    assert both[0] is not None and both[1] is not None and both[2] is None


@given(st.lists(st.text(alphabet="ab .!\n", max_size=30), min_size=1, max_size=6))
@settings(max_examples=60, deadline=None)
def test_every_real_segmentation_passes_its_checks(texts):
    segs = fresh_segmentation(texts)
    keys = [text_key(t) for t in texts]
    blobs = [encode(k, s.token_starts, s.token_ends, s.sentence_starts, s.sentence_ends) for k, s in zip(keys, segs)]
    back = decode(keys, blobs, [len(t) for t in texts])
    assert [tuple(a.tolist() for a in row) for row in back] == units(segs)


def test_a_corrupt_row_on_disk_is_recomputed_rewritten_and_warned_once(disk_for_every_batch):
    texts = ["First text. It has two sentences.", "Second one here."]
    made = units(text.segment_all(texts))
    text.wait_for_writes()
    convention = text.cache_convention("en")
    keys = [text_key(t) for t in texts]
    with sqlite3.connect(store_path()) as db:
        rows = dict(db.execute("SELECT key, data FROM segmentations WHERE convention = ?", [convention]))
        # The two rows swapped: each is whole, but written for the other text.
        for k, other in zip(keys, reversed(keys)):
            db.execute("UPDATE segmentations SET data = ? WHERE key = ?", [rows[other], k])
    text.clear_cache()
    with pytest.warns(RuntimeWarning, match=r"2 stored row\(s\) failed their checks") as caught:
        assert units(text.segment_all(texts)) == made
    text.wait_for_writes()
    assert len([w for w in caught if "segmentation cache" in str(w.message)]) == 1
    with sqlite3.connect(store_path()) as db:
        assert dict(db.execute("SELECT key, data FROM segmentations WHERE convention = ?", [convention])) == rows


def test_a_new_process_reads_segmentations_from_disk(disk_for_every_batch, monkeypatch):
    texts = ["First text. It has two sentences.", "Second one", "", "First text. It has two sentences."]
    made = units(text.segment_all(texts))
    assert made == units(fresh_segmentation(texts))
    text.wait_for_writes()
    stats = SegmentationStore().stats()
    # Three distinct texts, under the English convention of this spaCy version.
    assert stats.entries == 3 and stats.by_convention == {text.cache_convention("en"): 3}
    assert stats.path == str(store_path()) and stats.size_bytes > 0
    text.clear_cache()  # what a new process starts with
    monkeypatch.setattr(text, "_tokenised_rows", must_not_tokenise)
    assert units(text.segment_all(texts)) == made


def test_the_convention_keys_language_and_spacy_version(disk_for_every_batch, monkeypatch):
    text.segment_all(["Bonjour. Ça va?"], lang="fr")
    text.wait_for_writes()
    text.clear_cache()
    assert SegmentationStore().stats().by_convention == {text.cache_convention("fr"): 1}
    assert text.cache_convention("fr").startswith("spacy-") and "/fr/" in text.cache_convention("fr")
    # The same text under another language is not taken from the French entry.
    calls = []
    real = text._tokenised_flat
    monkeypatch.setattr(text, "_tokenised_flat", lambda ts, bs, lang: calls.append(ts) or real(ts, bs, lang))
    text.segment_all(["Bonjour. Ça va?"], lang="en")
    assert calls == [["Bonjour. Ça va?"]]


pieces = st.sampled_from(["the", "Dr.", "U.S.", "3.5", "don't", "café", "!", "?", ".", ",", "...", '"', "。", "—"])
separators = st.sampled_from([" ", " ", "  ", "\n", "\n\n", "\t", ""])
texts_strategy = st.lists(
    st.lists(st.tuples(pieces, separators), max_size=20).map(lambda parts: "".join(p + s for p, s in parts)),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(texts_strategy)
def test_cached_and_uncached_segmentations_are_identical(disk_for_every_batch, texts):
    expected = units(fresh_segmentation(texts))
    text.clear_cache()
    assert units(text.segment_all(texts)) == expected  # tokenised, or read from an earlier example's rows
    text.clear_cache()
    assert units(text.segment_all(texts)) == expected  # read from disk


def test_real_responses_read_back_from_disk_exactly(monkeypatch):
    texts = mushroom_english_responses()
    assert len(texts) >= text.DISK_MIN_TEXTS
    text.clear_cache()
    expected = units(fresh_segmentation(texts))
    assert units(text.segment_all(texts)) == expected
    text.clear_cache()
    monkeypatch.setattr(text, "_tokenised_rows", must_not_tokenise)
    assert units(text.segment_all(texts)) == expected
    text.clear_cache()


def test_parallel_tokenising_equals_one_process(disk_for_every_batch, monkeypatch):
    texts = mushroom_english_responses()
    pools = []

    class CountedPool(text.ProcessPoolExecutor):
        def __init__(self, workers, **kwargs):
            pools.append(workers)
            super().__init__(workers, **kwargs)

    def segmented(texts: list[str]) -> list:
        text.clear_cache()
        return text.segment_all(texts, 32)

    monkeypatch.setattr(text, "ProcessPoolExecutor", CountedPool)
    monkeypatch.setattr(text, "PARALLEL_MIN_CHARS", 1)
    # Small disk batches and worker tasks: the workers start and encode rows while texts are still being added.
    monkeypatch.setattr(text, "LOOKUP_TEXTS", 16)
    monkeypatch.setattr(text, "WORKER_CHARS", 2000)
    monkeypatch.setenv(text.WORKERS_ENV, "2")
    parallel = segmented(texts)
    assert pools == [2]
    assert units(parallel) == units(fresh_segmentation(texts))
    text.wait_for_writes()
    assert SegmentationStore().stats().entries == len(set(texts))  # every row the workers encoded, stored
    # With one worker configured, or from a thread other than the main one (a sweep's), no pool is started.
    monkeypatch.setenv(text.WORKERS_ENV, "1")
    segmented(texts[:3])
    monkeypatch.setenv(text.WORKERS_ENV, "2")
    from_thread = []
    worker = threading.Thread(target=lambda: from_thread.append(segmented(texts[:3])))
    worker.start()
    worker.join()
    assert pools == [2] and units(from_thread[0]) == units(fresh_segmentation(texts[:3]))
    text.clear_cache()


def test_the_parts_handed_to_workers_keep_the_order():
    assert text._parts_of(["ab", "c", "def", "g"], 3) == [["ab", "c"], ["def"], ["g"]]
    assert text._parts_of([], 3) == []


def concurrent_writer(barrier, texts: list[str], order: int) -> None:
    """One of several processes that segment the same texts, each in its own order, at the same moment."""
    mine = [texts[i] for i in np.random.default_rng(order).permutation(len(texts))]
    text.clear_cache()
    barrier.wait()
    text.segment_all(mine)


def test_concurrent_writers_store_each_text_once_and_intact(monkeypatch):
    texts = [f"Text number {i}. It repeats {i % 7} times; then ends!" for i in range(400)]
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=concurrent_writer, args=(barrier, texts, k)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    with sqlite3.connect(store_path()) as db:
        assert db.execute("SELECT COUNT(*), COUNT(DISTINCT key) FROM segmentations").fetchone() == (400, 400)
    text.clear_cache()
    monkeypatch.setattr(text, "_tokenised_rows", must_not_tokenise)
    assert units(text.segment_all(texts)) == units(fresh_segmentation(texts))
    text.clear_cache()


def test_an_unusable_cache_warns_and_segmentation_goes_on(disk_for_every_batch, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    monkeypatch.setenv("SHAMBENCH_CACHE_DIR", str(blocker))
    with pytest.warns(RuntimeWarning, match="segmentation cache .* not used") as caught:
        segs = text.segment_all(["Still segmented. Twice."])
        text.wait_for_writes()
    assert len(caught) == 2  # reading, then writing (from the writer thread)
    assert units(segs) == units(fresh_segmentation(["Still segmented. Twice."]))


def test_cache_cli_reports_and_clears_segmentations(disk_for_every_batch):
    text.segment_all(["One text.", "Another text."])
    runner = CliRunner()
    out = runner.invoke(main, ["cache", "stats"], terminal_width=200)
    assert out.exit_code == 0, out.output
    assert "segmentation cache" in out.output and text.cache_convention("en") in out.output
    only = runner.invoke(main, ["cache", "clear", "--segmentation", "--yes"])
    assert only.exit_code == 0, only.output
    assert "deleted 2 cached segmentations" in only.output and "answers" not in only.output
    assert SegmentationStore().stats().entries == 0
    both = runner.invoke(main, ["cache", "clear", "--yes"])
    assert "deleted 0 cached answers" in both.output and "deleted 0 cached segmentations" in both.output
    clash = runner.invoke(main, ["cache", "clear", "--segmentation", "--model", "m", "--yes"])
    assert clash.exit_code == 2


def test_the_process_cache_stops_growing_at_its_limit(disk_for_every_batch, monkeypatch):
    monkeypatch.setattr(text, "PROCESS_CACHE_TEXTS", 2)
    first = text.segment_all(["One.", "Two."])
    assert text.segment("One.") is first[0]  # kept in the process
    more = text.segment_all(["Three.", "Four.", "One."])
    assert units(more) == units(fresh_segmentation(["Three.", "Four.", "One."]))
    assert more[2] is first[0]
    assert set(text._cache["en"]) == {"One.", "Two."}  # the new ones were returned, not kept


SLOW_WRITES = (
    COMMAND_ENDED
    + """
from shambench.scoring import segcache
put_many = segcache.SegmentationStore.put_many

def slow_put_many(*args, **kwargs):
    command_ended.wait()  # still writing when the command is done
    put_many(*args, **kwargs)
    print("rows written", flush=True)

segcache.SegmentationStore.put_many = slow_put_many
"""
)


def test_the_command_ends_only_once_its_segmentations_are_stored(tmp_path):
    # The rows are written by a thread once segmentation is done (while the scorer works): the installed command
    # waits for it, even when writing takes longer than scoring.
    n = text.DISK_MIN_TEXTS + 6
    rows = [{"id": f"toy/{i}", "dataset": "toy", "task": "qa", "response": f"Answer {i}. Then more.",
             "hallu_spans": []} for i in range(n)]  # fmt: skip
    examples = tmp_path / "examples.jsonl"
    examples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(json.dumps({"id": r["id"], "spans": []}) + "\n" for r in rows))
    cache = tmp_path / "cache"
    script = SLOW_WRITES + "import sys\nsys.argv = ['shambench', *sys.argv[1:]]\nfrom shambench.cli import run\nrun()\n"
    args = ["score", "--examples", examples, "--predictions", predictions, "--out", tmp_path / "results.json"]
    done = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SHAMBENCH_CACHE_DIR": str(cache)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("rows written")
    assert SegmentationStore(cache / segcache.FILENAME).stats().entries == n

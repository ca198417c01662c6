"""Corpora of EXAMPLES files kept on disk: a file scored before is not read again, and what is kept proves it."""

from __future__ import annotations

import gc
import json

import numpy as np
import pytest
from pydantic import BaseModel

from shambench.scoring import kept as kept_module
from shambench.scoring.corpus import Corpus
from shambench.scoring.scorer import Scorer
from tests.scoring.test_corpus import MIXED_PREDICTIONS, mixed_examples, reading, scores, write_examples


def test_a_file_scored_before_is_not_read_again_and_scores_the_same(tmp_path):
    path = tmp_path / "examples.jsonl"
    write_examples(path, mixed_examples())
    read, reads = reading(path)
    first = kept_module.file_corpus(path, None, read)
    again = kept_module.file_corpus(path, None, read)
    assert len(reads) == 1
    whole = scores(Scorer(mixed_examples(), n_resamples=50), MIXED_PREDICTIONS)
    assert scores(Scorer(first, n_resamples=50), MIXED_PREDICTIONS) == whole
    assert scores(Scorer(again, n_resamples=50), MIXED_PREDICTIONS) == whole
    assert again.tokens.starts.dtype == first.tokens.starts.dtype
    assert kept_module.corpora_stats()[0] == 1


@pytest.mark.usefixtures("command_line_settings")  # what the command line's process allows
def test_loading_a_kept_corpus_reads_its_names_with_the_collector_paused(tmp_path, monkeypatch):
    path = tmp_path / "examples.jsonl"
    write_examples(path, mixed_examples())
    read, reads = reading(path)
    kept_module.file_corpus(path, None, read)
    loads, seen = kept_module.orjson.loads, []

    def watched(data):
        if not data.startswith(b'{"key"'):  # the names, not the digest record read before them
            seen.append(gc.isenabled())
        return loads(data)

    monkeypatch.setattr(kept_module.orjson, "loads", watched)
    assert gc.isenabled()
    kept = kept_module.file_corpus(path, None, read)
    assert len(reads) == 1 and seen == [False] and gc.isenabled()
    assert kept.ids == [e.id for e in mixed_examples()]


def test_a_changed_file_or_limit_is_read_again(tmp_path):
    path = tmp_path / "examples.jsonl"
    write_examples(path, mixed_examples())
    read, reads = reading(path)
    kept_module.file_corpus(path, None, read)
    kept_module.file_corpus(path, 1, read)
    write_examples(path, mixed_examples()[:3])
    assert len(kept_module.file_corpus(path, None, read)) == 3
    assert len(reads) == 3


def test_a_damaged_stored_corpus_warns_and_the_file_is_read(tmp_path):
    path = tmp_path / "examples.jsonl"
    write_examples(path, mixed_examples())
    read, reads = reading(path)
    kept_module.file_corpus(path, None, read)
    (folder,) = kept_module.corpora_dir().iterdir()
    (folder / "arrays.npz").write_bytes(b"not a zip file")
    with pytest.warns(RuntimeWarning, match="stored corpus .* not used"):
        corpus = kept_module.file_corpus(path, None, read)
    assert len(reads) == 2 and corpus.ids == ["a", "b", "c", "d", "e", "f"]


def test_a_corpus_past_the_size_limit_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(kept_module, "KEPT_CORPUS_BYTES", 10)
    path = tmp_path / "examples.jsonl"
    write_examples(path, mixed_examples())
    read, reads = reading(path)
    kept_module.file_corpus(path, None, read)
    kept_module.file_corpus(path, None, read)
    assert len(reads) == 2 and kept_module.corpora_stats() == (0, 0)


def test_a_bad_file_is_never_kept_and_its_error_names_the_line(tmp_path):
    from shambench.errors import DataError

    path = tmp_path / "examples.jsonl"
    write_examples(path, mixed_examples())
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"id": "z", "dataset": "x", "task": "summ", "response": "ab", "hallu_spans": [[0, 9]]}\n')
    for _ in range(2):
        with pytest.raises(DataError, match=r"examples.jsonl:7: .*past the response"):
            kept_module.file_corpus(path, None, reading(path)[0])
    assert kept_module.corpora_stats() == (0, 0)


def test_two_processes_keeping_the_same_corpus_leave_one_whole_copy(tmp_path):
    path = tmp_path / "examples.jsonl"
    write_examples(path, mixed_examples())
    corpus = Corpus.of(mixed_examples())
    folder = kept_module.corpora_dir() / kept_module.file_key(path, None)
    kept_module._save(corpus, folder)
    kept_module._save(corpus, folder)  # the second writer finds the folder there and drops its own copy
    assert [p.name for p in kept_module.corpora_dir().iterdir()] == [folder.name]
    assert kept_module._load(folder).ids == corpus.ids


def test_cache_cli_reports_and_clears_kept_corpora(tmp_path):
    from click.testing import CliRunner

    from shambench.cli import main

    path = tmp_path / "examples.jsonl"
    write_examples(path, mixed_examples())
    kept_module.file_corpus(path, None, reading(path)[0])
    runner = CliRunner()
    out = runner.invoke(main, ["cache", "stats"], terminal_width=200)
    assert "scored EXAMPLES files kept as corpora: 1" in out.output
    cleared = runner.invoke(main, ["cache", "clear", "--segmentation", "--yes"])
    assert "deleted 1 kept corpora of EXAMPLES files" in cleared.output
    assert kept_module.corpora_stats() == (0, 0)


def kept_twice(tmp_path):
    """Two EXAMPLES files with the same ids and texts but other gold, each scored once (so each corpus is kept)."""
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    write_examples(first, mixed_examples())
    other = [e.model_copy(update={"hallu_spans": []}) for e in mixed_examples()]
    write_examples(second, other)
    for path in (first, second):
        kept_module.file_corpus(path, None, reading(path)[0])
    return first, second, other


def test_two_swapped_corpora_are_misses_and_each_file_scores_with_its_own_gold(tmp_path):
    first, second, other = kept_twice(tmp_path)
    a, b = (kept_module.corpora_dir() / kept_module.file_key(p, None) for p in (first, second))
    a.rename(tmp_path / "a")
    b.rename(a)
    (tmp_path / "a").rename(b)
    for path, examples in ((first, mixed_examples()), (second, other)):
        read, reads = reading(path)
        with pytest.warns(RuntimeWarning, match="made for another file"):
            corpus = kept_module.file_corpus(path, None, read)
        assert len(reads) == 1
        assert scores(Scorer(corpus, n_resamples=50), MIXED_PREDICTIONS) == scores(
            Scorer(examples, n_resamples=50), MIXED_PREDICTIONS
        )


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda names: names["partitions"].__setitem__(0, "summ/edited"), id="partition renamed"),
        pytest.param(lambda names: names["ids"].pop(), id="id dropped"),
        pytest.param(lambda names: names["ids"].reverse(), id="ids reordered"),
    ],
)
def test_an_edited_corpus_is_a_miss_rebuilt_once(tmp_path, edit):
    path = tmp_path / "examples.jsonl"
    write_examples(path, mixed_examples())
    read, reads = reading(path)
    kept_module.file_corpus(path, None, read)
    (folder,) = kept_module.corpora_dir().iterdir()
    names = json.loads((folder / "names.json").read_text(encoding="utf-8"))
    edit(names)
    (folder / "names.json").write_text(json.dumps(names), encoding="utf-8")
    with pytest.warns(RuntimeWarning, match="names.json does not match its digest"):
        corpus = kept_module.file_corpus(path, None, read)
    assert corpus.ids == ["a", "b", "c", "d", "e", "f"] and "summ/x" in corpus.partitions
    # The doctored copy was replaced by a good one: the next score reads nothing and warns nothing.
    again = kept_module.file_corpus(path, None, read)
    assert len(reads) == 2 and again.partitions == corpus.partitions


def test_a_corpus_without_its_digest_is_a_miss(tmp_path):
    path = tmp_path / "examples.jsonl"
    write_examples(path, mixed_examples())
    kept_module.file_corpus(path, None, reading(path)[0])
    (folder,) = kept_module.corpora_dir().iterdir()
    (folder / "digest.json").unlink()
    with pytest.warns(RuntimeWarning, match="stored corpus .* not used"):
        assert len(kept_module.file_corpus(path, None, reading(path)[0])) == 6


@pytest.mark.parametrize("refusal", ["not a folder", "disk full"])
def test_an_unwritable_or_full_cache_is_a_miss_and_score_succeeds(tmp_path, monkeypatch, refusal):
    import errno

    from click.testing import CliRunner

    from shambench.cli import main

    path = tmp_path / "examples.jsonl"
    write_examples(path, mixed_examples())
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(p.model_dump_json() + "\n" for p in MIXED_PREDICTIONS), encoding="utf-8")
    if refusal == "not a folder":
        blocker = tmp_path / "cache-is-a-file"
        blocker.write_text("x")
        monkeypatch.setenv("SHAMBENCH_CACHE_DIR", str(blocker))
    else:

        def full(*_args, **_kwargs):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(kept_module.np, "savez", full)
    out = tmp_path / "results.json"
    result = CliRunner().invoke(main, ["score", "--examples", path, "--predictions", predictions, "--out", out])
    assert result.exit_code == 0, result.output
    assert result.exception is None and "Traceback" not in result.output
    expected = Scorer(mixed_examples(), n_resamples=50).score(MIXED_PREDICTIONS)
    assert json.loads(out.read_text())["overall"]["token"]["f1"] == expected.overall.token.f1
    assert kept_module.corpora_stats() == (0, 0) or refusal == "not a folder"
    assert not list(tmp_path.glob("**/.tmp-*"))


def test_a_corpus_whose_id_has_a_lone_surrogate_is_scored_and_not_kept(tmp_path):
    # JSON's escapes allow a lone surrogate, which UTF-8 (the kept names' encoding) cannot store.
    path = tmp_path / "examples.jsonl"
    path.write_text('{"id": "a\\ud800", "task": "qa", "dataset": "x", "response": "The cat.", "hallu_spans": []}\n')
    for _ in range(2):
        corpus = kept_module.file_corpus(path, None, reading(path)[0])
        assert corpus.ids == ["a\ud800"] and corpus.kept is None
    assert kept_module.corpora_stats() == (0, 0)


class _Count(BaseModel):
    """A stand-in for what is kept beside a corpus."""

    n: int
    """Which call computed it."""


def test_what_is_kept_beside_a_corpus_is_read_back_for_its_context_only(tmp_path):
    path = tmp_path / "examples.jsonl"
    write_examples(path, mixed_examples())
    corpus = kept_module.file_corpus(path, None, reading(path)[0])
    made = []

    def compute(n):
        return lambda: made.append(n) or _Count(n=n)

    assert kept_module.kept_beside(corpus, "count.json", "one", _Count, compute(1)) == _Count(n=1)
    assert kept_module.kept_beside(corpus, "count.json", "one", _Count, compute(2)) == _Count(n=1)
    assert made == [1]
    # Another context (what else it depends on) under the same name: a miss, said once, and computed again.
    with pytest.warns(RuntimeWarning, match="count.json not used, computed again"):
        assert kept_module.kept_beside(corpus, "count.json", "two", _Count, compute(3)) == _Count(n=3)
    assert kept_module.kept_beside(corpus, "count.json", "two", _Count, compute(4)) == _Count(n=3)
    assert made == [1, 3] and not list(corpus.kept.glob(".tmp-*"))
    # Nothing is kept beside a corpus that is not kept.
    loose = Corpus.of(mixed_examples())
    assert loose.kept is None
    for n in (5, 6):
        assert kept_module.kept_beside(loose, "count.json", "one", _Count, compute(n)) == _Count(n=n)
    assert made == [1, 3, 5, 6]


def test_arrays_kept_beside_a_corpus_come_back_with_their_types_and_values(tmp_path):
    path = tmp_path / "examples.jsonl"
    write_examples(path, mixed_examples())
    corpus = kept_module.file_corpus(path, None, reading(path)[0])
    arrays = {"a/b c": np.array([[0, 1], [255, 2]], np.uint8), "d": np.array([0.5, -1.0])}
    made = []
    for _ in range(2):
        got = kept_module.kept_arrays_beside(corpus, "x.npz", "one", lambda: made.append(1) or arrays)
        assert got.keys() == arrays.keys() and made == [1]
        assert all(got[k].dtype == v.dtype and np.array_equal(got[k], v) for k, v in arrays.items())


def test_a_kept_corpus_scored_again_keeps_the_draws_of_its_groups_and_scores_the_same(tmp_path, monkeypatch):
    from shambench.scoring import metrics
    from tests.scoring.test_corpus import annotated_examples

    examples = mixed_examples() + annotated_examples()
    path = tmp_path / "examples.jsonl"
    write_examples(path, examples)
    whole = scores(Scorer(examples, n_resamples=50), MIXED_PREDICTIONS)  # a corpus not kept: drawn
    drawn: list[str] = []
    real = metrics._drawn_counts
    monkeypatch.setattr(metrics, "_drawn_counts", lambda n, name, *rest: drawn.append(name) or real(n, name, *rest))

    def scored() -> str:
        corpus = kept_module.file_corpus(path, None, reading(path)[0])
        return scores(Scorer(corpus, n_resamples=50), MIXED_PREDICTIONS)

    folder = kept_module.corpora_dir() / kept_module.file_key(path, None)
    # Scored once: the corpus is kept, its draws are not (a file scored once never pays for them).
    assert scored() == whole and not list(folder.glob("draws-*"))
    groups = sorted(drawn)
    # The leave-one-out rows' scorer keeps its groups' draws beside the corpus they come from.
    assert "summ/x" in groups and any(g.startswith("agreement:") for g in groups)
    assert scored() == whole and sorted(drawn) == sorted(groups * 2)  # scored again: drawn and kept
    files = sorted(folder.glob("draws-*-50-0.bin"))
    assert len(files) == len(groups) == len(set(groups))
    assert scored() == whole and len(drawn) == 2 * len(groups)  # read back: nothing drawn again
    # A damaged file is a miss: that group is drawn again, with the same figures.
    files[0].write_bytes(files[0].read_bytes()[:-5])
    with pytest.warns(RuntimeWarning, match="kept draws in .* not used, computed again"):
        assert scored() == whole
    assert len(drawn) == 2 * len(groups) + 1

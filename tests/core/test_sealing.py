"""Caches prove what they hold or are ignored: the same tampering (a value edited, moved under another key, or
stripped of its seal) is a miss with one warning in every store on disk, all sealed by `shambench.sealing`."""

from __future__ import annotations

import shutil
import sqlite3
import warnings
from pathlib import Path

import pytest
from pydantic import BaseModel

from shambench.llm.cache import ResponseCache
from shambench.schema import Example
from shambench.scoring import kept, text
from shambench.scoring.segcache import store_path, text_key
from shambench.sealing import SEAL_BYTES, Sealer
from tests.scoring.test_segcache import disk_for_every_batch  # noqa: F401 (a fixture used here)


def test_a_seal_is_that_of_its_key_and_body():
    stored = Sealer.sealed(b"key", b"body")
    assert stored[:4] == b"body" and len(stored) == 4 + SEAL_BYTES
    assert Sealer.opened(b"key", stored) == b"body"
    assert Sealer.opened(b"other key", stored) is None
    assert Sealer.opened(b"key", b"bodx" + stored[4:]) is None
    assert Sealer.opened(b"key", stored[:-1]) is None and Sealer.opened(b"key", stored[-SEAL_BYTES:]) is None
    # A key past BLAKE2b's 64 bytes is hashed first: two long keys that differ only at the end still differ.
    long_a, long_b = b"k" * 100 + b"a", b"k" * 100 + b"b"
    assert Sealer.opened(long_b, Sealer.sealed(long_a, b"body")) is None


def test_a_sealer_warns_once_however_many_values_fail():
    sealer = Sealer("test store")
    with pytest.warns(RuntimeWarning, match="^test store: 3 values failed$") as caught:
        for _ in range(3):
            sealer.reject("3 values failed")
    assert len(caught) == 1


class Responses:
    """The response cache: rows of `seal-in-hex:JSON text` keyed by the request's key."""

    def __init__(self, tmp_path: Path):
        self.path = tmp_path / "responses.sqlite"
        cache = ResponseCache(self.path)
        for name in ("a", "b"):
            cache.put(name, "m", {"text": f"answer {name}"})
        cache.close()

    def _row(self, name: str, value: str | None = None) -> str:
        with sqlite3.connect(self.path) as db:
            if value is not None:
                db.execute("UPDATE responses SET value = ? WHERE key = ?", (value, name))
            return db.execute("SELECT value FROM responses WHERE key = ?", (name,)).fetchone()[0]

    def edit(self, name: str) -> None:
        self._row(name, self._row(name).replace("answer", "ANSWER"))

    def move(self, source: str, target: str) -> None:
        self._row(target, self._row(source))

    def unseal(self, name: str) -> None:
        self._row(name, self._row(name).partition(":")[2])

    def hits(self, names: list[str]) -> set[str]:
        cache = ResponseCache(self.path)
        try:
            return {name for name in names if cache.get(name) is not None}
        finally:
            cache.close()


class Segmentations:
    """The segmentation cache: rows of int32 bounds and their seal, keyed by the text's hash."""

    TEXTS = {"a": "The cat sat. It was red.", "b": "Dogs bark loudly."}

    def __init__(self, tmp_path: Path):
        text.segment_all(list(self.TEXTS.values()))
        text.wait_for_writes()

    def _row(self, name: str, value: bytes | None = None) -> bytes:
        key = text_key(self.TEXTS[name])
        with sqlite3.connect(store_path()) as db:
            if value is not None:
                db.execute("UPDATE segmentations SET data = ? WHERE key = ?", (value, key))
            return db.execute("SELECT data FROM segmentations WHERE key = ?", (key,)).fetchone()[0]

    def edit(self, name: str) -> None:
        self._row(name, _flipped(self._row(name)))

    def move(self, source: str, target: str) -> None:
        self._row(target, self._row(source))

    def unseal(self, name: str) -> None:
        self._row(name, self._row(name)[:-SEAL_BYTES])

    def hits(self, names: list[str]) -> set[str]:
        texts = [self.TEXTS[name] for name in names]
        found, _ = text._from_disk(texts, "en")
        return {name for name in names if self.TEXTS[name] in found}


def _flipped(data: bytes) -> bytes:
    """`data` with one bit of its first byte flipped (inside the body: every seal comes after it)."""
    return bytes([data[0] ^ 1]) + data[1:]


def _examples_file(path: Path, response: str) -> Path:
    ex = Example(id="x", task="qa", dataset="toy", response=response)
    path.write_text(ex.model_dump_json() + "\n", encoding="utf-8")
    return path


def _read(path: Path, reads: list[Path]):
    from shambench.runs.selection import read_selection
    from shambench.runs.spec import Selection
    from shambench.scoring.scorer import UNSCORED_EXAMPLE_FIELDS

    def read():
        reads.append(path)
        return read_selection(Selection(examples_file=path), UNSCORED_EXAMPLE_FIELDS)[0]

    return read


class Corpora:
    """The kept corpora of EXAMPLES files: a folder per file, its files' seals in `digest.json`."""

    def __init__(self, tmp_path: Path):
        self.files = {name: _examples_file(tmp_path / f"{name}.jsonl", f"Answer {name}.") for name in ("a", "b")}
        for path in self.files.values():
            kept.file_corpus(path, None, _read(path, []))

    def _folder(self, name: str) -> Path:
        return kept.corpora_dir() / kept.file_key(self.files[name], None)

    def edit(self, name: str) -> None:
        names = self._folder(name) / kept.NAMES_FILE
        names.write_bytes(_flipped(names.read_bytes()))

    def move(self, source: str, target: str) -> None:
        shutil.rmtree(self._folder(target))
        shutil.copytree(self._folder(source), self._folder(target))

    def unseal(self, name: str) -> None:
        (self._folder(name) / kept.DIGEST_FILE).unlink()

    def hits(self, names: list[str]) -> set[str]:
        reads: list[Path] = []
        for name in names:
            kept.file_corpus(self.files[name], None, _read(self.files[name], reads))
        return {name for name in names if self.files[name] not in reads}


class _Made(BaseModel):
    """A stand-in for what is kept beside a corpus."""

    name: str
    """What it was made for."""


class Beside:
    """What is kept beside a kept corpus: one file per name, its body followed by its seal."""

    def __init__(self, tmp_path: Path):
        path = _examples_file(tmp_path / "examples.jsonl", "Answer.")
        self.corpus = kept.file_corpus(path, None, _read(path, []))
        assert self.corpus.kept is not None
        self.folder = self.corpus.kept
        self.made: list[str] = []
        self.hits(["a", "b"])
        self.made.clear()

    def _file(self, name: str) -> Path:
        return self.folder / f"{name}.json"

    def edit(self, name: str) -> None:
        self._file(name).write_bytes(_flipped(self._file(name).read_bytes()))

    def move(self, source: str, target: str) -> None:
        self._file(target).write_bytes(self._file(source).read_bytes())

    def unseal(self, name: str) -> None:
        self._file(name).write_bytes(self._file(name).read_bytes()[:-SEAL_BYTES])

    def hits(self, names: list[str]) -> set[str]:
        for name in names:
            kept.kept_beside(
                self.corpus, f"{name}.json", "ctx", _Made, lambda n=name: self.made.append(n) or _Made(name=n)
            )
        return {name for name in names if name not in self.made}


STORES = {"responses": Responses, "segmentations": Segmentations, "corpora": Corpora, "beside": Beside}
CASES = {
    "edited": lambda store: store.edit("a"),
    "moved": lambda store: store.move("b", "a"),
    "unsealed": lambda store: store.unseal("a"),
}


@pytest.mark.usefixtures("disk_for_every_batch")
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("kind", STORES)
def test_every_store_takes_a_tampered_value_for_a_miss_with_one_warning(tmp_path, kind, case):
    store = STORES[kind](tmp_path)
    text.clear_cache()
    with warnings.catch_warnings(record=True) as before:
        warnings.simplefilter("always")
        assert store.hits(["a", "b"]) == {"a", "b"}  # both held and proven before the tampering
    assert not [w for w in before if w.category is RuntimeWarning]
    CASES[case](store)
    text.clear_cache()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert store.hits(["a", "b"]) == {"b"}
    assert len([w for w in caught if w.category is RuntimeWarning]) == 1, [str(w.message) for w in caught]

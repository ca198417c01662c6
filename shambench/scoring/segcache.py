"""Segmentations kept on disk, so that a new process (a rescoring, a `compare`, a sweep worker) never tokenises a
response text that any earlier process has tokenised under the same convention.

One SQLite file, `cache_dir()/segmentation.sqlite`, in write-ahead-log mode: readers never block, concurrent
writers from many processes queue on SQLite's own lock (`busy_timeout`), and a row is written with
`INSERT OR IGNORE`, so two processes segmenting the same text store it once. A row is keyed by the segmentation
convention (tokenizer, spaCy version, language; see `shambench.scoring.text.convention`) and the BLAKE2b hash of the
text; its value is the int32 array `[n_tokens, n_units, token starts, token ends, unit starts, unit ends]`, sealed
under the text's hash (`shambench.sealing`, the seal of every cache). Every row is checked before use (its seal, its
counts, its items inside its text and in order); a row that fails is a miss: recomputed, rewritten, and reported in
one warning.
The cache is an optimisation only: when it cannot be read or written, segmentation goes on without it.
"""

from __future__ import annotations

import hashlib
import sqlite3
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import shambench.fs as fs
from shambench.paths import cache_dir
from shambench.schema import Model
from shambench.scoring.arrays import runs
from shambench.sealing import Sealer

FILENAME = "segmentation.sqlite"
# Keys looked up per query, at most (SQLite binds 32766 parameters by default since 3.32, 999 before).
_QUERY_KEYS = 30_000
# Rows per write transaction: short transactions let concurrent writers take turns.
_WRITE_ROWS = 5000
_INT32_MAX = np.iinfo(np.int32).max

_SCHEMA = """
CREATE TABLE IF NOT EXISTS segmentations (
    convention TEXT NOT NULL,
    key BLOB NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (convention, key)
) WITHOUT ROWID
"""


def store_path() -> Path:
    """Where the segmentation cache lives (under `$SHAMBENCH_CACHE_DIR` when set)."""
    return cache_dir() / FILENAME


def text_key(text: str) -> bytes:
    """The 16-byte BLAKE2b hash of a text (lone surrogates, which JSON allows, are hashed as they are)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def encode(
    key: bytes, token_starts: np.ndarray, token_ends: np.ndarray, unit_starts: np.ndarray, unit_ends: np.ndarray
) -> bytes | None:
    """The stored form of one text's segmentation, sealed with a digest of itself and the text's key (so a row
    stored under another key is never taken for this text's); None when an offset does not fit in int32 (such
    texts are not kept)."""
    parts = [np.array([len(token_starts), len(unit_starts)]), token_starts, token_ends, unit_starts, unit_ends]
    flat = np.concatenate(parts)
    if len(flat) and flat.max() > _INT32_MAX:
        return None
    return Sealer.sealed(key, flat.astype(np.int32).tobytes())


Bounds = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def decode(keys: Sequence[bytes], blobs: Sequence[bytes], lengths: Sequence[int]) -> list[Bounds | None]:
    """`(token_starts, token_ends, unit_starts, unit_ends)` int64 arrays of each stored segmentation of the texts
    with those keys and lengths, or None for a row that is not one: unsealed or sealed for another key, a count
    that does not match its size, an item empty, out of order, overlapping the previous one or outside its text.

    All rows are converted and checked in a few numpy calls over one array; each result is a view of it.
    """
    opened = ((i, Sealer.opened(k, blob)) for i, (k, blob) in enumerate(zip(keys, blobs)))
    proven = [(i, body) for i, body in opened if body is not None and len(body) >= 8 and len(body) % 4 == 0]
    out: list[Bounds | None] = [None] * len(blobs)
    if not proven:
        return out
    sealed = [i for i, _ in proven]
    sizes = np.array([len(body) // 4 for _, body in proven], np.int64)
    flat = np.frombuffer(b"".join(body for _, body in proven), np.int32).astype(np.int64)
    firsts = np.cumsum(sizes) - sizes
    n_tok, n_unit = flat[firsts], flat[firsts + 1]
    fits = (n_tok >= 0) & (n_unit >= 0) & (sizes == 2 + 2 * n_tok + 2 * n_unit)
    n_tok, n_unit = np.where(fits, n_tok, 0), np.where(fits, n_unit, 0)
    text_lengths = np.array([lengths[i] for i in sealed], np.int64)
    good = (
        fits
        & _items_fit(flat, firsts + 2, n_tok, text_lengths)
        & _items_fit(flat, firsts + 2 + 2 * n_tok, n_unit, text_lengths)
    )
    for row, first, nt, nu in zip(np.flatnonzero(good).tolist(), *(x[good].tolist() for x in (firsts, n_tok, n_unit))):
        a = first + 2
        b, c, d = a + nt, a + 2 * nt, a + 2 * nt + nu
        out[sealed[row]] = (flat[a:b], flat[b:c], flat[c:d], flat[d : d + nu])
    return out


def _items_fit(flat: np.ndarray, where: np.ndarray, counts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per row, whether its `counts` items (starts at `where`, then as many ends) are non-empty, in order, disjoint
    and inside `[0, length)` of its text."""
    row = np.repeat(np.arange(len(counts)), counts)
    starts = flat[runs(where, counts)]
    ends = flat[runs(where + counts, counts)]
    bad = (starts < 0) | (ends <= starts) | (ends > lengths[row])
    # An item that starts before the previous item of its row ends.
    bad[1:] |= (row[1:] == row[:-1]) & (starts[1:] < ends[:-1])
    return np.bincount(row[bad], minlength=len(counts)) == 0


class SegmentationCacheStats(Model):
    """What `shambench cache stats` reports about the segmentation cache."""

    path: str
    """The cache file."""
    entries: int
    """Stored segmentations (one per distinct text and convention)."""
    size_bytes: int
    """Size on disk, including the write-ahead log."""
    by_convention: dict[str, int]
    """Stored segmentations per segmentation convention."""


class SegmentationStore:
    """The on-disk segmentation cache; every method opens its own short-lived connection (safe across fork)."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else store_path()

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        # SQLite opens the file by name itself: the gate checks every file it opened (`fs.sqlite_connect`).
        db = fs.sqlite_connect(self.path, _SCHEMA, timeout=60)
        try:
            yield db
        finally:
            db.close()

    def get_many(self, convention: str, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """The stored values of those `keys` that are present."""
        found: dict[bytes, bytes] = {}
        with self._connection() as db:
            # As many keys per query as this SQLite binds (one query per key list costs far less than many).
            per_query = max(1, min(_QUERY_KEYS, db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) - 1))
            for lo in range(0, len(keys), per_query):
                chunk = keys[lo : lo + per_query]
                marks = ",".join("?" * len(chunk))
                query = f"SELECT key, data FROM segmentations WHERE convention = ? AND key IN ({marks})"
                found.update(db.execute(query, [convention, *chunk]))
        return found

    def put_many(self, convention: str, items: Sequence[tuple[bytes, bytes]], replace: bool = False) -> None:
        """Store `(key, value)` pairs; a key already stored (by this or another process) is left as it is, unless
        `replace` (for rows found unusable)."""
        # In key order: the table is a B-tree on the (random) hashes, which takes sorted inserts twice as fast.
        items = sorted(items)
        verb = "REPLACE" if replace else "IGNORE"
        with self._connection() as db:
            for lo in range(0, len(items), _WRITE_ROWS):
                db.execute("BEGIN IMMEDIATE")
                try:
                    db.executemany(
                        f"INSERT OR {verb} INTO segmentations (convention, key, data) VALUES (?, ?, ?)",
                        [(convention, k, v) for k, v in items[lo : lo + _WRITE_ROWS]],
                    )
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise

    def stats(self) -> SegmentationCacheStats:
        """Entries per convention and the size on disk (an absent cache is empty)."""
        by_convention: dict[str, int] = {}
        db = fs.sqlite_reader(self.path, _SCHEMA)  # only read: nothing made, a read-only cache read as it is
        if db is not None:
            try:
                rows = db.execute("SELECT convention, COUNT(*) FROM segmentations GROUP BY convention ORDER BY 1")
                by_convention = dict(rows.fetchall())
            finally:
                db.close()
        size = sum(p.stat().st_size for p in self._files())
        return SegmentationCacheStats(
            path=str(self.path), entries=sum(by_convention.values()), size_bytes=size, by_convention=by_convention
        )

    def clear(self) -> int:
        """Delete every stored segmentation and give the space back; returns how many there were."""
        if not self.path.exists():
            return 0
        with self._connection() as db:
            n = db.execute("DELETE FROM segmentations").rowcount
            db.execute("VACUUM")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return n

    def _files(self) -> list[Path]:
        return [p for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")) if p.exists()]


def warn_rejected(n_rows: int, path: Path) -> None:
    """Say once per batch that stored rows failed their checks (they are recomputed and rewritten)."""
    Sealer(f"segmentation cache {path}").reject(
        f"{n_rows} stored row(s) failed their checks (corrupt, or written for another text) and were recomputed"
    )


def warn_unusable(err: Exception, path: Path) -> None:
    """Say once per reason that the disk cache is skipped; segmentation itself goes on."""
    warnings.warn(f"segmentation cache {path} not used: {err}", RuntimeWarning, stacklevel=3)

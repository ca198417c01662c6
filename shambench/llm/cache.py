"""A persistent response cache for model calls: one SQLite file, write-ahead log, one writer connection.

Keys are content hashes of what determines a model's answer: the server (its normalised base URL, without
credentials), the model name, the request kind, the generation parameters and the rendered prompt (the prompt
template filled with the example); never of how it was fetched (concurrency, timeouts, retries). The same model
name on two servers therefore never shares answers, and entries written by versions whose keys lacked the server
are never hit again. Values are JSON records. Only answers a caller accepted are stored, so a failed or
unparseable response is asked again next time.

Every stored value is sealed under its row's key (`shambench.sealing`, the seal of every cache): a value edited,
corrupted or moved under another key, and a row written before values were sealed, is a miss, asked again and
stored again, with one warning per cache. A row holds the seal in hex, a colon, then the value's JSON text.

The file lives at `cache_dir()/responses.sqlite`; `shambench cache stats|clear` inspects and empties it.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from pathlib import Path
from typing import Any

import orjson

import shambench.fs as fs
from shambench.paths import cache_dir
from shambench.schema import Model
from shambench.sealing import Sealer
from shambench.secrets import redact

FILENAME = "responses.sqlite"
# Writes are committed in batches (one transaction per batch, or per interval): a commit per answer would cost
# more CPU than handling the answer. Answers still pending when a process dies are lost from the cache only; the
# run journal, written separately, is what resuming relies on.
BATCH_SIZE = 64
BATCH_SECONDS = 0.5

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    value TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def cache_path() -> Path:
    """Where the response cache lives (under `$SHAMBENCH_CACHE_DIR` when set)."""
    return cache_dir() / FILENAME


def sealed(key: str, text: str) -> str:
    """The stored form of a value's JSON text under `key`: its seal (hex), a colon, the text."""
    return f"{Sealer.seal(key.encode(), text.encode()).hex()}:{text}"


def unsealed(key: str, stored: str) -> str | None:
    """The JSON text of a stored value, or None when its seal is missing or is not that of this key and text."""
    seal, colon, text = stored.partition(":")
    try:
        proven = bytes.fromhex(seal)
    except ValueError:
        return None
    return text if colon and Sealer.proves(key.encode(), text.encode(), proven) else None


def cache_key(parts: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of `parts` (keys sorted, no whitespace, text as UTF-8).

    The bytes are the json module's (`sort_keys`, compact separators, `ensure_ascii=False`), so that keys stay
    those of earlier versions; orjson makes them, ten times faster, for every value it writes byte for byte the
    same way (`_same_in_orjson`), and json the rest."""
    if _same_in_orjson(parts):
        data = orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)
    else:
        data = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(data).hexdigest()


def _same_in_orjson(value: Any) -> bool:
    """Whether orjson writes `value` as the json module does: strings, booleans, None, 64-bit integers, finite
    floats that both print without an exponent below 1 (json writes 1e-05 where orjson writes 0.00001), and lists
    and string-keyed dicts of those. Anything else (non-finite floats, huge integers, other key or value types)
    is left to json."""
    # Walked with a stack, not by recursion: every request's key walks its whole body (a few dozen values, most of
    # them strings), and a call (and a generator) per value cost more than orjson's writing and the hash together.
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is str:
            continue
        if kind is dict or (kind is not list and isinstance(item, dict)):
            if not all(map(str.__instancecheck__, item)):
                return False
            pending.extend(item.values())
        elif kind is list or isinstance(item, list | tuple):
            pending.extend(item)
        elif not _same_scalar(item):
            return False
    return True


def _same_scalar(value: Any) -> bool:
    """`_same_in_orjson` of a value that is no list, tuple or dict."""
    if isinstance(value, str) or value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -(2**63) <= value < 2**64
    if isinstance(value, float):
        return value == 0 or (math.isfinite(value) and abs(value) >= 1e-4)
    return False


class CacheStats(Model):
    """What `shambench cache stats` reports."""

    path: str
    """The cache file."""
    entries: int
    """Stored responses."""
    size_bytes: int
    """Size on disk, including the write-ahead log."""
    by_model: dict[str, int]
    """Stored responses per model."""


def cache_stats(path: str | Path | None = None) -> CacheStats:
    """Entry counts per model and the size on disk of the response cache at `path` (default: `cache_path()`), read
    without writing anything: an absent cache is empty, one in a read-only folder is read as it is
    (`fs.sqlite_reader`)."""
    path = Path(path) if path else cache_path()
    db = fs.sqlite_reader(path, _SCHEMA)
    rows = []
    if db is not None:
        try:
            rows = db.execute("SELECT model, COUNT(*) FROM responses GROUP BY model ORDER BY model").fetchall()
        finally:
            db.close()
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())
    return CacheStats(path=str(path), entries=sum(n for _, n in rows), size_bytes=size, by_model=dict(rows))


class ResponseCache:
    """A thread-safe key → JSON record store in SQLite (WAL mode, one connection that all writes go through)."""

    def __init__(self, path: str | Path | None = None, batch_seconds: float = BATCH_SECONDS):
        self.path = Path(path) if path else cache_path()
        self.batch_seconds = batch_seconds
        self._lock = threading.Lock()
        # One connection shared by the threads of this process behind a lock: the single writer. Other
        # processes may read and write the same file; busy_timeout makes them wait for each other's commits.
        # SQLite opens the file by name itself: the gate checks every file it opened (`fs.sqlite_connect`).
        self._db = fs.sqlite_connect(self.path, _SCHEMA, timeout=30, threads=True)
        self._pending: dict[str, tuple[str, str, str, float]] = {}
        self._committed = time.monotonic()
        self._sealer = Sealer(f"response cache {self.path}")

    def get(self, key: str) -> dict[str, Any] | None:
        """The record stored under `key`, or None (also for a row whose seal fails: see the module docstring)."""
        with self._lock:
            if key in self._pending:
                return json.loads(self._pending[key][2].partition(":")[2])
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        text = unsealed(key, row[0]) if isinstance(row[0], str) else None
        if text is None:
            self._sealer.reject(
                "a stored answer failed its seal (edited, corrupt, or written by an older version) and is asked "
                "again; so is any other such row"
            )
            return None
        return json.loads(text)

    def put(self, key: str, model: str, value: dict[str, Any]) -> None:
        """Store (or replace) the record under `key`; committed with the next batch."""
        self.put_json(key, model, json.dumps(value, ensure_ascii=False))

    def put_json(self, key: str, model: str, text: str) -> None:
        """Store (or replace) the record whose JSON text is `text` under `key`; committed with the next batch."""
        text = redact(text)
        with self._lock:
            self._pending[key] = (key, model, sealed(key, text), time.time())
            if len(self._pending) >= BATCH_SIZE or time.monotonic() - self._committed > self.batch_seconds:
                self._commit()

    def discard(self, key: str) -> None:
        """Delete the record under `key`, if any (a reply found unusable after it was stored)."""
        with self._lock:
            self._pending.pop(key, None)
            self._db.execute("DELETE FROM responses WHERE key = ?", (key,))

    def flush(self) -> None:
        """Commit the pending records now."""
        with self._lock:
            self._commit()

    def _commit(self) -> None:
        if self._pending:
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany(
                    "INSERT OR REPLACE INTO responses (key, model, value, created) VALUES (?, ?, ?, ?)",
                    list(self._pending.values()),
                )
            self._pending.clear()
        self._committed = time.monotonic()

    def stats(self) -> CacheStats:
        """Entry counts per model and the size on disk, what is pending committed first."""
        self.flush()
        return cache_stats(self.path)

    def clear(self, model: str | None = None) -> int:
        """Delete every record (or those of one model); returns how many were deleted."""
        with self._lock:
            self._commit()
            if model is None:
                cur = self._db.execute("DELETE FROM responses")
            else:
                cur = self._db.execute("DELETE FROM responses WHERE model = ?", (model,))
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if model is None:
            with self._lock:
                self._db.execute("VACUUM")
        return cur.rowcount

    def close(self) -> None:
        """Commit what is pending and close the connection."""
        with self._lock:
            self._commit()
            self._db.close()

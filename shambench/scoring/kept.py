"""Corpora of EXAMPLES files, kept on disk: an EXAMPLES file scored before, byte for byte and under the same rules,
is not read again (`file_corpus`), and what is computed from its corpus alone is kept beside it (`kept_beside`)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import math
import zipfile
from collections.abc import Callable, Iterable
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import orjson
from pydantic import BaseModel

import shambench.fs as fs
from shambench.errors import DataError
from shambench.memory import collector_paused
from shambench.paths import cache_dir
from shambench.schema import Example
from shambench.scoring.corpus import Corpus, Readings, Units
from shambench.scoring.metrics import Resamples
from shambench.sealing import Sealer
from shambench.structured import json_file

Model = TypeVar("Model", bound=BaseModel)

# Arrays of a corpus kept on disk, beyond its `Units`.
_ARRAYS = (
    "partition_code",
    "task_code",
    "dataset_code",
    "lengths",
    "offsets",
    "gold_starts",
    "gold_ends",
    "gold_label_code",
)
_UNIT_ARRAYS = ("starts", "ends", "owner", "gold", "first", "count")
_READINGS = "annotations."  # the prefix of the readings' arrays
# The modules whose rules make a file's corpus: any change to them is a new key, so a stale corpus is never read.
_RULE_MODULES = (
    "shambench.scoring.corpus",
    "shambench.scoring.kept",
    "shambench.scoring.text",
    "shambench.records",
    "shambench.schema",
)
# Corpora larger than this are not kept: their arrays would crowd the cache, and reading their file dominates less.
KEPT_CORPUS_BYTES = 256 * 2**20
CORPORA_DIR = "corpora"
# The files of a kept corpus: its arrays, its names, and the digest of both with the key it was made for.
ARRAYS_FILE, NAMES_FILE, DIGEST_FILE = "arrays.npz", "names.json", "digest.json"


def corpora_dir() -> Path:
    """Where the corpora of EXAMPLES files are kept (under `$SHAMBENCH_CACHE_DIR` when set)."""
    return cache_dir() / CORPORA_DIR


def rules_hash(modules: Iterable[str]) -> str:
    """A hash of the source of those modules (by import name): what they compute changes only with it."""
    h = hashlib.blake2b(digest_size=16)
    for name in modules:
        h.update(Path(importlib.import_module(name).__file__ or name).read_bytes())
    return h.hexdigest()


def file_key(path: str | Path, limit: int | None) -> str:
    """The key of an EXAMPLES file's corpus: a hash of its bytes, the limit, spaCy's version and the rules."""
    h = hashlib.blake2b(digest_size=20)
    with fs.open_input(path) as fh:  # a FIFO is refused: it could not be read again for the examples
        while block := fh.read(1 << 20):
            h.update(block)
    h.update(f"|{limit}|{version('spacy')}|{rules_hash(_RULE_MODULES)}".encode())
    return h.hexdigest()


def _save(corpus: Corpus, folder: Path) -> None:
    """Write a corpus into a new folder that appears whole (renamed into place) or not at all, with the digest of
    its files and the key it was made for (`digest.json`, checked by `_load`; also the mark that lets `cache
    clear` delete the folder)."""
    root = cache_dir()
    tmp: Path | None = None
    try:
        buffer = io.BytesIO()
        # Typed loosely for `savez`, whose other keyword (allow_pickle) a name could otherwise be taken for.
        arrays: dict[str, Any] = _arrays(corpus)
        np.savez(buffer, **arrays)
        names = {
            "ids": corpus.ids,
            "partitions": corpus.partitions,
            "tasks": corpus.tasks,
            "datasets": corpus.datasets,
            "gold_labels": corpus.gold_labels,
            "segmentation": corpus.segmentation,
            "soft": [[i, spans] for i, spans in corpus.soft.items()],
            "with_steps": [[i, ex.model_dump(mode="json")] for i, ex in corpus.with_steps.items()],
            "annotations": corpus.annotations.names(),
        }
        # The buffer's own memory, not a copy (a corpus's arrays reach 256 MB); orjson: an eighth of json's time.
        files: dict[str, bytes | memoryview] = {ARRAYS_FILE: buffer.getbuffer(), NAMES_FILE: orjson.dumps(names)}
        digests = {name: _seal(folder, name, data).hex() for name, data in files.items()}
        # The digest first: it marks the folder as one `remove_tree` may delete, should a later step fail.
        files = {DIGEST_FILE: json.dumps({"key": folder.name, **digests}).encode(), **files}
        tmp = fs.new_dir(folder.parent, root)
        for name, data in files.items():
            fs.write_bytes(tmp / name, data, root, sync=False)  # sealed: a torn file fails its digest
        fs.rename(tmp, folder, root)
    except (OSError, DataError, orjson.JSONEncodeError):
        # Another process stored the same corpus first (the folder exists), the disk refused (read-only, full, not
        # a folder, a link on the way), or a name holds a lone surrogate (which JSON escapes allow and UTF-8
        # cannot store): the corpus is simply not kept.
        if tmp is not None:
            fs.remove_tree(tmp, root, DIGEST_FILE)


def _seal(folder: Path, name: str, data: bytes | memoryview) -> bytes:
    """The seal of a kept corpus's file: under the corpus's key and the file's name."""
    return Sealer.seal(f"{folder.name}|{name}".encode(), data)


class _NotThisCorpus(ValueError):
    """A kept corpus whose files are not what its digest says, or were made for another key."""


def _verified(folder: Path, name: str, claimed: dict) -> bytes:
    """The bytes of one file of a kept corpus, when they are what the folder's digest says."""
    data = fs.read_input(folder / name)
    seal = claimed.get(name)
    if not isinstance(seal, str) or seal != _seal(folder, name, data).hex():
        raise _NotThisCorpus(f"{name} does not match its digest (edited, truncated or from another corpus)")
    return data


def _load(folder: Path) -> Corpus:
    """A kept corpus, after checking that it was made for this folder's key and that its files are unchanged."""
    claimed = json_file(folder / DIGEST_FILE, "a kept corpus's digest record")
    if not isinstance(claimed, dict) or claimed.get("key") != folder.name:
        raise _NotThisCorpus("it was made for another file (its key differs from its folder's)")
    with np.load(io.BytesIO(_verified(folder, ARRAYS_FILE, claimed))) as npz:
        arrays = {name: npz[name] for name in npz.files}
    with collector_paused():  # the names of every example: long-lived, no cycles
        names = orjson.loads(_verified(folder, NAMES_FILE, claimed))
    units = {kind: Units(**{name: arrays[f"{kind}.{name}"] for name in _UNIT_ARRAYS}) for kind in ("tokens", "units")}
    return Corpus(
        ids=names["ids"],
        index={id_: i for i, id_ in enumerate(names["ids"])},
        **{name: arrays[name] for name in _ARRAYS},
        partitions=names["partitions"],
        tasks=names["tasks"],
        datasets=names["datasets"],
        gold_labels=names["gold_labels"],
        tokens=units["tokens"],
        units=units["units"],
        soft={i: [(start, end, prob) for start, end, prob in spans] for i, spans in names["soft"]},
        with_steps={i: Example.model_validate(ex) for i, ex in names["with_steps"]},
        segmentation=names["segmentation"],
        annotations=Readings.stored(
            {name.removeprefix(_READINGS): a for name, a in arrays.items() if name.startswith(_READINGS)},
            names["annotations"],
        ),
    )


def _arrays(corpus: Corpus) -> dict[str, np.ndarray]:
    """The corpus's arrays by their stored names (a `Units` array as `tokens.starts`, ...)."""
    arrays = {name: getattr(corpus, name) for name in _ARRAYS}
    for kind in ("tokens", "units"):
        arrays |= {f"{kind}.{name}": getattr(getattr(corpus, kind), name) for name in _UNIT_ARRAYS}
    return arrays | {f"{_READINGS}{name}": a for name, a in corpus.annotations.arrays().items()}


def file_corpus(path: str | Path, limit: int | None, examples: Callable[[], Iterable[Example]]) -> Corpus:
    """The corpus of an EXAMPLES file (its first `limit` examples per partition): read from disk when this file,
    byte for byte, was scored before under the same rules, else built from `examples()` (which reads and checks
    the file) and kept for next time. The disk copy is an optimisation only: when it cannot be read or written,
    the file is read as usual."""
    try:
        folder = corpora_dir() / file_key(path, limit)
    except (OSError, DataError):
        # not a regular file (a pipe is read once, as the examples) or unreadable: reading it says why
        return Corpus.of(examples())
    if folder.is_dir():
        try:
            corpus = _load(folder)
            corpus.kept, corpus.reread = folder, True
            return corpus
        except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as err:
            Sealer(f"stored corpus {folder} not used, rebuilt from the file").reject(str(err), stacklevel=3)
            with contextlib.suppress(DataError):
                fs.remove_tree(folder, cache_dir(), DIGEST_FILE)
    corpus = Corpus.of(examples())
    if sum(a.nbytes for a in _arrays(corpus).values()) <= KEPT_CORPUS_BYTES and not folder.is_dir():
        _save(corpus, folder)
        # Kept by this process, or by another one first (the same corpus: the folder is named by its key).
        corpus.kept = folder if folder.is_dir() else None
    return corpus


def clear_corpora() -> int:
    """Delete every kept corpus (each folder that holds its digest, reached without following a link); returns how
    many went."""
    root = cache_dir()
    return sum(fs.remove_tree(corpora_dir() / name, root, DIGEST_FILE) for name in fs.entries(corpora_dir(), root))


def corpora_stats() -> tuple[int, int]:
    """How many corpora are kept and their size on disk in bytes."""
    if not corpora_dir().is_dir():
        return 0, 0
    files = [p for p in corpora_dir().rglob("*") if p.is_file()]
    return len([p for p in corpora_dir().glob("*") if p.is_dir()]), sum(p.stat().st_size for p in files)


def _beside_key(folder: Path, name: str, context: str) -> bytes:
    """What a file kept beside a corpus is sealed under: the corpus's key, the file's name and its context."""
    return f"{folder.name}|{name}|{context}".encode("utf-8", "surrogatepass")


def kept_beside(corpus: Corpus, name: str, context: str, kind: type[Model], compute: Callable[[], Model]) -> Model:
    """`compute()`, or what an earlier `compute()` gave when it was kept beside the same corpus as `name`, for the
    same `context` (all else it depends on, versions included); what is computed is kept there, sealed. Nothing is
    kept beside a corpus that is not kept itself."""
    return _kept(
        corpus, name, context, compute, (lambda made: made.model_dump_json().encode(), kind.model_validate_json)
    )


def kept_arrays_beside(
    corpus: Corpus,
    name: str,
    context: str,
    compute: Callable[[], dict[str, np.ndarray]],
    sealer: Sealer | None = None,
) -> dict[str, np.ndarray]:
    """`kept_beside` for named numeric arrays, read back with their own types, shapes and values (read-only).
    `sealer`: the one warning of a family of such files, when not one for each file."""
    return _kept(corpus, name, context, compute, (_packed, _unpacked), sealer)


def kept_draws(resamples: Resamples, corpus: Corpus, context: str) -> None:
    """Keep a group's resamples beside a kept corpus, or take them from there where they were kept before (one byte
    per example and resample, sealed; `context`: all else they depend on, versions included): they depend on the
    group's name and size, the number of resamples and the seed alone, and reading them back costs a fraction of
    drawing them, the largest cost of scoring a kept corpus again."""
    # Group names may hold any printable character (a `/`): a digest of the name names the file.
    group = hashlib.blake2b(resamples.name.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    name = f"draws-{group}-{resamples.n}-{resamples.n_resamples}-{resamples.seed}.bin"
    drawn = kept_arrays_beside(
        corpus, name, context, lambda: {"counts": resamples.counts()}, _draws_sealer(corpus.kept)
    )
    resamples.keep_counts(drawn["counts"])


@cache
def _draws_sealer(folder: Path | None) -> Sealer:
    """The one warning of the draws kept beside a corpus, however many fail: a new version fails them all."""
    return Sealer(f"kept draws in {folder} not used, computed again")


def _packed(arrays: dict[str, np.ndarray]) -> bytes:
    """The arrays as a JSON header (each one's type and shape, in order) and their bytes: no zip archive, whose
    checksum would repeat the seal's work on every read."""
    header = json.dumps({name: [a.dtype.str, list(a.shape)] for name, a in arrays.items()}).encode()
    data = b"".join(np.ascontiguousarray(a).tobytes() for a in arrays.values())
    return len(header).to_bytes(8, "little") + header + data


def _unpacked(body: bytes) -> dict[str, np.ndarray]:
    size = int.from_bytes(body[:8], "little")
    at, arrays = 8 + size, {}
    for name, (kind, shape) in json.loads(body[8:at]).items():
        dtype, count = np.dtype(kind), math.prod(shape)
        arrays[name] = np.frombuffer(body, dtype, count, at).reshape(shape)
        at += count * dtype.itemsize
    return arrays


Made = TypeVar("Made")


def _kept(
    corpus: Corpus,
    name: str,
    context: str,
    compute: Callable[[], Made],
    coding: tuple[Callable[[Made], bytes], Callable[[bytes], Made]],
    sealer: Sealer | None = None,
) -> Made:
    """What `kept_beside` says, for anything `coding`'s dump writes as bytes and its load reads back (`sealer`: see
    `kept_arrays_beside`)."""
    dump, load = coding
    body = _read_beside(corpus.kept, name, context, sealer) if corpus.kept is not None else None
    if body is not None:
        return load(body)
    made = compute()
    if corpus.kept is not None:
        _write_beside(corpus.kept, name, context, dump(made))
    return made


def _read_beside(folder: Path, name: str, context: str, sealer: Sealer | None) -> bytes | None:
    """The body of a file kept beside a corpus, or None. A file that is not what its seal says (edited, truncated,
    moved from another corpus's folder, or written for another context or version) is a miss: deleted, with one
    warning (`sealer`'s, when given)."""
    path = folder / name
    try:
        data = fs.read_input(path)
    except (OSError, DataError):
        return None  # not kept (yet), or unreadable: computed again either way
    body = Sealer.opened(_beside_key(folder, name, context), data)
    if body is not None:
        return body
    (sealer or Sealer(f"kept {path} not used, computed again")).reject(
        "it does not match its seal (edited, truncated, moved from another corpus or written by another version)",
        stacklevel=4,
    )
    with contextlib.suppress(OSError, DataError):  # a read-only cache keeps it: a miss each time, never used
        fs.unlink(path, cache_dir())
    return None


def _write_beside(folder: Path, name: str, context: str, body: bytes) -> None:
    """Write a sealed file beside a kept corpus, whole (renamed into place) or not at all."""
    # The folder was deleted meanwhile (`cache clear`), or the disk refused: the file is simply not kept.
    with contextlib.suppress(OSError, DataError):
        fs.write_bytes(folder / name, Sealer.sealed(_beside_key(folder, name, context), body), cache_dir(), sync=False)

"""Tokens and sentence units of a response, as the scorer counts them.

Tokeniser: spaCy's rule-based tokeniser of the text's language (`spacy.blank(lang)`, no model download; English
unless a language is given), whitespace tokens excluded. Chinese uses spaCy's default character segmenter (every
Han character a token; no word segmenter is a dependency). Sentence splitter: the rule of spaCy's `sentencizer`
(a sentence opens at the first token after a sentence-final character that is neither punctuation nor such a
character), applied to the token arrays; its default final characters cover the scripts of every supported
language (`.!?`, Arabic/Persian `؟ ۔`, Devanagari `। ॥`, CJK `。！？`, ...). A sentence unit runs from its first to its
last non-whitespace token.

Both are computed once per distinct (language, text) and convention (`cache_convention`): kept in a process-wide cache, so
rescoring the same responses never tokenises again, and on disk (`shambench.scoring.segcache`), so a new process does not
either. Many texts not cached anywhere are tokenised on every core (`PARALLEL_MIN_CHARS`), with the same result as
one process.
"""

from __future__ import annotations

import hashlib
import importlib.util
import multiprocessing
import os
import sqlite3
import sys
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache
from importlib.metadata import version
from multiprocessing.context import ForkContext, SpawnContext
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from shambench.errors import DataError
from shambench.scoring.segcache import SegmentationStore, decode, encode, text_key, warn_rejected, warn_unusable

if TYPE_CHECKING:
    from spacy.tokenizer import Tokenizer

DEFAULT_LANG = "en"
TOKENIZER = "spacy.blank('en') rule-based tokenizer; whitespace tokens excluded"
SENTENCE_SPLITTER = (
    "spacy sentencizer rule (default punct_chars) on spacy.blank('en') tokens; examples with steps use the steps "
    "as units"
)

# Below this many uncached characters (about 1,000 responses) starting worker processes costs more than it saves.
PARALLEL_MIN_CHARS = 600_000
WORKERS_ENV = "SHAMBENCH_SEGMENT_WORKERS"
# The process cache stops growing here (about 50 MB of real responses: three benchmarks' worth); beyond it,
# segmentations live as long as their caller holds them, and the disk cache serves the next request. The scorer keeps
# its own columns, so a large corpus gains nothing from holding its texts here too.
PROCESS_CACHE_TEXTS = 20_000
# Smaller batches (a detector asking for one text's tokens) are cheaper to tokenise than to look up on disk.
DISK_MIN_TEXTS = 64
# Bumped whenever the stored form or the segmentation rule changes, so stale disk entries are never read.
_FORMAT = 2
# Whitespace-delimited chunks whose tokens spaCy's tokenizer keeps per process (spaCy's default is 10,000; the 6,330
# real test responses hold about 42,000 distinct chunks, and past the cap every new chunk runs the prefix, suffix and
# infix expressions again). The cache is spaCy's own exact memo of a chunk's tokens (chunks with special cases are
# never kept), so its size changes the speed, never the tokens. Full, it holds about 45 MB (measured: 250,000 distinct
# chunks grew a process by 151 MB with this cap and 107 MB with spaCy's, the rest being the vocabulary's new words,
# which spaCy keeps whatever the cap).
CHUNK_CACHE = 200_000

_lock = threading.Lock()
# Per language, text -> segmentation.
_cache: dict[str, dict[str, Segmentation]] = {}


@cache
def cache_convention(lang: str = DEFAULT_LANG) -> str:
    """The key of a segmentation convention in the disk cache: spaCy's version, the language and a hash of the
    tokenizer and splitter descriptions (any change to either makes a new convention)."""
    rules = hashlib.sha256(f"{convention(lang)}|{SENTENCE_SPLITTER}|{_FORMAT}".encode()).hexdigest()[:12]
    return f"spacy-{version('spacy')}/{lang}/{rules}"


@dataclass(frozen=True, slots=True)
class Segmentation:
    """Character bounds of the tokens and sentence units of one text (int64 arrays, half-open)."""

    token_starts: np.ndarray
    token_ends: np.ndarray
    sentence_starts: np.ndarray
    sentence_ends: np.ndarray


def convention(lang: str = DEFAULT_LANG) -> str:
    """The token and sentence convention used for texts in `lang`, as recorded per partition in results JSON."""
    words = " (character segmenter: one token per Han character)" if lang == "zh" else ""
    return (
        f"tokens: spacy.blank({lang!r}) rule-based tokenizer{words}, whitespace tokens excluded; sentences: "
        f"spacy sentencizer rule (default punct_chars) on those tokens"
    )


def language_of(meta: dict) -> str:
    """The language code segmentation uses for an example: the primary subtag of its `meta["lang"]` in lower case
    (`en-US` and `en_GB` are `en`, `zh-Hans` and `zh_Hant` are `zh`: spaCy tokenises a language, not a region or
    script), else English."""
    return str(meta.get("lang") or DEFAULT_LANG).replace("_", "-").split("-")[0].strip().lower() or DEFAULT_LANG


def example_language(example_id: str, meta: dict, usable: set[str]) -> str:
    """The language an example is segmented in (`language_of`); DataError naming the example when spaCy has no
    tokenizer for it. `usable` holds the languages found usable so far by the caller (each is looked up once)."""
    lang = language_of(meta)
    if lang not in usable:
        if why := unknown_language(lang):
            raise DataError(f"example {example_id!r}: {why}")
        usable.add(lang)
    return lang


def unknown_language(lang: str) -> str | None:
    """Why texts in `lang` cannot be segmented (spaCy has no tokenizer for it), or None when they can."""
    if lang in _shipped_languages():
        return None
    try:
        _tokenizer(lang)  # a language another package registers with spaCy
    except ImportError:
        return f"meta.lang {lang!r} is not a language spaCy can tokenise (an ISO 639-1 code such as 'en', 'de', 'zh')"
    return None


@cache
def _shipped_languages() -> frozenset[str]:
    """The language codes spaCy ships (`spacy/lang/<code>/`), found without importing spaCy: a scoring whose
    texts are all cached never loads a tokenizer."""
    spec = importlib.util.find_spec("spacy")
    if spec is None or spec.origin is None:
        return frozenset()
    return frozenset(p.parent.name for p in (Path(spec.origin).parent / "lang").glob("*/__init__.py"))


@cache
def _tokenizer(lang: str = DEFAULT_LANG) -> tuple[Tokenizer, int]:
    """spaCy's blank tokenizer for `lang`, and the id of a lexeme flag marking the sentencizer's final characters."""
    nlp = _import_spacy_lean().blank(lang)
    from spacy.attrs import IS_PUNCT, IS_SPACE
    from spacy.pipeline import Sentencizer

    nlp.tokenizer.max_cache_size = CHUNK_CACHE

    # Every new word's lexeme computes each registered attribute in Python; segmentation reads only these two (and
    # the flag below), and the tokenizer's splitting reads none, so the rest only slow the first pass over a corpus.
    getters = nlp.vocab.lex_attr_getters
    for attr in [a for a in getters if a not in (IS_PUNCT, IS_SPACE)]:
        del getters[attr]
    # A lexeme flag is computed once per distinct word and read back by `Doc.to_array` with the other columns.
    final = frozenset(Sentencizer.default_punct_chars)
    return nlp.tokenizer, nlp.vocab.add_flag(lambda text: text in final)


def _import_spacy_lean() -> ModuleType:
    """spaCy, imported without what the rule-based tokeniser never touches.

    thinc (under spaCy) imports torch whenever it is installed, which costs seconds per process: hiding torch for
    the import makes thinc record "no torch", and torch stays importable for everything else afterwards. spaCy's
    package also imports its whole command line (`spacy.cli`: weasel, httpx, jinja2, ..., about half of the rest of
    the import) for one name, `spacy.info`: a stand-in that imports the real function when called takes its place,
    and `import spacy.cli` afterwards imports the real command line."""
    if "spacy" in sys.modules:
        return sys.modules["spacy"]
    hidden: dict[str, ModuleType | None] = {}
    if "torch" not in sys.modules:
        hidden["torch"] = None
    cli, info = ModuleType("spacy.cli"), ModuleType("spacy.cli.info")
    cli.__path__ = []
    info.info = _spacy_info  # type: ignore[attr-defined]
    hidden |= {"spacy.cli": cli, "spacy.cli.info": info}
    sys.modules.update(hidden)  # type: ignore[arg-type]
    try:
        import spacy
    finally:
        for name, module in hidden.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]
        loaded = sys.modules.get("spacy")
        if loaded is not None and getattr(loaded, "cli", None) is cli:
            del loaded.cli
    return spacy


def _spacy_info(*args: object, **kwargs: object) -> object:
    """`spacy.info`, imported when called (see `_import_spacy_lean`)."""
    from spacy.cli.info import info

    return info(*args, **kwargs)


def _sentence_opens(is_punct: np.ndarray, final: np.ndarray, doc_first: np.ndarray) -> np.ndarray:
    """Which tokens open a sentence under spaCy's `Sentencizer.predict`, for many docs laid end to end.

    The sentencizer walks a doc's tokens with a flag set by a sentence-final character (its default
    `punct_chars`); the next token that is neither punctuation nor such a character opens a sentence and clears
    the flag. So a "plain" token opens a sentence exactly when a sentence-final character lies between it and the
    previous plain token of its doc (or its doc's start). A doc's first token always opens.
    """
    finals_before = np.concatenate([[0], np.cumsum(final)])
    plain = np.flatnonzero(~is_punct & ~final)
    # The reference point of each plain token: the previous plain token, or the start of its own doc.
    doc_start = doc_first[np.searchsorted(doc_first, plain, side="right") - 1]
    previous = np.maximum(np.concatenate([[0], plain[:-1]]), doc_start)
    opens = np.zeros(len(final), bool)
    opens[plain[finals_before[plain] > finals_before[previous]]] = True
    opens[doc_first[doc_first < len(final)]] = True
    return opens


@dataclass(frozen=True, slots=True)
class _Flat:
    """The segmentations of many texts laid end to end: bounds plus how many tokens and units each text has."""

    token_starts: np.ndarray
    token_ends: np.ndarray
    token_counts: np.ndarray
    sentence_starts: np.ndarray
    sentence_ends: np.ndarray
    sentence_counts: np.ndarray

    def split(self) -> list[Segmentation]:
        """One `Segmentation` per text, each a view of the flat arrays (plain slicing: np.split costs more)."""
        word_cut = _bounds(self.token_counts)
        sent_cut = _bounds(self.sentence_counts)
        ts, te, ss, se = self.token_starts, self.token_ends, self.sentence_starts, self.sentence_ends
        return [
            Segmentation(ts[wa:wb], te[wa:wb], ss[sa:sb], se[sa:sb]) for (wa, wb), (sa, sb) in zip(word_cut, sent_cut)
        ]


def packed(segmentations: Sequence[Segmentation]) -> _Flat:
    """Segmentations laid end to end: six arrays cross a process boundary far faster than four per text, and
    `.split()` gives the segmentations back."""
    none = np.empty(0, np.int64)
    return _Flat(
        np.concatenate([s.token_starts for s in segmentations] + [none]),
        np.concatenate([s.token_ends for s in segmentations] + [none]),
        np.array([len(s.token_starts) for s in segmentations], np.int64),
        np.concatenate([s.sentence_starts for s in segmentations] + [none]),
        np.concatenate([s.sentence_ends for s in segmentations] + [none]),
        np.array([len(s.sentence_starts) for s in segmentations], np.int64),
    )


def _flat_segmentation(docs: list, lang: str = DEFAULT_LANG) -> _Flat:
    """Tokens and sentence units of many docs, computed on their tokens laid end to end.

    One `to_array` call per doc and a few whole-batch numpy operations: iterating Token objects (or running the
    sentencizer's per-token loop, or even a dozen small numpy calls per doc) cost more than tokenising.
    """
    from spacy.attrs import IDX, IS_PUNCT, IS_SPACE, LENGTH

    flag = _tokenizer(lang)[1]
    arrays = [d.to_array([IDX, LENGTH, IS_SPACE, IS_PUNCT, flag]).view(np.int64).reshape(-1, 5) for d in docs]
    sizes = np.array([len(a) for a in arrays], dtype=np.int64)
    arr = np.concatenate(arrays + [np.empty((0, 5), np.int64)])
    doc_first = np.cumsum(sizes) - sizes
    opens = _sentence_opens(arr[:, 3] == 1, arr[:, 4] == 1, doc_first)
    words = np.flatnonzero(arr[:, 2] == 0)
    starts, ends = arr[words, 0], arr[words, 0] + arr[words, 1]
    first = np.flatnonzero(np.diff(np.cumsum(opens)[words], prepend=0))
    last = np.append(first[1:] - 1, len(words) - 1).astype(np.int64) if len(first) else first
    doc_of_word = np.repeat(np.arange(len(docs)), sizes)[words]
    return _Flat(
        starts,
        ends,
        np.bincount(doc_of_word, minlength=len(docs)),
        starts[first],
        ends[last],
        np.bincount(doc_of_word[first], minlength=len(docs)),
    )


def _bounds(counts: np.ndarray) -> list[tuple[int, int]]:
    """`(start, end)` of consecutive runs of the given lengths."""
    ends = np.cumsum(counts).tolist()
    return list(zip([0, *ends[:-1]], ends))


def _tokenised_flat(texts: list[str], batch_size: int = 256, lang: str = DEFAULT_LANG) -> _Flat:
    """The segmentations of the texts, made in this process."""
    return _flat_segmentation(list(_tokenizer(lang)[0].pipe(texts, batch_size=batch_size)), lang)


def _tokenised_rows(texts: list[str], batch_size: int, lang: str, store: bool) -> tuple[_Flat, list[Row | None]]:
    """The segmentations of the texts, made in this process, and with `store` each one's disk-cache row (None for
    a text that is not kept; encoded where it was tokenised: a worker's encoding runs beside the others'
    tokenising). What a worker of `Segmenter` runs."""
    flat = _tokenised_flat(texts, batch_size, lang)
    return flat, _disk_rows(texts, flat.split()) if store else []


Row = tuple[bytes, bytes]


def _disk_rows(texts: list[str], segmentations: list[Segmentation]) -> list[Row | None]:
    """Each text's `(key, value)` row of the disk cache, or None where its offsets do not fit one."""
    rows: list[Row | None] = []
    for t, seg in zip(texts, segmentations):
        key = text_key(t)
        blob = encode(key, seg.token_starts, seg.token_ends, seg.sentence_starts, seg.sentence_ends)
        rows.append(None if blob is None else (key, blob))
    return rows


def _workers(n_chars: int) -> int:
    """How many processes to tokenise `n_chars` characters with: every usable core above the threshold, unless
    `$SHAMBENCH_SEGMENT_WORKERS` says otherwise. Only the main thread of a top-level process starts workers: a
    worker process or thread (a sweep's, say) is already one of several running side by side."""
    nested = multiprocessing.parent_process() is not None or threading.current_thread() is not threading.main_thread()
    if n_chars < PARALLEL_MIN_CHARS or nested:
        return 1
    configured = os.environ.get(WORKERS_ENV, "").strip()
    if configured:
        return max(1, int(configured))
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def process_context() -> ForkContext | SpawnContext:
    """How to start worker processes: by forking while this process has one thread (cheapest: the workers
    inherit what is loaded, the tokenizer included), else by spawning (forking is unsafe while other threads run)."""
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _from_disk(texts: list[str], lang: str) -> tuple[dict[str, Segmentation], list[str]]:
    """The segmentations of those texts that the disk cache holds and that pass their checks (none when it cannot
    be read), and the texts whose stored rows failed them."""
    wait_for_writes()
    store = SegmentationStore()
    keys = [text_key(t) for t in texts]
    try:
        found = store.get_many(cache_convention(lang), keys)
    except (sqlite3.Error, OSError) as err:
        warn_unusable(err, store.path)
        return {}, []
    hits = [(t, k) for t, k in zip(texts, keys) if k in found]
    rows = decode([k for _, k in hits], [found[k] for _, k in hits], [len(t) for t, _ in hits])
    rejected = [t for (t, _), row in zip(hits, rows) if row is None]
    if rejected:
        warn_rejected(len(rejected), store.path)
    return {t: Segmentation(*row) for (t, _), row in zip(hits, rows) if row is not None}, rejected


def _to_disk(rows: dict[tuple[str, bool], list[Row]]) -> None:
    """Store new rows, per (convention, replace): those with `replace` overwrite stored rows that failed their
    checks."""
    store = SegmentationStore()
    try:
        for (convention, replace), items in rows.items():
            store.put_many(convention, items, replace=replace)
    except (sqlite3.Error, OSError) as err:
        warn_unusable(err, store.path)


_writers: list[threading.Thread] = []
_writers_lock = threading.Lock()


def _store_later(rows: dict[tuple[str, bool], list[Row]]) -> None:
    """Write the rows from a thread, so that the caller goes on (to score, say) while SQLite writes: one process
    writing everything it tokenised at once costs a fraction of each worker writing its tasks' rows. The thread is
    not a daemon, so every exit waits for it; so does this process's next disk lookup (`wait_for_writes`)."""
    if not any(rows.values()):
        return
    thread = threading.Thread(target=_to_disk, args=(rows,), name="shambench-segmentation-writer")
    with _writers_lock:
        _writers.append(thread)
    thread.start()


def wait_for_writes() -> None:
    """Return once every disk-cache write this process started has ended."""
    with _writers_lock:
        pending, _writers[:] = list(_writers), []
    for thread in pending:
        thread.join()


# Texts looked up in the disk cache with one query while a stream of texts is read (at least `DISK_MIN_TEXTS`, so a
# stream looked up before its end uses the disk cache from its first text).
LOOKUP_TEXTS = 256
# Characters of uncached texts a worker tokenises per task (about 300 real responses): small tasks reach the workers
# while the stream is still being read, and let the workers finish together.
WORKER_CHARS = 150_000


class Segmenter:
    """Segmentations of texts added one at a time, as a file is read: each text comes from the process cache, else
    from the disk cache (looked up in batches of `LOOKUP_TEXTS`, once the stream has `DISK_MIN_TEXTS` new texts),
    else is tokenised and stored in both. Once the uncached texts reach `PARALLEL_MIN_CHARS`, worker processes
    tokenise them (and encode their rows) while more texts are still being added, so reading and tokenising
    overlap; the results equal one process's. `take()` gives the segmentations of the texts added since the last
    call, in order, and starts writing the new rows to disk (`_store_later`). Use as a context manager: leaving it
    stops the workers."""

    def __init__(self, batch_size: int = 256):
        self.batch_size = batch_size
        self._added: list[tuple[str, str]] = []
        """(language, text) of every text added since the last `take`, in order."""
        self._seen: dict[str, set[str]] = {}
        """Per language, the distinct texts added since the last `take` that the process cache lacked."""
        self._unlooked: dict[str, list[str]] = {}
        """Per language, those of them not looked up on disk yet."""
        self._found: dict[str, dict[str, Segmentation]] = {}
        """Per language, segmentations read from disk or tokenised since the last `take`."""
        self._misses: dict[str, list[str]] = {}
        """Per language, texts found nowhere and not yet handed to a worker."""
        self._rejected: dict[str, set[str]] = {}
        """Per language, texts whose stored rows failed their checks (their new rows replace them)."""
        self._tasks: list[tuple[str, list[str], Future[tuple[_Flat, list[Row | None]]]]] = []
        self._rows: dict[tuple[str, bool], list[Row]] = {}
        """Per (convention, replace), the disk-cache rows of the texts tokenised since the last `take`."""
        self._n_new = 0
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Segmenter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def add(self, text: str, lang: str = DEFAULT_LANG) -> None:
        """Schedule one text (in language `lang`)."""
        self._added.append((lang, text))
        seen = self._seen.setdefault(lang, set())
        if text in seen or text in _cache.get(lang, {}):
            return
        seen.add(text)
        self._n_new += 1
        unlooked = self._unlooked.setdefault(lang, [])
        unlooked.append(text)
        if len(unlooked) >= LOOKUP_TEXTS:
            self._look_up(lang)
            self._dispatch(final=False)

    def take(self) -> list[Segmentation]:
        """The segmentations of the texts added since the last call, in order."""
        for lang in list(self._unlooked):
            self._look_up(lang)
        self._dispatch(final=True)
        for lang, texts, task in self._tasks:
            self._made(lang, texts, *task.result())
        with _lock:
            out = []
            for lang, text in self._added:
                fresh = self._found.get(lang, {})
                out.append(fresh[text] if text in fresh else _cache[lang][text])
            for lang, fresh in self._found.items():
                known = _cache.setdefault(lang, {})
                if len(known) + len(fresh) <= PROCESS_CACHE_TEXTS:
                    known.update(fresh)
        _store_later(self._rows)
        self._added, self._seen, self._found, self._tasks, self._rejected, self._rows = [], {}, {}, [], {}, {}
        return out

    def _made(self, lang: str, texts: list[str], flat: _Flat, rows: list[Row | None]) -> None:
        """Keep the segmentations of tokenised texts, and their rows to store."""
        self._found.setdefault(lang, {}).update(zip(texts, flat.split()))
        rejected = self._rejected.get(lang, set())
        for text, row in zip(texts, rows):
            if row is not None:
                self._rows.setdefault((cache_convention(lang), text in rejected), []).append(row)

    def _uses_disk(self) -> bool:
        # Smaller batches (a detector asking for one text's tokens) are cheaper to tokenise than to look up.
        return self._n_new >= DISK_MIN_TEXTS

    def _look_up(self, lang: str) -> None:
        texts = self._unlooked.pop(lang, [])
        if not texts:
            return
        found, rejected = _from_disk(texts, lang) if self._uses_disk() else ({}, [])
        self._found.setdefault(lang, {}).update(found)
        self._rejected.setdefault(lang, set()).update(rejected)
        misses = [t for t in texts if t not in found]
        if misses:
            self._misses.setdefault(lang, []).extend(misses)

    def _dispatch(self, final: bool) -> None:
        """Hand the misses to the workers (started once they reach `PARALLEL_MIN_CHARS`) in tasks of about
        `WORKER_CHARS`; with `final`, all of them, tokenising here what is too little for workers."""
        if self._pool is None:
            workers = _workers(sum(len(t) for texts in self._misses.values() for t in texts))
            if workers >= 2:
                for lang in self._misses:
                    _tokenizer(lang)  # loaded once here, inherited by forked workers
                self._pool = ProcessPoolExecutor(workers, mp_context=process_context())
            elif not final:
                return
        for lang in list(self._misses):
            texts = self._misses.pop(lang)
            if self._pool is None:
                self._made(lang, texts, *_tokenised_rows(texts, self.batch_size, lang, self._uses_disk()))
                continue
            parts = _parts_of(texts, WORKER_CHARS)
            if parts and not final and sum(map(len, parts[-1])) < WORKER_CHARS:
                self._misses[lang] = parts.pop()  # waits for more texts
            for part in parts:
                task = self._pool.submit(_tokenised_rows, part, self.batch_size, lang, self._uses_disk())
                self._tasks.append((lang, part, task))


def _parts_of(texts: list[str], chars: int) -> list[list[str]]:
    """The texts cut, in order, into runs of at least `chars` characters (the last one may be shorter; none
    without texts)."""
    parts: list[list[str]] = []
    size = chars
    for text in texts:
        if size >= chars:
            parts.append([])
            size = 0
        parts[-1].append(text)
        size += len(text)
    return parts


def segment_all(texts: Iterable[str], batch_size: int = 256, lang: str = DEFAULT_LANG) -> list[Segmentation]:
    """Segmentations of the texts, in order (see `Segmenter`)."""
    listed = list(texts)
    return segment_mixed(listed, [lang] * len(listed), batch_size)


def segment_mixed(texts: Sequence[str], langs: Sequence[str], batch_size: int = 256) -> list[Segmentation]:
    """Segmentations of texts that each have their own language, in order (see `Segmenter`)."""
    with Segmenter(batch_size) as segmenter:
        for text, lang in zip(texts, langs):
            segmenter.add(text, lang)
        return segmenter.take()


def remember(texts: Sequence[str], segmentations: Sequence[Segmentation], lang: str = DEFAULT_LANG) -> None:
    """Cache segmentations made by `segment_all` in another process (a sweep segments each dataset only once)."""
    with _lock:
        _cache.setdefault(lang, {}).update(zip(texts, segmentations))


def segment(text: str, lang: str = DEFAULT_LANG) -> Segmentation:
    """The segmentation of one text in language `lang`."""
    return segment_all([text], lang=lang)[0]


def sentences(text: str, lang: str = DEFAULT_LANG) -> list[tuple[int, int]]:
    """Sentence units of a text as `(start, end)` pairs: what `Prediction.sentence_labels` must label."""
    seg = segment(text, lang)
    return list(zip(seg.sentence_starts.tolist(), seg.sentence_ends.tolist()))


def tokens(text: str, lang: str = DEFAULT_LANG) -> list[tuple[int, int]]:
    """Non-whitespace tokens of a text as `(start, end)` pairs."""
    seg = segment(text, lang)
    return list(zip(seg.token_starts.tolist(), seg.token_ends.tolist()))


def clear_cache() -> None:
    """Forget every segmentation cached in this process (the disk cache stays; see `shambench cache clear`)."""
    with _lock:
        _cache.clear()

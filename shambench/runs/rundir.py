"""Run directories: their config, the append-only prediction journal, the lock, and re-creating a run's examples.

Layout of a run directory (file names in `shambench.runs.files`):
    config.json        what was run: detector, parameters, data selection and its hash, versions
    predictions.jsonl  one `Prediction` per line, appended and flushed as each arrives (last line per id wins)
    results.json       the scored `Results`, written atomically at the end (and by `shambench score RUN_DIR`)
    per_example.jsonl  one `ExampleScores` per example (written with results.json): what a score is made of
    .lock              held (flock) by the one process running the detector into it (`run_lock`)

Every line is flushed as soon as its prediction exists, so a run killed at any moment (even SIGKILL) loses only
the predictions not yet returned; a resume re-runs exactly the ids without a successful line. No line is written
before config.json: a run whose requests start while its corpora load (`shambench.runs.streamed`) holds the
predictions made meanwhile in memory until then (their answers are in the response cache already).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError
from pydantic_core import to_jsonable_python

import shambench.fs as fs
from shambench.detection.detector import Detector
from shambench.errors import ChangedDataError, DataError, RunDirError
from shambench.io import Journal, model_json, open_regular, read_regular, write_json
from shambench.provenance import git_commit, now_iso, package_versions, shambench_version
from shambench.runs.files import CONFIG, JOURNAL, LOCK
from shambench.runs.selection import select_examples
from shambench.runs.spec import RunSpec, Selection
from shambench.schema import Example, Name
from shambench.selection_fields import Resolved

MAX_CONFIG_BYTES = 64 * 1024 * 1024
"""Largest config.json read: far above any run's (selection, provenance, dropped-row counts)."""


class RunConfig(Resolved):
    """What a run evaluated, so that it can be rescored or resumed exactly: its selection as it resolved it (the
    datasets loaded, the data directory and EXAMPLES file as absolute paths), the detector and provenance."""

    # Keys this version no longer reads (a config.json written by an older one) are ignored, not refused.
    model_config = ConfigDict(extra="ignore")

    detector: Name
    """Detector spec as given (`NAME` or `NAME:ARG`)."""
    family: Name
    """Detector family."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Detector parameters that define its output (no secrets)."""
    context_provenance: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per partition, which evidence that was: provider, parameters, counts and a content hash."""
    dropped_rows: dict[str, dict[str, int]] = Field(default_factory=dict)
    """Per dataset, the source rows its adapter dropped (reason -> count) before any --limit."""
    examples_hash: str
    """SHA-256 over the examples as `fingerprint` says; resume and rescoring refuse a different hash."""
    fingerprint: int = 1
    """What `examples_hash` covers: 2, every field of an example but its context (whose evidence is recorded in
    `context_provenance`); 1, in runs written before, only ids, tasks, datasets, responses, gold spans and steps."""
    example_parts: dict[str, str] = Field(default_factory=dict)
    """SHA-256 of each part of the examples (`EXAMPLE_PARTS`), which names what changed when the hash differs."""
    n_examples: int
    """Number of examples in the run."""
    shambench_version: str
    """Version that created the run."""
    git_commit: str | None = None
    """Commit that created the run."""
    created_at: str
    """UTC creation time."""
    packages: dict[str, str] = Field(default_factory=dict)
    """Versions of score-relevant libraries."""
    origin: str = "run"
    """`run` (shambench eval) or `submission` (a predictions file given to `shambench leaderboard submit`)."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Free-form facts about the system, e.g. a submission's authors, description and URL."""
    served_model: str | None = None
    """The model name the server reported answering with, once predictions recorded one (see `served_model`)."""
    structured_mode: str | None = None
    """The structured-output mode the server answered in, once predictions recorded one (see `structured_mode`)."""
    spec: RunSpec | None = None
    """The run as it was asked for (None in runs made before config.json embedded it, and in submissions)."""


def recorded_selection(config: RunConfig) -> Selection:
    """The selection a run's examples are re-created from: what it resolved to (the datasets loaded, the data
    directory and EXAMPLES file as absolute paths)."""
    return Selection.model_validate(config.model_dump(include=set(Resolved.model_fields)))


def recorded_spec(config: RunConfig) -> RunSpec:
    """The run a config.json records, to compare another with (`shambench.runs.spec.spec_differences`): its
    embedded spec (a config written before it had one: its defaults) with the detector, its full parameters and
    the selection as they were resolved, and the suite asked for."""
    asked = config.spec or RunSpec()
    selection = recorded_selection(config).model_copy(update={"suite": asked.selection.suite})
    return asked.model_copy(update={"detector": config.detector, "params": config.params, "selection": selection})


FINGERPRINT = 2
"""What `examples_hash` covers in the runs this version writes (see `RunConfig.fingerprint`)."""

EXAMPLE_PARTS: dict[str, set[str]] = {
    "ids, tasks and splits": {"id", "dataset", "task", "split"},
    "questions": {"question"},
    "responses": {"response"},
    "gold spans and their labels": {"hallu_spans"},
    "soft labels": {"soft_spans"},
    "steps and step labels": {"steps"},
    "annotators": {"annotations"},
    "meta (languages, source facts)": {"meta"},
}
"""The parts of the examples a run's numbers depend on, each hashed on its own (`RunConfig.example_parts`): every
field of Example but the context, in Example's order (`fingerprints` joins their JSON into the whole example's)."""


def examples_hash(examples: Sequence[Example], fingerprint: int = FINGERPRINT) -> str:
    """A content hash of the examples (order-independent), covering what `fingerprint` says (`RunConfig`).

    Everything a score or a prediction reads is in it: gold span labels (typed errors), soft labels (IoU, Cor),
    the annotators (human agreement), step labels, `meta` (a language, a domain) as well as the responses and
    gold spans. The context is not: the evidence a provider put there is recorded apart (`context_provenance`)."""
    h = hashlib.sha256()
    for ex in sorted(examples, key=lambda e: e.id):
        if fingerprint >= 2:
            h.update(ex.model_dump_json(exclude={"context"}).encode())
            h.update(b"\n")
        else:
            spans = [[s.start, s.end] for s in ex.hallu_spans]
            steps = [[s.start, s.end, s.label] for s in ex.steps or []]
            h.update(json.dumps([ex.id, ex.task, ex.dataset, ex.response, spans, steps]).encode())
    return h.hexdigest()


def example_parts(examples: Sequence[Example]) -> dict[str, str]:
    """The SHA-256 of each part of the examples (`EXAMPLE_PARTS`: each part's JSON a line), order-independent."""
    return fingerprints(examples)[1]


_CONTEXT = {"context"}

_PART_KEYS = [
    b',"' + next(f for f in Example.model_fields if f in fields).encode() + b'":' for fields in EXAMPLE_PARTS.values()
][1:]
"""Where each part after the first opens in an example's JSON: its first field's key after a comma. No such bytes
can be inside a JSON string (a quote there is escaped), and no model inside the parts before `meta` has a field of
one of these names (tests/runs/test_fingerprint.py checks both), so the first one found after the previous part's
opening is that part's; only `Annotations.unplaced`'s free keys could be `meta`, and such examples are serialized by
part."""


def fingerprints(examples: Sequence[Example]) -> tuple[str, dict[str, str]]:
    """`examples_hash` (at FINGERPRINT) and `example_parts` of the examples, from one serialization of each example
    without its context: the parts hold Example's fields but the context, in their order, so that JSON is the parts'
    JSON joined, and each part is cut out of it at its first key (`_PART_KEYS`). Serializing each part apart (8
    calls an example) cost an eval of 6,330 examples 0.145 s of CPU against 0.11 s now (16 MB of JSON)."""
    whole = hashlib.sha256()
    parts = {part: hashlib.sha256() for part in EXAMPLE_PARTS}
    *cut, last = parts.values()
    # each part but the last, and the key that ends it (the next part's first)
    ends = list(zip(cut, _PART_KEYS, strict=True))
    for ex in sorted(examples, key=lambda e: e.id):
        if type(ex) is not Example or (ex.annotations is not None and "meta" in ex.annotations.unplaced):
            _by_part(ex, whole, parts)
            continue
        text = model_json(ex, exclude=_CONTEXT)
        whole.update(text + b"\n")
        at = 0  # where the part opens: its "{", or the comma before its first key
        for h, key in ends:
            end = text.find(key, at + 1)
            h.update(b"{" + text[at + 1 : end] + b"}\n")
            at = end
        last.update(b"{" + text[at + 1 :] + b"\n")
    return whole.hexdigest(), {part: h.hexdigest() for part, h in parts.items()}


def _by_part(ex: Example, whole: Any, parts: dict[str, Any]) -> None:
    """Hash `ex` into `whole` and `parts` serializing each part apart (an Example subclass: its own fields are in
    its whole JSON, in no part)."""
    pieces = [model_json(ex, include=fields) for fields in EXAMPLE_PARTS.values()]
    for h, piece in zip(parts.values(), pieces, strict=True):
        h.update(piece + b"\n")
    if type(ex) is Example:
        whole.update(b"{" + b",".join(piece[1:-1] for piece in pieces) + b"}\n")
    else:
        whole.update(ex.model_dump_json(exclude=_CONTEXT).encode() + b"\n")


def changed_parts(config: RunConfig, examples: Sequence[Example]) -> list[str] | None:
    """What changed in the examples since the run was made: None when nothing did (they hash as its config says),
    else the parts that differ (empty when the config records no parts to tell them by)."""
    if examples_hash(examples, config.fingerprint) == config.examples_hash:
        return None
    if not config.example_parts:
        return []
    now = example_parts(examples)
    return [part for part in EXAMPLE_PARTS if now.get(part) != config.example_parts.get(part)]


def changed_data_message(changed: list[str]) -> str:
    """The one line that says a run's examples changed, and what of them."""
    what = ", ".join(changed) if changed else "its examples (an older run: which part, it does not record)"
    return (
        f"the data changed since the run was made: {what} differ from its fingerprint; its numbers would not be the "
        "ones it was made with (rescore anyway with accept_changed_data, which the results then record, or start a "
        "new run)"
    )


def load_config(run_dir: Path) -> RunConfig:
    """The config of a run directory; DataError when it is not one."""
    path = Path(run_dir) / CONFIG
    data = read_regular(path, MAX_CONFIG_BYTES)
    if data is None:
        runs = sorted(str(d) for d in Path(run_dir).glob(f"*/{CONFIG}")) if Path(run_dir).is_dir() else []
        if runs:  # the folder of runs given instead of one of them (`score runs`)
            listed = ", ".join(str(Path(r).parent) for r in runs[:3]) + (", ..." if len(runs) > 3 else "")
            raise DataError(f"{run_dir} is a folder of {len(runs)} runs, not a run directory: name one ({listed})")
        raise DataError(f"{path}: not found (is {run_dir} a run directory?)")
    try:
        return RunConfig.model_validate_json(data)
    except ValidationError as err:
        raise DataError(f"{path}: not a run config ({err.errors()[0]['msg']})") from None


def run_examples(config: RunConfig, same_evidence: bool = False, accept_changed: bool = False) -> list[Example]:
    """A run's examples, re-created from its config with the evidence already stored for its context provider
    (rescoring, showing or comparing a run never calls a provider); ChangedDataError, naming what changed, when
    they no longer hash the same (unless `accept_changed`: the caller then records the change, see
    `changed_parts`).

    `same_evidence` (for resuming, where the detector reads the evidence): DataError too when that evidence is
    no longer what the run recorded in its `context_provenance` (e.g. a failed fetch has succeeded since).
    """
    examples, selection = select_examples(recorded_selection(config), fetch_context=False)
    changed = changed_parts(config, examples)
    if changed is not None and (not accept_changed or same_evidence):
        raise ChangedDataError(changed_data_message(changed))
    if same_evidence and to_jsonable_python(selection.get("context_provenance", {})) != config.context_provenance:
        raise DataError(
            f"the evidence stored for context provider {config.context} is no longer what the run used (see its "
            "context_provenance); start a new run instead"
        )
    return examples


def new_run_dir(base: str | Path, detector: str) -> Path:
    """A fresh, unique run directory name under `base`."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", detector).strip("-")[:60] or "run"
    path = Path(base) / f"{stamp}_{slug}"
    n = 1
    while path.exists():
        n += 1
        path = Path(base) / f"{stamp}_{slug}_{n}"
    return path


def detector_config(
    detector: Detector, examples: Sequence[Example], selection: dict[str, Any], spec: RunSpec | None = None
) -> RunConfig:
    """The config of a new run of `detector` (see `stamped_config`), embedding the `spec` it was asked as."""
    if spec is not None:
        spec = spec.model_copy(update={"detector": detector.name})
    return stamped_config(detector.name, detector.family, detector.params(), examples, spec=spec, **selection)


def stamped_config(
    name: str, family: str, params: dict[str, Any], examples: Sequence[Example], **fields: Any
) -> RunConfig:
    """A run config stamped with the examples' hash, versions and time (`fields`: selection, origin, meta)."""
    whole, parts = fingerprints(examples)
    return RunConfig(
        detector=name,
        family=family,
        params=params,
        examples_hash=whole,
        fingerprint=FINGERPRINT,
        example_parts=parts,
        n_examples=len(examples),
        shambench_version=shambench_version(),
        git_commit=git_commit(),
        created_at=now_iso(),
        packages=package_versions(),
        **fields,
    )


@contextmanager
def run_lock(run_dir: Path, root: Path | None = None) -> Iterator[None]:
    """Hold the run directory's lock while the body runs: one process at a time may call a detector into a run
    directory. DataError at once, naming the holder's pid, when another process holds it. `root`: the folder the
    run directory's writes are confined to (`shambench.fs.Root`; default its parent)."""
    import fcntl

    run_dir = Path(run_dir)
    # Never through a planted link (at the run directory or the lock): the pid written below would truncate
    # whatever file it points to. The gate makes the folder too.
    lock = open_regular(run_dir / LOCK, os.O_RDWR | os.O_CREAT, root or fs.folder_root(run_dir))
    with os.fdopen(lock, "r+", encoding="utf-8") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip()
            raise DataError(
                f"{run_dir} is in use by another shambench process{f' (pid {holder})' if holder else ''}; "
                "wait for it to finish (or stop it) before resuming"
            ) from None
        fh.truncate(0)
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def pending(examples: Sequence[Example], journal: Journal) -> list[Example]:
    """Examples without a successful prediction in the journal."""
    done = {pid for pid, p in journal.read().items() if p.error is None}
    return [ex for ex in examples if ex.id not in done]


def write_new_config(run_dir: Path, config: RunConfig) -> None:
    """Write a new run's config.json into `run_dir`, checked again (under the run's lock) to hold no run yet."""
    check_new_run_dir(run_dir)
    write_json(run_dir / CONFIG, config, root=fs.folder_root(run_dir))


def check_new_run_dir(run_dir: Path) -> None:
    """RunDirError when `run_dir` already holds a run, a journal whose run config is missing, or anything else: a
    new run goes into a new or empty folder (its own lock, left by a run that failed to start, aside), so that it
    never writes its results.json or per_example.jsonl over a file of the same name."""
    if (run_dir / CONFIG).exists():
        raise RunDirError(f"{run_dir} already holds a run: resume it, or choose another run directory")
    if (run_dir / JOURNAL).exists():
        raise RunDirError(
            f"{run_dir} holds {JOURNAL} but no {CONFIG}: where its predictions came from is unknown; "
            "choose another run directory (or delete the folder)"
        )
    held = sorted(entry.name for entry in run_dir.iterdir() if entry.name != LOCK) if run_dir.is_dir() else []
    if held:
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise RunDirError(
            f"{run_dir} is not a run directory and not empty (it holds {shown}): a new run goes into a new or "
            "empty folder; choose another run directory"
        )

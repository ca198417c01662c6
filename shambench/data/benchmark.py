"""Loading the benchmark: every available adapter's examples, with per-source errors kept apart.

The validation set (`split="dev"`) holds `DEV_PER_PARTITION` = 5 examples per `task/dataset` partition (45 when
the nine SHAM-Bench partitions are present). It is drawn per source: the candidates are first the examples of
the source's labelled split outside the test set, when `Adapter.splits` names one (Mu-SHROOM `validation`,
RAGTruth `train`), then its test examples (for partitions with fewer than five such examples, or none). Within
each of the two groups candidates are ranked by `sha256("shambench-dev-v1:" + id)` and the first five of a
partition are taken. The rank depends on nothing but the id, so the set is the same on every machine and in any
file order. Dev examples keep their ids, carry `split="dev"` and record where they came from in
`meta["source_split"]`; those drawn from test are also in the test split, which the dev set's users (prompt
optimisers) must accept, as SHAM-Bench did. A source with `Adapter.dev_from_test = False` (Mu-SHROOM in 14
languages) never falls back to test.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from shambench.data.adapter import DATA_DIR_ENV, Adapter, LoadResult, adapters, data_dir_origin, resolve_data_dir
from shambench.data.loading import tell
from shambench.errors import DataError, message_of
from shambench.memory import collector_paused
from shambench.schema import Example
from shambench.sources import DEFAULT_SUITE, declared, in_suite
from shambench.structured import json_value

if TYPE_CHECKING:
    from datasets import DatasetDict, Features

DEV = "dev"
DEV_PER_PARTITION = 5
DEV_SALT = "shambench-dev-v1"
log = logging.getLogger(__name__)


@dataclass
class Benchmark:
    """Examples from several sources, with what each source dropped and which sources failed to load."""

    data_dir: Path
    """The data directory the sources were read from."""
    split: str = "test"
    """The split that was loaded (`test`, `dev`, or a source's own split name)."""
    loads: dict[str, LoadResult] = field(default_factory=dict)
    """Per dataset name, what its adapter returned."""
    errors: dict[str, str] = field(default_factory=dict)
    """Per dataset name, why it could not be loaded (missing or corrupt files)."""
    sources: dict[str, Adapter] = field(default_factory=dict)
    """Per loaded dataset name, its adapter (licence, revision, homepage, citation)."""

    @property
    def examples(self) -> list[Example]:
        """All examples, dataset by dataset in the order they were asked for."""
        return [ex for load in self.loads.values() for ex in load.examples]

    def to_hf(self) -> DatasetDict:
        """The examples as a `datasets.DatasetDict` with one split named after `self.split` (schema: `hf_features`)."""
        from datasets import Dataset, DatasetDict

        rows = [hf_row(ex) for ex in self.examples]
        return DatasetDict({self.split: Dataset.from_list(rows, features=hf_features())})


def hf_features() -> Features:
    """The Hugging Face schema of an example; `meta` is stored as a JSON string because its keys vary by source,
    and `annotations` (the individual annotators' readings, nested) as a JSON string too, empty without them."""
    from datasets import Features, Value

    span = {"start": Value("int64"), "end": Value("int64"), "label": Value("string")}
    text = ("id", "dataset", "task", "split", "question", "context", "response", "meta", "annotations")
    return Features(
        {
            **{name: Value("string") for name in text},
            # A one-element list declares a list of structs (works with datasets 3.x and later).
            "hallu_spans": [span],
            "soft_spans": [{"start": Value("int64"), "end": Value("int64"), "prob": Value("float64")}],
            "steps": [{"start": Value("int64"), "end": Value("int64"), "label": Value("int64")}],
        }
    )


def hf_row(example: Example) -> dict:
    """One example as a row of `hf_features()` (None for absent soft spans and steps)."""
    row = example.model_dump(exclude={"meta", "annotations"})
    row["hallu_spans"] = [{k: s[k] for k in ("start", "end", "label")} for s in row["hallu_spans"]]
    row["meta"] = json.dumps(example.meta, ensure_ascii=False, sort_keys=True)
    row["annotations"] = example.annotations.model_dump_json() if example.annotations else ""
    return row


def example_from_hf(row: dict) -> Example:
    """The `Example` a row of `hf_features()` stands for."""
    annotations = json_value(row["annotations"], "a row's annotations", "JSON") if row.get("annotations") else None
    meta = json_value(row["meta"], "a row's meta", "a JSON object")
    return Example.model_validate({**row, "meta": meta, "annotations": annotations})


def split_names(datasets: str | Sequence[str] | None) -> list[str] | None:
    """Dataset names from a comma-separated string or a list; None means every available dataset."""
    if datasets is None:
        return None
    if isinstance(datasets, str):
        datasets = datasets.split(",")
    names = [d.strip() for d in datasets if d.strip()]
    return names or None


def dev_rank(example_id: str) -> str:
    """The key dev candidates are ordered by: the salted SHA-256 of the id."""
    return hashlib.sha256(f"{DEV_SALT}:{example_id}".encode()).hexdigest()


def dev_selection(
    preferred: Iterable[Example], fallback: Iterable[Example], per_partition: int = DEV_PER_PARTITION
) -> list[Example]:
    """`per_partition` examples of each partition, from `preferred` first, each group ranked by `dev_rank`.

    The chosen examples come back partition by partition, with `split="dev"` and `meta["source_split"]`.
    """
    ranked = sorted(preferred, key=lambda ex: dev_rank(ex.id)) + sorted(fallback, key=lambda ex: dev_rank(ex.id))
    taken: dict[str, list[Example]] = {}
    seen: set[str] = set()
    for ex in ranked:
        chosen = taken.setdefault(ex.partition, [])
        if len(chosen) < per_partition and ex.id not in seen:
            seen.add(ex.id)
            chosen.append(ex.model_copy(update={"split": DEV, "meta": {**ex.meta, "source_split": ex.split}}))
    return [ex for partition in sorted(taken) for ex in taken[partition]]


def load_dev(adapter: Adapter, root: Path) -> LoadResult:
    """An adapter's dev examples (see the module docstring); `dropped` sums the splits they are drawn from."""
    test = adapter.load(root, "test")
    extra = next((s for s in adapter.splits if s != "test"), None)
    other = LoadResult(examples=[])
    if extra:
        try:
            other = adapter.load(root, extra)
        except DataError as err:
            log.warning("%s: dev set drawn from test only, split %r not readable: %s", adapter.name, extra, err)
    dropped = Counter(test.dropped) + Counter(other.dropped)
    return LoadResult(
        examples=dev_selection(other.examples, test.examples if adapter.dev_from_test else []),
        dropped=dict(dropped),
        files=list(dict.fromkeys(other.files + test.files)),
        spans=dict(Counter(test.spans) + Counter(other.spans)),
    )


def load_benchmark(
    datasets: str | Sequence[str] | None = None,
    split: str = "test",
    data_dir: str | Path | None = None,
    on_load: Callable[[Benchmark, str], None] | None = None,
) -> Benchmark:
    """The examples of the named datasets (default: every SHAM-Bench source whose files are present) for a split.

    `split` is `test`, `dev` (the validation set, see the module docstring) or a source's own labelled split
    (`validation`, `train`). A source that is missing, corrupt or lacks the split is recorded in
    `Benchmark.errors` when it was named, and the others still load; an unknown name raises `UnknownPluginError`
    with a suggestion. When no source at all loads, DataError says where it looked and what for.

    `on_load(bench, name)`, when given, is called as soon as each dataset is loaded into `bench.loads` or recorded
    in `bench.errors` (before the next one is read): a run can start on a dataset while the others load.
    """
    root = resolve_data_dir(data_dir)
    names = split_names(datasets)
    chosen = [adapters.get(n) for n in names] if names else adapters.entries()
    bench = Benchmark(data_dir=root, split=split)
    unused: dict[str, str] = {}
    elsewhere: list[str] = []  # present, but of another suite than the default: loaded only when named
    for entry in chosen:
        adapter = entry.factory()
        problem = _unusable(adapter, entry.name, root, split)
        if problem or (not names and adapter.suite != DEFAULT_SUITE):
            if names and problem:
                bench.errors[entry.name] = problem
            elif problem and adapter.suite == DEFAULT_SUITE:
                unused[entry.name] = problem
            elif not problem:
                elsewhere.append(f"{entry.name} (suite {adapter.suite})")
        else:
            tell(f"loading {entry.name} ({split})")
            try:
                with collector_paused():  # its examples outlive the loading and form no cycles
                    bench.loads[entry.name] = load_dev(adapter, root) if split == DEV else adapter.load(root, split)
            except DataError as err:
                bench.errors[entry.name] = message_of(err)
            else:
                bench.sources[entry.name] = adapter
        if on_load is not None and (entry.name in bench.loads or entry.name in bench.errors):
            on_load(bench, entry.name)
    tell(None)
    if not bench.loads:
        present = f"; present but outside the default set, so loaded only when named: {', '.join(elsewhere)}"
        raise DataError(_nothing_loaded(root, data_dir, split, bench.errors or unused) + (present if elsewhere else ""))
    return bench


def _nothing_loaded(root: Path, data_dir: str | Path | None, split: str, problems: dict[str, str]) -> str:
    where = f"data directory {root} ({data_dir_origin(data_dir)})"
    if not root.is_dir():
        from_env = not data_dir and os.environ.get(DATA_DIR_ENV)
        env = f"point ${DATA_DIR_ENV} at that folder" if from_env else f"set ${DATA_DIR_ENV}"
        return (
            f"{where} does not exist; pass --data-dir (data_dir= in Python) with the folder holding the corpora "
            f"(e.g. ../shared/data), {env}, or run `shambench data download`"
        )
    listing = "; ".join(f"{name}: {problem}" for name, problem in problems.items())
    hint = data_folder_below(root)
    if hint is not None:
        folder, names = hint
        return (
            f"no dataset could be loaded for split {split!r} from {where}, but {folder} holds {', '.join(names)}: "
            f"pass that folder. Not found here: {listing}"
        )
    return f"no dataset could be loaded for split {split!r} from {where}: {listing}"


def data_folder_below(root: Path) -> tuple[Path, list[str]] | None:
    """The first folder just below `root` where some sources are present, with their names: a user who names the
    folder above the data (`../shared` for `../shared/data`) is told where it is."""
    try:
        folders = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:
        return None
    for folder in folders:
        names = [e.name for e in adapters.entries() if e.factory().available(folder)]
        if names:
            return folder, names
    return None


def default_datasets(root: Path, split: str = "test", suite: str = DEFAULT_SUITE) -> list[str]:
    """The sources of `suite` usable for `split` under `root`; for the default suite, what `load_benchmark` loads
    when no names are given. The extended suite is SHAM-Bench's sources and those that join it (`Adapter.also_in`,
    `shambench.sources.in_suite`)."""
    usable = ((e.name, e.factory()) for e in adapters.entries())
    return [name for name, a in usable if in_suite(declared(a, name), suite) and not _unusable(a, name, root, split)]


def _unusable(adapter: Adapter, name: str, root: Path, split: str) -> str | None:
    if not adapter.available(root):
        return f"{adapter.root(root)}: source files not found (run `shambench data download {name}` or pass --data-dir)"
    if split != DEV and split not in adapter.splits:
        return f"{name} has no split {split!r} (it has: {', '.join(adapter.splits)}, and {DEV})"
    return None


def dataset_card(benches: list[Benchmark]) -> str:
    """The README.md of an exported dataset: configs for `load_dataset`, the schema, and every source's licence,
    revision, homepage and citation."""
    import yaml

    from shambench.provenance import shambench_version

    sources = {name: adapter for bench in benches for name, adapter in bench.sources.items()}
    header = {
        "license": "other",
        "language": ["en"],
        "pretty_name": "SHAM-Bench examples (shambench export)",
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": b.split, "path": f"data/{b.split}.parquet"} for b in benches],
            }
        ],
    }
    lines = [
        "---",
        yaml.safe_dump(header, sort_keys=False).rstrip(),
        "---",
        "",
        f"# SHAM-Bench examples, exported by shambench {shambench_version()}",
        "",
        "Hallucination-localisation examples in shambench's unified schema: `response` is the model output,",
        "`hallu_spans` its gold hallucinated character ranges (`[start, end)`, Python code points), `soft_spans`",
        "the annotator agreement where the source releases it, `steps` the step bounds of math sets, `meta`",
        "(a JSON string) source-specific extras, and `annotations` (a JSON string, empty when the source releases",
        "no individual annotators) each annotator's spans beside the gold the others make. Each source keeps its",
        "own licence, listed below.",
        "",
        "## Splits",
        "",
        "| split | partition | examples |",
        "|---|---|---|",
    ]
    for bench in benches:
        for partition, n in sorted(Counter(ex.partition for ex in bench.examples).items()):
            lines.append(f"| {bench.split} | {partition} | {n} |")
    lines += [
        "",
        f"`dev` holds {DEV_PER_PARTITION} examples per partition, drawn from a source's non-test labelled split when "
        f'it has one, else from test, ranked by `sha256("{DEV_SALT}:" + id)`.',
        "",
        "## Sources",
        "",
        "| dataset | tasks | licence | revision | homepage |",
        "|---|---|---|---|---|",
    ]
    for name, a in sorted(sources.items()):
        lines.append(f"| {name} | {', '.join(a.tasks)} | {a.license} | {a.revision} | {a.homepage} |")
    lines += ["", "## Citations", ""]
    lines += [f"- **{name}**: {a.citation}" for name, a in sorted(sources.items())]
    return "\n".join(lines) + "\n"


def write_hf_dataset(out: Path, benches: list[Benchmark]) -> list[Path]:
    """Write `data/<split>.parquet` per benchmark and the dataset card into `out`; the paths written.

    Each file is written under a temporary name and renamed, so an interrupted export leaves no half file.
    """
    from datasets.utils.tqdm import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    from shambench.io import write_atomic

    written = []
    root = Path(out).absolute().parent  # `out` itself (made here) is never a link written through
    # datasets draws a progress bar per file ("Creating parquet from Arrow format"): noise beside the command's
    # own "wrote FILE" lines.
    was_disabled = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        for bench in benches:
            path = out / "data" / f"{bench.split}.parquet"
            # Made in memory, then written whole through the filesystem gate (no link followed under `out`).
            buffer = io.BytesIO()
            bench.to_hf()[bench.split].to_parquet(buffer)
            write_atomic(path, buffer.getvalue(), root)
            written.append(path)
    finally:
        if not was_disabled:
            enable_progress_bars()
    write_atomic(out / "README.md", dataset_card(benches), root)
    return [*written, out / "README.md"]

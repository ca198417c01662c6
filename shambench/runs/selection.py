"""Which examples a run evaluates: adapters' datasets or an EXAMPLES file, at most `limit` per partition, with a
context provider's evidence when asked for. `read_selection` is the one reader; the rest build on it.

Errors name the Python parameters (`datasets`, `examples_file`, ...): the command line adds its own flags.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from shambench.data.benchmark import Benchmark, load_benchmark
from shambench.errors import DataError, SelectionError
from shambench.records import iter_records
from shambench.runs.spec import Selection
from shambench.schema import Example
from shambench.scoring.corpus import Corpus
from shambench.scoring.kept import file_corpus
from shambench.scoring.scorer import UNSCORED_EXAMPLE_FIELDS
from shambench.scoring.text import example_language
from shambench.sources import selections


def selected_datasets(selection: Selection) -> str | list[str] | None:
    """The datasets a selection names: its own, or those of its suite (see `suite_datasets`)."""
    if selection.suite:
        return suite_datasets(selection.suite, selection.data_dir, selection.split)
    return selection.datasets


def suite_datasets(suite: str, data_dir: str | Path | None, split: str) -> str:
    """The datasets a suite selects: its fixed ones, or the extended suite's sources present in the data directory
    (SHAM-Bench's, the extended ones and Mu-SHROOM's 14 languages). SelectionError for an unknown suite, or a
    suite none of whose sources is present."""
    from shambench.data.adapter import data_dir_origin, resolve_data_dir
    from shambench.data.benchmark import default_datasets

    known = selections()
    if suite not in known:
        raise SelectionError(f"unknown suite {suite!r} (known: {', '.join(known)})")
    fixed = known[suite]
    if fixed is not None:
        return fixed
    root = resolve_data_dir(data_dir)
    names = default_datasets(root, split, suite)
    if not names:
        raise SelectionError(
            f"no source of the {suite} suite is present for split {split!r} in data directory {root} "
            f"({data_dir_origin(data_dir)}); download its sources or point at the folder holding them"
        )
    return ",".join(names)


def first_per_partition(
    examples: Iterable[Example], limit: int | None, seen: Counter[str] | None = None
) -> Iterator[Example]:
    """The first `limit` examples of each partition (all when limit is None), as they are read; `seen` counts the
    examples of each partition read before (by earlier calls, for examples read in parts)."""
    seen = Counter() if seen is None else seen
    for ex in examples:
        seen[ex.partition] += 1
        if limit is None or seen[ex.partition] <= limit:
            yield ex


def loaded_benchmark(selection: Selection, on_load: Callable[[Benchmark, str], None] | None = None) -> Benchmark:
    """The benchmark of the selected datasets (`on_load`: see `load_benchmark`); DataError when one of them fails
    to load (never a partition silently left out)."""
    bench = load_benchmark(selected_datasets(selection), selection.split, selection.data_dir, on_load)
    if bench.errors:
        raise DataError("; ".join(f"dataset {name} not loaded: {message}" for name, message in bench.errors.items()))
    return bench


def read_selection(
    selection: Selection, drop: Sequence[str] = (), kept_datasets: Collection[str] | None = None
) -> tuple[Iterator[Example], dict[str, Any]]:
    """The examples of a selection, read as they are consumed, and the selection fields of a `RunConfig`.

    An EXAMPLES file is read line by line, without the fields in `drop` (its texts are never all in memory);
    adapters' datasets are loaded before this returns. `kept_datasets`: only the examples of these datasets (those
    a file of predictions in a released format covers). SelectionError when both or no examples are selected (the
    latter once the examples are consumed)."""
    examples_file = selection.examples_file
    if examples_file and selection.datasets:
        raise SelectionError("give datasets or an examples file, not both")
    read: Iterable[Example]
    if examples_file:
        # an empty file is input that cannot be used (DataError), not a selection that matched nothing
        records = (ex for _, ex in iter_records(examples_file, Example, drop))
        read = _not_empty(records, DataError(f"{examples_file}: holds no example"))
        fields: dict[str, Any] = {"examples_file": str(Path(examples_file).resolve())}
    else:
        bench = loaded_benchmark(selection)
        read = bench.examples
        fields = _benchmark_fields(bench)
    if kept_datasets is not None:
        read = (ex for ex in read if ex.dataset in kept_datasets)
    selected = segmentable(first_per_partition(read, selection.limit))
    return _not_empty(selected, _nothing_selected(kept_datasets)), {**fields, "limit": selection.limit}


def segmentable(examples: Iterable[Example]) -> Iterator[Example]:
    """`examples` as they are read; DataError naming the first whose `meta.lang` no tokenizer reads, as it is read:
    before a detector that segments (overlap, the span taggers) or the scorer meets it, whichever comes first."""
    usable: set[str] = set()
    for ex in examples:
        example_language(ex.id, ex.meta, usable)
        yield ex


def _benchmark_fields(bench: Benchmark) -> dict[str, Any]:
    return {
        "datasets": sorted(bench.loads),
        "split": bench.split,
        "data_dir": str(bench.data_dir.resolve()),
        "dropped_rows": {name: load.dropped for name, load in bench.loads.items() if load.dropped},
    }


def _not_empty(examples: Iterable[Example], nothing: DataError) -> Iterator[Example]:
    """`examples` as they are read; `nothing` raised once they end without one."""
    n = 0
    for ex in examples:
        n += 1
        yield ex
    if not n:
        raise nothing


def _nothing_selected(kept_datasets: Collection[str] | None = None) -> SelectionError:
    message = "no examples selected by the datasets, examples file and data directory given"
    if kept_datasets is not None:
        message += f"; the predictions are for {', '.join(sorted(kept_datasets)) or 'no dataset'}"
    return SelectionError(message)


def select_datasets(
    selection: Selection, on_selected: Callable[[list[Example]], None], on_failed: Callable[[], None]
) -> tuple[list[Example], dict[str, Any]]:
    """What `select_examples` selects from adapters' datasets without a context provider (the same examples in
    the same order, the same checks, errors and selection fields), with each dataset's selected examples handed
    to `on_selected` as soon as that dataset is loaded. Once a dataset fails to load `on_failed` is called and
    nothing more is handed; the others are still loaded, so that the error names every dataset that failed."""
    seen: Counter[str] = Counter()
    examples: list[Example] = []

    def loaded(bench: Benchmark, name: str) -> None:
        if bench.errors:
            if len(bench.errors) == 1 and name in bench.errors:
                on_failed()
            return
        selected = list(segmentable(first_per_partition(bench.loads[name].examples, selection.limit, seen)))
        examples.extend(selected)
        on_selected(selected)

    bench = loaded_benchmark(selection, loaded)
    if not examples:
        raise _nothing_selected()
    return examples, {**_benchmark_fields(bench), "limit": selection.limit}


def corpus_to_score(selection: Selection, kept_datasets: Collection[str] | None = None) -> Corpus:
    """The scorer's corpus of a selection, read without the fields the scorer never reads. An EXAMPLES file scored
    before, byte for byte, is not read again: its corpus is kept on disk (`shambench.scoring.kept.file_corpus`),
    unless only some of its datasets are kept."""
    read, _ = read_selection(selection, UNSCORED_EXAMPLE_FIELDS, kept_datasets)
    if selection.examples_file and not selection.datasets and kept_datasets is None:
        return file_corpus(selection.examples_file, selection.limit, lambda: read)
    return Corpus.of(read)


def select_examples(selection: Selection, fetch_context: bool = True) -> tuple[list[Example], dict[str, Any]]:
    """Every example of a selection (see `read_selection`; an EXAMPLES file is checked whole before any is used),
    with a provider's evidence as context when its `context` names one, and the selection fields of a `RunConfig`.
    With `fetch_context` false, only the evidence already stored is used: the provider is never called."""
    read, fields = read_selection(selection)
    examples = list(read)
    context, params = selection.context, selection.context_params
    if context:
        from shambench.data.context import apply_context, stored_context

        examples, provenance = (apply_context if fetch_context else stored_context)(context, examples, params)
        fields |= {"context": context, "context_params": params, "context_provenance": provenance}
    return examples, fields

"""Loading the benchmark: every available adapter's examples, with per-source errors kept apart."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from shambench.adapter import LoadResult, adapters, resolve_data_dir
from shambench.io import DataError
from shambench.schema import Example


@dataclass
class Benchmark:
    """Examples from several sources, with what each source dropped and which sources failed to load."""

    data_dir: Path
    """The data directory the sources were read from."""
    loads: dict[str, LoadResult] = field(default_factory=dict)
    """Per dataset name, what its adapter returned."""
    errors: dict[str, str] = field(default_factory=dict)
    """Per dataset name, why it could not be loaded (missing or corrupt files)."""

    @property
    def examples(self) -> list[Example]:
        """All examples, dataset by dataset in the order they were asked for."""
        return [ex for load in self.loads.values() for ex in load.examples]


def split_names(datasets: str | list[str] | None) -> list[str] | None:
    """Dataset names from a comma-separated string or a list; None means every available dataset."""
    if datasets is None:
        return None
    if isinstance(datasets, str):
        datasets = datasets.split(",")
    names = [d.strip() for d in datasets if d.strip()]
    return names or None


def load_benchmark(
    datasets: str | list[str] | None = None, split: str = "test", data_dir: str | Path | None = None
) -> Benchmark:
    """The examples of the named datasets (default: all whose files are present) for a split.

    A source that is missing or corrupt is recorded in `Benchmark.errors` and the others still load; an
    unknown name raises `UnknownPluginError` with a suggestion.
    """
    root = resolve_data_dir(data_dir)
    names = split_names(datasets)
    chosen = [adapters.get(n) for n in names] if names else adapters.entries()
    bench = Benchmark(data_dir=root)
    for entry in chosen:
        adapter = entry.factory()
        if not adapter.available(root):
            if names:
                bench.errors[entry.name] = (
                    f"{adapter.root(root)}: source files not found "
                    f"(run `shambench data download {entry.name}` or pass --data-dir)"
                )
            continue
        try:
            bench.loads[entry.name] = adapter.load(root, split)
        except DataError as err:
            bench.errors[entry.name] = str(err)
    return bench

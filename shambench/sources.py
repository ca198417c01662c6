"""What each source declares about itself, and the suites made of them: the core reads these, never a corpus name.

A source is an adapter registered with `@adapter(NAME)` (`shambench.data.adapter`). Its class attributes say which
suite it belongs to, which dataset names its examples carry, whether its partitions stay out of the paper's tasks
and overall, whether it is scored by steps, the example counts its paper reports, and the shared task whose view
its partitions are reported in. Adding a corpus to a suite is editing its adapter alone. The registry reaches the
adapters lazily: the first question imports them, and `shambench --help` asks none.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Callable
from typing import Any

from pydantic import Field

from shambench.registry import Registry
from shambench.schema import Model, Name

DEFAULT_SUITE = "shambench"
"""The paper's suite: what `--datasets` left empty selects."""
EXTENDED_SUITE = "extended"
"""The paper's sources and those that add partitions to it (`groups.extended` in results)."""
PAPER_SOURCE = "SHAM-Bench, Table 1"
"""Where the paper's own example counts are printed (`PublishedCount.source` of its partitions)."""

registry: Registry[Any] = Registry("dataset", "shambench.adapters", "shambench.adapters")
"""The adapters by name (typed `Registry[Adapter]` as `shambench.data.adapter.adapters`)."""


class PublishedCount(Model):
    """How many examples a paper or a release reports for one partition, and where."""

    count: int
    """The reported count, in the partition's unit (one example per response)."""
    source: str
    """Where it is printed (`PAPER_SOURCE` for SHAM-Bench's Table 1), and how it maps to the partition's examples."""


class SharedTask(Model):
    """A shared task whose own view (one row per dataset: its official IoU and Cor beside span F1, and their mean
    over rows) a source is shown in."""

    group: str
    """The view's key in `Results.groups`."""
    title: str
    """The shared task's name, as its tables title the view."""
    row_prefix: str = ""
    """What is cut from the front of a dataset name to name its row (e.g. up to a language code)."""
    metric: str
    """The registered metric (`shambench.scoring.measures`) whose figure, an IoU and a Cor, the task ranks rows by."""


class Source(Model):
    """What one registered adapter declares about itself (its class attributes, as the core reads them)."""

    name: Name
    """The adapter's registered name."""
    suites: tuple[str, ...]
    """Its suite, then the further suites that select it."""
    datasets: tuple[Name, ...]
    """The dataset names its examples carry, as `fnmatch` patterns."""
    kept_apart: str = ""
    """How the results' conventions name the partitions it keeps out of the paper's tasks and overall; empty when
    its partitions enter them."""
    extended_group: str = ""
    """The extended view's group its partitions form (empty: each joins its task's group)."""
    step_level: bool = False
    """Whether its examples are scored by steps (a step-level suite, with a table of its own)."""
    char_level: bool = False
    """Step-level: whether its steps are also scored by character."""
    published_counts: dict[str, PublishedCount] = Field(default_factory=dict)
    """Per `task/dataset` partition, the example count its paper (or SHAM-Bench's) reports for the test split."""
    shared_task: SharedTask | None = None
    """The shared task whose view its partitions are shown in."""

    @property
    def suite(self) -> str:
        """Its own suite (the first of `suites`)."""
        return self.suites[0]

    def produces(self, dataset: str) -> bool:
        """Whether examples of `dataset` come from this source."""
        return any(fnmatch.fnmatchcase(dataset, pattern) for pattern in self.datasets)


def declared(adapter: Any, name: str) -> Source:
    """The declaration of an adapter (a `shambench.data.adapter.Adapter`) registered under `name`."""
    return Source(
        name=name,
        suites=(adapter.suite, *adapter.also_in),
        datasets=adapter.datasets or (name,),
        kept_apart=adapter.kept_apart,
        extended_group=adapter.extended_group,
        step_level=adapter.step_level,
        char_level=adapter.char_level,
        published_counts=adapter.published_counts,
        shared_task=adapter.shared_task,
    )


@functools.cache
def _declaration(name: str, factory: Callable[[], Any]) -> Source:
    """The declaration of the adapter a registered factory makes (made once per factory)."""
    return declared(factory(), name)


def sources() -> list[Source]:
    """Every registered source's declaration, by name (importing the built-in adapters on first use)."""
    return [_declaration(entry.name, entry.factory) for entry in registry.entries()]


def source_of(dataset: str, among: list[Source] | None = None) -> Source | None:
    """The source whose examples carry `dataset` (its own name first, then patterns); None when none declares it."""
    among = sources() if among is None else among
    exact = next((s for s in among if dataset in s.datasets), None)
    return exact or next((s for s in among if s.produces(dataset)), None)


def in_suite(source: Source, suite: str) -> bool:
    """Whether a suite selects the source: its own or one it joins; the extended suite also holds the paper's."""
    return suite in source.suites or (suite == EXTENDED_SUITE and DEFAULT_SUITE in source.suites)


def selections() -> dict[str, str | None]:
    """What `--suite NAME` selects, per suite other than the default: its sources' names, comma-separated, or None
    for the extended suite, whose sources present are found in the data directory."""
    found = sources()
    names = sorted({suite for s in found for suite in s.suites} - {DEFAULT_SUITE})
    return {
        suite: None if suite == EXTENDED_SUITE else ",".join(s.name for s in found if s.suite == suite)
        for suite in names
    }


def step_suites() -> set[str]:
    """The suites scored by steps."""
    return {s.suite for s in sources() if s.step_level}


def char_level_suites() -> set[str]:
    """The step-level suites whose steps are also scored by character."""
    return {s.suite for s in sources() if s.char_level}


def suite_of(dataset: str) -> str:
    """The suite a dataset belongs to (`processbench/gsm8k` -> its source's suite); an undeclared one is the part of
    its name before `/`."""
    source = source_of(dataset)
    return source.suite if source else dataset.split("/", 1)[0]


def published_count(partition: str) -> PublishedCount | None:
    """The example count a paper reports for a `task/dataset` partition (SHAM-Bench's, else its corpus's own)."""
    source = source_of(partition.split("/", 1)[-1])
    return source.published_counts.get(partition) if source else None


def paper_counts() -> dict[str, int]:
    """SHAM-Bench's Table 1: per partition of the paper, its example count."""
    found = ((partition, c) for s in sources() for partition, c in s.published_counts.items())
    return dict(sorted((partition, c.count) for partition, c in found if c.source == PAPER_SOURCE))

"""The extended suite's view of a scored run: SHAM-Bench's partitions and the span-level corpora the paper lacks.

The extended suite (`--suite extended`) adds partitions to SHAM-Bench's nine: those of every source that declares
them kept apart (`Adapter.kept_apart`; e.g. long-form QA, human-written reference summaries, Mu-SHROOM in 14
languages). None of them ever enters `Results.tasks` or the paper's `Results.overall`, whatever else was scored:
those stay comparable with the paper's. The view, in `Results.groups.extended` whenever a kept-apart partition that
joins its task was scored, groups every partition of the run by task, the added ones with the paper's of the same
task, except the partitions of a source that declares a group of its own (`Adapter.extended_group`; Mu-SHROOM's
languages form `open_qa_multilingual`, its examples averaged like a task's: English Mu-SHROOM is then both in
`open_qa` and in that group). Its overall is the unweighted mean over those groups, with the population standard
deviation, as the paper's overall is over tasks; step-level (math) partitions never enter it.
"""

from __future__ import annotations

from collections.abc import Iterable

from shambench.sources import Source, source_of, sources


def declarations(partitions: Iterable[str]) -> dict[str, Source | None]:
    """Per `task/dataset` partition, the declaration of the source its examples come from (None: undeclared)."""
    found = sources()
    return {p: source_of(p.split("/", 1)[-1], found) for p in partitions}


def kept_apart(partition: str, source: Source | None = None) -> bool:
    """Whether a partition stays out of the paper's tasks and overall (it is reported in the extended view); its
    source's declaration is looked up unless given."""
    source = source or declarations([partition])[partition]
    return bool(source and source.kept_apart)


def joins_task(source: Source | None) -> bool:
    """Whether a source's partitions are kept apart but join their task's group in the extended view (scoring one
    of them brings the view about)."""
    return bool(source and source.kept_apart and not source.extended_group)


def extended_group(partition: str, source: Source | None) -> str:
    """The group of the extended view a partition belongs to: its task, or its source's own group."""
    return source.extended_group if source and source.extended_group else partition.split("/", 1)[0]


def kept_apart_names() -> list[str]:
    """How the results' conventions name every source's partitions kept apart, sorted."""
    return sorted(s.kept_apart for s in sources() if s.kept_apart)

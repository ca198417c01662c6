"""The extended suite's view of a scored run: SHAM-Bench's partitions and the span-level corpora the paper lacks.

The extended suite (`--suite extended`) adds partitions to SHAM-Bench's nine: long-form QA with human-written and
GPT-4 answers (`open_qa_long/haluquestqa`), ChatGPT answers in five domains with segment-level gold
(`open_qa_long/felm`), human-written reference summaries (`summ/xsumfaith-gold`), and Mu-SHROOM in 14
languages (`open_qa/mushroom-<lang>`). None of them ever enters `Results.tasks` or the paper's `Results.overall`, whatever else was scored: those stay comparable with the paper's. The view, in
`Results.groups.extended` whenever an added partition was scored, groups every partition of the run by task,
the added ones with the paper's of the same task (summ/xsumfaith-gold joins the other summ partitions), except
the 14 languages, which form one group of their own (`open_qa_multilingual`, its examples averaged like a task's:
English Mu-SHROOM is then both in `open_qa` and in that group). Its overall is the unweighted mean over those
groups, with the population standard deviation, as the paper's overall is over tasks; step-level (math)
partitions never enter it.
"""

from __future__ import annotations

from shambench.scoring.results import MULTILINGUAL
from shambench.scoring.shared_task import DATASET_PREFIX

ADDED_PARTITIONS = ("open_qa_long/haluquestqa", "summ/xsumfaith-gold", "open_qa_long/felm")
"""Partitions the extended suite adds to SHAM-Bench's, besides Mu-SHROOM's 14 languages."""


def is_language_partition(partition: str) -> bool:
    """Whether a `task/dataset` partition is one of Mu-SHROOM's 14 languages."""
    return partition.split("/", 1)[-1].startswith(DATASET_PREFIX)


def kept_apart(partition: str) -> bool:
    """Whether a partition stays out of the paper's tasks and overall (it is reported in its own group)."""
    return partition in ADDED_PARTITIONS or is_language_partition(partition)


def extended_group(partition: str) -> str:
    """The group of the extended view a partition belongs to: its task, or `MULTILINGUAL`."""
    return MULTILINGUAL if is_language_partition(partition) else partition.split("/", 1)[0]

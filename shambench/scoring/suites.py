"""The step-level (math) suites by name: which adapter each covers, and which are scored by character too."""

from __future__ import annotations

# Suite name (as on the command line) -> the adapter (dataset name prefix) it covers.
SUITES = {
    "processbench": "processbench",
    "hard2verify": "hard2verify",
    "sharp": "sharp",
    "math-shepherd": "math-shepherd",
}

CHAR_LEVEL_SUITES = frozenset({"math-shepherd"})


def suite_of(dataset: str) -> str:
    """The suite a dataset name belongs to (`processbench/gsm8k` -> `processbench`); unknown ones are their own."""
    prefix = dataset.split("/", 1)[0]
    return next((suite for suite, name in SUITES.items() if name == prefix), prefix)


# The extended suite: the paper's partitions, the sources beyond it and Mu-SHROOM's 14 languages.
EXTENDED_SUITE = "extended"
# What `--suite NAME` selects: a dataset list, or None for the extended suite, whose sources present are found in
# the data directory. The `mushroom` suite runs the 14 Mu-SHROOM languages. Kept here, free of heavy imports,
# because the command line builds its `--suite` choices from it before any command runs.
SELECTIONS: dict[str, str | None] = {**SUITES, "mushroom": "mushroom-multilingual", EXTENDED_SUITE: None}

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

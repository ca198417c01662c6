"""Every adapter's gold span labels name only the error types it declares (`Adapter.span_types`), on the real data."""

from __future__ import annotations

from pathlib import Path

import pytest

from shambench.data.adapter import adapters
from shambench.errors import SourceError
from shambench.scoring.typed import type_names
from tests.conftest import require_shared

# Every registered adapter, on the real data in ../shared/data, else on its fixtures.
NAMES = sorted(entry.name for entry in adapters.entries())


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("name", NAMES)
def test_gold_labels_are_the_declared_types(name):
    data = require_shared()
    adapter = adapters.create(name)
    # A source absent from ../shared/data (HalluEntity, SHARP, Hard2Verify) is read from the fixtures written in
    # its released format, so that no adapter goes unchecked.
    data = data if adapter.available(data) else FIXTURES
    assert adapter.available(data), f"{name}: neither the shared data nor the fixtures hold its source"
    labels = {s.label for ex in _examples(adapter, data) for s in ex.hallu_spans}
    used = {t for label in labels if label is not None for t in type_names(label)}
    assert used <= set(adapter.span_types), f"{name}: types not declared: {sorted(used - set(adapter.span_types))}"
    assert len(set(adapter.span_types)) == len(adapter.span_types)


def _examples(adapter, data):
    """The examples of every split of the source that is here (Math-Shepherd's is only `sample`)."""
    loaded = []
    for split in adapter.splits:
        try:
            loaded += adapter.load(data, split).examples
        except SourceError:
            continue
    assert loaded, f"{adapter.name}: no split loads"
    return loaded


def test_the_typed_sources_declare_their_types():
    expected = {
        "ragtruth": ("Evident Conflict", "Subtle Conflict", "Evident Baseless Info", "Subtle Baseless Info"),
        "favabench": ("entity", "relation", "contradictory", "invented", "subjective", "unverifiable", "sentence"),
        "faithbench": ("Unwanted", "Unwanted.Intrinsic", "Unwanted.Extrinsic", "Questionable"),
        "felm": ("knowledge", "reasoning", "irrelevant", "fooled"),
    }
    assert {name: adapters.create(name).span_types for name in expected} == expected
    assert {n for n in NAMES if adapters.create(n).span_types} == set(expected)

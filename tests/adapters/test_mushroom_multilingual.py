"""Mu-SHROOM in 14 languages on the real files: partitions, dev split, and the organisers' baseline rows."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from shambench.adapters.mushroom_multilingual import LANGUAGES
from shambench.data.adapter import adapters
from shambench.data.benchmark import default_datasets, load_benchmark
from shambench.schema import Prediction
from shambench.scoring.scorer import Scorer
from tests.conftest import require_shared

SIZES = {"ar": 150, "ca": 100, "cs": 100, "de": 150, "en": 154, "es": 152, "eu": 99, "fa": 100, "fi": 150,
         "fr": 150, "hi": 150, "it": 150, "sv": 147, "zh": 150}  # fmt: skip


@pytest.fixture(scope="module")
def bench():
    root = require_shared("mushroom", "multilingual").parent.parent
    return load_benchmark("mushroom-multilingual", data_dir=root)


def test_all_1902_items_load_as_one_partition_per_language(bench):
    assert not bench.errors
    assert Counter(ex.partition for ex in bench.examples) == {f"open_qa/mushroom-{k}": n for k, n in SIZES.items()}
    assert len(bench.examples) == 1902
    assert all(ex.meta["lang"] == ex.dataset.removeprefix("mushroom-") for ex in bench.examples)
    assert all(ex.soft_spans is not None for ex in bench.examples)


def test_the_shambench_default_set_stays_english_only(bench):
    assert "mushroom-multilingual" not in default_datasets(bench.data_dir)
    assert adapters.get("mushroom-multilingual").factory().suite == "mushroom"


def test_dev_comes_from_validation_only(bench):
    dev = load_benchmark("mushroom-multilingual", split="dev", data_dir=bench.data_dir)
    langs = Counter(ex.meta["lang"] for ex in dev.examples)
    # Five per language that has a validation set; ca, cs, eu and fa (test-only) have none rather than test items.
    assert langs == {lang: 5 for lang in ("ar", "de", "en", "es", "fi", "fr", "hi", "it", "sv", "zh")}
    assert {ex.meta["source_split"] for ex in dev.examples} == {"validation"}
    assert len(load_benchmark("mushroom-multilingual", split="validation", data_dir=bench.data_dir).examples) == 499


@pytest.fixture(scope="module")
def baseline_views(bench):
    scorer = Scorer(bench.examples, n_resamples=10)
    mark_all = [Prediction(id=ex.id, spans=[{"start": 0, "end": len(ex.response)}]) for ex in bench.examples]
    mark_none = [Prediction(id=ex.id, spans=[]) for ex in bench.examples]
    return {
        "Baseline (mark all)": scorer.score(mark_all).groups["mushroom"],
        "Baseline (mark none)": scorer.score(mark_none).groups["mushroom"],
    }


@pytest.mark.parametrize("baseline", ["Baseline (mark all)", "Baseline (mark none)"])
@pytest.mark.parametrize("lang", LANGUAGES)
def test_mark_all_and_mark_none_reproduce_the_official_rows(bench, baseline_views, baseline, lang):
    official = json.loads((bench.data_dir / "mushroom/multilingual/official_leaderboard.json").read_text("utf-8"))
    printed = official["languages"][lang]["baselines_test"][baseline]
    row = baseline_views[baseline]["languages"][lang]
    # The leaderboard prints 6 significant digits (`%g`); ours, formatted the same way, must read identically.
    assert (f"{row['iou']:g}", f"{row['cor']:g}") == (printed["IoU_str"], printed["Cor_str"])


def test_overall_is_the_mean_over_languages(baseline_views):
    view = baseline_views["Baseline (mark none)"]
    ious = [r["iou"] for r in view["languages"].values()]
    assert view["overall"]["iou"] == pytest.approx(sum(ious) / 14)
    assert view["overall"]["n"] == 1902

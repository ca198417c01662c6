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
        "Baseline (mark all)": scorer.score(mark_all).model_dump(mode="json")["groups"]["mushroom"],
        "Baseline (mark none)": scorer.score(mark_none).model_dump(mode="json")["groups"]["mushroom"],
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


def test_the_organisers_files_are_read_with_their_annotators(bench):
    load = bench.loads["mushroom-multilingual"]
    assert load.files == [f"multilingual/authors/test/mushroom.{lang}-tst.v1.extra.jsonl" for lang in LANGUAGES]
    assert all(ex.meta["wikipedia_url"].startswith("https://") for ex in bench.examples)
    sizes = {lang: set() for lang in LANGUAGES}
    for ex in bench.examples:
        sizes[ex.meta["lang"]].add(len(ex.annotations.readings))
    assert sizes == {lang: {3} for lang in LANGUAGES} | {"en": {9, 10, 11, 12}, "es": {6}, "zh": {5, 6, 7}}
    # With the organisers' boundary rule, every item's majority is its released hard labels.
    assert sum(ex.annotations.reproduces_gold for ex in bench.examples) == 1902
    raw = adapters.create("mushroom-multilingual", boundaries="raw").load(bench.data_dir).examples
    assert sum(ex.annotations.reproduces_gold for ex in raw) == 985


def test_the_third_party_copies_still_load_without_annotators(bench, tmp_path):
    # A data folder with only the third-party layout (links to the real files, nothing copied).
    folder = tmp_path / "mushroom" / "multilingual"
    folder.mkdir(parents=True)
    for lang in LANGUAGES:
        name = f"mushroom.{lang}-tst.v1.jsonl"
        (folder / name).symlink_to(bench.data_dir / "mushroom" / "multilingual" / name)
    examples = adapters.create("mushroom-multilingual").load(tmp_path).examples
    assert len(examples) == 1902
    assert all(ex.annotations is None and "wikipedia_url" not in ex.meta for ex in examples)


def _official_iou_cor(path) -> tuple[float, float]:
    """One annotator against the others as the official scorer computes it, written out again from the files:
    IoU of the annotator's characters with those more than half of the others marked, Spearman of the annotator's
    0/1 vector with the others' shares (the constant-vector rule); mean over annotators, then items."""
    from scipy.stats import spearmanr

    from shambench.adapters.mushroom import organisers_boundaries

    ious, cors = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        text = row["model_output_text"]
        marked = {
            a: {i for s, e in organisers_boundaries(spans, text) for i in range(s, e)}
            for a, spans in row["annotations"].items()
        }
        item_iou, item_cor = [], []
        for a, mine in marked.items():
            others = [m for b, m in marked.items() if b != a]
            share = [sum(i in m for m in others) / len(others) for i in range(len(text))]
            ref = {i for i, p in enumerate(share) if p > 0.5}
            item_iou.append(len(ref & mine) / len(ref | mine) if ref | mine else 1.0)
            pred = [1.0 if i in mine else 0.0 for i in range(len(text))]
            levels = len({round(x, 8) for x in share}), len({round(x, 8) for x in pred})
            constant = min(levels) == 1
            item_cor.append(float(levels[0] == levels[1]) if constant else spearmanr(share, pred).correlation)
        ious.append(sum(item_iou) / len(item_iou))
        cors.append(sum(item_cor) / len(item_cor))
    return sum(ious) / len(ious), sum(cors) / len(cors)


@pytest.fixture(scope="module")
def agreement(bench):
    return Scorer(bench.examples, n_resamples=10).agreement()


@pytest.mark.parametrize("lang", LANGUAGES)
def test_human_iou_and_cor_are_the_official_scorers(bench, agreement, lang):
    path = bench.data_dir / f"mushroom/multilingual/authors/test/mushroom.{lang}-tst.v1.extra.jsonl"
    got = agreement.partitions[f"open_qa/mushroom-{lang}"]
    iou, cor = _official_iou_cor(path)
    assert got.iou == pytest.approx(iou, abs=1e-9)
    assert got.cor == pytest.approx(cor, abs=1e-9)
    assert got.items == SIZES[lang] and 0 < got.token.f1 < 1
    assert got.reproduces_gold.share == 1.0

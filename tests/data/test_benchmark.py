"""load_benchmark: the dev set draw, source selection and errors, and the Hugging Face view."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shambench import load_benchmark
from shambench.adapters.mushroom import FILES
from shambench.data.adapter import Adapter, LoadResult, adapters
from shambench.data.benchmark import dev_rank, dev_selection, example_from_hf
from shambench.errors import DataError
from shambench.registry import Entry
from shambench.schema import Example, Step
from tests.conftest import require_shared

FIXTURES = Path(__file__).parents[1] / "adapters" / "fixtures"
MINE = "mushroom,favabench,halluentity"


def _ex(i: int, partition: str, split: str = "test") -> Example:
    task, dataset = partition.split("/")
    return Example(id=f"{dataset}/{split}-{i}", dataset=dataset, task=task, split=split, response="x")


def test_dev_rank_is_the_salted_sha256_of_the_id():
    assert dev_rank("mushroom/val-en-1") == hashlib.sha256(b"shambench-dev-v1:mushroom/val-en-1").hexdigest()


def test_dev_selection_takes_five_per_partition_preferring_the_non_test_split():
    partitions = [f"t{k}/d{k}" for k in range(9)]
    test = [_ex(i, p) for p in partitions for i in range(7)]
    # Partition t0/d0 has 3 examples outside test, t1/d1 has 8: the first is topped up with 2 from test.
    other = [_ex(i, "t0/d0", "train") for i in range(3)] + [_ex(i, "t1/d1", "train") for i in range(8)]
    chosen = dev_selection(other, test)
    assert len(chosen) == 45  # 9 partitions x 5
    by_partition = {p: [ex for ex in chosen if ex.partition == p] for p in partitions}
    assert [ex.meta["source_split"] for ex in by_partition["t0/d0"]] == ["train"] * 3 + ["test"] * 2
    assert {ex.meta["source_split"] for ex in by_partition["t1/d1"]} == {"train"}
    assert {ex.split for ex in chosen} == {"dev"}
    # Within a group, the five (or fewer) with the smallest salted hash, in that order.
    t5 = sorted(
        (ex.id for ex in test if ex.partition == "t5/d5"),
        key=lambda i: hashlib.sha256(f"shambench-dev-v1:{i}".encode()).hexdigest(),
    )
    assert [ex.id for ex in by_partition["t5/d5"]] == t5[:5]
    # The originals are not modified.
    assert {ex.split for ex in test} == {"test"}


@given(st.integers(0, 10_000))
def test_dev_selection_ignores_file_order(seed):
    test = [_ex(i, p) for p in ("a/x", "b/y") for i in range(9)]
    shuffled = random.Random(seed).sample(test, len(test))
    assert [ex.id for ex in dev_selection([], shuffled)] == [ex.id for ex in dev_selection([], test)]


def test_dev_split_of_the_fixture_sources():
    bench = load_benchmark(MINE, "dev", FIXTURES)
    assert bench.errors == {}
    # Mu-SHROOM draws from its validation file; FAVA and HalluEntity (test only) from test: 3 x 5 = 15.
    assert [len(bench.loads[n].examples) for n in MINE.split(",")] == [5, 5, 5]
    assert {ex.meta["source_split"] for ex in bench.loads["mushroom"].examples} == {"validation"}
    assert all(ex.id.startswith("mushroom/val-en-") for ex in bench.loads["mushroom"].examples)
    assert {ex.meta["source_split"] for ex in bench.loads["halluentity"].examples} == {"test"}
    assert load_benchmark(MINE, "dev", FIXTURES).examples == bench.examples


def test_real_mushroom_dev_is_five_validation_items():
    path = require_shared("mushroom", FILES["validation"])
    ids = [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines()]
    expected = sorted((f"mushroom/{i}" for i in ids), key=dev_rank)[:5]
    bench = load_benchmark("mushroom", "dev", path.parent.parent)
    assert [ex.id for ex in bench.examples] == expected


def test_all_nine_partitions_give_45_dev_examples(tmp_path):
    """The real RAGTruth, FaithBench, Zhou and Mu-SHROOM folders plus the invented FAVA/HalluEntity fixtures."""
    for name in ("ragtruth", "faithbench", "zhou", "mushroom"):
        (tmp_path / name).symlink_to(require_shared(name), target_is_directory=True)
    for name in ("fava", "halluentity"):
        (tmp_path / name).symlink_to(FIXTURES / name, target_is_directory=True)
    bench = load_benchmark(split="dev", data_dir=tmp_path)
    assert bench.errors == {}
    counts = {}
    for ex in bench.examples:
        counts[ex.partition] = counts.get(ex.partition, 0) + 1
    assert len(bench.examples) == 45 and len(counts) == 9 and set(counts.values()) == {5}
    assert {ex.meta["source_split"] for ex in bench.examples if ex.dataset == "mushroom"} == {"validation"}


class ToyAdapter(Adapter):
    """An always-present source outside the SHAM-Bench suite, with steps."""

    name = "toy"
    suite = "toy"
    tasks = ("math",)

    def available(self, data_dir: Path) -> bool:
        return True

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        ex = Example(
            id="toy/1",
            dataset="toy",
            task="math",
            response="1+1=2. So 3.",
            steps=[Step(start=0, end=6, label=1), Step(start=7, end=12, label=0)],
        )
        return LoadResult(examples=[ex])


@pytest.fixture
def toy(monkeypatch):
    adapters.entries()  # load the built-ins first, so the toy entry is not overwritten
    monkeypatch.setitem(adapters._entries, "toy", Entry("toy", ToyAdapter, "toy source", __name__))
    return ToyAdapter


def test_default_selection_is_the_shambench_suite(toy):
    assert "toy" not in load_benchmark(data_dir=FIXTURES).loads
    bench = load_benchmark("toy", data_dir=FIXTURES)
    assert [s.model_dump() for s in bench.examples[0].steps] == [
        {"start": 0, "end": 6, "label": 1},
        {"start": 7, "end": 12, "label": 0},
    ]


def test_a_folder_holding_only_sources_outside_the_default_set_names_them(toy, tmp_path):
    # toy is always present; no SHAM-Bench source is in tmp_path
    with pytest.raises(
        DataError, match=r"; present but outside the default set, so loaded only when named: toy \(suite toy\)$"
    ):
        load_benchmark(data_dir=tmp_path)


def test_missing_corrupt_and_split_errors_leave_the_other_sources_loaded(tmp_path):
    (tmp_path / "fava").symlink_to(FIXTURES / "fava", target_is_directory=True)
    (tmp_path / "halluentity").mkdir()
    bad = tmp_path / "halluentity" / "HalluEntity.jsonl"
    bad.write_text('{"prompt": "p", "response": "r", "entity": ["r"]}\n')
    bench = load_benchmark(MINE, data_dir=tmp_path)
    assert list(bench.loads) == ["favabench"]
    assert bench.errors["halluentity"].startswith(f"{bad}:1: entity_label: Field required")
    assert bench.errors["mushroom"] == (
        f"{tmp_path / 'mushroom'}: source files not found (run `shambench data download mushroom` or pass --data-dir)"
    )
    # Unnamed sources that are absent are not errors.
    assert load_benchmark(data_dir=tmp_path).errors == {"halluentity": bench.errors["halluentity"]}
    # Nothing loads at all: one error saying where it looked and what for, not an empty benchmark.
    with pytest.raises(DataError) as err:
        load_benchmark("favabench", "train", tmp_path)
    assert str(err.value) == (
        f"no dataset could be loaded for split 'train' from data directory {tmp_path} (given by --data-dir): "
        "favabench: favabench has no split 'train' (it has: test, and dev)"
    )
    with pytest.raises(
        DataError, match=f"data directory {tmp_path / 'nowhere'} \\(given by --data-dir\\) does not exist"
    ):
        load_benchmark(data_dir=tmp_path / "nowhere")
    with pytest.raises(DataError, match=r"from data directory .*; mushroom: \S*/mushroom: source files not found"):
        load_benchmark(data_dir=tmp_path / "halluentity")


def test_to_hf_round_trips_the_examples():
    bench = load_benchmark(MINE, data_dir=FIXTURES)
    hf = bench.to_hf()
    assert list(hf) == ["test"] and hf["test"].num_rows == 18
    assert [example_from_hf(row) for row in hf["test"]] == bench.examples
    mushroom = next(row for row in hf["test"] if row["id"] == "mushroom/tst-en-1")
    assert mushroom["soft_spans"] == [{"start": 36, "end": 40, "prob": 0.8}, {"start": 44, "end": 54, "prob": 0.3}]
    assert mushroom["steps"] is None
    assert json.loads(mushroom["meta"])["wikipedia_url"] == "https://en.wikipedia.org/wiki/Item_tst_1"

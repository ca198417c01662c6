"""Finding and reading a hub dataset's files as released: the card's `configs`, the hub's naming convention,
Parquet, JSON arrays and JSON lines."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel

from shambench.adapters._released import card_configs, data_rows, split_files
from shambench.errors import SourceError


class Row(BaseModel):
    x: int


def test_rows_are_read_in_each_format(tmp_path):
    (tmp_path / "a.json").write_text('  [{"x": 1}, {"x": 2}]')
    (tmp_path / "b.json").write_text('{"x": 1}\n\n{"x": 2}\n')  # JSON lines under a .json name, as the hub allows
    (tmp_path / "c.jsonl").write_text('{"x": 1}\n{"x": 2}\n')
    pq.write_table(pa.Table.from_pylist([{"x": 1}, {"x": 2}]), tmp_path / "d.parquet")
    for name, second in (("a.json", " record 1"), ("b.json", ":3"), ("c.jsonl", ":2"), ("d.parquet", " row 1")):
        rows = data_rows(tmp_path / name, Row, "rows of x")
        assert [r.x for _, r in rows] == [1, 2]
        assert rows[1][0] == f"{tmp_path / name}{second}"


def test_split_files_follow_the_card_else_the_convention(tmp_path):
    for name in (
        "data/test-00000-of-00002.parquet",
        "data/test-00001-of-00002.parquet",
        "data/train-00000.parquet",
        "SHARP-Math/test.json",
        "SHARP-Math/train.json",
        "SHARP-Math/testing-notes.json",
        "notes/test.txt",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    names = lambda paths: [str(p.relative_to(tmp_path)) for p in paths]  # noqa: E731
    # no card: files named after the split (then `-`, `.` or `_`), under the config's folder when one is asked for
    assert names(split_files(tmp_path, "test")) == [
        "SHARP-Math/test.json",
        "data/test-00000-of-00002.parquet",
        "data/test-00001-of-00002.parquet",
    ]
    assert names(split_files(tmp_path, "test", "SHARP-Math")) == ["SHARP-Math/test.json"]
    # a card's configs win
    (tmp_path / "README.md").write_text(
        "---\nconfigs:\n- config_name: SHARP-Math\n  data_files:\n  - split: test\n    path:\n"
        "    - SHARP-Math/train.json\n- config_name: default\n  data_files: data/*\n---\nbody\n"
    )
    assert [c["config_name"] for c in card_configs(tmp_path)] == ["SHARP-Math", "default"]
    assert names(split_files(tmp_path, "test", "SHARP-Math")) == ["SHARP-Math/train.json"]
    # a config with one unnamed split says nothing about test or train: the convention decides
    assert names(split_files(tmp_path, "train", "default")) == []
    assert names(split_files(tmp_path, "train")) == ["SHARP-Math/train.json", "data/train-00000.parquet"]


def test_a_card_whose_front_matter_is_not_yaml_names_the_file(tmp_path):
    (tmp_path / "README.md").write_text("---\nconfigs: [unclosed\n---\n")
    with pytest.raises(SourceError, match=r"README.md:\d+: not valid YAML .*expected the dataset card's front matter"):
        card_configs(tmp_path)

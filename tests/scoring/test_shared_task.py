"""How the organisers' scorer read numbers (pandas.read_json's default float parser), reproduced digit for digit."""

from __future__ import annotations

import io
import json

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from shambench.scoring.shared_task import organisers_float
from tests.conftest import require_shared


def test_numbers_read_as_pandas_reads_them_by_hand():
    # 3 fraction digits scaled by the literal 0.1: one rounding more than a correct parse.
    assert organisers_float("0.3") == 3 * 0.1 == 0.30000000000000004
    assert organisers_float("0.30") == 30 * 0.01 == 0.3
    # Digits past the 15th are dropped: three different probabilities, one value.
    assert organisers_float("0.10000000000000001") == organisers_float("0.10000000000000002") == 0.1
    assert float("0.10000000000000002") != 0.1
    assert organisers_float("0.1234567890123456789") == organisers_float("0.123456789012345")
    # 0.5000000000000001 is above 0.5 (a hard label), read by pandas it is 0.5 (none).
    assert float("0.5000000000000001") > 0.5
    assert organisers_float("0.5000000000000001") == 0.5
    assert organisers_float("-0.25") == -0.25
    assert organisers_float("1.5e-3") == (1 + 5 * 0.1) * 10.0**-3
    assert organisers_float("2E+2") == 200.0
    assert organisers_float("1") == 1.0


def _pandas_reads(texts: list[str]) -> list[float]:
    lines = "\n".join(f'{{"id": "x{i}", "v": [{t}]}}' for i, t in enumerate(texts))
    return [row[0] for row in pd.read_json(io.StringIO(lines), lines=True)["v"]]


digits = st.text("0123456789", min_size=1, max_size=22)
json_floats = st.builds(
    lambda sign, whole, frac, exp: f"{sign}{whole}{frac}{exp}",
    st.sampled_from(["", "-"]),
    st.sampled_from(["0", "1", "3", "12"]),
    digits.map(lambda d: "." + d),
    st.one_of(
        st.just(""),
        st.builds(
            lambda e, s, n: f"{e}{s}{n}", st.sampled_from("eE"), st.sampled_from(["", "-", "+"]), st.integers(0, 30)
        ),
    ),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(json_floats, min_size=1, max_size=40))
def test_every_number_reads_as_pandas_read_json_reads_it(texts):
    # The independent computation: the organisers' own loader.
    assert [organisers_float(t) for t in texts] == _pandas_reads(texts)


def test_released_gold_probabilities_keep_their_order_and_ties_either_way():
    """Gold soft labels are read exactly: on every released file that gives the same ranks (hence the same Cor)
    and the same constant-vector test as the organisers' reading."""
    root = require_shared("mushroom", "multilingual")
    texts: set[str] = set()
    for path in [*root.rglob("*.jsonl"), *root.parent.glob("*.jsonl")]:
        for line in path.read_text(encoding="utf-8").splitlines():
            for label in json.loads(line, parse_float=str)["soft_labels"]:
                texts.add(str(label["prob"]))
    assert len(texts) > 20
    exact = sorted(texts, key=float)
    organisers = [organisers_float(t) if any(c in t for c in ".eE") else float(t) for t in exact]
    assert organisers == sorted(organisers) and len(set(organisers)) == len(set(map(float, exact)))
    assert [round(v, 8) for v in organisers] == [round(float(t), 8) for t in exact]

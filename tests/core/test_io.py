"""Reading JSON lines: the fast reader (orjson) accepts and reads exactly what the strict `json` reader does."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shambench.io import _parse_json_strictly, parse_json_line

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=())),  # lone surrogates included
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


def outcome(read, line):
    try:
        return "value", read(line)
    except ValueError as err:
        return "error", str(err)


@settings(max_examples=300, deadline=None)
@given(json_values, st.sampled_from(["", "\n", "\r\n", "  \n"]), st.booleans())
def test_any_json_line_reads_as_json_reads_it(value, end, ascii_only):
    line = (json.dumps(value, ensure_ascii=ascii_only) + end).encode("utf-8", "surrogatepass")
    fast, strict = outcome(parse_json_line, line), outcome(_parse_json_strictly, line)
    assert fast == strict
    # Exact types too: an integer stays an integer, however large.
    assert json.dumps(fast[1]) == json.dumps(strict[1])


@pytest.mark.parametrize(
    "line",
    [
        b'"\\ud800"',  # a lone surrogate: JSON allows it, orjson does not
        b"1e999",
        b'{"a": -Infinity}',
        b"NaN",
        b'{"a": -9223372036854775809}',  # below int64: orjson would read a float
        b'{"a": 18446744073709551616}',  # past uint64
        b"[" * 40 + b"]" * 40,
        b"[" * 5000 + b"]" * 5000,
        b'\xef\xbb\xbf{"a": 1}',
        b'\xff{"a": 1}',
        b'{"a": [1, 2,]}',
        b'{"a": 1} x',
        b'{"a": 1, "a": 2}',
        b"",
        '"\u2028"'.encode(),
    ],
)
def test_edge_lines_give_the_strict_reader_s_value_or_message(line):
    assert outcome(parse_json_line, line) == outcome(_parse_json_strictly, line)


def test_a_str_line_with_a_lone_surrogate_reads_as_json_reads_it():
    assert parse_json_line('{"a": "\ud800"}') == {"a": "\ud800"}

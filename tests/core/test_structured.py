"""The bounded reader of structured input: sizes, depths, YAML aliases, one-line errors with file and line; and
the class test: no module of the package parses JSON, YAML, CSV or Python literals except through it."""

from __future__ import annotations

import ast
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shambench import structured
from shambench.errors import DataError
from shambench.structured import (
    MAX_DEPTH,
    bounded_bytes,
    deeper_than,
    json_file,
    json_value,
    literal_value,
    yaml_file,
    yaml_value,
)
from tests.test_architecture import REPO
from tests.test_fs_gate import calls_outside_gate


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_json_within_bounds_reads_as_json_does():
    assert json_value('{"a": [1, 2.5, "x", null, true]}', "f", "x") == {"a": [1, 2.5, "x", None, True]}
    assert json_value(nested(MAX_DEPTH), "f", "x") == json.loads(nested(MAX_DEPTH))
    # integers past 64 bits, which orjson refuses, are json's to read
    assert json_value("[18446744073709551616]", "f", "x") == [2**64]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (nested(MAX_DEPTH + 1), f"f: nested deeper than {MAX_DEPTH} levels; expected a list"),
        (nested(100_000), f"f: nested deeper than {MAX_DEPTH} levels; expected a list"),
        ('{"a": 1,\n "b": }', "f:2: not valid JSON (Expecting value at column 7); expected a list"),
        ("[NaN]", "f: not valid JSON (NaN is not a JSON number (expected a finite number)); expected a list"),
        (b"[\xff]", "f: not UTF-8 text (byte 1); expected a list"),
    ],
)
def test_json_failures_are_one_line(text, message):
    with pytest.raises(DataError) as err:
        json_value(text, "f", "a list")
    assert str(err.value) == message


def test_a_file_over_its_cap_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.json"
    path.write_text("[" + "1," * 600 + "1]")
    with pytest.raises(DataError, match=r"big.json: 1,203 bytes, over the 1,000 accepted; expected a list$"):
        json_file(path, "a list", limit=1000)
    assert json_file(path, "a list", limit=2000) == [1] * 601
    with pytest.raises(DataError, match=r"nope.json: file not found; expected a list$"):
        bounded_bytes(tmp_path / "nope.json", "a list")
    with pytest.raises(DataError, match=r": is a folder; expected a list$"):
        bounded_bytes(tmp_path, "a list")


def test_yaml_aliases_and_anchors_are_refused_with_their_line(tmp_path):
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b]\n"
    path = tmp_path / "sweep.yaml"
    path.write_text(laughs)
    with pytest.raises(DataError) as err:
        yaml_file(path, "a sweep file")
    assert str(err.value) == (
        f"{path}:1: not valid YAML (aliases and anchors (&, *) are not accepted); expected a sweep file"
    )


def test_yaml_depth_and_syntax_errors(tmp_path):
    assert yaml_value("a: [1, {b: two}]\n", "f", "x") == {"a": [1, {"b": "two"}]}
    with pytest.raises(
        DataError, match=f"^f:1: not valid YAML \\(nested deeper than {MAX_DEPTH} levels\\); expected x$"
    ):
        yaml_value(nested(MAX_DEPTH + 5), "f", "x")
    with pytest.raises(DataError, match=r"^f:4: not valid YAML \(.*'<stream end>'\); expected x$"):
        yaml_value("a: 1\nb: 2\nc: [\n", "f", "x")  # the list is still open where the text ends, on line 4
    with pytest.raises(DataError, match=r"^card.md:4: "):
        yaml_value("a: 1\nb: *x\n", "card.md", "x", first_line=3)
    with pytest.raises(DataError, match="not valid YAML"):
        yaml_value("!!python/object:os.system x", "f", "x")  # the safe loader: plain data only


def test_python_literals():
    assert literal_value("[{'text': 'a', 'start': 1, 'ok': True}, ('t',), None]", "f", "x") == [
        {"text": "a", "start": 1, "ok": True},
        ("t",),
        None,
    ]
    with pytest.raises(DataError, match="^f: not a Python literal"):
        literal_value("__import__('os').system('true')", "f", "x")
    with pytest.raises(DataError, match="^f: not a Python literal"):
        literal_value(nested(10_000), "f", "x")
    with pytest.raises(DataError, match=f"^f: nested deeper than {MAX_DEPTH} levels"):
        literal_value(nested(MAX_DEPTH + 1), "f", "x")
    with pytest.raises(DataError, match="over the"):
        literal_value("[" + "1," * structured.MAX_FIELD_CHARS + "]", "f", "x")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=20,
)


def depth_of(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


@given(json_values, st.integers(min_value=1, max_value=8))
def test_deeper_than_agrees_with_a_recursive_depth(value, limit):
    assert deeper_than(value, limit) == (depth_of(value) > limit)


@given(json_values, st.integers(min_value=1, max_value=8), st.booleans())
def test_json_value_refuses_exactly_what_nests_deeper_than_its_limit(value, limit, as_bytes):
    """Whether the value is walked or, holding no more brackets than the limit, is not: the same answer."""
    text = json.dumps(value)
    data = text.encode() if as_bytes else text
    if depth_of(value) > limit:
        with pytest.raises(DataError, match=f"nested deeper than {limit} levels"):
            json_value(data, "f", "x", max_depth=limit)
    else:
        assert json_value(data, "f", "x", max_depth=limit) == value


python_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet="a([{)]}'\\", max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.frozensets(st.integers(), max_size=2).map(set)
        | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=12,
)


def literal_depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(literal_depth, value.values()), default=0)
    if isinstance(value, list | tuple | set):
        return 1 + max(map(literal_depth, value), default=0)
    return 0


@given(python_values, st.integers(min_value=1, max_value=6), st.booleans())
def test_literal_value_refuses_exactly_what_nests_deeper_than_its_limit(value, limit, bare):
    """Walked or not (no more brackets than the limit), the same answer; a tuple written without its parentheses
    (only the whole literal can be one) nests one level with no bracket of its own."""
    text = repr(value)
    if bare and isinstance(value, tuple) and len(value) > 1:
        text = text[1:-1]
    if literal_depth(value) > limit:
        with pytest.raises(DataError, match=f"nested deeper than {limit} levels"):
            literal_value(text, "f", "x", max_depth=limit)
    else:
        assert literal_value(text, "f", "x", max_depth=limit) == value


def test_a_bare_tuple_is_one_level_without_a_bracket():
    assert literal_value("1, [2]", "f", "x", max_depth=2) == (1, [2])
    with pytest.raises(DataError, match="nested deeper than 1 levels"):
        literal_value("1, [2]", "f", "x", max_depth=1)


# ASCII digits, digits of other scripts (which are no JSON digits), and a character UTF-8 writes in several bytes
digit_texts = st.text(alphabet=st.sampled_from("0123456789" * 6 + "\u0660\uff11\u00b9-.e \u00e9\U0001f600\ud800"))


@given(digit_texts)
def test_a_run_of_19_digits_is_found_as_the_expression_finds_it(text):
    """The translate-and-search check says what the expression [0-9]{19} says, of a text and of its UTF-8 bytes."""
    expected = re.search("[0-9]{19}", text) is None
    assert structured._orjson_reads_it_as_json(text) is expected
    assert structured._orjson_reads_it_as_json(text.encode("utf-8", "surrogatepass")) is expected


def test_runs_of_digits_by_hand():
    assert structured._orjson_reads_it_as_json("1" * 18 + "x" + "2" * 18)
    assert not structured._orjson_reads_it_as_json("x" + "9876543210" * 2)
    assert structured._orjson_reads_it_as_json("\uff11" * 40)  # fullwidth digits: no JSON number
    assert not structured._orjson_reads_it_as_json(b"[0." + b"1234567890" * 2 + b"]")


# --- the class: every parse of structured input in the package goes through the one reader ------------------

PARSERS = {
    ("json", "load"),
    ("json", "loads"),
    ("orjson", "loads"),
    ("yaml", "load"),
    ("yaml", "safe_load"),
    ("yaml", "full_load"),
    ("yaml", "unsafe_load"),
    ("yaml", "load_all"),
    ("yaml", "safe_load_all"),
    ("ast", "literal_eval"),
    ("csv", "reader"),
    ("csv", "DictReader"),
    ("pd", "read_json"),
    ("pd", "read_csv"),
    ("pandas", "read_json"),
    ("pandas", "read_csv"),
    ("tomllib", "loads"),
    ("tomllib", "load"),
}

# Parses that stay outside `shambench.structured`, each with its reason.
ALLOWED = {
    ("shambench/io.py", "orjson.loads"): "parse_json_line, the JSON-lines half of the reader (depth, strict JSON)",
    ("shambench/io.py", "json.loads"): "parse_json_line's strict fallback (RecursionError caught)",
    ("shambench/llm/cache.py", "json.loads"): "a cache row whose seal was verified (or this process's own row)",
    ("shambench/scoring/kept.py", "orjson.loads"): "a kept corpus's names, read only after their digest matched",
    ("shambench/scoring/kept.py", "json.loads"): "a kept arrays file's header, read only after its seal matched",
    ("adapters/_released.py", "csv.DictReader"): "csv_rows: fields capped at MAX_FIELD_CHARS, errors per line",
}


def parse_call(node: ast.Call) -> str | None:
    """The call as written (`json.loads`) when it is one of PARSERS; None otherwise."""
    owner = node.func.value if isinstance(node.func, ast.Attribute) else None
    if isinstance(owner, ast.Name) and isinstance(node.func, ast.Attribute) and (owner.id, node.func.attr) in PARSERS:
        return f"{owner.id}.{node.func.attr}"
    return None


def test_no_module_parses_structured_input_but_through_the_reader():
    assert calls_outside_gate(parse_call, ALLOWED, gate=REPO / "shambench" / "structured.py") == []

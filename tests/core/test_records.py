"""`shambench.records`: one strict validator for prediction and example lines, files and detector output."""

from __future__ import annotations

import json
import math
import os
import re
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shambench import records
from shambench.detection.detector import Detector
from shambench.errors import DataError
from shambench.io import NUMBER_SHAPES, Journal, parse_json_line, write_atomic
from shambench.records import (
    check_detector_prediction,
    may_hide_problems,
    parse_line,
    parse_record,
    read_examples,
    read_predictions,
)
from shambench.runs.runner import run_predictions
from shambench.schema import Example, Prediction, SoftSpan, Span

EXAMPLE = Example(id="a", dataset="toy", task="qa", response="Paris is in Italy.", hallu_spans=[[12, 17]])

ranges = st.tuples(st.integers(0, 40), st.integers(1, 20)).map(lambda t: [t[0], t[0] + t[1]])
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
# What an id may hold: anything but the control characters `shambench.schema.Name` refuses (tests/core/test_names.py).
NAME_CHARACTERS = st.characters(
    exclude_categories=("Cc",), exclude_characters="\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


@st.composite
def prediction_objects(draw) -> dict:
    obj: dict = {"id": draw(st.text(NAME_CHARACTERS, min_size=1, max_size=12))}
    if draw(st.booleans()):
        obj["spans"] = draw(st.lists(ranges, max_size=4))
    if draw(st.booleans()):
        obj["scores"] = [{"start": s, "end": e, "score": draw(finite)} for s, e in draw(st.lists(ranges, max_size=3))]
    if draw(st.booleans()):
        obj["sentence_labels"] = draw(st.lists(st.sampled_from([0, 1]), max_size=5))
    if draw(st.booleans()):
        obj["soft_spans"] = [
            {"start": s, "end": e, "prob": draw(st.floats(0, 1))} for s, e in draw(st.lists(ranges, max_size=3))
        ]
    if draw(st.booleans()):
        obj["meta"] = {"note": draw(st.text(max_size=10)), "n": draw(st.integers())}
    return obj


@settings(max_examples=150, deadline=None)
@given(prediction_objects())
def test_a_valid_line_round_trips_through_the_journal_format(obj):
    pred = parse_line(json.dumps(obj), Prediction)
    assert pred == Prediction.model_validate(obj)
    # what the journal writes is read back by the same validator to the same prediction
    assert parse_line(pred.model_dump_json(exclude_none=True), Prediction) == pred


@settings(max_examples=150, deadline=None)
@given(prediction_objects(), st.sampled_from(["spans", "scores", "soft_spans"]), st.sampled_from(["1", 1.5, True]))
def test_a_non_integer_offset_anywhere_is_refused(obj, field, bad):
    obj[field] = [{"start": bad, "end": 5, **({"prob": 0.5} if field == "soft_spans" else {})}]
    with pytest.raises(ValueError, match=f"{field}.0: start must be an integer character offset"):
        parse_line(json.dumps(obj), Prediction)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"id": "a", "spam": []}, "unknown key 'spam'"),
        ({"id": 3}, "expected a string id"),
        ({"id": "a", "spans": {"start": 0}}, "spans: expected a list of ranges, got an object"),
        ({"id": "a", "spans": [[0, 1, "x", 4]]}, "spans.0: expected [start, end] or [start, end, label], got 4"),
        ({"id": "a", "spans": ["0-3"]}, "spans.0: expected [start, end] or an object with start and end, got str"),
        ({"id": "a", "step_verdicts": [1, 0.0]}, "step_verdicts: expected integers, got 0.0"),
        ({"id": "a", "soft_spans": [{"start": 0, "end": 2, "prob": 1.5}]}, "soft_spans.0.prob"),
    ],
)
def test_malformed_records_say_what_was_expected(obj, message):
    with pytest.raises(ValueError) as info:
        parse_line(json.dumps(obj), Prediction)
    assert message in str(info.value)


def test_soft_spans_alone_give_hard_spans_above_one_half():
    # Mu-SHROOM: prob > 0.5 makes a hard label; adjacent ranges merge.
    soft = [
        {"start": 0, "end": 3, "prob": 0.9},
        {"start": 3, "end": 5, "prob": 0.6},
        {"start": 7, "end": 9, "prob": 0.5},
    ]
    pred = parse_line(json.dumps({"id": "a", "soft_spans": soft}), Prediction)
    assert [(s.start, s.end) for s in pred.spans] == [(0, 5)]
    # given spans are kept as they are
    pred = Prediction(id="a", spans=[[7, 9]], soft_spans=[SoftSpan(start=0, end=3, prob=0.9)])
    assert [(s.start, s.end) for s in pred.spans] == [(7, 9)]


def test_files_name_the_line_and_refuse_duplicate_ids(tmp_path):
    path = tmp_path / "pred.jsonl"
    path.write_text('{"id": "a"}\n\n{"id": "b", "spans": [[0, 2]]}\n{"id": "a"}\n')
    with pytest.raises(DataError, match=r"pred.jsonl:4: id 'a' repeats line 1 \(ids must be unique\)"):
        read_predictions(path)
    examples = tmp_path / "ex.jsonl"
    line = EXAMPLE.model_dump_json()
    examples.write_text(f"{line}\n{line}\n")
    with pytest.raises(DataError, match=r"ex.jsonl:2: id 'a' repeats line 1"):
        read_examples(examples)
    examples.write_text(line.replace('"hallu_spans"', '"hallu_span"') + "\n")
    with pytest.raises(DataError, match=r"ex.jsonl:1: unknown key 'hallu_span'"):
        read_examples(examples)
    with pytest.raises(DataError, match="is a folder"):
        read_predictions(tmp_path)


def _nested(depth: int) -> list:
    value: list = [1]
    for _ in range(depth):
        value = [value]
    return value


def test_detector_output_is_checked_before_it_is_journaled(tmp_path):
    good = Prediction(id="a", spans=[Span(start=12, end=17)])
    assert check_detector_prediction(good, EXAMPLE, "mine") is good
    cases = [
        (
            Prediction(id="a", step_scores=[0.5, math.nan]),
            "detector 'mine', example 'a': step_scores.1: expected a finite",
        ),
        (Prediction(id="a", spans=[Span(start=12, end=40)]), "predicted span [12, 40) ends past the response"),
        (Prediction(id="a", meta={"x": _nested(40)}), "nested deeper"),
    ]
    for pred, message in cases:
        with pytest.raises(DataError, match=re.escape(message)):
            check_detector_prediction(pred, EXAMPLE, "mine")
    with pytest.raises(DataError, match="for an id that was not asked for"):
        check_detector_prediction(Prediction(id="zzz"), None, "mine")

    class Bad(Detector):
        name = "bad"

        def detect(self, example):
            return Prediction(id=example.id, scores=[Span(start=0, end=2, score=1.0)], step_scores=[math.inf])

    journal = Journal(tmp_path / "predictions.jsonl")
    with pytest.raises(DataError, match="detector 'bad', example 'a': step_scores.0: expected a finite number"):
        run_predictions(Bad(), [EXAMPLE], journal)
    assert journal.read() == {}


def test_a_nan_span_score_is_refused_by_the_model():
    with pytest.raises(ValueError, match="finite number"):
        Span(start=0, end=1, score=math.nan)


def test_write_atomic_writes_into_a_fifo_instead_of_replacing_it(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    write_atomic(fifo, "hello\n")
    reader.join(timeout=10)
    assert received == ["hello\n"]
    assert fifo.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]
    # a regular file is still replaced atomically
    regular = tmp_path / "r.json"
    regular.write_text("old")
    write_atomic(regular, "new")
    assert regular.read_text() == "new"


def outcome(read):
    try:
        return "record", read().model_dump()
    except ValueError as err:
        return "error", str(err)


# Number literals as a file may hold them: plain, with exponents (some overflowing to infinity), long digit runs.
number_texts = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.builds(lambda m, e: f"{m}e{e}", st.integers(-9, 9), st.integers(-400, 400)),
    st.builds(lambda m, e: f"{m}.5E+{e}", st.integers(0, 9), st.integers(0, 400)),
    st.sampled_from(["1e999", "-1e999", "1" + "0" * 400 + ".0", "0.5", "-0.0"]),
)


@settings(max_examples=300, deadline=None)
@given(
    prediction_objects(),
    st.lists(number_texts, max_size=4),
    st.integers(0, 40),
    st.booleans(),
    st.text(alphabet='[]{}0123456789eE"\\ ', max_size=60),
)
def test_lines_cleared_without_a_walk_get_the_walked_verdict(obj, numbers, depth, as_score, decoy):
    # Any line: numbers written as text (infinite ones included) in meta or as a score, nested to any depth, beside
    # a string of brackets, digits, exponents, quotes and escapes (which neither nest nor overflow).
    meta = json.dumps(obj.get("meta", {}))[:-1].rstrip()
    nested = "[" * depth + ", ".join(numbers) + "]" * depth if depth else "0"
    text = json.dumps(decoy)
    meta = f'{meta}{", " if meta != "{" else ""}"numbers": [{", ".join(numbers)}], "nested": {nested}, "t": {text}}}'
    fields = {k: v for k, v in obj.items() if k != "meta"}
    if as_score and numbers:
        fields["scores"] = [{"start": 0, "end": 1, "score": 0}]
        body = json.dumps(fields).replace('"score": 0', f'"score": {numbers[0]}')
    else:
        body = json.dumps(fields)
    line = f'{body[:-1]}, "meta": {meta}}}\n'.encode()
    walked = outcome(lambda: parse_record(parse_json_line(line), Prediction, walk=True))
    assert outcome(lambda: parse_line(line, Prediction)) == walked


def _hides(line: bytes) -> bool:
    return may_hide_problems(line, line.translate(NUMBER_SHAPES))


def test_only_numbers_and_nesting_outside_strings_call_for_a_walk():
    # Annotator ids in hex ("8e62..."), texts with digits and brackets: nothing to walk for.
    many = ", ".join(f'{{"annotator": "a3ac{i}8e6249b7978617da5", "spans": [[{i}, {i + 1}]]}}' for i in range(40))
    assert _hides(f'{{"id": "x", "meta": {{"readings": [{many}]}}}}'.encode()) is False
    assert _hides(b'{"id": "x", "meta": {"t": "' + b"[" * 40 + b'1e999 10000000000000000000"}}') is False
    # Nesting, an exponent or a long digit run outside strings.
    assert _hides(b'{"id": "x", "meta": {"t": ' + b"[" * 40 + b"1" + b"]" * 40 + b"}}") is True
    assert _hides(b'{"id": "x", "meta": {"t": 1e999}}') is True
    assert _hides(b'{"id": "x", "meta": {"t": 10000000000000000000}}') is True
    assert _hides(b'{"id": "x\\"[[", "meta": {"t": 2E5}}') is True
    # A value orjson read holds no infinite number (it refuses one that overflows): only its nesting is in doubt.
    for line, deep in (
        (b'{"id": "x", "meta": {"t": 2E5}}', False),
        (b'{"t": ' + b"[" * 40 + b"1e5" + b"]" * 40 + b"}", True),
    ):
        assert may_hide_problems(line, line.translate(NUMBER_SHAPES), finite=True) is deep


def test_a_file_is_read_with_the_collector_paused_and_left_as_it_was(tmp_path, monkeypatch, command_line_settings):
    # Under the command line's process settings (a notebook's collector is its user's: nothing is paused there).
    import gc

    path = tmp_path / "examples.jsonl"
    rows = [Example(id=f"e{i}", task="qa", dataset="d", split="test", response="ab cd", hallu_spans=[]) for i in "12"]
    path.write_text("".join(r.model_dump_json() + "\n" for r in rows))
    seen = []
    reading = records.iter_records
    monkeypatch.setattr(records, "iter_records", lambda *a: (seen.append(gc.isenabled()), *reading(*a))[1:])
    enabled = gc.isenabled()
    try:
        gc.enable()
        assert read_examples(path) == rows and seen == [False] and gc.isenabled()
        gc.disable()
        assert read_examples(path) == rows and not gc.isenabled()
    finally:
        (gc.enable if enabled else gc.disable)()

"""Ids and names are one line of plain text: `shambench.schema.Name` refuses control characters, and every id or name
field of every model (the core's and the plugins', walked from the package, so a model added later is covered) is a
`Name`. Checked on the corpora: none of the 15,312 examples of the 14 sources in ../shared/data has a control
character in an id, task, dataset or split, so refusing them loses no row."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
import sys
import types
import typing

import pytest
from click.testing import CliRunner
from pydantic import AfterValidator, BaseModel

import shambench
from shambench.cli import main
from shambench.controls import IN_NAMES
from shambench.errors import DataError
from shambench.schema import Annotations, Example, Prediction, Reading, Span, plain_name

# A field holding an id or a name, by its name.
ID_OR_NAME = re.compile(
    r"(id|\w+_id|ids|name|\w+_name|names|dataset|datasets|task|tasks|split|partition|partitions|detector|annotator"
    r"|run|family)"
)
# Models whose id or name fields may hold other text, by module prefix, each with why: none (a source's raw rows
# too, so that a bad id is refused with the file and line it was read from).
NOT_NAMES: dict[str, str] = {}


def models() -> list[type[BaseModel]]:
    """Every pydantic model defined in the package and its plugins."""
    found: dict[str, type[BaseModel]] = {}
    for module in pkgutil.walk_packages(shambench.__path__, "shambench."):
        mod = importlib.import_module(module.name)
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if issubclass(cls, BaseModel) and cls.__module__ == mod.__name__:
                found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return list(found.values())


def texts(annotation, metadata=()) -> list[bool]:
    """For each text the annotation holds (alone, among None, in a list or a tuple; a dict's keys are made of names
    checked where they come from), whether `plain_name` checks it."""
    named = any(isinstance(m, AfterValidator) and m.func is plain_name for m in metadata)
    if annotation is str:
        return [named]
    if typing.get_origin(annotation) is typing.Annotated:
        inner = typing.get_args(annotation)[0]
        return [named or one for one in texts(inner, (*metadata, *annotation.__metadata__))]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, list, tuple):
        return [named or one for arg in typing.get_args(annotation) if arg is not Ellipsis for one in texts(arg)]
    return []


def test_every_id_or_name_field_of_every_model_is_a_name():
    walked = models()
    assert {Example, Prediction, Reading} <= set(walked)
    fields = {
        f"{cls.__module__}.{cls.__qualname__}.{name}": texts(field.annotation, field.metadata)
        for cls in walked
        if not any(cls.__module__.startswith(prefix) for prefix in NOT_NAMES)
        for name, field in cls.model_fields.items()
        if ID_OR_NAME.fullmatch(name)
    }
    fields = {where: checked for where, checked in fields.items() if checked}
    assert len(fields) > 40, fields  # the walk finds the models (the core's, the runs', the leaderboard's)
    others = [where for where, checked in fields.items() if not all(checked)]
    assert others == [], f"id or name fields not of type shambench.schema.Name: {others}"


@pytest.mark.parametrize(
    ("text", "shown"),
    [("a\nb", "U+000A at position 1"), ("\x1b[2J", "U+001B at position 0"), ("ok\u202e", "U+202E at position 2"),
     ("tab\there", "U+0009 at position 3"), ("\x85", "U+0085 at position 0"), ("del\x7f", "U+007F at position 3")],
)  # fmt: skip
def test_a_control_character_in_an_id_or_name_is_refused(text, shown):
    with pytest.raises(ValueError, match=re.escape(shown)):
        Example(id=text, task="summ", dataset="d", response="x")
    with pytest.raises(ValueError, match=re.escape(shown)):
        Prediction(id=text)
    assert Example(id="ragtruth/12 é 中", task="summ", dataset="d", response="x").id == "ragtruth/12 é 中"


def test_every_code_point_is_refused_exactly_when_it_is_a_control_character():
    # plain_name passes a printable value without its regex: the whole of Unicode, one character after two letters
    controls = re.compile(f"[{IN_NAMES}]")
    refused = []
    for code in range(sys.maxunicode + 1):
        try:
            plain_name("ab" + chr(code))
        except ValueError as err:
            assert str(err).startswith(f"U+{code:04X} at position 2: ")
            refused.append(code)
    assert refused == [code for code in range(sys.maxunicode + 1) if controls.match(chr(code))]
    assert len(refused) == 32 + 1 + 32 + 5 + 4


def test_an_annotator_named_with_a_control_character_is_refused_however_the_readings_are_made():
    with pytest.raises(ValueError, match="U\\+000A"):
        Annotations(readings=[Reading(annotator="a\nb")], rule="r")
    with pytest.raises(ValueError, match="U\\+000A"):  # leave_one_out builds its readings without validating
        Annotations.leave_one_out({"a\nb": [Span(start=0, end=1)], "c": []}, lambda lists: [], "r")


def test_a_source_row_with_such_an_id_is_one_error_naming_its_place(tmp_path):
    from shambench.data.benchmark import load_benchmark
    from tests.cli.test_data import FIXTURES

    (tmp_path / "mushroom").mkdir()
    for path in (FIXTURES / "mushroom").iterdir():
        lines = path.read_text().splitlines()
        row = json.loads(lines[1])
        lines[1] = json.dumps({**row, "id": row["id"] + "\n\x1b[2J"})
        (tmp_path / "mushroom" / path.name).write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as caught:  # the adapter's SourceError, in what load_benchmark says
        load_benchmark("mushroom", data_dir=tmp_path)
    where = tmp_path / "mushroom" / "mushroom.en-tst.v1.extra.jsonl"
    assert f"mushroom: {where}:2: id: U+000A at position " in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_prediction_file_with_such_an_id_is_one_error_line_with_its_line(tmp_path):
    from tests.cli.test_run_integrity import examples_file

    examples = examples_file(tmp_path / "ex.jsonl", 2)
    preds = tmp_path / "pred.jsonl"
    preds.write_text('{"id": "toy/0", "spans": []}\n{"id": "toy/1\\n\\u001b[2J", "spans": []}\n')
    res = CliRunner().invoke(main, ["score", "--examples", str(examples), "--predictions", str(preds)])
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [
        f"error: {preds}:2: id: U+000A at position 5: an id or a name holds no control character (it would be a "
        "line break or an escape sequence wherever it is shown)"
    ]

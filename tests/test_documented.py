"""A model's field docstrings describe its JSON Schema, read when the schema is made: the same schema as
pydantic's `use_attribute_docstrings`, and nothing read when the class is made."""

from __future__ import annotations

import subprocess
import sys

import pydantic._internal._fields as pydantic_fields
from pydantic import BaseModel, ConfigDict

from shambench.documented import DOCUMENTED, described_fields


def _models(config: ConfigDict) -> type[BaseModel]:
    """A model and a subclass that redeclares one field without a docstring and adds one, under `config`."""

    class Base(BaseModel):
        model_config = config

        x: int
        """The x,
        on two lines."""
        y: int = 0
        """The y."""

    class Child(Base):
        y: int = 1
        z: str | None = None
        """The z."""
        base: Base | None = None
        """A nested model."""

    return Child


def test_the_schema_is_pydantics_own_from_the_docstrings():
    ours = _models(DOCUMENTED).model_json_schema()
    assert ours == _models(ConfigDict(use_attribute_docstrings=True)).model_json_schema()
    described = {name: prop.get("description") for name, prop in ours["properties"].items()}
    assert described == {"x": "The x,\non two lines.", "y": None, "z": "The z.", "base": "A nested model."}
    assert ours["$defs"]["Base"]["properties"]["y"]["description"] == "The y."


def test_no_docstring_is_read_when_the_class_is_made(monkeypatch):
    read = []
    monkeypatch.setattr(pydantic_fields, "extract_docstrings_from_cls", lambda cls, **_: read.append(cls) or {})
    assert _models(DOCUMENTED).model_fields["z"].description is None and read == []
    _models(ConfigDict(use_attribute_docstrings=True))
    assert len(read) == 2  # what it replaces: one extraction per class made


def test_described_fields_are_pydantics_own_and_leave_the_model_as_it_is():
    ours, theirs = _models(DOCUMENTED), _models(ConfigDict(use_attribute_docstrings=True))
    described = described_fields(ours)
    assert {n: f.description for n, f in described.items()} == {
        n: f.description for n, f in theirs.model_fields.items()
    }
    assert described["x"].description == "The x,\non two lines." and described["y"].description is None
    assert described["x"] is not ours.model_fields["x"] and ours.model_fields["x"].description is None
    assert described["x"].default is ours.model_fields["x"].default


def test_a_command_without_run_options_reads_no_docstring_of_the_run_models():
    # A fresh interpreter: `score` imports the run's spec, selection and config models and results.json's; none of
    # them reads a field docstring when made (pydantic's extraction tokenizes each class's source).
    code = (
        "import pydantic._internal._fields as f, pydantic._internal._docs_extraction as d\n"
        "read = []\n"
        "real = d.extract_docstrings_from_cls\n"
        "f.extract_docstrings_from_cls = d.extract_docstrings_from_cls = lambda c, **k: read.append(c) or real(c, **k)\n"
        "import shambench.cli.score, shambench.runs.rundir, shambench.runs.spec, shambench.scoring.results\n"
        "print([c.__qualname__ for c in read if c.__module__.startswith('shambench')])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"

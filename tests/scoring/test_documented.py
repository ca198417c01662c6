"""A results model's field docstrings describe its JSON Schema, read when the schema is made: the same schema as
pydantic's `use_attribute_docstrings`, and nothing read when the class is made."""

from __future__ import annotations

import pydantic._internal._fields as pydantic_fields
from pydantic import BaseModel, ConfigDict

from shambench.scoring.documented import DOCUMENTED


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

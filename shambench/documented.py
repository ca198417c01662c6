"""The docstring under each field of a model, read when it is needed: as its description in the JSON Schema when
the schema is made (`DOCUMENTED`), and as the command line's help of a run's options when the CLI makes them
(`described_fields`).

pydantic's `use_attribute_docstrings` reads them when the class is made: below Python 3.13 it finds each class's
source from the frame defining it, then tokenizes and parses it, at import and in every process (0.09 G of the 6.65 G
instructions of a warm 6k `score` for the results models, which reads no description; 0.04 G more for the run's
spec and selection models). The models here read them with pydantic's own extraction, once per class and process.
"""

from __future__ import annotations

import copy
import functools
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

# pydantic's extraction, the one `use_attribute_docstrings` uses (there is no public name for it).
from pydantic._internal._docs_extraction import extract_docstrings_from_cls

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo


@functools.cache
def field_docstrings(model: type[BaseModel]) -> dict[str, str]:
    """The docstring under each field of the model, in the class that last declares it (as the field itself is
    inherited: a field redeclared without a docstring has none)."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if issubclass(cls, BaseModel) and cls is not BaseModel:
            own = set(getattr(cls, "__annotations__", {}))
            docs = {k: v for k, v in docs.items() if k not in own} | extract_docstrings_from_cls(cls, use_inspect=True)
    return docs


def described_fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """The model's fields, each with its docstring as its description where it has none (copies: the model's own
    fields are left as they are), as `use_attribute_docstrings` would have made them."""
    docs = field_docstrings(model)
    fields = {}
    for name, info in model.model_fields.items():
        if info.description is None and name in docs:
            info = copy.copy(info)
            info.description = docs[name]
        fields[name] = info
    return fields


def _described(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """Gives each property of the model's JSON Schema that has no description the docstring under its field."""
    docs = field_docstrings(model)
    for name, prop in schema.get("properties", {}).items():
        if name in docs and "description" not in prop:
            prop["description"] = docs[name]


DOCUMENTED = ConfigDict(json_schema_extra=_described)
"""The config of a documented model: its field docstrings describe its JSON Schema (`DOCUMENTED | ConfigDict(...)`)."""

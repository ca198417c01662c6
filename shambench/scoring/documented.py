"""The docstring under each field of a results model, as its description in the JSON Schema, read when the schema
is made.

pydantic's `use_attribute_docstrings` reads them when the class is made: below Python 3.13 it finds each class's
source from the frame defining it, then tokenizes and parses it, at import and in every process (0.09 G of the 6.65 G
instructions of a warm 6k `score`, which reads no description). The results models are described only in their
JSON Schema (`shambench.leaderboard.schema`), so they read the docstrings there, with pydantic's own extraction.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

# pydantic's extraction, the one `use_attribute_docstrings` uses (there is no public name for it).
from pydantic._internal._docs_extraction import extract_docstrings_from_cls


def _described(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """Gives each property of the model's JSON Schema that has no description the docstring under its field (in
    the class that last declares it, as the field itself is inherited)."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if issubclass(cls, BaseModel) and cls is not BaseModel:
            own = set(getattr(cls, "__annotations__", {}))
            docs = {k: v for k, v in docs.items() if k not in own} | extract_docstrings_from_cls(cls, use_inspect=True)
    for name, prop in schema.get("properties", {}).items():
        if name in docs and "description" not in prop:
            prop["description"] = docs[name]


DOCUMENTED = ConfigDict(json_schema_extra=_described)
"""The config of a results model: its field docstrings describe its JSON Schema (`DOCUMENTED | ConfigDict(...)`)."""

"""`file:PATH`: evidence from a JSONL file of `{"id", "context"}` lines (how a group shares the exact evidence)."""

from __future__ import annotations

from pathlib import Path

from shambench.data.context import ContextProvider, ContextRecord, content_hash, context_provider
from shambench.errors import DataError
from shambench.io import iter_jsonl
from shambench.schema import Example


class FileProvider(ContextProvider):
    """Looks each example id up in a JSONL file; optional `source_urls` per line are kept."""

    def __init__(self, path: str):
        if not path:
            raise DataError("the file provider needs a path: --context file:EVIDENCE.jsonl")
        self.path = Path(path)
        self.records: dict[str, tuple[str, list[str]]] = {}
        for lineno, obj in iter_jsonl(self.path):
            if not isinstance(obj.get("id"), str) or not isinstance(obj.get("context"), str):
                raise DataError(f'{self.path}:{lineno}: expected {{"id": str, "context": str}}')
            self.records[obj["id"]] = (obj["context"], list(obj.get("source_urls") or []))
        self.file_hash = content_hash(self.path.read_text(encoding="utf-8"))

    def params(self) -> dict:
        return {"file_sha256": self.file_hash}

    def fetch_one(self, example: Example) -> ContextRecord:
        if example.id not in self.records:
            return self.record(example, error=f"no line with this id in {self.path}")
        text, urls = self.records[example.id]
        return self.record(example, text, source_urls=urls)


@context_provider("file")
def file_provider(path: str = "") -> ContextProvider:
    """Evidence from a JSONL file of {id, context} lines: `--context file:PATH`."""
    return FileProvider(path)

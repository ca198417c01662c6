"""Evidence for examples without a source document: context providers and the store of what they found.

A provider turns examples into `ContextRecord`s. Records are appended to a JSONL store in the shambench cache
(`<cache>/contexts/<provider>-<params hash>.jsonl`), keyed by example id, each with its provenance, so a re-run
fetches only the ids without a successful record and a run can state exactly which evidence it was scored with.
A failed fetch is recorded with its reason and leaves that example's context empty.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from shambench.detection.detector import Monitor
from shambench.io import Journal
from shambench.paths import cache_dir
from shambench.provenance import now_iso
from shambench.registry import Registry
from shambench.schema import Example, Model, Name

providers: Registry[ContextProvider] = Registry(
    "context provider", "shambench.context_providers", "shambench.data.providers", listing="shambench list providers"
)
context_provider = providers.register


def content_hash(text: str) -> str:
    """SHA-256 of a context's text."""
    return hashlib.sha256(text.encode()).hexdigest()


class ContextRecord(Model):
    """The evidence one provider found for one example, with where it came from."""

    id: Name
    """The example id."""
    context: str = ""
    """The evidence text; empty when the fetch failed."""
    provider: str
    """Provider spec that produced it (`NAME` or `NAME:ARG`)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Provider parameters that shape the evidence."""
    source_urls: list[str] = Field(default_factory=list)
    """Where the text was taken from."""
    retrieved_at: str = Field(default_factory=now_iso)
    """UTC retrieval time."""
    content_hash: str = ""
    """SHA-256 of `context`."""
    error: str | None = None
    """Why no evidence could be had (missing page, timeout, refusal, ...)."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Provider extras, e.g. usage and cost of an LLM retrieval."""

    def model_post_init(self, _context: Any) -> None:
        if self.context and not self.content_hash:
            self.content_hash = content_hash(self.context)


class ContextProvider:
    """Base class of context providers: override `fetch_one`, or `fetch` for batched or concurrent retrieval."""

    name: str = "custom"
    """Registered spec, set by `create_provider`."""

    def params(self) -> dict[str, Any]:
        """Parameters that shape the evidence (part of the store key; never secrets)."""
        return {}

    def fetch_one(self, example: Example) -> ContextRecord:
        """The evidence for one example."""
        raise NotImplementedError(f"{type(self).__name__} must implement fetch_one() or fetch()")

    def fetch(self, examples: Sequence[Example], monitor: Monitor | None = None) -> Iterator[ContextRecord]:
        """Records for the examples, yielded as they are ready."""
        for example in examples:
            yield self.fetch_one(example)

    def close(self) -> None:
        """Release clients or servers."""

    def record(self, example: Example, context: str = "", error: str | None = None, **kw: Any) -> ContextRecord:
        """A record of this provider for an example."""
        return ContextRecord(
            id=example.id, context=context, provider=self.name, params=self.params(), error=error, **kw
        )


def create_provider(spec: str, **params: Any) -> ContextProvider:
    """A provider from `NAME` or `NAME:ARG` (e.g. `file:evidence.jsonl`)."""
    name, _, arg = spec.partition(":")
    entry = providers.get(name)
    provider = entry.factory(arg, **params) if arg else entry.factory(**params)
    provider.name = spec
    return provider


class ContextStore:
    """The append-only journal of one provider configuration's records."""

    def __init__(self, provider: ContextProvider, root: Path | None = None):
        key = json.dumps([provider.name, provider.params()], sort_keys=True, default=str)
        slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in provider.name.partition(":")[0])
        self.path = (root or cache_dir() / "contexts") / f"{slug}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.jsonl"

    def read(self) -> dict[str, ContextRecord]:
        """The last record per example id."""
        return Journal(self.path, ContextRecord).read()

    def append(self, records: Iterator[ContextRecord]) -> dict[str, int]:
        """Append records as they arrive (each flushed at once); counts of fetched and failed."""
        counts = {"fetched": 0, "failed": 0}
        with Journal(self.path, ContextRecord).appender() as append:
            for rec in records:
                append(rec)
                counts["failed" if rec.error else "fetched"] += 1
        return counts


def add_context(
    provider: ContextProvider, examples: Sequence[Example], monitor: Monitor | None = None, root: Path | None = None
) -> dict[str, int]:
    """Fetch evidence for the examples that have no successful record yet; counts of fetched, failed, cached."""
    store = ContextStore(provider, root)
    have = {i for i, r in store.read().items() if r.error is None}
    todo = [ex for ex in examples if ex.id not in have]
    monitor = monitor or Monitor()

    def tracked() -> Iterator[ContextRecord]:
        for rec in provider.fetch(todo, monitor):
            monitor.done(rec)
            yield rec

    counts = store.append(tracked()) if todo else {"fetched": 0, "failed": 0}
    return {**counts, "cached": len(examples) - len(todo)}


def with_context(
    examples: Sequence[Example], provider: ContextProvider, root: Path | None = None
) -> tuple[list[Example], dict[str, dict[str, Any]]]:
    """Examples with the provider's evidence as context, and per partition which evidence that was.

    Evidence goes only to open-domain examples (those whose source gives no context); an example that has its
    own source document keeps it. An open-domain example without a successful record keeps an empty context.
    The per-partition record holds the provider, its parameters, counts, and one hash over the
    (id, content hash) pairs of the evidence used.
    """
    records = ContextStore(provider, root).read()
    out: list[Example] = []
    parts: dict[str, dict[str, Any]] = {}
    for ex in examples:
        part = parts.setdefault(ex.partition, {"pairs": [], "missing": 0, "failed": 0, "own": 0})
        if ex.context:
            out.append(ex)
            part["own"] += 1
            continue
        rec = records.get(ex.id)
        good = rec if rec is not None and rec.error is None else None
        out.append(ex.model_copy(update={"context": good.context if good is not None else ""}))
        part["pairs"].append((ex.id, good.content_hash if good is not None else ""))
        if rec is None:
            part["missing"] += 1
        elif rec.error:
            part["failed"] += 1
    provenance = {
        name: {
            "provider": provider.name,
            "params": provider.params(),
            "n_with_context": sum(1 for _, h in p["pairs"] if h),
            "n_missing": p["missing"],
            "n_failed": p["failed"],
            "n_own_context": p["own"],
            "content_hash": hashlib.sha256(json.dumps(sorted(p["pairs"])).encode()).hexdigest(),
        }
        for name, p in parts.items()
    }
    return out, provenance


def evidence_gaps(provenance: dict[str, dict[str, Any]]) -> str | None:
    """A warning when open-domain examples went without evidence (failed or never fetched), per partition."""
    parts = [
        f"{name}: {p['n_failed']} failed, {p['n_missing']} not fetched"
        for name, p in sorted(provenance.items())
        if p.get("n_failed") or p.get("n_missing")
    ]
    if not parts:
        return None
    return (
        "some examples have no evidence and were judged without it (" + "; ".join(parts) + "); a new run with "
        "the same --context fetches the failed ones again"
    )


def apply_context(
    spec: str, examples: Sequence[Example], params: dict[str, Any] | None = None, monitor: Monitor | None = None
) -> tuple[list[Example], dict[str, dict[str, Any]]]:
    """Fetch what the provider `spec` (with `params`) has not stored yet for open-domain examples, then the
    examples with its evidence and the provenance (see `with_context`)."""
    provider = create_provider(spec, **(params or {}))
    try:
        add_context(provider, [ex for ex in examples if not ex.context], monitor)
    finally:
        provider.close()
    return with_context(examples, provider)


def stored_context(
    spec: str, examples: Sequence[Example], params: dict[str, Any] | None = None
) -> tuple[list[Example], dict[str, dict[str, Any]]]:
    """Like `apply_context`, from the evidence already stored only: the provider fetches nothing."""
    provider = create_provider(spec, **(params or {}))
    try:
        return with_context(examples, provider)
    finally:
        provider.close()

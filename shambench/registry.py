"""Name → factory registries for plugins (detectors, adapters, context providers).

A plugin is a factory function registered under a name with a decorator; the factory imports anything heavy
inside its body, so listing plugins never imports torch. Built-in plugins are the public modules of one package
(`shambench.detectors`, `shambench.adapters`), all imported on first use; third-party packages add theirs through an entry-point group (e.g. `shambench.detectors`),
scanned when a name is not built in. Built-ins win name clashes with installed plugins; two built-ins of one
name are an error (NameClashError), raised when the second registers.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import pkgutil
import re
import sys
import threading
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from shambench.errors import NameClashError, ParameterError, UnknownPluginError, described

T = TypeVar("T")


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A registered plugin: its name, factory and the one-line description shown by `shambench list`."""

    name: str
    factory: Callable[..., T]
    description: str
    origin: str
    info: dict[str, Any] = field(default_factory=dict)


def name_problem(name: str) -> str | None:
    """What makes `name` unusable as a plugin or row name (shown in terminals, compared as given), or None: empty,
    leading or trailing whitespace, or a character that is not printable (ANSI escapes, newlines, ...)."""
    if not name.strip():
        return "is empty"
    if name != name.strip():
        return "has leading or trailing whitespace"
    if not name.isprintable():
        return "contains control characters"
    return None


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if (doc or "").strip() else ""


def _one_line(text: str, limit: int = 300) -> str:
    """`text` with its white space runs folded to single spaces and cut to `limit` characters (a plugin's error
    message may span lines or be long)."""
    folded = " ".join(text.split())
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"


# The installed packages' entry points, all groups, with the sys.path they were found on: listing them reads every
# installed package's metadata whatever the group asked for, so the registries (sources, formats, detectors...) share
# one listing per process, listed again only where sys.path changed.
_installed: dict[tuple[str, ...], Any] = {}  # SelectableGroups before Python 3.12, EntryPoints from it
_installed_lock = threading.Lock()


def installed_entry_points(group: str) -> list[metadata.EntryPoint]:
    """The entry points of `group` among the packages installed on sys.path."""
    where = tuple(sys.path)
    with _installed_lock:
        if where not in _installed:
            _installed.clear()
            _installed[where] = metadata.entry_points()
        listed = _installed[where]
    return list(listed.select(group=group))


def _builtin(origin: str) -> bool:
    return origin.startswith("shambench.")


def _qualname(factory: Callable) -> str:
    # A partial (a preset's factory) has no name of its own: the function it wraps names it.
    target = factory.func if isinstance(factory, functools.partial) else factory
    return getattr(target, "__qualname__", type(target).__name__)


class Registry(Generic[T]):
    """A thread-safe registry of plugin factories of one kind."""

    def __init__(self, kind: str, group: str, builtin_package: str, listing: str | None = None):
        self.kind = kind
        self.listing = listing or f"shambench list {kind}s"
        """The command that lists the registered names (named when an unknown one is asked for)."""
        self.group = group
        self.builtin_package = builtin_package
        self._entries: dict[str, Entry[T]] = {}
        self._lock = threading.RLock()
        self._builtins_loaded = False
        self._entry_points_loaded = False
        self._broken: dict[str, str] = {}

    def register(self, name: str, description: str | None = None, **info: Any) -> Callable:
        """Decorator: register the factory under `name` (description defaults to its docstring's first line)."""

        def decorate(factory: Callable[..., T]) -> Callable[..., T]:
            self.add(name, factory, description or _first_line(factory.__doc__), factory.__module__, **info)
            return factory

        return decorate

    def add(self, name: str, factory: Callable[..., T], description: str, origin: str, **info: Any) -> None:
        """Register a factory directly (used for data-driven plugins such as presets)."""
        if problem := name_problem(name):
            raise ValueError(f"cannot register {self.kind} {name!r}: {problem}")
        with self._lock:
            existing = self._entries.get(name)
            if existing and _builtin(existing.origin):
                if not _builtin(origin):
                    return
                if (existing.origin, _qualname(existing.factory)) != (origin, _qualname(factory)):
                    raise NameClashError(
                        f"{self.kind} {name!r} is registered twice among the built-ins: by "
                        f"{existing.origin}:{_qualname(existing.factory)} and {origin}:{_qualname(factory)}"
                    )
            self._entries[name] = Entry(name, factory, description, origin, info)

    def _load_builtins(self) -> None:
        with self._lock:
            if self._builtins_loaded:
                return
            self._builtins_loaded = True
            package = importlib.import_module(self.builtin_package)
            for info in pkgutil.iter_modules(package.__path__):
                if not info.name.startswith("_"):
                    importlib.import_module(f"{self.builtin_package}.{info.name}")

    def _load_entry_points(self) -> None:
        with self._lock:
            if self._entry_points_loaded:
                return
            self._entry_points_loaded = True
            for ep in installed_entry_points(self.group):
                if ep.name in self._entries:
                    continue
                try:
                    obj = ep.load()
                    if ep.name not in self._entries:
                        self.add(ep.name, obj, _first_line(getattr(obj, "__doc__", "")), ep.value)
                except KeyboardInterrupt:
                    raise
                # One broken third-party package must not take the others, or the command, down: not even one
                # that calls sys.exit() or raises another BaseException while it is imported.
                except BaseException as err:
                    self._broken[ep.name] = _one_line(f"{ep.value}: {described(err)}")

    def broken(self) -> dict[str, str]:
        """Installed plugins that failed to load, by name: where each points and why it failed, on one line."""
        self._load_entry_points()
        with self._lock:
            return dict(sorted(self._broken.items()))

    def entries(self) -> list[Entry[T]]:
        """Every plugin, built-in and installed, sorted by name (factories are not called)."""
        self._load_builtins()
        self._load_entry_points()
        with self._lock:
            return sorted(self._entries.values(), key=lambda e: e.name)

    def get(self, name: str) -> Entry[T]:
        """The entry for `name`; entry points are scanned only when it is not built in. Only the canonical
        spelling is found: `overlap ` is not another name for `overlap` (runs record the name as given)."""
        self._load_builtins()
        if problem := name_problem(name):
            canonical = " ".join(name.split())
            with self._lock:
                known = canonical in self._entries
            raise UnknownPluginError(
                f"{self.kind} name {name!r} {problem}" + (f"; did you mean {canonical!r}?" if known else "")
            )
        with self._lock:
            if name in self._entries:
                return self._entries[name]
        self._load_entry_points()
        with self._lock:
            if name in self._entries:
                return self._entries[name]
            if name in self._broken:
                raise UnknownPluginError(f"{self.kind} {name!r} is installed but failed to load ({self._broken[name]})")
            names = list(self._entries)
        suggestion = did_you_mean(name, names)
        raise UnknownPluginError(f"unknown {self.kind} {name!r}{suggestion} (see `{self.listing}`)")

    def create(self, name: str, **params: Any) -> T:
        """Call the factory of `name` with the given parameters."""
        return self.get(name).factory(**params)


def did_you_mean(wanted: str, known: Iterable[str], n: int = 3, cutoff: float = 0.5) -> str:
    """`; did you mean 'a' or 'b'?` naming the closest of `known` to a mistyped name; empty when none is close."""
    close = difflib.get_close_matches(wanted, list(known), n=n, cutoff=cutoff)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


@dataclass(frozen=True)
class Parameter:
    """One parameter of a plugin factory, as `shambench list detectors NAME` shows it."""

    name: str
    type: str
    default: str
    help: str


def _docstring_help(doc: str | None) -> dict[str, str]:
    """`name -> text` from an `Args:` (or `Parameters:`) section of a docstring: lines `name: text` or
    `name (type): text`, continued on more-indented lines."""
    helps: dict[str, str] = {}
    in_args, current = False, None
    for raw in (doc or "").splitlines():
        line = raw.strip()
        if line.rstrip(":").lower() in ("args", "arguments", "parameters", "params"):
            in_args, current = True, None
            continue
        if not in_args:
            continue
        if not line:
            current = None
            continue
        match = re.match(r"^\*{0,2}(\w+)(?:\s*\([^)]*\))?\s*:\s*(.*)$", line)
        if match:
            current = match.group(1)
            helps[current] = match.group(2)
        elif current:
            helps[current] += " " + line
        else:
            in_args = False
    return helps


def _type_hints(factory: Callable) -> dict[str, Any]:
    target = factory.func if isinstance(factory, functools.partial) else factory
    try:
        return typing.get_type_hints(target)
    except Exception:  # an annotation that cannot be resolved only costs the type check
        return {}


def factory_parameters(factory: Callable) -> tuple[list[Parameter], bool]:
    """The keyword parameters of a factory (name, type, default, help from its docstring), and whether it also
    takes more (`**params`) that it hands on."""
    target = factory.func if isinstance(factory, functools.partial) else factory
    helps = _docstring_help(target.__doc__)
    hints = _type_hints(factory)
    out, more = [], False
    for p in inspect.signature(factory).parameters.values():
        if p.kind is p.VAR_KEYWORD:
            more = True
            continue
        if p.kind is p.VAR_POSITIONAL:
            continue
        hint = hints.get(p.name, p.annotation)
        type_name = "" if hint is inspect.Parameter.empty else _type_name(hint)
        default = "required" if p.default is inspect.Parameter.empty else repr(p.default)
        out.append(Parameter(p.name, type_name, default, helps.get(p.name, "")))
    return out, more


def _type_name(hint: Any) -> str:
    if isinstance(hint, str):
        return hint
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "")


def _described(params: list[Parameter]) -> str:
    return ", ".join(f"{p.name} ({p.type or 'any'}, default {p.default})" for p in params)


def checked_params(kind: str, name: str, factory: Callable, params: dict[str, Any]) -> dict[str, Any]:
    """`params` converted to the factory's annotated types; ParameterError names a parameter the factory does
    not take (with the valid ones) or a value that is not of its type."""
    declared, more = factory_parameters(factory)
    by_name = {p.name: p for p in declared}
    hints = _type_hints(factory)
    out = dict(params)
    for key, value in params.items():
        if key not in by_name:
            if more:
                continue
            suggestion = did_you_mean(key, by_name, n=1)
            takes = f"its parameters: {_described(declared)}" if declared else "it takes none"
            raise ParameterError(
                f"{kind} {name!r} has no parameter {key!r}{suggestion} ({takes}; see `shambench list {kind}s {name}`)"
            )
        if key in hints:
            try:
                out[key] = TypeAdapter(hints[key]).validate_python(value)
            except ValidationError:
                raise ParameterError(
                    f"{kind} {name!r}: parameter {key}={value!r} is not of type {by_name[key].type} "
                    f"(its parameters: {_described(declared)})"
                ) from None
    return out

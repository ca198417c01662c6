"""Optional dependencies: a module that only one of shambench's extras installs, imported with an error that
names the extra to install when it is missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from shambench.errors import MissingExtra


def install_command(extra: str) -> str:
    """The pip command that installs one extra of shambench (from a checkout, `pip install -e '.[extra]'`)."""
    return f"pip install 'shambench[{extra}]'"


def import_extra(module: str, extra: str, needed_by: str) -> ModuleType:
    """`module`, imported; a MissingExtra naming `extra` and the command that installs it when the module cannot
    be imported. `needed_by` says what needs it, in the user's terms (e.g. "shambench optimize (MIPROv2)")."""
    try:
        return importlib.import_module(module)
    except ImportError as err:  # absent, or present but broken (a missing dependency of its own)
        raise MissingExtra(
            f"{needed_by} needs the '{extra}' extra, which is not installed ({err}): {install_command(extra)}, "
            f"or pip install -e '.[{extra}]' in a checkout",
            extra=extra,
        ) from None

"""Options shared by several subcommands."""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic.fields import FieldInfo
    from rich.console import Console

    from shambench.runs.spec import RunSpec
    from shambench.selection_fields import Flag

F = TypeVar("F", bound=Callable[..., Any])


class OutputFolder(click.Path):
    """A folder a command writes its outputs into (`--out DIR`): a new or empty folder, or one holding the mark
    that command leaves in the folders it writes (`marker_of`; an earlier output of it, rewritten). A folder
    holding anything else is someone else's (`--out docs`, `--out .`), whose files of the same names would be
    overwritten, whatever they are named: an error naming what it holds, before anything is read. The mark is
    left when the command ends, once it has written something there (also when it failed part way: what is
    there is its own). A link is left to the filesystem gate, which refuses it."""

    def __init__(self) -> None:
        super().__init__(file_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from shambench.cli.exits import UserError
        from shambench.errors import FolderError
        from shambench.fs import entries, marked

        if ctx is None:
            raise TypeError("an output folder belongs to a command: convert it with the command's context")
        path = Path(os.path.abspath(os.fsdecode(super().convert(value, param, ctx))))
        command, marker = marker_of(ctx)
        try:
            held = [name for name in entries(path, path.parent) if name != marker]
            ours = marked(path, path.parent, marker)
        except FolderError as err:
            raise UserError(str(err)) from None
        if held and not ours:
            shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
            raise UserError(
                f"{value} holds {shown} and no {marker} (the mark `{command}` leaves in the folders it writes): "
                "give a new or empty folder, or one this command wrote before"
            )
        ctx.call_on_close(lambda: _leave_mark(path, marker))
        return value


def marker_of(ctx: click.Context) -> tuple[str, str]:
    """The command of `ctx` (`data export`) and the name of the mark it leaves in its output folders."""
    names = []
    while ctx.parent is not None:
        names.append(ctx.info_name or ctx.command.name or "")
        ctx = ctx.parent
    command = " ".join(reversed(names))
    return command, ".shambench-" + command.replace(" ", "-")


def _leave_mark(folder: Path, marker: str) -> None:
    from shambench.errors import FolderError
    from shambench.fs import entries, mark, marked

    # Nothing written there (the command stopped first), nothing to claim; a mark the disk refuses (the command
    # has said why its own writes failed) only means that a rerun asks for another folder.
    with suppress(FolderError):
        if entries(folder, folder.parent) and not marked(folder, folder.parent, marker):
            mark(folder, folder.parent, marker)


def _checked_base_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A --base-url without credentials (the check `shambench.llm.endpoint.check_base_url` makes), as a usage error."""
    from shambench.errors import EndpointError
    from shambench.llm.endpoint import check_base_url

    try:
        return check_base_url(value)
    except EndpointError as err:
        raise click.BadParameter(str(err).removeprefix("--base-url ").removeprefix("--base-url: ")) from None


class Duration(click.ParamType):
    """A length of time as a number with a unit, `s`, `m` or `h` (hours when none), converted to seconds."""

    name = "duration"
    UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, int | float):
            return float(value)
        text = str(value).strip().lower()
        number, unit = (text[:-1], text[-1]) if text[-1:] in self.UNITS else (text, "h")
        try:
            seconds = float(number) * self.UNITS[unit]
        except ValueError:
            self.fail(f"expected a duration such as 90m, 26h or 3600s, got {value!r}", param, ctx)
        if not seconds > 0 or seconds == float("inf"):
            self.fail(f"expected a positive duration, got {value!r}", param, ctx)
        return seconds


DURATION = Duration()


def base_url_option(func: F) -> F:
    """--base-url: an OpenAI-compatible server; refused when it carries credentials (user:password@)."""
    return field_option("base_url")(func)


def api_key_env_option(func: F) -> F:
    """--api-key-env: the environment variable holding the API key (never named by a file)."""
    return field_option("api_key_env")(func)


def data_dir_option(func: F) -> F:
    """--data-dir: where the corpora are."""
    return field_option("data_dir")(func)


def no_data_hint(root: Path) -> str:
    """What to do when no source is present in the data folder `root`: it does not exist, it is empty, or it is the
    folder above the data (`../shared` for `../shared/data`, named)."""
    from shambench.data.adapter import DATA_DIR_ENV
    from shambench.data.benchmark import data_folder_below

    below = data_folder_below(root) if root.is_dir() else None
    where = f"none is present in {root}" if root.exists() else f"{root} does not exist"
    hint = f"{below[0]} holds some: pass --data-dir {below[0]}" if below else "point at a folder that holds them"
    return f"{where}: {hint} (or set ${DATA_DIR_ENV}), or fetch them with `shambench data download`"


def split_option(func: F) -> F:
    """--split: which split of the adapters' data."""
    return field_option("split")(func)


def datasets_option(func: F) -> F:
    """--datasets/-d: which sources (default: the SHAM-Bench sources present)."""
    return field_option("datasets")(func)


class SuiteChoice(click.ParamType):
    """`--suite NAME`: one of the suites the registered sources declare (`shambench.sources.selections`), checked
    when given; `--help` does not list them, since reading them imports every adapter."""

    name = "suite"

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "SUITE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from shambench.sources import selections

        known = selections()
        if value not in known:
            self.fail(f"{value!r} is not a suite (the registered sources declare: {', '.join(known)})", param, ctx)
        return str(value)

    def shell_complete(self, ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        from click.shell_completion import CompletionItem

        from shambench.sources import selections

        return [CompletionItem(name) for name in selections() if name.startswith(incomplete)]


def suite_option(help: str) -> Callable[[F], F]:
    """--suite: a named selection of datasets instead of --datasets (`shambench.sources.selections`)."""
    return click.option("--suite", type=SuiteChoice(), help=help)


def spec_fields(spec: type[RunSpec] | None = None, described: bool = True) -> dict[str, tuple[str | None, FieldInfo]]:
    """Every field of a run's spec by name, with its section (None: a field of the spec itself), in the order the
    help lists them: the spec's own, then each section's in declaration order (those it inherits first). With
    `described`, each field has its docstring as its description (`shambench.documented.described_fields`, which
    reads the models' source); an option's flag, type and default need only the fields themselves."""
    from shambench.documented import described_fields
    from shambench.runs.spec import RunSpec

    spec = spec or RunSpec
    fields_of = described_fields if described else lambda model: model.model_fields
    sections = spec.sections()
    fields: dict[str, tuple[str | None, FieldInfo]] = {
        name: (None, info) for name, info in fields_of(spec).items() if name not in sections
    }
    for section, model in sections.items():
        fields.update({name: (section, info) for name, info in fields_of(model).items()})
    return fields


def field_help(info: FieldInfo, fields: dict[str, tuple[str | None, FieldInfo]]) -> str:
    """A field's docstring as an option's help: the other fields it names in backquotes given as their flags."""
    flag = _flag(info)
    text = (flag.help if flag and flag.help else info.description) or ""
    return re.sub(
        r"`(\w+)`", lambda m: flag_of(m[1], fields[m[1]][1]) if m[1] in fields else m[0], " ".join(text.split())
    )


def flags_in(message: str) -> str:
    """A message of the core's with the run options it names in backquotes (`limit`) given as their flags
    (--limit): what the command line shows."""
    fields = spec_fields(described=False)
    return re.sub(r"`(\w+)`", lambda m: flag_of(m[1], fields[m[1]][1]) if m[1] in fields else m[0], message)


def flag_of(name: str, info: FieldInfo) -> str:
    """The command line's flag of a field: its `Flag.name`, else its name with dashes."""
    flag = _flag(info)
    return flag.name if flag and flag.name else "--" + name.replace("_", "-")


def _flag(info: FieldInfo) -> Flag | None:
    from shambench.selection_fields import Flag

    return next((m for m in info.metadata if isinstance(m, Flag)), None)


class FieldOption(click.Option):
    """The option of a run spec's field: its help, the field's docstring (`field_help`), is made when first read
    (a help page, the docs), not when the command is made: reading docstrings parses the models' source, which a
    command run with its options never needs."""

    _help: str | None

    def __init__(self, param_decls: Sequence[str], help_of: Callable[[], str], **attrs: Any):
        super().__init__(param_decls, **attrs)
        self._help_of: Callable[[], str] | None = help_of

    @property
    def help(self) -> str | None:
        if self._help_of is not None:
            self._help, self._help_of = self._help_of(), None
        return self._help

    @help.setter
    def help(self, value: str | None) -> None:
        # A help set later (or none, by click's own __init__) replaces the field's.
        self._help, self._help_of = value, None


def _help_of(name: str, spec: type[RunSpec] | None) -> str:
    fields = spec_fields(spec)
    return field_help(fields[name][1], fields)


def field_option(name: str, spec: type[RunSpec] | None = None) -> Callable[[F], F]:
    """The click option of the spec's field `name`, its help from the field's docstring (see `field_help`), read
    when shown (`FieldOption`)."""
    import annotated_types

    info = spec_fields(spec, described=False)[name][1]
    flag = _flag(info)
    kind = flag.kind if flag else None
    decls = [flag_of(name, info), *([flag.short] if flag and flag.short else []), name]
    kwargs: dict[str, Any] = {"cls": FieldOption, "help_of": functools.partial(_help_of, name, spec), "default": None}
    if flag and flag.metavar:
        kwargs["metavar"] = flag.metavar
    default = info.get_default(call_default_factory=True)
    bounds = {type(m): m for m in info.metadata}
    low = bounds.get(annotated_types.Ge) or bounds.get(annotated_types.Gt)
    low_value = getattr(low, "ge", getattr(low, "gt", None))
    base = _base_type(info.annotation)
    if base is bool:
        kwargs.update(is_flag=True, default=False)
    elif kind == "pairs":
        kwargs.update(multiple=True, metavar=kwargs.get("metavar", "KEY=VALUE"), default=())
    elif kind == "duration":
        kwargs.update(type=DURATION, default=f"{default / 3600:g}h", show_default=True)
    elif kind in ("dir", "file"):
        kwargs["type"] = click.Path(file_okay=kind == "file", dir_okay=kind == "dir")
    elif kind == "base_url":
        kwargs["callback"] = _checked_base_url
    elif kind == "suite":
        kwargs["type"] = SuiteChoice()
    elif base in (int, float):
        ranged = click.IntRange if base is int else click.FloatRange
        kwargs["type"] = ranged(min=low_value, min_open=isinstance(low, annotated_types.Gt)) if low else base
    if "show_default" not in kwargs and default is not None and not isinstance(default, bool | dict | list):
        kwargs.update(default=str(default) if isinstance(default, Path) else default, show_default=True)
    return click.option(*decls, **kwargs)


def _base_type(annotation: Any) -> Any:
    """The type a field holds, without `| None`."""
    import types

    if isinstance(annotation, types.UnionType):
        args = [a for a in annotation.__args__ if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


def given_value(info: FieldInfo, value: Any) -> Any:
    """What a given option's value sets its field to: `parse_params` of KEY=VALUE pairs, the opposite of an
    inverse flag's."""
    flag = _flag(info)
    if flag and flag.kind == "pairs":
        return parse_params(value)
    return not value if flag and flag.inverse else value


def spec_options(
    names: Sequence[str] | None = None, into: str = "spec", spec: type[RunSpec] | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The click options of a run spec's fields (`names`, else every field a `Flag` does not hide), passed to the
    command as one keyword, `into`: the `RunSpec` they make (`RunSpec.of`; only the options given are set), or,
    for names of one section only, that section. One table: each option's flag, type and help come from its
    field."""
    fields = spec_fields(spec, described=False)
    chosen = [n for n in names] if names is not None else [n for n, (_, info) in fields.items() if _shown(info)]
    sections = {fields[n][0] for n in chosen}

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            # Only what the user set (on the command line, not a default) is set in the spec: a resume compares
            # those with the run it finishes.
            ctx = click.get_current_context()
            values = {name: kwargs.pop(name) for name in chosen}
            given = {
                name: given_value(fields[name][1], value)
                for name, value in values.items()
                if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)
            }
            kwargs[into] = _made(given, sections, spec)
            return func(*args, **kwargs)

        for name in reversed(chosen):
            wrapper = field_option(name, spec)(wrapper)
        return wrapper

    return decorate


def _shown(info: FieldInfo) -> bool:
    flag = _flag(info)
    return flag is None or flag.option


def _made(given: dict[str, Any], sections: set[str | None], spec: type[RunSpec] | None) -> Any:
    """The spec of the options given, or the one section they all belong to."""
    from shambench.runs.spec import RunSpec

    model = spec or RunSpec
    if len(sections) == 1 and None not in sections:
        (section,) = sections
        return model.sections()[section](**given)  # type: ignore[index]
    return model.of(**given)


def refused_values(err: ValidationError) -> str:
    """What a model refused of the values a command was given, each named by its field in backquotes (shown as
    its flag where it is a run option's: `flags_in`)."""
    from shambench.io import error_text

    named = ((next((x for x in reversed(e["loc"]) if isinstance(x, str)), "value"), e) for e in err.errors())
    return "; ".join(f"`{field}`: {error_text(e)}" for field, e in named)


data_selection = spec_options(["datasets", "examples_file", "split", "data_dir", "limit"], into="selection")
"""--datasets/--examples/--split/--data-dir/--limit: which examples to use, as the command's `selection`."""
scoring = spec_options(["n_resamples", "seed", "alt_epsilon"], into="scoring")
"""--bootstrap/--seed/--alt-epsilon: confidence-interval and alternative-annotator-test settings, as the command's
`scoring`."""


def json_outputs(func: Callable[..., Any]) -> Callable[..., Any]:
    """--out FILE|- and --json: the JSON to a file, or to stdout with the human output moved to stderr."""

    @click.option(
        "--out",
        type=click.Path(dir_okay=False, allow_dash=True),
        help="Write the JSON here (a regular file is replaced atomically; `-` is stdout, the table going to stderr).",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print the JSON to stdout (the human output goes to stderr).")
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper


def json_to_stdout(out: str | None, as_json: bool) -> bool:
    """Whether the JSON goes to stdout (`--json` or `--out -`), so that everything else must go to stderr."""
    return as_json or out == "-"


def emit_json(obj: Any, out: str | None, as_json: bool, console: Console) -> None:
    """Print `obj` as JSON to stdout and/or write it to `out` (see `json_outputs`)."""
    from pydantic import BaseModel

    from shambench.io import write_json

    if json_to_stdout(out, as_json):
        text = obj.model_dump_json(indent=2) if isinstance(obj, BaseModel) else json.dumps(obj, indent=2)
        click.echo(text)
    if out and out != "-":
        write_json(out, obj)
        console.print(f"JSON written to {out}", soft_wrap=True)


def parse_params(pairs: tuple[str, ...]) -> dict:
    """`KEY=VALUE` pairs as a dict; values are read as YAML scalars (numbers, booleans, strings)."""
    # Imported here, not with the module: every command's options come from this module, and the structured reader
    # brings YAML, SQLite and the filesystem gate, which a command's --help does not need.
    from shambench.structured import yaml_value

    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--param")
        name = key.strip().replace("-", "_")
        out[name] = yaml_value(value, f"-p {name}", "a YAML scalar (a number, a boolean or a string)") if value else ""
    return out


def given_options(ctx: click.Context, *names: str) -> list[str]:
    """The flags (e.g. `--limit`) of the parameters `names` that the user set, on the command line or from the
    environment, rather than left at their default: for refusing options that would otherwise be ignored."""
    return [
        p.opts[0]
        for p in ctx.command.params
        if p.name in names and ctx.get_parameter_source(p.name) not in (None, click.core.ParameterSource.DEFAULT)
    ]

"""Options shared by several subcommands."""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

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


class OptionRow(NamedTuple):
    """A run option as the command line makes it, in a form read without pydantic: the rows of `RunSpec`'s fields
    are written out in `shambench/cli/option_table.py` (`python -m shambench.cli.options` rewrites it), which the
    commands' options and their `--help` read; tests/cli/test_options.py checks it against the fields
    (`option_rows`). Importing pydantic and the spec's models to make the options nearly tripled the instructions of
    `eval --help` (benchmarks/RESULTS.md)."""

    flags: tuple[str, ...]
    """The option's flag, then its one-letter alias if it has one."""
    section: str | None = None
    """The section of the spec holding the field (None: a field of the spec itself)."""
    kind: str | None = None
    """How the value is read: `bool` (a flag), `int`, `float`, or the field's `Flag.kind`; None: as text."""
    low: float | None = None
    """The least value a number may take (the field's `ge` or `gt`), if it has one."""
    low_open: bool = False
    """Whether `low` itself is refused (a `gt` bound)."""
    default: Any = None
    """What the command gets when the option is not given (the spec then leaves the field at its own default)."""
    show_default: bool = False
    """Whether the help shows the default."""
    metavar: str | None = None
    """What the help shows for the value, when not its type's name."""
    inverse: bool = False
    """A flag that sets its boolean field to False (`--keep-going` for `fail_fast`)."""
    shown: bool = True
    """Whether `eval` has an option of its own for it (False: `resume`, set by `--resume RUN_DIR`)."""
    help: str = ""
    """The option's help (`field_help`)."""


def spec_fields(spec: type[RunSpec] | None = None) -> dict[str, tuple[str | None, FieldInfo]]:
    """Every field of a run's spec by name, with its section (None: a field of the spec itself), in the order the
    help lists them: the spec's own, then each section's in declaration order (those it inherits first); each with
    its docstring as its description (`shambench.documented.described_fields`, which reads the models' source)."""
    from shambench.documented import described_fields
    from shambench.runs.spec import RunSpec

    spec = spec or RunSpec
    sections = spec.sections()
    fields: dict[str, tuple[str | None, FieldInfo]] = {
        name: (None, info) for name, info in described_fields(spec).items() if name not in sections
    }
    for section, model in sections.items():
        fields.update({name: (section, info) for name, info in described_fields(model).items()})
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
    rows = spec_rows()
    return re.sub(r"`(\w+)`", lambda m: rows[m[1]].flags[0] if m[1] in rows else m[0], message)


def flag_of(name: str, info: FieldInfo) -> str:
    """The command line's flag of a field: its `Flag.name`, else its name with dashes."""
    flag = _flag(info)
    return flag.name if flag and flag.name else "--" + name.replace("_", "-")


def _flag(info: FieldInfo) -> Flag | None:
    from shambench.selection_fields import Flag

    return next((m for m in info.metadata if isinstance(m, Flag)), None)


def option_rows(spec: type[RunSpec] | None = None) -> dict[str, OptionRow]:
    """The option of each field of the spec (`RunSpec` when none), made from the field: its type and bound, its
    default, its `Flag` and its docstring."""
    fields = spec_fields(spec)
    return {name: _row_of(name, section, info, fields) for name, (section, info) in fields.items()}


def _row_of(
    name: str, section: str | None, info: FieldInfo, fields: dict[str, tuple[str | None, FieldInfo]]
) -> OptionRow:
    import annotated_types

    flag = _flag(info)
    base = _base_type(info.annotation)
    number = base.__name__ if base in (int, float) else None
    kind = "bool" if base is bool else (flag.kind if flag and flag.kind else number)
    bounds = {type(m): m for m in info.metadata}
    low = bounds.get(annotated_types.Ge) or bounds.get(annotated_types.Gt)
    value = info.get_default(call_default_factory=True)
    default, shown_default = _default_of(kind, value)
    return OptionRow(
        flags=(flag_of(name, info), *([flag.short] if flag and flag.short else [])),
        section=section,
        kind=kind,
        low=getattr(low, "ge", getattr(low, "gt", None)) if kind == number else None,
        low_open=isinstance(low, annotated_types.Gt) and kind == number,
        default=default,
        show_default=shown_default,
        metavar=(flag.metavar if flag else None) or ("KEY=VALUE" if kind == "pairs" else None),
        inverse=bool(flag and flag.inverse),
        shown=flag is None or flag.option,
        help=field_help(info, fields),
    )


def _default_of(kind: str | None, value: Any) -> tuple[Any, bool]:
    """What a command gets for an option not given, and whether its help shows it: the field's default, as text
    for a path and a duration; none shown for a flag, a list or a mapping."""
    if kind == "bool":
        return False, False
    if kind == "pairs":
        return (), False
    if kind == "duration":
        return f"{value / 3600:g}h", True
    if value is None or isinstance(value, bool | dict | list):
        return None, False
    return (str(value) if isinstance(value, Path) else value), True


def _base_type(annotation: Any) -> Any:
    """The type a field holds, without `| None`."""
    import types

    if isinstance(annotation, types.UnionType):
        args = [a for a in annotation.__args__ if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


def spec_rows(spec: type[RunSpec] | None = None) -> dict[str, OptionRow]:
    """The options of a run spec's fields: `RunSpec`'s as written in `shambench/cli/option_table.py`, another
    spec's (a subclass adding fields) made from its fields."""
    return option_rows(spec) if spec is not None else _written_rows()


@functools.cache
def _written_rows() -> dict[str, OptionRow]:
    from shambench.cli.option_table import OPTIONS

    return {name: OptionRow(**row) for name, row in OPTIONS.items()}


def option_table_text(spec: type[RunSpec] | None = None) -> str:
    """The text of `shambench/cli/option_table.py`: the option rows of `RunSpec`'s fields (or `spec`'s) as Python
    data, one line each: the fields of its `OptionRow` that are not at their defaults, by name."""
    lines = [
        '"""The option of each field of `RunSpec`: the fields of its `OptionRow` (`shambench.cli.options`) that are not',
        "at their defaults. What the command line reads to make its run options and their help without importing",
        "pydantic. Written from the fields by `python -m shambench.cli.options`, not by hand (nor by the formatter:",
        "pyproject.toml excludes it); tests/cli/test_options.py checks that it is up to date.",
        '"""',
        "",
        "from typing import Any",
        "",
        "OPTIONS: dict[str, dict[str, Any]] = {",
        *(f"    {name!r}: {_given(row)!r}," for name, row in option_rows(spec).items()),
        "}",
    ]
    return "\n".join([*lines, ""])


def _given(row: OptionRow) -> dict[str, Any]:
    """The fields of a row that are not at their defaults."""
    defaults = OptionRow._field_defaults
    return {field: value for field, value in row._asdict().items() if field not in defaults or value != defaults[field]}


def field_option(name: str) -> Callable[[F], F]:
    """The click option of `RunSpec`'s field `name` (`spec_rows`)."""
    return _option(name, spec_rows()[name])


def _option(name: str, row: OptionRow) -> Callable[[F], F]:
    """The click option of a row: its flags, the type its kind reads, its default and help."""
    kwargs: dict[str, Any] = {"default": row.default, "help": row.help}
    if row.show_default:
        kwargs["show_default"] = True
    if row.metavar:
        kwargs["metavar"] = row.metavar
    if row.kind == "bool":
        kwargs["is_flag"] = True
    elif row.kind == "pairs":
        kwargs["multiple"] = True
    elif row.kind == "duration":
        kwargs["type"] = DURATION
    elif row.kind in ("dir", "file"):
        kwargs["type"] = click.Path(file_okay=row.kind == "file", dir_okay=row.kind == "dir")
    elif row.kind == "base_url":
        kwargs["callback"] = _checked_base_url
    elif row.kind == "suite":
        kwargs["type"] = SuiteChoice()
    elif row.kind == "int":
        kwargs["type"] = int if row.low is None else click.IntRange(min=int(row.low), min_open=row.low_open)
    elif row.kind == "float":
        kwargs["type"] = float if row.low is None else click.FloatRange(min=row.low, min_open=row.low_open)
    return click.option(*row.flags, name, **kwargs)


def given_value(row: OptionRow, value: Any) -> Any:
    """What a given option's value sets its field to: `parse_params` of KEY=VALUE pairs, the opposite of an
    inverse flag's."""
    if row.kind == "pairs":
        return parse_params(value)
    return not value if row.inverse else value


def spec_options(
    names: Sequence[str] | None = None, into: str = "spec", spec: type[RunSpec] | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The click options of a run spec's fields (`names`, else every field a `Flag` does not hide), passed to the
    command as one keyword, `into`: the `RunSpec` they make (`RunSpec.of`; only the options given are set), or,
    for names of one section only, that section. One table: each option's flag, type and help come from its
    field (`spec_rows`)."""
    rows = spec_rows(spec)
    chosen = list(names) if names is not None else [name for name, row in rows.items() if row.shown]
    sections = {rows[name].section for name in chosen}

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            # Only what the user set (on the command line, not a default) is set in the spec: a resume compares
            # those with the run it finishes.
            ctx = click.get_current_context()
            values = {name: kwargs.pop(name) for name in chosen}
            given = {
                name: given_value(rows[name], value)
                for name, value in values.items()
                if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)
            }
            kwargs[into] = _made(given, sections, spec)
            return func(*args, **kwargs)

        for name in reversed(chosen):
            wrapper = _option(name, rows[name])(wrapper)
        return wrapper

    return decorate


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


def data_selection(func: Callable[..., Any]) -> Callable[..., Any]:
    """--datasets/--examples/--split/--data-dir/--limit: which examples to use, as the command's `selection`."""
    return spec_options(["datasets", "examples_file", "split", "data_dir", "limit"], into="selection")(func)


def scoring(func: Callable[..., Any]) -> Callable[..., Any]:
    """--bootstrap/--seed/--alt-epsilon: confidence-interval and alternative-annotator-test settings, as the
    command's `scoring`."""
    return spec_options(["n_resamples", "seed", "alt_epsilon"], into="scoring")(func)


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


if __name__ == "__main__":
    # `python -m shambench.cli.options [FILE]`: rewrites the table (or writes it to FILE), after a field of the
    # spec has changed.
    import sys

    from shambench.io import write_atomic

    write_atomic(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).with_name("option_table.py"), option_table_text())

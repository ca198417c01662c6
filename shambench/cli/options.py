"""Options shared by several subcommands."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from shambench.structured import yaml_value

if TYPE_CHECKING:
    from rich.console import Console

F = TypeVar("F", bound=Callable[..., Any])

DATA_DIR_HELP = "Folder holding the corpora (default: $SHAMBENCH_DATA_DIR, else the user cache directory)."


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
    return click.option(
        "--base-url",
        callback=_checked_base_url,
        help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (no user:password@: name the key's variable "
        "with --api-key-env).",
    )(func)


def api_key_env_option(func: F) -> F:
    """--api-key-env: the environment variable holding the API key (never named by a file)."""
    return click.option(
        "--api-key-env", metavar="VAR", help="Environment variable holding the API key (default OPENAI_API_KEY)."
    )(func)


def data_dir_option(func: F) -> F:
    """--data-dir: where the corpora are."""
    return click.option("--data-dir", type=click.Path(file_okay=False), help=DATA_DIR_HELP)(func)


def no_data_hint(root: Path) -> str:
    """What to do when no source is present in the data folder `root`: it does not exist, it is empty, or it is the
    folder above the data (`../shared` for `../shared/data`, named)."""
    from shambench.data.adapter import DATA_DIR_ENV
    from shambench.data.benchmark import data_folder_below

    below = data_folder_below(root) if root.is_dir() else None
    where = f"none is present in {root}" if root.exists() else f"{root} does not exist"
    hint = f"{below[0]} holds some: pass --data-dir {below[0]}" if below else "point at a folder that holds them"
    return f"{where}: {hint} (or set ${DATA_DIR_ENV}), or fetch them with `shambench data download`"


def datasets_option(func: F) -> F:
    """--datasets/-d: which sources (default: the SHAM-Bench sources present)."""
    return click.option(
        "--datasets",
        "-d",
        metavar="NAMES",
        help="Comma-separated dataset names (see `shambench list datasets`); default: every SHAM-Bench source present.",
    )(func)


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


def data_selection(func: Callable[..., Any]) -> Callable[..., Any]:
    """--datasets/--examples/--split/--data-dir/--limit: which examples to use."""

    @datasets_option
    @click.option(
        "--examples",
        "examples_file",
        type=click.Path(dir_okay=False),
        help="An EXAMPLES JSONL file instead of --datasets (one unified example per line).",
    )
    @click.option("--split", default="test", show_default=True, help="Split: test, or dev (the validation set).")
    @data_dir_option
    @click.option("--limit", type=click.IntRange(min=1), help="Use only the first N examples of each partition.")
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper


def scoring(func: Callable[..., Any]) -> Callable[..., Any]:
    """--bootstrap/--seed: confidence-interval settings."""

    @click.option(
        "--bootstrap",
        "n_resamples",
        type=click.IntRange(min=10),
        default=1000,
        show_default=True,
        help="Bootstrap resamples for the 95% confidence intervals.",
    )
    @click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper


def alt_epsilon_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """--alt-epsilon: the alternative annotator test's tolerance (`shambench.scoring.alternative`)."""
    from shambench.scoring.alternative import ALT_EPSILON

    return click.option(
        "--alt-epsilon",
        type=click.FloatRange(min=0.0, max=2.0),
        default=ALT_EPSILON,
        show_default=True,
        help="Epsilon of the alternative annotator test in groups.agreement (H0: mean(W_f - W_h) <= -epsilon; "
        "the paper's value for skilled annotators is the default).",
    )(func)


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

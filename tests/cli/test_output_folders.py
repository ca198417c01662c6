"""Output folders (`--out FOLDER`): a command writes only into a new or empty folder, or one holding what it writes
itself, never among a folder's other files (`--out docs`, `--out .` would overwrite their files of the same name)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.cli.options import OutputFolder


def every_command(command: click.Command = main, ctx: click.Context | None = None):
    """(command path, command) of the command line and every command below it."""
    ctx = ctx or click.Context(main, info_name="shambench")
    yield ctx.command_path, command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            yield from every_command(sub, click.Context(sub, info_name=name, parent=ctx))


FOLDER_OUTPUTS = [
    (path, param)
    for path, command in every_command()
    for param in command.params
    if param.name in ("out", "out_dir") and isinstance(param.type, click.Path) and not param.type.file_okay
]


def test_the_class_is_found():
    assert {path for path, _ in FOLDER_OUTPUTS} >= {
        "shambench analyze",
        "shambench data export",
        "shambench leaderboard build",
        "shambench leaderboard schema",
        "shambench train token-classifier",
    }


@pytest.mark.parametrize(("path", "param"), FOLDER_OUTPUTS, ids=[path for path, _ in FOLDER_OUTPUTS])
def test_every_output_folder_option_is_checked(path, param):
    assert isinstance(param.type, OutputFolder), f"{path} {param.opts}: an output folder is an OutputFolder"


def convert(folder, *writes: str):
    return OutputFolder(*writes).convert(str(folder), None, None)


def test_a_new_an_empty_or_its_own_folder_is_taken(tmp_path):
    assert convert(tmp_path / "new", "index.html") == str(tmp_path / "new")
    assert convert(tmp_path, "index.html") == str(tmp_path)
    (tmp_path / "index.html").write_text("an earlier build")
    (tmp_path / "runs-a").mkdir()
    assert convert(tmp_path, "index.html", "*/") == str(tmp_path)


def test_a_folder_holding_other_files_is_a_usage_error_naming_them(tmp_path):
    (tmp_path / "index.html").write_text("")
    (tmp_path / "notes.md").write_text("mine")
    with pytest.raises(click.BadParameter) as caught:
        convert(tmp_path, "index.html", "*.json")
    assert caught.value.message == (
        f"{tmp_path} holds notes.md, which this command does not write: give a new or empty folder, or one it wrote "
        "before (holding only index.html, *.json)"
    )
    for name in ("a.md", "b.md", "c.md"):
        (tmp_path / name).write_text("")
    with pytest.raises(click.BadParameter, match=r"holds a.md, b.md, c.md and 1 more, which"):
        convert(tmp_path, "index.html")
    # a pattern ending in / matches folders only
    with pytest.raises(click.BadParameter, match="holds a.md, b.md, c.md and 2 more"):
        convert(tmp_path, "*/")


def test_a_link_is_left_to_the_filesystem_gate(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "notes.md").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    assert convert(tmp_path / "link", "index.html") == str(tmp_path / "link")


def test_export_and_build_into_a_folder_of_other_files_change_nothing(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "README.md").write_text("my own readme")
    (docs / "index.md").write_text("my own page")
    runner = CliRunner()
    export = runner.invoke(main, ["data", "export", "--out", str(docs), "--data-dir", str(tmp_path)])
    built = runner.invoke(main, ["leaderboard", "build", "--runs", str(tmp_path), "--out", str(docs)])
    assert export.exit_code == 2 and f"{docs} holds index.md, which this command does not write" in export.stderr
    assert built.exit_code == 2 and f"{docs} holds README.md, index.md, which this command" in built.stderr
    assert sorted(p.name for p in docs.iterdir()) == ["README.md", "index.md"]
    assert (docs / "README.md").read_text() == "my own readme"

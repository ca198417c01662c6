"""Output folders (`--out FOLDER`): a command writes only into a new or empty folder, or one holding the mark it
leaves in the folders it writes, never among a folder's other files, whatever their names (`--out docs`, `--out .`)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from shambench.cli import UserError, main
from shambench.cli.options import OutputFolder
from tests.cli.commands import every_command

FIXTURES = Path(__file__).parents[1] / "adapters" / "fixtures"


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


# Output folder options with no default the command line converts, each with why: none may write an unmarked folder.
NO_DEFAULT_FOLDER = {
    "shambench leaderboard schema": "its default is the leaderboard package's own folder, where the committed "
    "schemas are regenerated in place (two files of fixed names among the package's modules): no output folder",
}


@pytest.mark.parametrize(("path", "param"), FOLDER_OUTPUTS, ids=[path for path, _ in FOLDER_OUTPUTS])
def test_every_output_folder_is_given_or_a_default_taken_as_one(path, param):
    """A folder the command writes when --out is not given is its option's default, so that click converts it as
    a folder given (`OutputFolder`: refused among someone else's files, marked once written), never a path the
    command makes up in its body (RUN_DIR/analysis was written unmarked)."""
    default = param.to_info_dict()["default"]  # None when there is none (click's own sentinel left out)
    assert param.required or default is not None or path in NO_DEFAULT_FOLDER, (
        f"{path} {param.opts}: required, or a default (a callable one may read the arguments before it)"
    )
    assert NO_DEFAULT_FOLDER.keys() <= {p for p, _ in FOLDER_OUTPUTS} and all(NO_DEFAULT_FOLDER.values())


def convert(folder, command: str = "leaderboard build") -> str:
    """`folder` as the --out of `command` takes it (its context closed: the mark left when it wrote there)."""
    ctx = click.Context(main, info_name="shambench")
    for name in command.split():
        ctx = click.Context(click.Command(name), info_name=name, parent=ctx)
    with ctx:
        return OutputFolder().convert(str(folder), None, ctx)


def error_of(folder, command: str = "leaderboard build") -> str:
    with pytest.raises(UserError) as caught:
        convert(folder, command)
    return caught.value.message


def test_a_new_or_an_empty_folder_is_taken_and_marked_once_written(tmp_path):
    assert convert(tmp_path / "new") == str(tmp_path / "new")
    assert not (tmp_path / "new").exists()  # nothing written, nothing made or marked
    (tmp_path / "empty").mkdir()
    assert convert(tmp_path / "empty") == str(tmp_path / "empty")
    assert list((tmp_path / "empty").iterdir()) == []
    mine = tmp_path / "mine"
    ctx = click.Context(click.Command("build"), info_name="build", parent=click.Context(main, info_name="leaderboard"))
    with ctx:
        OutputFolder().convert(str(mine), None, ctx)
        mine.mkdir()
        (mine / "notes.md").write_text("written by the command")
    assert sorted(p.name for p in mine.iterdir()) == [".shambench-build", "notes.md"]
    assert (mine / ".shambench-build").read_text() == "made by shambench\n"


def test_its_own_folder_is_reused_whatever_it_holds(tmp_path):
    (tmp_path / "README.md").write_text("")
    (tmp_path / ".shambench-data-export").write_text("made by shambench\n")
    assert convert(tmp_path, "data export") == str(tmp_path)
    # the mark of another command is not this one's
    assert error_of(tmp_path, "leaderboard build") == (
        f"{tmp_path} holds .shambench-data-export, README.md and no .shambench-leaderboard-build (the mark "
        "`leaderboard build` leaves in the folders it writes): give a new or empty folder, or one this command "
        "wrote before"
    )


@pytest.mark.parametrize("held", [["README.md"], ["README.md", "data/"], ["index.html"], ["a.json", "b.txt"]])
def test_a_folder_of_files_without_the_mark_is_refused_whatever_their_names(tmp_path, held):
    for name in held:
        if name.endswith("/"):
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_text("mine")
    names = ", ".join(sorted(name.rstrip("/") for name in held))
    assert error_of(tmp_path, "data export").startswith(f"{tmp_path} holds {names} and no .shambench-data-export")


def test_many_files_are_counted(tmp_path):
    for name in ("a.md", "b.md", "c.md", "d.md", "e.md"):
        (tmp_path / name).write_text("")
    assert error_of(tmp_path).startswith(f"{tmp_path} holds a.md, b.md, c.md and 2 more and no .shambench-")


def test_a_link_is_left_to_the_filesystem_gate(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "notes.md").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    assert convert(tmp_path / "link") == str(tmp_path / "link")
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == ["notes.md"]


@pytest.mark.parametrize("held", [["README.md"], ["README.md", "data"]])
def test_export_into_a_folder_of_a_readme_changes_nothing(tmp_path, held):
    docs = tmp_path / "docs"
    (docs / "data").mkdir(parents=True)
    (docs / "README.md").write_text("my own readme")
    if "data" not in held:
        (docs / "data").rmdir()
    result = CliRunner().invoke(
        main, ["data", "export", "--out", str(docs), "--data-dir", str(FIXTURES), "-d", "mushroom"]
    )
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {docs} holds {', '.join(held)} and no .shambench-data-export (the mark `data export` leaves in "
        "the folders it writes): give a new or empty folder, or one this command wrote before\n"
    )
    assert sorted(p.name for p in docs.iterdir()) == held
    assert (docs / "README.md").read_text() == "my own readme"


def test_export_marks_its_folder_and_writes_it_again(tmp_path):
    out = tmp_path / "hf"
    args = ["data", "export", "--out", str(out), "--data-dir", str(FIXTURES), "-d", "mushroom"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    assert sorted(p.name for p in out.iterdir()) == [".shambench-data-export", "README.md", "data"]
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0, again.output
    # an empty folder is taken too
    (tmp_path / "empty").mkdir()
    built = CliRunner().invoke(
        main, ["data", "export", "--out", str(tmp_path / "empty"), "--data-dir", str(FIXTURES), "-d", "mushroom"]
    )
    assert built.exit_code == 0 and (tmp_path / "empty" / ".shambench-data-export").is_file()


def test_build_into_a_folder_of_other_files_changes_nothing(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.html").write_text("my own page")
    built = CliRunner().invoke(main, ["leaderboard", "build", "--runs", str(tmp_path), "--out", str(docs)])
    assert built.exit_code == 2
    assert built.stderr.startswith(f"error: {docs} holds index.html and no .shambench-leaderboard-build")
    assert (docs / "index.html").read_text() == "my own page"


def test_analyze_takes_its_default_folder_of_several_runs_as_an_output_folder(tmp_path, monkeypatch):
    from tests.run_helpers import eval_run, write_jsonl

    examples = tmp_path / "ex.jsonl"
    write_jsonl(examples, [{"id": "a", "dataset": "d", "task": "qa", "response": "Paris is big.", "hallu_spans": []}])
    for name in ("r1", "r2"):
        eval_run(examples, "overlap", tmp_path / name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "analysis.json").write_text("my own")
    refused = CliRunner().invoke(main, ["analyze", "r1", "r2", "--no-figures"])
    assert refused.exit_code == 2
    assert refused.stderr.startswith("error: analysis holds analysis.json and no .shambench-analyze (the mark")
    assert (tmp_path / "analysis" / "analysis.json").read_text() == "my own"
    (tmp_path / "analysis" / "analysis.json").unlink()
    for _ in range(2):  # into the empty folder, then into the folder it marked
        written = CliRunner().invoke(main, ["analyze", "r1", "r2", "--no-figures"])
        assert written.exit_code == 0, written.output
    assert sorted(p.name for p in (tmp_path / "analysis").iterdir()) == [".shambench-analyze", "analysis.json"]


def test_analyze_of_one_run_takes_and_marks_run_dir_analysis(tmp_path):
    from tests.run_helpers import eval_run, write_jsonl

    examples = tmp_path / "ex.jsonl"
    write_jsonl(examples, [{"id": "a", "dataset": "d", "task": "qa", "response": "Paris is big.", "hallu_spans": []}])
    eval_run(examples, "overlap", tmp_path / "r1")
    folder = tmp_path / "r1" / "analysis"
    for _ in range(2):  # made and marked, then written again into the folder it marked
        written = CliRunner().invoke(main, ["analyze", str(tmp_path / "r1"), "--no-figures"])
        assert written.exit_code == 0, written.output
        assert sorted(p.name for p in folder.iterdir()) == [".shambench-analyze", "analysis.json"]
    (folder / ".shambench-analyze").unlink()  # as a folder of analysis.json someone else wrote
    refused = CliRunner().invoke(main, ["analyze", str(tmp_path / "r1"), "--no-figures"])
    assert refused.exit_code == 2
    assert refused.stderr.startswith(f"error: {folder} holds analysis.json and no .shambench-analyze (the mark")

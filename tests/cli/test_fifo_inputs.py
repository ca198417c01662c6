"""FIFOs where files are read, as a class over the command line: every command (the invocations of
`test_fs_class`, which covers the whole click group) is run once for each input file it names, that file replaced
by a FIFO nobody writes to; and the data commands are run once for each file of the data folder, that file replaced
so. None may hang (each run under `unless_hung`), print a traceback or fail but with exit status 2 and one `error:`
line naming the FIFO. A named FIFO is read under an idle deadline made tiny here; one in the data folder is refused."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import shambench.fs as fs
from shambench.cli import main
from tests.cli.test_fs_class import (  # noqa: F401  (test_fs_class's sandbox: its fixtures, used by name)
    INVOCATIONS,
    RUN,
    api,
    check_outcome,
    fava_on_the_hub,
    no_network,
    run,
    template,
    template_untouched,
    world,
)
from tests.cli.test_run_integrity import examples_file
from tests.run_helpers import unless_hung, write_jsonl


def named_inputs(name: str, home: Path) -> list[str]:
    """The files of the work folder in `home` that a command's invocation names (its inputs)."""
    work = home / "work"
    found = (m.group(1) for a in INVOCATIONS[name] if (m := re.search(r"\{work\}/([^\s,]+)", a)))
    return [f for f in found if (work / f).is_file()]


# Every (command, input file) the walk must find: a new command's input is added here by the walk failing.
EXPECTED = [
    "data add-context evidence.jsonl",
    "data add-context ex.jsonl",
    "eval ex.jsonl",
    "leaderboard submit pred.jsonl",
    "leaderboard submit ex.jsonl",
    "optimize train.jsonl",
    "sweep sweep.yaml",
    "train token-classifier ex.jsonl",
]


def planted(path: Path) -> None:
    """`path` replaced by a FIFO nobody writes to."""
    path.unlink()
    os.mkfifo(path)


def one_error_naming(res, path: Path) -> None:
    check_outcome(res, statuses=(2,))
    errors = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and str(path) in errors[0], res.output


@pytest.fixture(autouse=True)
def tiny_idle(monkeypatch):
    """A named FIFO's idle deadline, so that one nobody writes to fails at once."""
    monkeypatch.setattr(fs, "INPUT_IDLE_SECONDS", 0.01)


def test_every_named_input_is_a_fifo_once(request):
    (home, _), clean = request.getfixturevalue("world"), request.getfixturevalue("template")
    ran = []
    for name in RUN:
        for arg in named_inputs(name, clean):
            fifo = home / "work" / arg
            planted(fifo)
            res = unless_hung(lambda name=name: run(name, home), f"{name} with {arg} a FIFO")
            one_error_naming(res, fifo)
            fifo.unlink()
            fifo.write_bytes((clean / "work" / arg).read_bytes())
            ran.append(f"{name} {arg}")
    assert ran == EXPECTED, ran  # the walk finds every input the invocations name


DATA_COMMANDS = {"favabench": ["data stats -d", "data verify", "eval --detector none --no-progress --bootstrap 10 -d"]}
DATA_COMMANDS["mushroom"] = DATA_COMMANDS["favabench"]
FOLDERS = {"favabench": "fava", "mushroom": "mushroom"}


@pytest.mark.parametrize("dataset", sorted(DATA_COMMANDS))
def test_every_file_of_a_data_folder_is_a_fifo_once(request, dataset):
    (home, _), clean = request.getfixturevalue("world"), request.getfixturevalue("template")
    folder = home / "data" / FOLDERS[dataset]
    files = sorted(p.name for p in (clean / "data" / FOLDERS[dataset]).iterdir() if p.is_file())
    assert files
    for file in files:
        planted(folder / file)
        for command in DATA_COMMANDS[dataset]:
            words = command.split()
            args = [*words[len(words[:2]) if words[0] == "data" else 1 :], dataset]
            name = " ".join(words[:2]) if words[0] == "data" else words[0]
            res = unless_hung(lambda name=name, args=args: run(name, home, args), f"{command} with {file} a FIFO")
            if name == "data verify":  # a status line for that file (when declared), the others still checked
                check_outcome(res)
                said = [ln.strip() for ln in res.stdout.splitlines() if ln.split()[1:2] == [f"{dataset}/{file}"]]
                assert said in ([], [f"refused  {dataset}/{file}  not a regular file (a FIFO)"]), res.output
                assert (res.exit_code == 2) == bool(said), res.output
            elif res.exit_code != 0:  # the source unavailable (its folder named), or the file refused (named)
                one_error_naming(res, folder)  # (0: a file of the other split, not read)
        (folder / file).unlink()
        (folder / file).write_bytes((clean / "data" / FOLDERS[dataset] / file).read_bytes())


def piped(body: bytes) -> str:
    """A path to an anonymous pipe holding `body`, its writer closed: what `<(cmd)` gives a command."""
    r, w = os.pipe()
    os.write(w, body)  # a few lines: within what a pipe holds
    os.close(w)
    return f"/dev/fd/{r}"


def test_examples_and_predictions_from_pipes_score_as_from_files(tmp_path):
    """A process substitution is a legitimate input: read once (the kept corpus's key and the format's sniffing
    leave it alone), to the same figures as the files."""
    examples = examples_file(tmp_path / "ex.jsonl", 3)
    preds = write_jsonl(tmp_path / "pred.jsonl", [{"id": f"toy/{i}", "spans": [[0, 3]]} for i in range(3)])
    figures = []
    for ex, pr in ((str(examples), str(preds)), (piped(examples.read_bytes()), piped(preds.read_bytes()))):
        out = tmp_path / f"{len(figures)}.json"
        args = ["score", "--examples", ex, "--predictions", pr, "--bootstrap", "10", "--out", str(out)]
        res = unless_hung(lambda args=args: CliRunner().invoke(main, args), "score from pipes")
        assert res.exit_code == 0, res.output
        figures.append(json.loads(out.read_text())["overall"])
    assert figures[0] == figures[1] and figures[0]

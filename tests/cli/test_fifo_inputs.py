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
from shambench.data.adapter import adapters
from shambench.data.download import GLOB
from shambench.errors import DataError
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
from tests.conftest import require_shared
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


ADAPTER_FIXTURES = Path(__file__).parents[1] / "adapters" / "fixtures"


def data_to_plant(adapter) -> tuple[Path, str, list[str]]:
    """A data folder the adapter loads (its fixture, else the shared data: `require_shared`), the split it loads
    there and, of the files that load read, the first of each kind (suffix: the files of one kind are read by one
    function, Mu-SHROOM's 14 languages or Zhou's models), relative to the data folder (a pattern's first match
    standing for it)."""
    for data_dir in (ADAPTER_FIXTURES, require_shared()):
        for split in ("test", *adapter.splits):
            try:
                loaded = adapter.load(data_dir, split) if adapter.available(data_dir) else None
            except DataError:  # not this split here (Math-Shepherd's shared folder has only its sample)
                continue
            if loaded is not None:
                root = adapter.root(data_dir)
                found = (next(iter(sorted(root.glob(f))), None) if GLOB.search(f) else root / f for f in loaded.files)
                kinds = {f.suffix: os.path.relpath(f, data_dir) for f in reversed([f for f in found if f])}
                return data_dir, split, sorted(kinds.values())
    raise AssertionError(f"{adapter.name}: no data to plant a FIFO in: add a fixture to {ADAPTER_FIXTURES}")


def loaded_or_refusal(adapter, data_dir: Path, split: str):
    """The adapter's load of `data_dir` past its `available` check, or the DataError it raised."""
    try:
        return adapter.load(data_dir, split)
    except DataError as err:
        return err


def linked_copy(data_dir: Path, into: Path) -> Path:
    """`data_dir` as a tree of folders and links to its files (nothing copied: the corpora are read in place)."""
    for folder, _, files in os.walk(data_dir):
        here = into / os.path.relpath(folder, data_dir)
        here.mkdir(parents=True, exist_ok=True)
        for name in files:
            (here / name).symlink_to(Path(folder, name))
    return into


@pytest.mark.parametrize("name", sorted(e.name for e in adapters.entries()))
def test_every_file_every_adapter_reads_is_a_fifo_once(name, tmp_path):
    """Every registered adapter (a new one is covered, or fails here until it has data to load), every kind of
    file its load reads, replaced by a FIFO nobody writes to in a copy of its data folder: never waited on. The load is
    refused at once naming the FIFO, or the source is passed over as unavailable naming its folder (its
    `available` takes regular files only), each exit 2 with one error line; or, where the source has another
    release of that file, that one is read (exit 0: Mu-SHROOM's third-party copy of an organisers' file). And
    `data verify` never calls it absent."""
    adapter = adapters.create(name)
    data_dir, split, files = data_to_plant(adapter)
    assert files, f"{name}: its load names no file it read (LoadResult.files)"
    mirror = linked_copy(data_dir, tmp_path / "data")
    for file in files:
        fifo = mirror / file
        fifo.unlink()
        os.mkfifo(fifo)
        args = ["data", "dump", "-d", name, "--split", split, "--data-dir", str(mirror), "--out", "-"]
        res = unless_hung(lambda args=args: CliRunner().invoke(main, args), f"{name} with {file} a FIFO")
        check_outcome(res)
        said = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
        named = [fifo, *(mirror / folder for folder in Path(file).parents if folder != Path("."))]
        assert (
            res.exit_code == 0
            or f"{fifo}: not a regular file (a FIFO)" in said[0]
            or (
                any(f"{folder}: " in said[0] for folder in named)  # passed over: the FIFO's folder named
            )
        ), res.output
        # past `available`: the reading itself refuses the FIFO by what it is, or passes over it as no file of its
        # kind and says what it lacks (in the FIFO's folders, or another release in the source's own folder)
        read = unless_hung(lambda: loaded_or_refusal(adapter, mirror, split), f"{name}.load with {file} a FIFO")
        text = str(read)
        assert (
            not isinstance(read, DataError)
            or f"{fifo}: not a regular file (a FIFO)" in text
            or (any(text.startswith(f"{folder}") for folder in [*named[1:], adapter.root(mirror)]))
        ), text
        verify = CliRunner().invoke(main, ["data", "verify", name, "--data-dir", str(mirror)])
        check_outcome(verify)  # a released file it declares: refused by what it is, the others still checked
        label = f"{name}/{os.path.relpath(fifo, adapter.root(mirror))}"
        said = [ln.split()[0] for ln in verify.stdout.splitlines() if ln.split()[1:2] == [label]]
        assert said in ([], ["refused"]) and (verify.exit_code == 2) >= bool(said), verify.output
        fifo.unlink()
        fifo.symlink_to(data_dir / file)


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

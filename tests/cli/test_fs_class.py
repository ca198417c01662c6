"""The filesystem gate as a class, over the command line: every command (enumerated from the click group, so a new
one is covered or fails `test_every_command_is_run`; `optimize` too, a MIPROv2 `light` search against an
OpenAI-compatible stand-in on 127.0.0.1) runs (a) with a symbolic link planted at each folder and file it
creates, changes or deletes in its run, cache, data and output folders, and at each SQLite database it opens
and that database's side files, pointing outside them, and (b) with each of those folders refusing writes;
neither may write or delete outside the tool's folders (a sentinel folder's tree and contents are compared),
print a traceback, or fail with anything but exit status 2 and one `error:` line. And (c) every command that talks
to a server (`TALKING`; every other one is in `NO_SERVER` with why it talks to none) runs against a stand-in on
127.0.0.1 that answers every request in one hostile way (`FAULTS`): no traceback, nothing outside the tool's
folders, the API key in no file and not on the terminal, exit status 2 with one `error:` line, or 3 where items
failed for good and the command wrote what it could, as its help documents.

The read-only folder is simulated: tests run as root here, where `chmod` does not stop a write, and a read-only
bind mount needs privileges the tests do not have. `os.open`, `os.mkdir`, `os.rename`/`os.replace`, `os.unlink`
and `os.rmdir` are patched to fail with EROFS, as a read-only mount makes them fail, for any path that resolves
under the folder (a name relative to a `dir_fd` is resolved through `/proc/self/fd`), so the gate's own
translation of the disk's refusal is what is tested. SQLite writes in C, past the patch; the gate opens its file
through `os.open` before SQLite does, which is where a read-only cache is refused.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

import shambench.fs as fs
from shambench import secrets
from shambench.cli import main
from shambench.llm.cache import ResponseCache
from tests import leaks
from tests.cli.commands import runnable_commands
from tests.cli.test_data_download import Through
from tests.cli.test_run_integrity import examples_file
from tests.conftest import folder_tree
from tests.data.test_download import FileServer
from tests.detectors.test_miprov2_compile import Script, invented, output_fields, write_examples
from tests.detectors.tiny_models import require_models, save_tiny
from tests.openai_server import Fault, OpenAIServer
from tests.run_helpers import eval_run, write_jsonl

FIXTURES = Path(__file__).parents[1] / "adapters" / "fixtures"
BOOT = ["--bootstrap", "10"]
# Command path -> a minimal valid invocation ({work}, {data}: the sandbox's folders), or why it is not run here.
INVOCATIONS: dict[str, list[str]] = {
    "agreement": ["-d", "mushroom", "--out", "{work}/agreement.json", *BOOT],
    "analyze": ["{work}/run", "--no-figures"],  # into the run directory: its default output folder
    "batch status": ["{work}/run"],
    "cache clear": ["--yes"],
    "cache stats": [],
    "compare": ["{work}/run", "{work}/run2", *BOOT],
    "data add-context": ["--provider", "file:{work}/evidence.jsonl", "--examples", "{work}/ex.jsonl"],
    "data download": ["favabench"],
    "data dump": ["--out", "{work}/dump.jsonl", "-d", "favabench"],
    "data export": ["--out", "{work}/export", "-d", "favabench"],
    "data stats": ["-d", "favabench"],
    "data verify": ["favabench"],
    "eval": ["--detector", "all", "--examples", "{work}/ex.jsonl", "--run-dir", "{work}/new", "--no-progress", *BOOT],
    "leaderboard build": ["--runs", "{work}/run", "--out", "{work}/site", "--no-reported"],
    "leaderboard schema": ["--out", "{work}/schema"],
    "leaderboard submit": [
        "{work}/pred.jsonl",
        "--name",
        "sub",
        "--examples",
        "{work}/ex.jsonl",
        "--runs-dir",
        "{work}/subs",
        *BOOT,
    ],  # fmt: skip
    "list datasets": [],
    "list detectors": ["all"],
    "list formats": [],
    "list providers": [],
    "optimize": [
        "--base",
        "openai",
        "--model",
        "m",
        "--base-url",
        "{api}",
        "--trainset",
        "{work}/train.jsonl",
        "--heldout",
        "0.25",
        "--auto",
        "light",
        "--max-demos",
        "0",
        "--out",
        "{work}/program.json",
        "--no-progress",
    ],  # fmt: skip
    "score": ["{work}/run", *BOOT],
    "show": ["{work}/run", "--html", "{work}/page.html"],
    "sweep": ["{work}/sweep.yaml", "--workers", "1", "--no-progress", "--no-leaderboard"],
    "train token-classifier": [
        "--base",
        "{base}",
        "--examples",
        "{work}/ex.jsonl",
        "--out",
        "{work}/trained",
        "--epochs",
        "1",
        "--max-length",
        "64",
        "--no-progress",
    ],  # fmt: skip
}


# Commands whose results are kept in the cache folder (a read-only cache fails them, it is no optimisation there).
CACHE_IS_OUTPUT = {"cache clear", "data add-context"}
# Folders a command makes and removes again, which a clean run's before/after comparison cannot see.
TRANSIENT = {"data download": ["data/.shambench-hub", "data/.shambench-hub/fava-uw"]}


# Commands the class tests leave out, each with its reason: none, every command of the group is run.
NOT_RUN: dict[str, str] = {}
RUN = sorted(INVOCATIONS.keys() - NOT_RUN.keys())


def test_every_command_is_run():
    """The commands both class tests run (`RUN`) are the click group's, less `NOT_RUN`, which names commands only."""
    assert sorted(RUN) == sorted(set(list(runnable_commands())) - NOT_RUN.keys())
    assert sorted(INVOCATIONS) == sorted(list(runnable_commands()))
    assert NOT_RUN.keys() <= set(list(runnable_commands())) and all(NOT_RUN.values())


def make_template(home: Path, examples: Callable[[Path], Path]) -> Path:
    """The tool's folders as the commands find them, in `home`: a data folder with FAVABench's and Mu-SHROOM's
    fixtures, a cache that has seen a run, a kept corpus and a model's answer, a finished run and a second one, an
    EXAMPLES file (written by `examples`), its predictions and evidence."""
    work, data, cache = home / "work", home / "data", home / "cache"
    work.mkdir()
    for source in ("fava", "mushroom"):  # FAVABench, and Mu-SHROOM for its annotators
        shutil.copytree(FIXTURES / source, data / source)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SHAMBENCH_CACHE_DIR", str(cache))
        ex = examples(work / "ex.jsonl")
        ids = [json.loads(line)["id"] for line in ex.read_text().splitlines()]
        eval_run(ex, "all", work / "run")
        eval_run(ex, "none", work / "run2")
        write_jsonl(work / "pred.jsonl", [{"id": i, "spans": [[0, 3]]} for i in ids])
        # Relative paths: each copy of the template sweeps its own examples into its own folder.
        (work / "sweep.yaml").write_text("detectors: [none]\nexamples: [ex.jsonl]\nruns: swept\n")
        write_jsonl(work / "evidence.jsonl", [{"id": i, "context": "Varn is a town."} for i in ids])
        write_examples(work / "train.jsonl", invented(0, 8))  # optimize's trainset
        (work / "sweep-api.yaml").write_text(
            "detectors: [{detector: openai, params: {model: m, max_retries: 0}}]\nexamples: [ex.jsonl]\nruns: swept-api\n"
        )
        res = CliRunner().invoke(main, ["score", "--examples", str(ex), "--predictions", str(work / "pred.jsonl")])
        assert res.exit_code == 0, res.output
        answers = ResponseCache()  # so that a command reading the response cache finds one (cache stats)
        answers.put("key", "m", {"content": "[]"})
        answers.close()
    return home


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """The tool's folders (`make_template`) with an EXAMPLES file of three plain examples."""
    return make_template(tmp_path_factory.mktemp("template"), lambda path: examples_file(path, 3))


@pytest.fixture(scope="module", autouse=True)
def template_untouched(template):
    """No command reaches the template through a copy of it (a path in a copied file would)."""
    before = folder_tree(template)
    yield
    assert folder_tree(template) == before


@pytest.fixture
def world(template, tmp_path, monkeypatch):
    """A fresh copy of the template, the environment pointing at it, and a sentinel folder beside it."""
    home = tmp_path / "home"
    shutil.copytree(template, home, symlinks=True)
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "file.txt").write_text("keep me\n")
    (outside / "dir" / "inner.txt").write_text("keep me too\n")
    monkeypatch.setenv("SHAMBENCH_CACHE_DIR", str(home / "cache"))
    monkeypatch.setenv("SHAMBENCH_DATA_DIR", str(home / "data"))
    monkeypatch.chdir(home / "work")
    return home, outside


@pytest.fixture(autouse=True)
def fava_on_the_hub(hub):
    """`data download favabench` fetches from the hub's stand-in on 127.0.0.1 (the `hub` fixture refuses any other
    address): FAVABench's file at its pinned commit, one byte longer than the fixture in the data folder, so the
    download stages, installs and records it."""
    from shambench.data.adapter import adapters

    (spec,) = adapters.create("favabench").remote_files
    body = (FIXTURES / "fava" / "annotations.json").read_bytes() + b" "
    hub.repo(spec.repo_id).commit({"annotations.json": body}, sha=spec.revision)


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Files at plain URLs come from a server on 127.0.0.1 that serves nothing (every file a 404)."""
    server = FileServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    monkeypatch.setattr("shambench.data.download.make_client", lambda timeout=60.0: Through(server.url("")))
    yield
    server.shutdown()
    server.server_close()


# Where the commands that talk to an OpenAI-compatible server find it (set by the `api` fixture).
SERVERS: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def api():
    """An OpenAI-compatible stand-in on 127.0.0.1, scripted as in the MIPROv2 tests (`optimize` talks to it)."""
    with OpenAIServer(script=Script()) as server:
        SERVERS["api"] = server.base_url
        yield server
    SERVERS.clear()


def run(name: str, home: Path, invocation: list[str] | None = None):
    """Run the command's invocation (or the one given) with its folders in `home` (the `world` fixture restores
    the environment)."""
    os.environ["SHAMBENCH_CACHE_DIR"] = str(home / "cache")
    os.environ["SHAMBENCH_DATA_DIR"] = str(home / "data")
    os.chdir(home / "work")
    if name.startswith("train"):
        require_models()
    base = home.parent / "base"  # a tiny model, read only (beside the tool's folders)
    if name.startswith("train") and not base.exists():
        save_tiny(base, "AutoModel", kind="bert")
    where = {"work": home / "work", "data": home / "data", "base": base, **SERVERS}
    args = [a.format(**where) for a in (INVOCATIONS[name] if invocation is None else invocation)]
    return CliRunner().invoke(main, [*name.split(), *args], terminal_width=200)


def check_outcome(res, statuses=(0, 2)) -> None:
    """No traceback, an exit status among `statuses`, and a failure told in one `error:` line."""
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    assert res.exit_code in statuses, res.output
    if res.exit_code == 2:
        errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, res.stderr


def touched(before: dict, after: dict) -> list[str]:
    """The paths a run created, changed or deleted, parents before children."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


@pytest.fixture(scope="module")
def clean_runs(template, tmp_path_factory):
    """Per command, what a clean run touches in the tool's folders and the SQLite databases it opens (computed
    once per command, on demand)."""
    return {}


def what_it_touches(name: str, world, clean_runs) -> list[str]:
    return clean_run(name, world, clean_runs)[0]


def clean_run(name: str, world, clean_runs) -> tuple[list[str], list[str]]:
    """The paths a clean run of `name` touches and the databases it opens through `fs.sqlite_connect` (opening
    one leaves it unchanged, so a snapshot does not see it), both relative to its folders."""
    if name not in clean_runs:
        home, _ = world
        before = folder_tree(home)
        opened: set[str] = set()
        connect = fs.sqlite_connect

        def recording(path, *args, **kwargs):
            opened.add(Path(os.path.abspath(path)).relative_to(home).as_posix())
            return connect(path, *args, **kwargs)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(fs, "sqlite_connect", recording)
            res = run(name, home)
        # A clean run that fails exercises nothing: every invocation must do its work.
        check_outcome(res, (0,))
        clean_runs[name] = (touched(before, folder_tree(home)), sorted(opened))
    return clean_runs[name]


@pytest.mark.parametrize("name", RUN)
def test_a_link_planted_where_a_command_writes_is_never_followed(name, world, clean_runs, tmp_path):
    # A clean run in a copy of its own shows where the command writes; then, for each such place (up to 12 of
    # them, the shallowest first), a fresh copy with a link planted there.
    scratch = tmp_path / "clean"
    shutil.copytree(world[0], scratch, symlinks=True)
    places, databases = clean_run(name, (scratch, world[1]), clean_runs)
    places = sorted([*places, *TRANSIENT.get(name, [])], key=lambda p: (p.count("/"), p))[:12]
    # Every SQLite database the command opens, and its side files (they exist only while a connection is open,
    # so a clean run leaves none to see), on top of those.
    places += [p for db in databases for p in (db, *(db + side for side in fs.SQLITE_SIDES)) if p not in places]
    for place in places:
        home = tmp_path / f"planted-{places.index(place)}"
        shutil.copytree(world[0], home, symlinks=True)
        outside = world[1]
        target = home / place
        was_dir = target.is_dir() and not target.is_symlink()
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(outside / ("dir" if was_dir or "." not in target.name else "file.txt"))
        before = folder_tree(outside)
        res = run(name, home)
        check_outcome(res)
        assert folder_tree(outside) == before, f"{name} with a link at {place} changed the folder outside"


def refusing_writes_under(folder: Path, monkeypatch) -> None:
    """Make every write that resolves under `folder` fail with EROFS, as a read-only mount does."""
    real = {name: getattr(os, name) for name in ("open", "mkdir", "rename", "replace", "unlink", "rmdir")}
    top = os.path.realpath(folder)

    def under(path, dir_fd=None) -> bool:
        if isinstance(path, int):
            return False
        base = os.readlink(f"/proc/self/fd/{dir_fd}") if dir_fd is not None else os.getcwd()
        full = os.path.realpath(os.path.join(base, os.fsdecode(path)))
        return full == top or full.startswith(top + os.sep)

    def refuse():
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    def open_(path, flags, mode=0o777, *, dir_fd=None):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC) and under(path, dir_fd):
            refuse()
        return real["open"](path, flags, mode, dir_fd=dir_fd)

    def one_path(kind):
        def patched(path, *args, dir_fd=None, **kwargs):
            if under(path, dir_fd):
                refuse()
            return real[kind](path, *args, dir_fd=dir_fd, **kwargs)

        return patched

    def two_paths(kind):
        def patched(src, dst, *, src_dir_fd=None, dst_dir_fd=None):
            if under(src, src_dir_fd) or under(dst, dst_dir_fd):
                refuse()
            return real[kind](src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

        return patched

    monkeypatch.setattr(os, "open", open_)
    for kind in ("mkdir", "unlink", "rmdir"):
        monkeypatch.setattr(os, kind, one_path(kind))
    for kind in ("rename", "replace"):
        monkeypatch.setattr(os, kind, two_paths(kind))


@pytest.mark.parametrize("folder", ["work", "cache", "data"])
@pytest.mark.parametrize("name", RUN)
def test_a_read_only_folder_is_one_error_line(name, folder, world, clean_runs, tmp_path, monkeypatch):
    home, outside = world
    scratch = tmp_path / "clean"
    shutil.copytree(home, scratch, symlinks=True)
    places = what_it_touches(name, (scratch, outside), clean_runs)
    before_home, before_outside = folder_tree(home), folder_tree(outside)
    with monkeypatch.context() as patch:
        refusing_writes_under(home / folder, patch)
        res = run(name, home)
    writes_there = any(p.split("/")[0] == folder for p in places)
    # A command that writes its results there fails with one line; the cache is an optimisation a command may
    # go without (with a warning), so a read-only cache may also leave it at exit status 0, unless what the
    # command makes is kept in the cache. A command that writes nothing there only reads it: it works.
    cache_only = folder == "cache" and name not in CACHE_IS_OUTPUT
    check_outcome(res, ((0, 2) if cache_only else (2,)) if writes_there else (0,))
    assert folder_tree(outside) == before_outside
    assert {k: v for k, v in folder_tree(home).items() if k.split("/")[0] == folder} == {
        k: v for k, v in before_home.items() if k.split("/")[0] == folder
    }, f"{name} wrote into the read-only {folder} folder"


# (c) Every command that talks to a server, with the invocation that makes it talk to a stand-in on 127.0.0.1:
# the OpenAI-compatible one ("api") or the hub's ("hub"); every other command, with why it talks to none.
KEY_ENV = "SHAMBENCH_CLASS_TEST_KEY"
API = ["--base-url", "{api}", "--api-key-env", KEY_ENV]
TALKING: dict[str, tuple[str, list[str]]] = {
    "analyze": ("api", ["{work}/run2", "--out", "{work}/judged", "--no-figures", "--categorise", "--judge", "openai",
                        "--model", "m", *API]),
    "data add-context": ("api", ["--provider", "llm", "-p", "preset=openai", "-p", "model=m", "-p", "base_url={api}",
                                 "-p", f"api_key_env={KEY_ENV}", "--examples", "{work}/ex.jsonl"]),
    "data download": ("hub", ["favabench"]),
    "eval": ("api", ["--detector", "openai", "--model", "m", *API, "--examples", "{work}/ex.jsonl", "--run-dir",
                     "{work}/api-run", "--no-progress", *BOOT]),
    "optimize": ("api", [*INVOCATIONS["optimize"], "--api-key-env", KEY_ENV]),
    "sweep": ("api", ["{work}/sweep-api.yaml", *API, "--workers", "1", "--no-progress", "--no-leaderboard"]),
}  # fmt: skip
NO_SERVER: dict[str, str] = {
    "agreement": "reads the data folder",
    "batch status": "asks a Batch API about a run made by batch only; its hostile replies (lying output lines, an "
    "output past its limit, a batch never finishing, a doctored or linked batches.json) are tests/runs/test_batch.py's",
    "cache clear": "local files",
    "cache stats": "local files",
    "compare": "local files",
    "data dump": "reads the data folder",
    "data export": "reads the data folder",
    "data stats": "reads the data folder",
    "data verify": "reads the data folder",
    "leaderboard build": "local runs (the reported figures are packaged)",
    "leaderboard schema": "writes two files",
    "leaderboard submit": "local files",
    "list datasets": "prints the registry",
    "list detectors": "prints the registry",
    "list formats": "prints the registry",
    "list providers": "prints the registry",
    "score": "local files",
    "show": "local files",
    "train token-classifier": "a local base model, offline",
}
# What the stand-ins do instead of answering well, every time: the OpenAI-compatible one refuses the key, sends a
# body that is no completion, JSON nested 5000 deep in the model's output, a gzip bomb (64 MiB inflated), 6 MiB of
# content, or a reply carrying the request's Authorization value; the hub sends a file's body endlessly, longer
# than listed, or with a Content-Length of a gigabyte.
FAULTS = {
    "api": ["401", "malformed", "deep-output", "bomb", "huge", "echo-key"],
    "hub": ["endless", "longer", "announced"],
}
# A key of no known shape (quote, backslash, slash, URL-reserved characters): only the redactor's knowledge of the
# key in use can mask it, in whichever process writes what the server sent back.
SECRET = leaks.ODD_KEY


def test_every_command_is_classed_as_talking_to_a_server_or_not():
    assert sorted([*TALKING, *NO_SERVER]) == sorted(list(runnable_commands()))
    assert not TALKING.keys() & NO_SERVER.keys() and all(NO_SERVER.values())


def echo_key(req) -> str:
    """A reply whose every field is the request's Authorization value (a server trying to get the key stored)."""
    system = req.body["messages"][0]["content"] if req.body.get("messages") else ""
    fields = output_fields(system) if "Your output fields are:" in system else ["incorrect_spans"]
    return json.dumps({f: [req.authorization] if f == "incorrect_spans" else req.authorization for f in fields})


@pytest.mark.parametrize(("name", "fault"), [(n, f) for n, (kind, _) in TALKING.items() for f in FAULTS[kind]])
def test_a_hostile_server_is_one_line_and_nothing_leaves_the_tool_s_folders(name, fault, world, api, hub, monkeypatch):
    home, outside = world
    monkeypatch.setenv(KEY_ENV, SECRET)
    # The redactor as a new process has it: no key variable learnt by an earlier test of this process, so each
    # command must tell it the key in use by itself (a sweep's driver never reads the key: its workers do).
    monkeypatch.setattr(secrets, "_key_envs", secrets.KEY_ENVS)
    monkeypatch.setattr(secrets, "_remembered", set())
    monkeypatch.setattr("shambench.llm.client.backoff", lambda *args: 0.0)  # retries at once: the faults repeat
    kind, args = TALKING[name]
    if kind == "hub":
        hub.hostile["annotations.json"] = fault
    elif fault == "echo-key":
        monkeypatch.setattr(api, "script", echo_key)
    else:
        monkeypatch.setattr(api, "faults", lambda req: Fault(fault))
    before = folder_tree(outside)
    where = {"work": home / "work", "data": home / "data", **SERVERS}
    res = CliRunner().invoke(main, [*name.split(), *(a.format(**where) for a in args)], terminal_width=200)
    # Items that failed for good are exit status 3 (the run is written, the failures summed up), as documented.
    check_outcome(res, (0, 2, 3))
    assert folder_tree(outside) == before
    files = [p for p in sorted(home.rglob("*")) if p.is_file() and not p.is_symlink()]
    assert leaks.leaks(SECRET, files, [res.output, res.stderr]) == []


# Every command that takes a run directory (its invocation names the finished run), and eval resuming one.
RUN_DIR_INVOCATIONS = {name: args for name, args in INVOCATIONS.items() if "{work}/run" in args} | {
    "eval": ["--resume", "{work}/run", "--no-progress", *BOOT],
    "agreement": ["--run", "{work}/run", "--out", "{work}/agreement.json", *BOOT],
}


def test_the_commands_taking_a_run_directory_are_found():
    assert sorted(RUN_DIR_INVOCATIONS) == [
        "agreement",
        "analyze",
        "batch status",
        "compare",
        "eval",
        "leaderboard build",
        "score",
        "show",
    ]


@pytest.mark.parametrize("name", sorted(RUN_DIR_INVOCATIONS))
def test_a_run_directory_given_as_a_link_to_a_folder_outside_is_never_written_through(name, world, tmp_path):
    """The run directory named on the command line is itself a link (planted in a shared runs folder) to a run
    kept outside the tool's folders: a command that writes into it refuses in one line, one that only reads may
    read it, and nothing outside changes (`analyze` writes its default output folder inside the run)."""
    home, outside = world
    foreign = outside / "foreign_run"
    shutil.move(home / "work" / "run", foreign)
    (home / "work" / "run").symlink_to(foreign, target_is_directory=True)
    before = folder_tree(outside)
    res = run(name, home, RUN_DIR_INVOCATIONS[name])
    check_outcome(res)
    assert folder_tree(outside) == before, f"{name} wrote through the linked run directory"
    if name in ("analyze", "eval", "score"):  # they write into the run directory: refused, naming the link
        assert res.exit_code == 2 and f"{home / 'work' / 'run'}: is a symbolic link" in res.stderr, res.stderr
    else:  # the others only read it, through the link (agreement to find the toy run has no annotators)
        assert res.exit_code == (2 if name == "agreement" else 0) and "symbolic link" not in res.output, res.output

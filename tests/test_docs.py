"""The documentation's code blocks are tests: every ```python block of the README, CONTRIBUTING and the pages of
docs/ runs as written, each in a fresh interpreter; every ```bash block parses, and every `shambench` command in
one names commands and options that the command line has, and detectors and datasets that are registered; so does
every example command in the commands' own help, which the command-line reference page renders; every ```yaml
block is a valid sweep file and every ```toml block declares entry points of groups that shambench's registries
read."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import click
import pytest
import yaml

from shambench.cli import main
from tests.cli.commands import every_command
from tests.conftest import require_shared

REPO = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "CONTRIBUTING.md", *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").rglob("*.md")))
# What separates one shell command from the next, and the shell words that may precede a command.
SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")", ";;"}
KEYWORDS = {"do", "then", "else", "time", "!"}


def fenced_blocks(text: str, languages: str) -> list[str]:
    """The bodies of the fenced blocks of the given languages (a regex alternation) in a Markdown text, in order;
    a block indented under a list item is dedented."""
    found = re.findall(rf"^( *)```(?:{languages})\n(.*?)^\1```$", text, flags=re.S | re.M)
    return [textwrap.dedent(body) for _, body in found]


def python_blocks(text: str) -> list[str]:
    """The bodies of the ```python fenced blocks of a Markdown text, in order."""
    return fenced_blocks(text, "python")


def shell_blocks(text: str) -> list[str]:
    """The bodies of the ```bash and ```sh fenced blocks of a Markdown text, in order."""
    return fenced_blocks(text, "bash|sh")


def shambench_commands(script: str) -> list[list[str]]:
    """The argument lists of the `shambench` commands in a shell script (`shambench` itself, or any path ending in
    it), with environment assignments and shell keywords before them left out."""
    commands: list[list[str]] = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        commands.append([])
        for token in lexer:
            if token in SEPARATORS:
                commands.append([])
            elif commands[-1] or (token not in KEYWORDS and not re.match(r"^\w+=", token)):
                commands[-1].append(token)
    return [words[1:] for words in commands if words and Path(words[0]).name == "shambench"]


def option_names(command: click.Command, ctx: click.Context) -> set[str]:
    """Every option string a command accepts, its help options included."""
    names = {name for param in command.get_params(ctx) for name in (*param.opts, *param.secondary_opts)}
    return {name for name in names if name.startswith("-")}


def unknown_words(args: list[str]) -> list[str]:
    """What in one `shambench` argument list the command line does not have: a command that is not one, an option
    its command does not take."""
    command: click.Command = main
    ctx = click.Context(main, info_name="shambench")
    wrong = []
    for word in args:
        if word.startswith("-") and len(word) > 1:
            if word.split("=", 1)[0] not in option_names(command, ctx):
                wrong.append(f"{ctx.command_path} {word}")
        elif isinstance(command, click.Group) and not word.startswith(("$", "[")) and not word.isupper():
            sub = command.get_command(ctx, word)
            if sub is None:
                wrong.append(f"{ctx.command_path} {word}")
                break
            command, ctx = sub, click.Context(sub, info_name=word, parent=ctx)
    return wrong


# The options whose value names registered plugins: a detector (`NAME` or `NAME:ARG`), datasets (comma-separated).
NAMED_BY = {"--detector": "detector", "--datasets": "datasets", "-d": "datasets"}


def unknown_names(args: list[str], defined: tuple[str, ...] = ()) -> list[str]:
    """The detector and dataset names in one `shambench` argument list that no registry has, nor the page itself
    registers (`defined`); placeholders (`NAME`, `MODEL_DIR`, `$d`) are not names."""
    from shambench.detection.detector import detectors
    from shambench.errors import UnknownPluginError
    from shambench.sources import registry as adapters

    named = []
    for option, value in zip(args, args[1:], strict=False):
        kind = NAMED_BY.get(option)
        if kind == "detector":
            named.append((detectors, option, value.split(":", 1)[0]))
        elif kind == "datasets":
            named.extend((adapters, option, name) for name in value.split(","))
    wrong = []
    for registry, option, name in named:
        if name.isupper() or name in defined or not re.fullmatch(r"[a-z0-9][\w.-]*", name):
            continue
        try:
            registry.get(name)
        except UnknownPluginError:
            wrong.append(f"{option} {name}")
    return wrong


def help_texts() -> list[tuple[str, str]]:
    """(command path, help text) of the command line and every command below it."""
    return [(path, command.help or "") for path, command in every_command()]


def help_examples(text: str) -> list[str]:
    """The example lines of a help text, as a script: the `shambench ...` commands (their explanation, after a run
    of spaces, left out) and a sweep file's `detector:` entries, written as the `--detector` they name."""
    lines = []
    for line in re.sub(r"\s*\\\n\s*", " ", text).splitlines():
        line = line.strip()
        if line.startswith("shambench "):
            lines.append(re.split(r" {3,}", line)[0])
        elif entry := re.match(r"-?\s*detector: (\S+)", line):
            lines.append(f"shambench eval --detector {entry[1]}")
    return lines


BLOCKS = [(doc, i, block) for doc in DOCS for i, block in enumerate(python_blocks((REPO / doc).read_text()))]


def inline_commands(text: str) -> list[str]:
    """The `shambench ...` commands quoted inline in a Markdown text's prose (fenced blocks left out)."""
    prose = re.sub(r"^( *)```.*?^\1```$", "", text, flags=re.S | re.M)
    return re.findall(r"`(shambench [^`]+)`", prose.replace("\n", " "))


def defined_detectors(text: str) -> tuple[str, ...]:
    """The detectors a Markdown text's own code registers (`@detector("NAME")`), which its commands may name."""
    return tuple(re.findall(r'@detector\("([\w.-]+)"', text))


INLINE = [(doc, command) for doc in DOCS for command in inline_commands((REPO / doc).read_text())]
SCRIPTS = [(doc, i, block) for doc in DOCS for i, block in enumerate(shell_blocks((REPO / doc).read_text()))]
DECLARED = [
    (doc, language, block)
    for doc in DOCS
    for language in ("yaml", "toml")
    for block in fenced_blocks((REPO / doc).read_text(), language)
]


def registry_groups() -> set[str]:
    """The entry-point groups that shambench's plugin registries read."""
    from shambench.data.context import providers
    from shambench.data.formats import formats
    from shambench.detection.detector import detectors, optimizers, trainers
    from shambench.sources import registry as adapters

    return {r.group for r in (adapters, providers, formats, detectors, optimizers, trainers)}


def test_the_block_finder_reads_fenced_python_only():
    text = "x\n```python\na = 1\n```\n```bash\nls\n```\n```python\nb = 2\nc = 3\n```\n- item\n\n  ```python\n  d = 4\n  ```\n"
    assert python_blocks(text) == ["a = 1\n", "b = 2\nc = 3\n", "d = 4\n"]
    assert shell_blocks(text) == ["ls\n"]


def click_help_hook():
    """The site's build hook docs/hooks/click_help.py, loaded as MkDocs loads it (by path)."""
    spec = importlib.util.spec_from_file_location("click_help", REPO / "docs" / "hooks" / "click_help.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_keeps_unwrapped_help_paragraphs_as_blocks():
    help_text = """Summary line.

    \b
    Typical use:
      shambench eval    run it
      shambench score   rescore

    Closing prose
    over two lines.
    """
    assert click_help_hook().help_markdown(help_text) == [
        "Summary line.",
        "",
        "```text",
        "Typical use:",
        "  shambench eval    run it",
        "  shambench score   rescore",
        "```",
        "",
        "Closing prose",
        "over two lines.",
        "",
    ]


def test_the_cli_reference_hook_replaces_mkdocs_clicks_description_maker():
    from mkdocs_click import _docs

    hook = click_help_hook()
    original = _docs._make_description
    try:
        hook.on_config({})
        context = click.Context(main, info_name="shambench")
        lines = list(_docs._make_description(context))
    finally:
        _docs._make_description = original
    assert lines[2] == "```text" and lines[3] == "Typical use:"


def test_the_command_finder_reads_every_shambench_command():
    script = (
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/shambench eval --detector overlap\n"
        "for d in none all; do\n  shambench eval --detector $d \\\n    --run-dir runs/$d  # a comment\ndone\n"
        "X=1 shambench cache stats | shambench cache clear --model M   # shambench in a comment\n"
    )
    assert shambench_commands(script) == [
        ["eval", "--detector", "overlap"],
        ["eval", "--detector", "$d", "--run-dir", "runs/$d"],
        ["cache", "stats"],
        ["cache", "clear", "--model", "M"],
    ]


def test_the_command_checker_names_what_the_command_line_lacks():
    assert unknown_words(["eval", "--detector", "x", "-p", "a=1", "--data-dir=../d"]) == []
    assert unknown_words(["data", "download", "mushroom", "--data-dir", "d"]) == []
    assert unknown_words(["evaluate", "--detector", "x"]) == ["shambench evaluate"]
    assert unknown_words(["eval", "--detectors", "x"]) == ["shambench eval --detectors"]
    assert unknown_words(["data", "fetch"]) == ["shambench data fetch"]
    assert unknown_names(["eval", "--detector", "overlap", "-d", "ragtruth,mushroom", "--base", "x"]) == []
    assert unknown_names(["eval", "--detector", "token-classifier:models/rt", "--datasets", "$D"]) == []
    assert unknown_names(["eval", "--detector", "NAME", "-d", "DATASETS"]) == []
    assert unknown_names(["eval", "--detector", "shouty"], defined=("shouty",)) == []
    assert unknown_words(["COMMAND", "--help"]) == []
    assert unknown_names(["eval", "--detector", "lettuce", "-d", "ragtruth,mushrom"]) == [
        "--detector lettuce",
        "-d mushrom",
    ]


def test_help_examples_are_the_commands_and_sweep_entries_of_a_help_text():
    text = """Summary.

    \b
      shambench eval --detector overlap            run a detector
      shambench optimize --base openai \\
        --trainset mine.jsonl
      detectors:
        - overlap
        - detector: lettuce
    """
    assert help_examples(text) == [
        "shambench eval --detector overlap",
        "shambench optimize --base openai --trainset mine.jsonl",
        "shambench eval --detector lettuce",
    ]


def test_the_readme_test_command_is_what_ci_runs():
    readme = (REPO / "README.md").read_text()
    command = next(line for block in shell_blocks(readme) for line in block.splitlines() if "pytest" in line)
    assert command.startswith("python3 -m venv .venv && .venv/bin/pip install -e '.[dev,")
    assert command in (REPO / ".ci" / "run").read_text().splitlines()


def test_the_docs_have_blocks_to_run():
    with_python = {doc for doc, _, _ in BLOCKS}
    assert {"README.md", "CONTRIBUTING.md"} <= with_python
    assert any(doc.startswith("docs/") for doc in with_python)
    assert any(doc.startswith("docs/") for doc, _, _ in SCRIPTS)
    assert {language for _, language, _ in DECLARED} == {"yaml", "toml"}


@pytest.mark.parametrize(("doc", "index", "script"), SCRIPTS, ids=[f"{d}#{i}" for d, i, _ in SCRIPTS])
def test_shell_block_parses_and_names_real_commands(doc, index, script):
    parsed = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert parsed.returncode == 0, f"{doc} shell block {index} does not parse:\n{script}\n{parsed.stderr}"
    wrong = [word for args in shambench_commands(script) for word in unknown_words(args) + unknown_names(args)]
    assert wrong == [], f"{doc} shell block {index} names what the command line does not have: {wrong}"


# The options whose value is a file or folder the command writes.
OUTPUT_OPTIONS = ("--out", "--html", "--per-example", "--run-dir")


def written_paths(args: list[str]) -> list[str]:
    """The files and folders one `shambench` argument list writes by name (`-`, stdout, is none)."""
    return [value for option, value in zip(args, args[1:], strict=False) if option in OUTPUT_OPTIONS and value != "-"]


def leaves_checkout_dirty(path: str) -> bool:
    """Whether writing `path` (relative to the checkout's root; `$var` read as a name) would show in `git status`:
    it is inside the checkout, not ignored, and not a tracked output rebuilt on purpose (the leaderboard site)."""
    path = re.sub(r"\$\{?\w+\}?", "x", path)
    if Path(path).is_absolute() or path.startswith(("..", "~")):
        return False
    git = ["git", "-C", str(REPO)]
    ignored = subprocess.run([*git, "check-ignore", "--no-index", "-q", path]).returncode == 0
    tracked = subprocess.run([*git, "ls-files", path], capture_output=True, text=True).stdout != ""
    return not (ignored or tracked)


def test_the_written_path_finder_reads_output_options():
    args = ["show", "runs/A", "--html", "ex.html", "--out", "-", "--run-dir", "runs/$d", "--data-dir", "d"]
    assert written_paths(args) == ["ex.html", "runs/$d"]


@pytest.mark.parametrize(("doc", "index", "script"), SCRIPTS, ids=[f"{d}#{i}" for d, i, _ in SCRIPTS])
def test_shell_block_run_in_a_checkout_leaves_it_clean(doc, index, script):
    if subprocess.run(["git", "-C", str(REPO), "rev-parse"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout: nothing to keep clean")
    written = [path for args in shambench_commands(script) for path in written_paths(args)]
    dirty = [path for path in written if leaves_checkout_dirty(path)]
    assert dirty == [], f"{doc} shell block {index} writes {dirty} into the checkout, unignored (see .gitignore)"


def test_inline_commands_and_defined_detectors_are_read_from_prose():
    text = 'Run `shambench eval --detector x` or `ls`.\n```bash\nshambench nope\n```\n@detector("my-one")\n'
    assert inline_commands(text) == ["shambench eval --detector x"]
    assert defined_detectors(text) == ("my-one",)


@pytest.mark.parametrize(("doc", "command"), INLINE, ids=[f"{d}:{c}" for d, c in INLINE])
def test_inline_command_names_real_commands_detectors_and_datasets(doc, command):
    defined = defined_detectors((REPO / doc).read_text())
    wrong = [
        word for args in shambench_commands(command) for word in unknown_words(args) + unknown_names(args, defined)
    ]
    assert wrong == [], f"{doc}: `{command}` names what the command line does not have: {wrong}"


@pytest.mark.parametrize(("path", "text"), help_texts(), ids=[path for path, _ in help_texts()])
def test_help_examples_name_real_commands_detectors_and_datasets(path, text):
    script = "\n".join(help_examples(text))
    wrong = [word for args in shambench_commands(script) for word in unknown_words(args) + unknown_names(args)]
    assert wrong == [], f"the help of `{path}` names what the command line does not have: {wrong}"


@pytest.mark.parametrize(("doc", "language", "block"), DECLARED, ids=[f"{d}:{lang}" for d, lang, _ in DECLARED])
def test_declared_block_is_what_shambench_reads(doc, language, block):
    from shambench.runs.sweep import SweepSpec

    if language == "yaml":  # the docs' YAML is sweep files
        SweepSpec.model_validate(yaml.safe_load(block))
    else:  # and their TOML, a plugin package's entry points
        groups = set(tomllib.loads(block)["project"]["entry-points"])
        assert groups and groups <= registry_groups(), f"{doc}: {groups - registry_groups()} is read by no registry"


@pytest.mark.parametrize(("doc", "index", "block"), BLOCKS, ids=[f"{d}#{i}" for d, i, _ in BLOCKS])
def test_block_runs_as_written(doc, index, block, tmp_path):
    # A user's own project folder with ../shared beside it, as the README assumes; nothing lands in the checkout.
    shared = require_shared()
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "shared").symlink_to(shared.parent)
    env = {k: v for k, v in os.environ.items() if k != "SHAMBENCH_DATA_DIR"}
    done = subprocess.run(
        [sys.executable, "-c", block], cwd=project, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{doc} block {index} failed:\n{block}\n{done.stderr[-3000:]}"

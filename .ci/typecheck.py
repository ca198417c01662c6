"""Type-check shambench as it installs: `.venv/bin/python .ci/typecheck.py [extra mypy options]`.

adapters/, detectors/ and leaderboard/ sit at the top of the checkout but install as shambench.adapters,
shambench.detectors and shambench.leaderboard (package-dir in pyproject.toml). mypy finds modules by folder and
cannot follow the import hook of an editable install, so this lays out symlinks shaped like the installed package
under .mypy_cache/, runs `mypy -p shambench` on them with the settings of [tool.mypy], and reports every error at
its path in the checkout. The exit status is mypy's.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tomllib
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / ".mypy_cache" / "installed"
# "path:line: error: ..." and "path: note: ..." lines, as mypy prints them
LOCATED = re.compile(r"^(?P<path>[^:\s]+\.pyi?)(?P<rest>:.*)$")


def package_dirs(pyproject: Path) -> dict[str, Path]:
    """Each installed package's folder in the checkout, per [tool.setuptools]."""
    setuptools = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]
    mapped = setuptools.get("package-dir", {})
    dirs = {name: ROOT / name.replace(".", "/") for name in setuptools["packages"] if "." not in name}
    dirs.update({name: ROOT / folder for name, folder in mapped.items()})
    return dirs


def lay_out(tree: Path, dirs: dict[str, Path]) -> None:
    """Symlinks under `tree` that import as the installed packages do."""
    shutil.rmtree(tree, ignore_errors=True)
    for name in sorted(dirs):
        here = tree.joinpath(*name.split("."))
        inner = {other.rpartition(".")[2] for other in dirs if other.rpartition(".")[0] == name}
        if not inner:
            here.symlink_to(dirs[name], target_is_directory=True)
            continue
        # a package with mapped subpackages is a real folder: its own entries linked in, the subpackages beside them
        here.mkdir(parents=True)
        for entry in dirs[name].iterdir():
            if entry.name != "__pycache__" and entry.name not in inner:
                (here / entry.name).symlink_to(entry)


def in_checkout(line: str, tree: Path = TREE) -> str:
    """The mypy output line with a path inside the symlink `tree` replaced by the file's path in the checkout."""
    located = LOCATED.match(line)
    if located is None:
        return line
    path = Path(located["path"]).absolute()
    if not path.is_relative_to(tree):
        return line
    return f"{path.resolve().relative_to(ROOT)}{located['rest']}"


def main(argv: list[str]) -> int:
    os.chdir(ROOT)
    lay_out(TREE, package_dirs(ROOT / "pyproject.toml"))
    os.environ["MYPYPATH"] = str(TREE)
    out, err, status = api.run(["-p", "shambench", *argv])
    sys.stdout.write("".join(in_checkout(line) + "\n" for line in out.splitlines()))
    sys.stderr.write(err)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

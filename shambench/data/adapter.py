"""The adapter plugin interface: one adapter per published corpus, turning its released files into `Example`s."""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

from pydantic import Field

from shambench.errors import DataError
from shambench.paths import cache_dir
from shambench.registry import Registry
from shambench.schema import Example, Model, Name
from shambench.sources import DEFAULT_SUITE, PublishedCount, SharedTask, registry

adapters = cast("Registry[Adapter]", registry)
adapter = adapters.register

DATA_DIR_ENV = "SHAMBENCH_DATA_DIR"


class RemoteFile(Model):
    """A released file at its original public location, as `shambench data download` fetches it."""

    url: str
    """Original location (GitHub raw file, Hugging Face hub resolve URL, ...)."""
    path: str
    """Where it goes, relative to the source's folder in the data directory."""
    sha256: str | None = None
    """Expected SHA-256 of the content; a mismatch fails the download."""
    git_blob: str | None = None
    """Expected git blob id (SHA-1 of `blob <size>\\0` + content), for files whose checksum is known only from a git
    tree; one of `sha256` and `git_blob` must be given, or the download refuses the file."""


class HubFiles(Model):
    """Files of a Hugging Face dataset repository at a pinned commit, as `shambench data download` fetches them
    (listed through the hub's JSON API); each is verified against the size and digest the hub reports for that commit."""

    repo_id: Name
    """The dataset repository (`owner/name`)."""
    revision: str
    """The commit: 40 hex digits, or the short id the authors' page shows (resolved against the repository's
    history, and then kept), or empty when no commit is known here (the download then takes `main`'s commit,
    says so, and records it)."""
    files: tuple[str, ...]
    """The files to fetch: repository paths or `fnmatch` patterns, matched against the repository's listing at
    that commit (so the real layout is read, not guessed). A path that is not listed fails the download, and so
    do patterns of which none matches a file."""
    into: str = ""
    """Folder below the source's folder where the files go, keeping their repository paths."""
    gated: bool = False
    """Whether the repository asks users to accept its conditions (a token is then needed)."""

    @property
    def page(self) -> str:
        """The repository's page on the public hub, where gated conditions are accepted."""
        return f"https://huggingface.co/datasets/{self.repo_id}"


class LoadResult(Model):
    """What an adapter read: the examples and an account of every row it did not keep."""

    examples: list[Example]
    """The unified examples, in the source's own order."""
    dropped: dict[str, int] = Field(default_factory=dict)
    """Rows not kept, counted by reason (e.g. `quality != good`)."""
    files: list[str] = Field(default_factory=list)
    """The files read, relative to the source folder."""
    spans: dict[str, int] = Field(default_factory=dict)
    """For sources whose gold spans are placed by their text (quoted strings, unreliable offsets): the source's
    spans counted by outcome, `placed: <how>`, `ambiguous: <how>` or `unplaced: <reason>`, over every row read
    (a row dropped for a span that could not be placed still counts that span)."""


class Adapter:
    """Base class of adapters. Subclasses set the class attributes and implement `available` and `load`."""

    name: str = ""
    """Dataset name used in partitions (`task/name`) and on the command line."""
    folder: str = ""
    """Folder of the source below the data directory (defaults to `name`)."""
    tasks: tuple[str, ...] = ()
    """Tasks the source contributes."""
    span_types: tuple[str, ...] = ()
    """The error types of its gold spans: each gold span's `label` names one or several of them (joined by `|`),
    the adapter mapping the source's own labels onto them; empty when its gold spans carry no type. The per-type
    figures (`groups.types` of results.json) read the labels, the board and `analyze` list the types in this
    order."""
    suite: str = DEFAULT_SUITE
    """Benchmark suite the source belongs to; `--datasets` left empty selects the `shambench` suite only, and
    `--suite NAME` every source of suite NAME (`shambench.sources.selections`)."""
    also_in: tuple[str, ...] = ()
    """Further suites that select it (e.g. `extended`: the paper's sources and those adding partitions)."""
    datasets: tuple[str, ...] = ()
    """The dataset names its examples carry, as `fnmatch` patterns (`sharp/*`); empty: its `name` alone."""
    kept_apart: str = ""
    """How results name the partitions it keeps out of the paper's tasks and overall (they are scored in the
    extended view, `groups.extended`); empty: its partitions enter them."""
    extended_group: str = ""
    """The extended view's group its partitions form, apart from the tasks' groups; empty: each joins its task."""
    step_level: bool = False
    """Whether its examples are scored by steps (`groups.math`, and a table of its suite)."""
    char_level: bool = False
    """Step-level: whether its steps are also scored by character."""
    published_counts: dict[str, PublishedCount] = {}
    """Per `task/dataset` partition, the example count its paper reports for the test split, with where
    (`shambench.sources.PAPER_SOURCE` for SHAM-Bench's Table 1); shown by `shambench data stats`."""
    shared_task: SharedTask | None = None
    """The shared task whose view (one row per dataset, `Results.groups[group]`) its partitions are shown in."""
    splits: tuple[str, ...] = ("test",)
    """Labelled splits `load` accepts, in the source's own names (`test` first); others feed the dev set."""
    dev_from_test: bool = True
    """Whether the dev set may fall back to test examples for partitions short of non-test ones."""
    license: str = ""
    """The source's licence, as its authors state it."""
    homepage: str = ""
    """Where the authors release the data."""
    revision: str = ""
    """The released revision the adapter reads (commit, version or date)."""
    citation: str = ""
    """How the authors ask to be cited."""
    remote_files: tuple[RemoteFile | HubFiles, ...] = ()
    """The released files and their public locations, for `shambench data download` and `data verify`."""

    def root(self, data_dir: Path) -> Path:
        """The source's folder inside a data directory."""
        return data_dir / (self.folder or self.name)

    def available(self, data_dir: Path) -> bool:
        """Whether the released files this adapter reads are present."""
        raise NotImplementedError

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        """Examples of a split (`test`, or `dev`/`train` where the source has them)."""
        raise NotImplementedError

    def check_split(self, split: str) -> None:
        """Raise DataError unless `split` is one of the labelled splits this source offers."""
        if split not in self.splits:
            raise DataError(f"{self.name} has no {split!r} split (it offers: {', '.join(self.splits)})")


def data_dir_origin(explicit: str | Path | None = None) -> str:
    """Where `resolve_data_dir` took the data directory from, for error messages."""
    if explicit:
        return "given by --data-dir"
    if os.environ.get(DATA_DIR_ENV):
        return f"from ${DATA_DIR_ENV}"
    return f"the default: neither --data-dir nor ${DATA_DIR_ENV} is set"


def resolve_data_dir(explicit: str | Path | None = None) -> Path:
    """Where corpora are read from: the argument, else `$SHAMBENCH_DATA_DIR`, else `data/` in the cache."""
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get(DATA_DIR_ENV):
        return Path(os.environ[DATA_DIR_ENV]).expanduser()
    return cache_dir() / "data"

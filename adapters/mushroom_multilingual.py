"""Mu-SHROOM (SemEval-2025 Task 3) in all 14 languages: open-domain QA answers with character-level labels.

Reads `mushroom/multilingual/` (the labelled test release, `mushroom.<lang>-tst.v1.jsonl`, 1,902 items) as one
partition per language, `open_qa/mushroom-<lang>` (ar ca cs de en es eu fa fi fr hi it sv zh). Gold spans are the
released `hard_labels`, soft labels are kept as `Example.soft_spans` for the official IoU/Cor, and `meta["lang"]`
holds the lower-case language code, which selects the scorer's tokenizer and sentence rule (`shambench.scoring.text`).

The `validation` split is `multilingual/validation/mushroom.<lang>-val.v2.jsonl`, the labelled validation set of
the 10 languages that have one (ca, cs, eu and fa are test-only, as in the shared task). The dev set of this
source is drawn from validation only (`dev_from_test = False`), so `optimize --trainset dev` and `train` never
see test items; test-only languages simply have no dev examples.

The organisers' own release, `multilingual/authors/test/mushroom.<lang>-tst.v1.extra.jsonl` (and
`authors/val/mushroom.<lang>-val.v2.extra.jsonl`), is read in preference wherever a language's file is there: the
same items with two more fields, `wikipedia_url` (kept in `meta`) and `annotations`, every annotator's raw spans,
which become `Example.annotations` for human agreement under the rule of `shambench.adapters.mushroom`. Without
it, the third-party copies above are read as before (no annotators, so no human figure).

This source is its own suite (`--suite mushroom`): the SHAM-Bench default set keeps the English-only `mushroom`
partition, so the paper's numbers stay comparable.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from shambench.adapters._released import jsonl_rows, source_file
from shambench.adapters.mushroom import BOUNDARIES, EXPECTED, ORGANISERS, REPOSITORY, MushroomRow, row_example
from shambench.data.adapter import Adapter, LoadResult, RemoteFile, adapter
from shambench.data.formats import PredictionsFormat, PredictionsRead, predictions_format
from shambench.errors import DataError
from shambench.io import iter_lines, validation_message
from shambench.schema import Prediction
from shambench.scoring.results import MULTILINGUAL
from shambench.scoring.shared_task import EXACT_READING, ORGANISERS_READING, organisers_float
from shambench.sources import EXTENDED_SUITE, SharedTask
from shambench.structured import json_value

LANGUAGES = ("ar", "ca", "cs", "de", "en", "es", "eu", "fa", "fi", "fr", "hi", "it", "sv", "zh")
VALIDATION_LANGUAGES = ("ar", "de", "en", "es", "fi", "fr", "hi", "it", "sv", "zh")
DATASET_PREFIX = "mushroom-"
# SHA-256 of the organisers' labelled files at the pinned commit (the files as released, with `annotations` and
# `wikipedia_url`): `splits/test_labeled/v1/mushroom.<lang>-tst.v1.extra.jsonl` and
# `splits/val/v2/mushroom.<lang>-val.v2.extra.jsonl`.
AUTHORS_TEST_SHA256 = {
    "ar": "f15c2404a5d19c2a5ee490a1cbfad455174a6d570ebd499e2ed10b754c58f756",
    "ca": "ba994ea3fc0b2d5906fa4b6b0db778e02ab68b00edf51f182cb01ec89dd918df",
    "cs": "da9dbaea5278279b2990a485af22509294a9101684ff1d7e89ae3448b1ea933d",
    "de": "52c0b09bb47d6ff97080b629071fd11fd1a7c6ac12b019cbbf002128cba243c9",
    "en": "758df17a159bb1c75adb7e7ef6900a3903a56a6d803195770ec73ea2f0c45131",
    "es": "defdf802bca9d76267e7b5682e89045014f13907527486f2e0697dea9ec9ae24",
    "eu": "7fd05535cd910cbd0d3467ae810686f15df159bc5f6c6c2c7ae3aa6526fe5927",
    "fa": "c9e367c6f6c8967c91ae1f14ae65b891698ce2279f890e23fad8ed3861de4f57",
    "fi": "a32a8f54333325e5129cd6a8ce78d0114c661edda7a18aee2146745c540cabb1",
    "fr": "9ddf53682e10d1610cae58c7bfd39d9d553b58e30e0582826718aadeae8d3ade",
    "hi": "6ca70f9ce4cd174f524e85ee5a813b20a1df1e7349f9f0926530aa59ee0c489d",
    "it": "de4de2ff6ca9bf350cce8beca494ac2fd575aafdd15b838bf341adafe405c2db",
    "sv": "b2e2957254db801d4f1f62046e328e067c9f4772b70d9d780f69dd377474f752",
    "zh": "4a8149cbb7ec08a4e94c5b5b44cfd82e8cb553c5417b0ff59696392c08785f7b",
}
AUTHORS_VALIDATION_SHA256 = {
    "ar": "65942384caa036f69b9feddd82c72ca268a466a9522424af362df62893432c15",
    "de": "47765639d1e8057a726c45331808058e732ff5ec11c4a95a9d8f95bf500856d4",
    "en": "e629e5e085011f22b396b222538b0a21f5aae0b634798c4d0143bb58026cee4b",
    "es": "7803830bd6fe83ecfbdeb87c92b12d9320fc58f11122ada8d21532e46fdda643",
    "fi": "dc1dcd989a8c7d8b87d4e12a29c4609994ee49022b468968e3b0aa3cae4f8c4c",
    "fr": "9fc2fbd52b1f994c3ee5e4e206d2e8a40a63a5b058e23033460769843150002f",
    "hi": "322fa994a65230187df2dc7d96062d96a72a327c32c3d84ca8a45e8699b14609",
    "it": "619e126c91a62d1a26f9a7fdf520efeeae3d447df64638ae91f1b4038ae5a5c0",
    "sv": "7851d2cbeb60e289b767da292a3c6e81cd0c2e7aeaf91bc02d438550b9d2d508",
    "zh": "fd751f8b3fad3727205f5b95b16200d9c7db339bc736d996aa057ffe409844ed",
}


def file_of(lang: str, split: str) -> str:
    """The third-party copy of one language and split, relative to the source folder."""
    if split == "test":
        return f"multilingual/mushroom.{lang}-tst.v1.jsonl"
    return f"multilingual/validation/mushroom.{lang}-val.v2.jsonl"


def authors_file_of(lang: str, split: str) -> str:
    """The organisers' own file of one language and split (with `annotations`), relative to the source folder."""
    if split == "test":
        return f"multilingual/authors/test/mushroom.{lang}-tst.v1.extra.jsonl"
    return f"multilingual/authors/val/mushroom.{lang}-val.v2.extra.jsonl"


def authors_url(lang: str, split: str) -> str:
    """Where the organisers' repository publishes that file, at the commit the English adapter pins."""
    folder = "test_labeled/v1" if split == "test" else "val/v2"
    return f"{REPOSITORY}/splits/{folder}/{Path(authors_file_of(lang, split)).name}"


def read_file_of(root: Path, lang: str, split: str) -> str:
    """The file read for one language and split: the organisers' when present, else the third-party copy."""
    authors = authors_file_of(lang, split)
    return authors if (root / authors).is_file() else file_of(lang, split)


class MushroomMultilingualAdapter(Adapter):
    """Reads the labelled Mu-SHROOM files of all 14 languages, one partition per language."""

    name = "mushroom-multilingual"
    folder = "mushroom"
    tasks = ("open_qa",)
    suite = "mushroom"
    also_in = (EXTENDED_SUITE,)
    datasets = (f"{DATASET_PREFIX}*",)
    kept_apart = "Mu-SHROOM's 14 languages"
    extended_group = MULTILINGUAL
    # Mu-SHROOM ranked systems per language on the official IoU and Cor (the `mushroom` metric).
    shared_task = SharedTask(group="mushroom", title="Mu-SHROOM", row_prefix=DATASET_PREFIX, metric="mushroom")
    splits = ("test", "validation")
    dev_from_test = False
    license = "unstated (no LICENSE file; the authors ask to be cited)"
    homepage = "https://helsinki-nlp.github.io/shroom/"
    revision = (
        "official labelled test v1 and validation v2, as vendored in "
        "ZurichNLP/sc-hallucination-detection@ec3d35e2881fb5814d7dfe6bdc27526b9a9e7e34"
    )
    citation = (
        "Vázquez et al. 2025. SemEval-2025 Task 3: Mu-SHROOM, the Multilingual Shared-task on Hallucinations "
        "and Related Observable Overgeneration Mistakes."
    )

    remote_files = tuple(
        RemoteFile(url=authors_url(lang, split), path=authors_file_of(lang, split), sha256=sha)
        for split, digests in (("test", AUTHORS_TEST_SHA256), ("validation", AUTHORS_VALIDATION_SHA256))
        for lang, sha in digests.items()
    )

    def __init__(self, boundaries: str = ORGANISERS):
        if boundaries not in BOUNDARIES:
            raise ValueError(f"boundaries must be one of {', '.join(BOUNDARIES)}, not {boundaries!r}")
        self.boundaries = boundaries

    def available(self, data_dir: Path) -> bool:
        root = self.root(data_dir)
        return all((root / read_file_of(root, lang, "test")).is_file() for lang in LANGUAGES)

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        root = self.root(data_dir)
        langs = LANGUAGES if split == "test" else VALIDATION_LANGUAGES
        examples, files = [], []
        for lang in langs:
            name = read_file_of(root, lang, split)
            path = source_file(root, name, self.name, EXPECTED)
            files.append(name)
            for where, row in jsonl_rows(path, MushroomRow, EXPECTED):
                if row.lang.lower() != lang:
                    raise DataError(f"{where}: language {row.lang!r} in the {lang} file")
                meta = {"model": row.model_id, "lang": lang}
                if row.wikipedia_url is not None:
                    meta["wikipedia_url"] = row.wikipedia_url
                examples.append(
                    row_example(
                        where,
                        row,
                        self.boundaries,
                        id=f"{DATASET_PREFIX}{lang}/{row.id}",
                        dataset=f"{DATASET_PREFIX}{lang}",
                        split=split,
                        meta=meta,
                    )
                )
        return LoadResult(examples=examples, files=files)


@adapter("mushroom-multilingual")
def mushroom_multilingual(boundaries: str = ORGANISERS) -> Adapter:
    """Mu-SHROOM (SemEval-2025 Task 3) in 14 languages, one open-QA partition per language (suite `mushroom`)."""
    return MushroomMultilingualAdapter(boundaries=boundaries)


# The official submission format (README of the test release, "Submission file format"): one line per item, its `id`
# with `hard_labels` ([[start, end], ...]) and/or `soft_labels` ([{"start", "end", "prob"}, ...]); other keys are
# allowed and ignored, as the organisers' scorer ignores them.
SUBMISSION_ID = re.compile(r"(tst|val)-([a-z]+)-[0-9]+")
SUBMISSION_KEYS = ("hard_labels", "soft_labels")
SUBMISSION_EXPECTED = (
    "a Mu-SHROOM submission line: an object with id tst-<lang>-N or val-<lang>-N and hard_labels [[start, end], ...] "
    'and/or soft_labels [{"start", "end", "prob"}, ...]'
)


def _offset(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{where}: expected an integer character offset, got {json.dumps(value)}")
    return value


def _kept_range(field: str, start: int, end: int, skipped: Counter[str]) -> bool:
    """Whether a range counts. The organisers' scorer reads a range as `range(start, end)`: an empty one
    (`[-1, -1]`, end <= start) marks nothing, so it is skipped and counted; a non-empty one must start at 0 or
    later (their scorer would take -1 as the last character). (Where hard labels are derived, their
    `recompute_hard_labels` also reads an empty range's prob, and fails on a first `[-1, -1]` above 0.5: such a
    file is scored here, the empty ranges skipped.)"""
    if end <= start:
        skipped[f"{field}: empty range (end <= start), which the organisers' scorer ignores"] += 1
        return False
    if start < 0:
        raise ValueError(f"{field}: [{start}, {end}) starts before the text")
    return True


def _hard_labels(value: Any, skipped: Counter[str]) -> list[list[int]]:
    if not isinstance(value, list):
        raise ValueError(f"hard_labels: expected a list of [start, end], got {json.dumps(value)}")
    kept = []
    for i, pair in enumerate(value):
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError(f"hard_labels.{i}: expected [start, end], got {json.dumps(pair)}")
        start, end = (_offset(v, f"hard_labels.{i}") for v in pair)
        if _kept_range("hard_labels", start, end, skipped):
            kept.append([start, end])
    return kept


def _soft_labels(value: Any, skipped: Counter[str]) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise ValueError(f'soft_labels: expected a list of {{"start", "end", "prob"}}, got {json.dumps(value)}')
    kept = []
    for i, label in enumerate(value):
        where = f"soft_labels.{i}"
        if not isinstance(label, dict):
            raise ValueError(f'{where}: expected {{"start", "end", "prob"}}, got {json.dumps(label)}')
        start, end = (_offset(label.get(key), f"{where}.{key}") for key in ("start", "end"))
        if not _kept_range("soft_labels", start, end, skipped):
            continue
        if "prob" not in label:
            # The organisers' scorer reads `prob` only for the characters of a range, so an empty range without
            # one passes; a non-empty one stops it (KeyError): it is skipped and counted here instead, so the file
            # is scored, though its figures then have no official counterpart.
            skipped["soft_labels: non-empty range without prob (the organisers' scorer stops at it)"] += 1
            continue
        prob = label["prob"]
        if not isinstance(prob, int | float) or isinstance(prob, bool) or not 0 <= prob <= 1:
            raise ValueError(f"{where}.prob: expected a probability in [0, 1], got {json.dumps(prob)}")
        kept.append({"start": start, "end": end, "prob": prob})
    return kept


def submission_prediction(obj: Any, skipped: Counter[str]) -> Prediction:
    """The prediction of one submission line, for the example `mushroom-<lang>/<id>`; empty ranges and soft ranges
    without prob are counted in `skipped`. ValueError says what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object")
    item = obj.get("id")
    match = SUBMISSION_ID.fullmatch(item) if isinstance(item, str) else None
    if match is None or match.group(2) not in LANGUAGES:
        raise ValueError(f"id {json.dumps(item)} is not a Mu-SHROOM item id (tst-<lang>-N or val-<lang>-N)")
    hard, soft = obj.get("hard_labels"), obj.get("soft_labels")
    if hard is None and soft is None:
        raise ValueError("neither hard_labels nor soft_labels")
    fields: dict[str, Any] = {"id": f"{DATASET_PREFIX}{match.group(2)}/{item}"}
    if soft is not None:
        fields["soft_spans"] = _soft_labels(soft, skipped)
    # Without hard_labels, `Prediction` derives them from the soft labels as the organisers' scorer does
    # (`recompute_hard_labels`: prob > 0.5, adjacent ranges merged); without soft_labels, Cor reads the hard labels
    # with probability 1 (`infer_soft_labels`).
    if hard is not None:
        fields["spans"] = _hard_labels(hard, skipped)
    try:
        return Prediction(**fields)
    except ValidationError as err:
        raise ValueError(validation_message(err)) from None


class MushroomSubmission(PredictionsFormat):
    """Mu-SHROOM submission files, unchanged: ids `tst-<lang>-N` (or `val-<lang>-N`) of the `mushroom-<lang>`
    examples, `hard_labels` and/or `soft_labels`, read as the organisers' scorer read them."""

    name = "mushroom"
    source = "mushroom-multilingual"

    def recognises(self, first: dict[str, Any]) -> bool:
        return "id" in first and any(key in first for key in SUBMISSION_KEYS)

    def read(self, path: Path, exact_floats: bool = False) -> PredictionsRead:
        number = float if exact_floats else organisers_float
        skipped: Counter[str] = Counter()
        predictions = []
        for lineno, raw in iter_lines(path):
            obj = json_value(raw, str(path), SUBMISSION_EXPECTED, parse_float=number, first_line=lineno)
            try:
                predictions.append((lineno, submission_prediction(obj, skipped)))
            except ValueError as err:
                raise DataError(f"{path}:{lineno}: {err} (expected {SUBMISSION_EXPECTED})") from None
        datasets = sorted({pred.id.split("/", 1)[0] for _, pred in predictions})
        reading = EXACT_READING if exact_floats else ORGANISERS_READING
        return PredictionsRead(
            predictions=predictions,
            skipped=dict(sorted(skipped.items())),
            datasets=datasets,
            conventions={"mushroom_probabilities": reading},
        )


@predictions_format("mushroom")
def mushroom_submission() -> PredictionsFormat:
    """Mu-SHROOM (SemEval-2025 Task 3) submission files as participants sent them (id, hard_labels, soft_labels)."""
    return MushroomSubmission()

"""Mu-SHROOM (SemEval-2025 Task 3) in all 14 languages: open-domain QA answers with character-level labels.

Reads `mushroom/multilingual/` (the labelled test release, `mushroom.<lang>-tst.v1.jsonl`, 1,902 items) as one
partition per language, `open_qa/mushroom-<lang>` (ar ca cs de en es eu fa fi fr hi it sv zh). Gold spans are the
released `hard_labels`, soft labels are kept as `Example.soft_spans` for the official IoU/Cor, and `meta["lang"]`
holds the lower-case language code, which selects the scorer's tokenizer and sentence rule (`shambench.scoring.text`).

The `validation` split is `multilingual/validation/mushroom.<lang>-val.v2.jsonl`, the labelled validation set of
the 10 languages that have one (ca, cs, eu and fa are test-only, as in the shared task). The dev set of this
source is drawn from validation only (`dev_from_test = False`), so `optimize --trainset dev` and `train` never
see test items; test-only languages simply have no dev examples.

This source is its own suite (`--suite mushroom`): the SHAM-Bench default set keeps the English-only `mushroom`
partition, so the paper's numbers stay comparable.
"""

from __future__ import annotations

from pathlib import Path

from shambench.adapters._released import jsonl_rows, source_file
from shambench.adapters.mushroom import EXPECTED, MushroomRow, row_example
from shambench.data.adapter import Adapter, LoadResult, RemoteFile, adapter
from shambench.errors import DataError

LANGUAGES = ("ar", "ca", "cs", "de", "en", "es", "eu", "fa", "fi", "fr", "hi", "it", "sv", "zh")
VALIDATION_LANGUAGES = ("ar", "de", "en", "es", "fi", "fr", "hi", "it", "sv", "zh")
DATASET_PREFIX = "mushroom-"
VENDORED = (
    "https://raw.githubusercontent.com/ZurichNLP/sc-hallucination-detection/"
    "ec3d35e2881fb5814d7dfe6bdc27526b9a9e7e34/data/test_jan25_labelled"
)
# SHA-256 of each labelled test file (the release's SHA256SUMS); the joined validation files have no public copy.
TEST_SHA256 = {
    "ar": "c0c2bdf94a570dc8946c95ca74fea10bc1253adf6f2c1488ed10cb32cf5fcedc",
    "ca": "9130a6b794c8de219c4a3eeddaa67133287a46e73016b53cf992085c1f89e2ac",
    "cs": "25b804a098d371d7639b248119af8fb96fcdf893622749ed9bf4c2efaeb43ba1",
    "de": "12d534859f16abccdf55c0cf85dd4fbab4420f6586bee876f6f6073aff078b68",
    "en": "53d52b5e80d49f874b627a5d0691dc1681e92ca70eb12d3ed5ad5b33c65c7908",
    "es": "21cabe614803501c63f4d8e17505c2c4e6fb7c07c90b678093b49abb473fcab6",
    "eu": "b382ec135b435026939ca836f20674416b8fafa8408c5d42b2888b8cb3972982",
    "fa": "cda6dcb67db871fb2144fc052e41f7e5c059b2d080c4042120bd0d341fd8c3aa",
    "fi": "ba1650307cd7253f8934b81e0e5739b6e0e32103b51747c53667089e228a5056",
    "fr": "58b979a1bb37c44123cc6882ea6559582b1b25c99ae3264056e260833cc2cab6",
    "hi": "b6e04563975d1833bf961d3bc200653bc8eef86f247ac2e2a60c13e30abe1ba4",
    "it": "5835d6d3dabf1ae7bb1e2468cc5e6e871100f1a8332be82027088286f3cebd24",
    "sv": "e0f6ed566f8ae592684a78a1946e0e997c3adedfe3d40c02f0c0aa1a8eb36a93",
    "zh": "a8d779695f545bbaeee47c6edd4abe73e65db10a211c9c6081d3dcd061a2f814",
}


def file_of(lang: str, split: str) -> str:
    """The released file of one language and split, relative to the source folder."""
    if split == "test":
        return f"multilingual/mushroom.{lang}-tst.v1.jsonl"
    return f"multilingual/validation/mushroom.{lang}-val.v2.jsonl"


class MushroomMultilingualAdapter(Adapter):
    """Reads the labelled Mu-SHROOM files of all 14 languages, one partition per language."""

    name = "mushroom-multilingual"
    folder = "mushroom"
    tasks = ("open_qa",)
    suite = "mushroom"
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
        RemoteFile(url=f"{VENDORED}/mushroom.{lang}-tst.v1.jsonl", path=file_of(lang, "test"), sha256=sha)
        for lang, sha in TEST_SHA256.items()
    )

    def available(self, data_dir: Path) -> bool:
        root = self.root(data_dir)
        return all((root / file_of(lang, "test")).is_file() for lang in LANGUAGES)

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        root = self.root(data_dir)
        langs = LANGUAGES if split == "test" else VALIDATION_LANGUAGES
        examples, files = [], []
        for lang in langs:
            path = source_file(root, file_of(lang, split), self.name, EXPECTED)
            files.append(file_of(lang, split))
            for where, row in jsonl_rows(path, MushroomRow, EXPECTED):
                if row.lang.lower() != lang:
                    raise DataError(f"{where}: language {row.lang!r} in the {lang} file")
                examples.append(
                    row_example(
                        where,
                        row,
                        id=f"{DATASET_PREFIX}{lang}/{row.id}",
                        dataset=f"{DATASET_PREFIX}{lang}",
                        split=split,
                        meta={"model": row.model_id, "lang": lang},
                    )
                )
        return LoadResult(examples=examples, files=files)


@adapter("mushroom-multilingual")
def mushroom_multilingual() -> Adapter:
    """Mu-SHROOM (SemEval-2025 Task 3) in 14 languages, one open-QA partition per language (suite `mushroom`)."""
    return MushroomMultilingualAdapter()

"""Hard2Verify (Salesforce, 2025): 200 frontier-model responses to 80 olympiad problems, split into steps, each
step labelled correct (1) or incorrect (0) by humans under strict grading (a step built on an earlier error is
itself incorrect), with the index of the first incorrect step (-1 for none).

The public release (`Salesforce/Hard2Verify`, split `test`, Parquet) encrypts `question`, `model_response_by_step`,
`human_labels` and `human_labels_first_error_idx` against canary-string scraping; they are decrypted here at load
time, never stored: each is base64 text, XORed with SHA-256(canary) repeated to its length, decoded as UTF-8 and
parsed as JSON when it parses (so lists and integers come back typed). The response is the steps joined with a
blank line; every step labelled 0 is a gold span. When the released first-error index disagrees with the first 0
of the step labels, the step labels rule (they define every level of the metric here) and a warning names the
row; the released index is kept in `meta["first_error_idx"]`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from pydantic import ConfigDict

from shambench.adapters._released import data_rows, example_at, split_files
from shambench.data.adapter import Adapter, HubFiles, LoadResult, adapter
from shambench.data.steps import step_fields
from shambench.errors import SourceError
from shambench.schema import Model, Name
from shambench.structured import json_value

log = logging.getLogger(__name__)

TASK = "math_proof_step"
SEPARATOR = "\n\n"
ENCRYPTED = ("question", "model_response_by_step", "human_labels", "human_labels_first_error_idx")
EXPECTED = "Hard2Verify rows with unique_id, canary and the four encrypted fields"


class EncryptedRow(Model):
    """One released row, before decryption."""

    model_config = ConfigDict(extra="ignore")

    unique_id: Name | int
    """The response's id."""
    canary: str
    """Plain-text canary; its SHA-256 is the key of the other fields."""
    question: str
    """Encrypted problem statement."""
    model_response_by_step: str
    """Encrypted JSON list of step texts."""
    human_labels: str
    """Encrypted JSON list of 0/1 step labels."""
    human_labels_first_error_idx: str
    """Encrypted first incorrect step index (-1 for none)."""


class Hard2VerifyRecord(Model):
    """A decrypted row."""

    unique_id: Name
    """The response's id."""
    question: str
    """The problem."""
    model_response_by_step: list[str]
    """The response, split into steps."""
    human_labels: list[int]
    """1 = correct step, 0 = incorrect."""
    human_labels_first_error_idx: int
    """First incorrect step, -1 for none."""


def decrypt_field(value: str, canary: str) -> Any:
    """A field's plain value: base64 text XORed with the repeated SHA-256 of the canary, JSON-parsed when it parses."""
    if value == "":
        return ""
    cipher = base64.b64decode(value, validate=True)
    digest = hashlib.sha256(canary.encode("utf-8")).digest()
    key = (digest * (len(cipher) // len(digest) + 1))[: len(cipher)]
    text = bytes(c ^ k for c, k in zip(cipher, key)).decode("utf-8")
    try:
        return json_value(text, "a decrypted field", "JSON", allow_nan=True)  # as the official loader (json.loads)
    except ValueError:
        return text


def decrypted(where: str, row: EncryptedRow) -> Hard2VerifyRecord:
    """The decrypted record of a row; SourceError naming the row when a field does not decrypt to its type."""
    fields: dict[str, Any] = {"unique_id": str(row.unique_id)}
    for name in ENCRYPTED:
        try:
            fields[name] = decrypt_field(getattr(row, name), row.canary)
        except (binascii.Error, UnicodeDecodeError) as err:
            raise SourceError(f"{where}: field {name} does not decrypt with the row's canary ({err})") from None
    if isinstance(fields["question"], int | float | list | dict):
        fields["question"] = json.dumps(fields["question"])
    try:
        return Hard2VerifyRecord.model_validate(fields)
    except ValueError as err:
        raise SourceError(f"{where}: decrypted fields are not a Hard2Verify record ({err})") from None


class Hard2VerifyAdapter(Adapter):
    """Reads and decrypts the Hard2Verify test split."""

    name = "hard2verify"
    suite = "hard2verify"
    step_level = True
    tasks = (TASK,)
    license = "not stated on the dataset card"
    homepage = "https://huggingface.co/datasets/Salesforce/Hard2Verify"
    # No commit of the repository is known here: the download takes main's, says so, and records it.
    revision = "Salesforce/Hard2Verify main (test split; the commit downloaded is recorded beside the files)"
    citation = (
        "Pandit et al. 2025. Hard2Verify: A Step-Level Verification Benchmark for Open-Ended Frontier Math. "
        "arXiv:2510.13744."
    )
    # The card says JSON, an earlier layout was Parquet: the card and every data file are fetched as listed, and
    # the split's files are found through the card's `configs`.
    remote_files = (
        HubFiles(repo_id="Salesforce/Hard2Verify", revision="", files=("README.md", "*.parquet", "*.json", "*.jsonl")),
    )

    def _files(self, data_dir: Path, split: str) -> list[Path]:
        return split_files(self.root(data_dir), split)

    def available(self, data_dir: Path) -> bool:
        return bool(self._files(data_dir, "test"))

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        root = self.root(data_dir)
        paths = self._files(data_dir, split)
        if not paths:
            raise SourceError(
                f"{root}: no {split} data files (Parquet or JSON, as the card's configs or `{split}-*` name them; "
                f"run `shambench data download {self.name}`)"
            )
        examples = []
        for path in paths:
            for where, row in data_rows(path, EncryptedRow, EXPECTED):
                rec = decrypted(where, row)
                if len(rec.human_labels) != len(rec.model_response_by_step) or any(
                    v not in (0, 1) for v in rec.human_labels
                ):
                    raise SourceError(
                        f"{where}: {len(rec.human_labels)} labels for {len(rec.model_response_by_step)} steps "
                        "(expected one 0/1 label per step)"
                    )
                ex = example_at(
                    where,
                    id=f"hard2verify/{rec.unique_id}",
                    dataset=self.name,
                    task=TASK,
                    question=rec.question,
                    **step_fields(rec.model_response_by_step, rec.human_labels, SEPARATOR),
                    meta={"first_error_idx": rec.human_labels_first_error_idx},
                )
                if ex.first_error != rec.human_labels_first_error_idx:
                    log.warning(
                        "%s: released first-error index %d, first 0 label at %d; the labels are used",
                        where,
                        rec.human_labels_first_error_idx,
                        ex.first_error,
                    )
                examples.append(ex)
        return LoadResult(examples=examples, files=[str(p.relative_to(root)) for p in paths])


@adapter("hard2verify")
def hard2verify() -> Adapter:
    """Hard2Verify: human step labels of frontier-model olympiad proofs (encrypted release, decrypted on load)."""
    return Hard2VerifyAdapter()

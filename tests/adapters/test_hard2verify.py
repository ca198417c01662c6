"""Hard2Verify adapter: an invented fixture encrypted here with the release's scheme, decrypted on load."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shambench.adapters.hard2verify import Hard2VerifyAdapter, decrypt_field
from shambench.errors import SourceError

FIXTURES = Path(__file__).parent / "fixtures"
CANARY = "SHAMBENCH FIXTURE CANARY 3f9c1e27-invented-not-the-real-one"


def encrypt(text: str, canary: str) -> str:
    """The release's scheme: UTF-8 bytes XOR the repeated SHA-256 of the canary, in base64."""
    data = text.encode("utf-8")
    digest = hashlib.sha256(canary.encode("utf-8")).digest()
    key = (digest * (len(data) // 32 + 1))[: len(data)]
    return base64.b64encode(bytes(a ^ b for a, b in zip(data, key))).decode()


@given(st.text(min_size=1), st.text(min_size=1))
def test_decrypt_inverts_the_scheme(text, canary):
    # text that is JSON comes back parsed, as the official loader does; any other text comes back as it was
    try:
        expected = json.loads(text)
    except ValueError:
        expected = text
    value = decrypt_field(encrypt(text, canary), canary)
    assert value == expected or (value != value and expected != expected)  # NaN is the one value unequal to itself


def test_decrypts_typed_fields():
    assert decrypt_field(encrypt("[1, 0]", "c"), "c") == [1, 0]
    assert decrypt_field(encrypt("-1", "c"), "c") == -1
    assert decrypt_field(encrypt("Prove it.", "c"), "c") == "Prove it."
    assert decrypt_field("", "c") == ""


def test_fixture_loads():
    loaded = Hard2VerifyAdapter().load(FIXTURES)
    assert [ex.id for ex in loaded.examples] == ["hard2verify/h2v-0", "hard2verify/h2v-1", "hard2verify/h2v-2"]
    first, second, third = loaded.examples
    assert first.question == "Show that the square of an even integer is divisible by 4."
    assert first.response.split("\n\n") == [
        "Let n be even.",
        "Then n = 2k for an integer k.",
        "So n^2 = 4k^2, which is divisible by 4.",
    ]
    assert first.first_error == -1 and first.hallu_spans == []
    # strict labels [1, 0, 0]: both erroneous steps are gold spans, first error 1
    assert [s.label for s in second.steps] == [1, 0, 0] and second.first_error == 1
    assert [(sp.start, sp.end) for sp in second.hallu_spans] == [(20, 40), (42, 88)]
    assert third.meta["first_error_idx"] == 1 and third.task == "math_proof_step"


def _release(root: Path, row: dict) -> Path:
    path = root / "hard2verify" / "data" / "test-00000-of-00001.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([row]), path)
    return root


def _row(labels: str, canary: str = CANARY) -> dict:
    return {
        "unique_id": 7,
        "canary": canary,
        "question": encrypt("Q", CANARY),
        "model_response_by_step": encrypt('["a", "b"]', CANARY),
        "human_labels": encrypt(labels, CANARY),
        "human_labels_first_error_idx": encrypt("-1", CANARY),
    }


def test_label_count_mismatch_names_the_row(tmp_path):
    with pytest.raises(SourceError, match=r"row 0: 1 labels for 2 steps"):
        Hard2VerifyAdapter().load(_release(tmp_path, _row("[1]")))


def test_wrong_canary_is_an_error_naming_the_row(tmp_path):
    with pytest.raises(SourceError, match=r"row 0: "):
        Hard2VerifyAdapter().load(_release(tmp_path, _row("[1, 1]", canary="another canary")))


def test_missing_release_is_an_error(tmp_path):
    assert not Hard2VerifyAdapter().available(tmp_path)
    with pytest.raises(SourceError, match=r"hard2verify: no test data files \(Parquet or JSON, as the card's configs"):
        Hard2VerifyAdapter().load(tmp_path)


CARD = """---
license: cc-by-nc-4.0
configs:
- config_name: default
  data_files:
  - split: test
    path: "{path}"
---
# Hard2Verify
"""


@pytest.mark.parametrize("layout", ["jsonl", "json array"])
def test_the_same_release_as_json_is_found_through_the_card(tmp_path, layout):
    rows = pq.read_table(FIXTURES / "hard2verify" / "data" / "test-00000-of-00001.parquet").to_pylist()
    root = tmp_path / "hard2verify"
    (root / "release").mkdir(parents=True)
    name = "release/hard2verify.json"  # a name no convention would find: only the card says it is the test split
    text = json.dumps(rows) if layout == "json array" else "".join(json.dumps(r) + "\n" for r in rows)
    (root / name).write_text(text)
    (root / "README.md").write_text(CARD.format(path="release/*.json"))
    loaded = Hard2VerifyAdapter().load(tmp_path)
    assert loaded.examples == Hard2VerifyAdapter().load(FIXTURES).examples
    assert loaded.files == [name]

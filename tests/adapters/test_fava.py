"""FAVABench adapter: the tag parser on hand-made strings and on generated ones, and the invented fixture file."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shambench.adapters import fava
from shambench.adapters.fava import DUPLICATE, EMPTY, FILE, MISMATCH, UNTAGGED, parse_annotated, spans_on_output
from shambench.data.adapter import adapters
from shambench.errors import SourceError
from shambench.schema import Span
from tests.conftest import require_shared

FIXTURES = Path(__file__).parent / "fixtures"


def _spans(annotated: str) -> list[tuple[str, str]]:
    tagged = parse_annotated(annotated)
    return [(tagged.clean[s:e], kind) for s, e, kind in tagged.spans]


def test_delete_text_is_the_span_and_mark_text_is_skipped():
    tagged = parse_annotated("The <entity><mark>Argentine</mark><delete>American</delete></entity> player.")
    assert tagged.clean == "The American player."
    # "The " is 4 characters, "American" 8: the span is [4, 12).
    assert tagged.spans == [(4, 12, "entity")]


def test_misspelt_tags_whitespace_and_unknown_tags():
    assert _spans("A <contradictary> <delete>x</delete> </contradictary>y <b>z</b>.") == [("x", "contradictory")]
    assert _spans("<subj>Best.</subj> <inverted>Made up.</inverted>") == [
        ("Best.", "subjective"),
        ("Made up.", "invented"),
    ]


def test_unclosed_tag_ends_at_its_sentence_and_stray_close_is_ignored():
    tagged = parse_annotated("One. <unverifiable>Two is here. Three.</relation>")
    assert tagged.clean == "One. Two is here. Three."
    # The unclosed tag opens at 5 ("One. ") and closes after "Two is here." (12 characters): [5, 17).
    assert tagged.spans == [(5, 17, "unverifiable")]
    assert tagged.repairs == 2  # one unclosed opener, one stray closer


def test_mismatched_nesting_closes_the_inner_tag_with_the_outer():
    tagged = parse_annotated("a <relation>b <entity>c</relation> d</entity>")
    # "a " = 2, "b " = 2, "c" = 1: both tags close at 5, the entity one is a repair; "</entity>" is stray.
    assert tagged.clean == "a b c d"
    assert sorted(tagged.spans) == [(2, 5, "relation"), (4, 5, "entity")]
    assert tagged.repairs == 2


def test_mark_only_insertion_yields_no_span():
    assert _spans("Founded <entity><mark>in 1903 </mark></entity>by Ida.") == []


def test_spans_move_onto_output_across_whitespace_and_end_of_sequence_artefacts():
    tagged = parse_annotated("Frogs <invented>sing.</invented></s>")
    # output has a leading space and a double space: "sing." moves from [6, 11) to [8, 13).
    assert spans_on_output(tagged, " Frogs  sing.") == [(8, 13, "invented")]
    assert spans_on_output(tagged, "Frogs dance.") is None


def test_the_space_table_agrees_with_str_isspace_on_every_code_point():
    last = len(fava._SPACE) - 1
    assert [bool(fava._SPACE[min(c, last)]) for c in range(sys.maxunicode + 1)] == [
        chr(c).isspace() for c in range(sys.maxunicode + 1)
    ]


# Any character, white space of every kind, the artefacts' pieces, lone surrogates and characters beyond the BMP.
TEXTS = st.text(st.one_of(st.characters(), st.sampled_from([" ", "\u3000", "\x85", "\u2029", "<", "/", "s", ">"])))


@given(TEXTS)
def test_kept_positions_are_those_of_the_characters_neither_space_nor_artefact(text):
    artefact = {i for m in re.finditer(r"</?s>", text) for i in range(m.start(), m.end())}
    assert fava._kept_positions(text).tolist() == [
        i for i, c in enumerate(text) if not c.isspace() and i not in artefact
    ]


WORD = st.text(alphabet="abcdefgh ", min_size=1, max_size=8)


@given(
    st.lists(
        st.tuples(WORD, st.sampled_from(["entity", "relation", "invented"]), WORD, st.text("xyz", min_size=0)),
        min_size=1,
        max_size=5,
    )
)
def test_generated_annotations_give_the_deleted_text(parts):
    """Each part is plain text, then an error tag wrapping a <mark> correction and the <delete>d response text."""
    annotated, output, expected = "", "", []
    for plain, kind, deleted, mark in parts:
        annotated += f"{plain}<{kind}><mark>{mark}</mark><delete>{deleted}</delete></{kind}>"
        output += plain
        if deleted.strip():
            lead = len(deleted) - len(deleted.lstrip())
            expected.append((len(output) + lead, len(output) + len(deleted.rstrip()), kind))
        output += deleted
    tagged = parse_annotated(annotated)
    assert tagged.clean == output
    assert tagged.spans == expected
    assert tagged.repairs == 0


def test_fixture_file_loads_with_drop_counts():
    result = adapters.create("favabench").load(FIXTURES)
    # 9 records: #1 repeats #0's (prompt, output), #5's tagged text says "was" where the output says "is",
    # #7 has an empty output; 6 remain.
    assert result.dropped == {DUPLICATE: 1, MISMATCH: 1, EMPTY: 1}
    by_id = {ex.id: ex for ex in result.examples}
    assert list(by_id) == [f"favabench/{i}" for i in (0, 2, 3, 4, 6, 8)]
    assert {ex.partition for ex in result.examples} == {"open_qa/favabench"}

    def texts(i):
        ex = by_id[f"favabench/{i}"]
        return [(ex.response[s.start : s.end], s.label) for s in ex.hallu_spans]

    assert texts(0) == [("Mira Olsen", "entity"), ("1921", "entity")]
    # Record 2's output starts with a space and has a double space; the spans still land on the output.
    assert texts(2) == [
        ("cloud forests", "contradictory"),
        ("They sing in three octaves.", "invented"),
        ("Their skin is the most beautiful of any animal.", "subjective"),
    ]
    assert texts(3) == [("1887", "entity"), ("It spans the Velt river.", "unverifiable")]
    assert by_id["favabench/3"].meta["tag_repairs"] == 2
    # Nested tags overlap and merge into one span carrying both types.
    assert texts(4) == [("The Corvin Museum has five floors", "invented|entity")]
    assert texts(6) == [] and texts(8) == []
    assert by_id["favabench/0"].meta == {"model": "chatgpt", "record": 0}


def test_fixture_rows_of_one_response_are_its_annotators():
    by_id = {ex.id: ex for ex in adapters.create("favabench").load(FIXTURES).examples}
    pair = by_id["favabench/0"]

    def read(reading):
        return (
            reading.annotator,
            [pair.response[s.start : s.end] for s in reading.spans],
            [pair.response[s.start : s.end] for s in reading.others],
        )

    # Records 0 and 1 annotate the same response: each is the other's gold.
    assert [read(r) for r in pair.annotations.readings] == [
        ("record 0", ["Mira Olsen", "1921"], ["1921"]),
        ("record 1", ["1921"], ["Mira Olsen", "1921"]),
    ]
    # A response with one fitting row has one reading (counted, never scored); record 5 does not fit: no reading.
    assert [r.annotator for r in by_id["favabench/4"].annotations.readings] == ["record 4"]
    assert "record 5" not in {r.annotator for ex in by_id.values() for r in ex.annotations.readings}


def test_the_others_gold_follows_the_duplicates_rule():
    # With three fitting rows a, b, c: first-matching leaves b's gold to a (the first other), union to a + c.
    adapter = adapters.create("favabench", duplicates="union")
    a, b, c = ([Span(start=k, end=k + 2)] for k in (0, 4, 8))
    assert adapter.gold_of([a, c]) == [Span(start=0, end=2), Span(start=8, end=10)]
    assert adapters.create("favabench").gold_of([a, c]) == a
    assert adapters.create("favabench").gold_of([]) == []


def test_real_file_responses_with_several_fitting_rows():
    path = require_shared("fava", FILE)
    examples = adapters.create("favabench").load(path.parent.parent).examples
    sizes = Counter(len(ex.annotations.readings) for ex in examples)
    # 267 responses; 135 have two to five fitting rows (the 28 rows of other generations never fit).
    assert sizes == {1: 132, 2: 111, 3: 19, 4: 4, 5: 1}


def test_bad_files_name_the_file_and_the_record(tmp_path):
    folder = tmp_path / "fava"
    folder.mkdir()
    path = folder / "annotations.json"
    path.write_text(json.dumps({"prompt": "q"}))
    with pytest.raises(SourceError, match=rf"^{path}: expected a JSON array of records"):
        adapters.create("favabench").load(tmp_path)
    path.write_text(json.dumps([{"prompt": "q", "output": "a", "annotated": "a"}, {"prompt": "q", "output": "b"}]))
    with pytest.raises(SourceError, match=rf"^{path} record 1: annotated: Field required"):
        adapters.create("favabench").load(tmp_path)
    path.write_text("[{")
    with pytest.raises(SourceError, match=rf"^{path}:1: not valid JSON"):
        adapters.create("favabench").load(tmp_path)
    path.unlink()
    with pytest.raises(SourceError, match=r"annotations\.json: file not found .*data download favabench"):
        adapters.create("favabench").load(tmp_path)


def test_only_the_test_split_exists():
    from shambench.data.adapter import adapters
    from shambench.errors import DataError

    with pytest.raises(DataError, match=r"favabench has no 'dev' split \(it offers: test\)"):
        adapters.create("favabench").load(FIXTURES, "dev")


def _real(**options):
    root = require_shared("fava", "annotations.json").parent.parent
    return adapters.create("favabench", **options).load(root)


@pytest.mark.parametrize(
    ("options", "count", "dropped", "tagged"),
    [
        ({}, 267, {DUPLICATE: 165, MISMATCH: 28}, 186),
        ({"duplicates": "first"}, 253, {DUPLICATE: 179, MISMATCH: 28}, 172),
        ({"duplicates": "union"}, 267, {MISMATCH: 28}, 203),
        ({"keep_untagged": False}, 186, {DUPLICATE: 165, MISMATCH: 28, UNTAGGED: 81}, 186),
        ({"exclude_types": ("subjective", "unverifiable")}, 267, {DUPLICATE: 165, MISMATCH: 28}, 149),
    ],
)
def test_real_file_counts_per_variant(options, count, dropped, tagged):
    result = _real(**options)
    assert len(result.examples) == count
    assert result.dropped == dropped
    assert sum(bool(ex.hallu_spans) for ex in result.examples) == tagged
    # Every row is accounted for: used (once, or merged under `union`) or dropped with a reason.
    used = sum(len(ex.meta.get("records", [ex.meta["record"]])) for ex in result.examples)
    assert used + sum(dropped.values()) == 460


def test_real_file_default_keeps_every_released_response_once():
    rows = json.loads(require_shared("fava", "annotations.json").read_text(encoding="utf-8"))
    result = _real()
    assert len({(r["prompt"], r["output"]) for r in rows}) == len(result.examples) == 267
    assert len({ex.id for ex in result.examples}) == 267


def test_real_file_stats_of_the_default():
    from shambench.data.stats import group_stats

    stats = group_stats("open_qa", "favabench", _real().examples, 261)
    assert (round(stats.mean_response_tokens, 1), round(stats.mean_hallucinated_tokens, 1)) == (296.7, 35.0)
    assert round(stats.mean_hallucinated_rate, 3) == 0.106


def test_unknown_options_are_refused():
    with pytest.raises(ValueError, match="duplicates must be one of"):
        adapters.create("favabench", duplicates="last")
    with pytest.raises(ValueError, match="unknown error type"):
        adapters.create("favabench", exclude_types=("opinion",))

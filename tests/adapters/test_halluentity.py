"""HalluEntity adapter: entity placement (cursor, restart, normalised search) and the invented fixture file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shambench.adapters.halluentity import LENGTHS, NO_ENTITY, UNPLACED, locate
from shambench.data.adapter import adapters
from shambench.errors import SourceError

FIXTURES = Path(__file__).parent / "fixtures"


def test_locate_uses_the_cursor_then_restarts_then_normalises():
    text = "Oslo, then Bergen, then Oslo."
    # From cursor 0 the first "Oslo" is [0, 4); from cursor 4 the second, at 24 ("Oslo, then Bergen, then " is 24).
    assert locate(text, "Oslo", 0) == (0, 4)
    assert locate(text, "Oslo", 4) == (24, 28)
    # "Bergen" lies before cursor 20, so the search restarts at 0: [11, 17).
    assert locate(text, "Bergen", 20) == (11, 17)
    # Curly quotes and a line break in the response still match straight quotes and a single space.
    assert locate("He wrote \u2018A  B\u2019 in\nNew York.", "'A B'", 0) == (9, 15)
    assert locate("He lived in New\nYork.", "New York", 0) == (12, 20)
    assert locate("He lived in York.", "Leeds", 0) is None
    assert locate("He lived in York.", "  ", 0) is None


@given(st.lists(st.sampled_from(["ab", "cd", "ab cd", "e"]), min_size=1, max_size=6), st.data())
def test_located_entities_are_their_text_in_reading_order(words, data):
    response = " ".join(words) + "."
    picks = sorted(data.draw(st.sets(st.integers(0, len(words) - 1), min_size=1)))
    cursor = 0
    for i in picks:
        start, end = locate(response, words[i], cursor)
        assert response[start:end] == words[i]
        # Entities listed in reading order never land before the previous one.
        assert start >= cursor
        cursor = end


def test_fixture_file_loads_with_drop_counts():
    result = adapters.create("halluentity").load(FIXTURES)
    # 9 rows: row 6 has a hallucinated entity absent from the response, row 7 none, row 8 one label for two
    # entities; 6 remain.
    assert result.dropped == {UNPLACED: 1, NO_ENTITY: 1, LENGTHS: 1}
    by_id = {ex.id: ex for ex in result.examples}
    assert list(by_id) == [f"halluentity/{i}" for i in (1, 2, 3, 4, 5, 9)]
    assert {ex.partition for ex in result.examples} == {"open_bio/halluentity"}

    def texts(i):
        ex = by_id[f"halluentity/{i}"]
        return [ex.response[s.start : s.end] for s in ex.hallu_spans]

    assert texts(1) == ["1984", "Vienna"]
    # The second "Oslo" is the hallucinated one: "Per Halvang was born in Oslo. He worked in Bergen and later
    # returned to " is 72 characters.
    assert [(s.start, s.end) for s in by_id["halluentity/2"].hallu_spans] == [(72, 76)]
    assert texts(3) == ["Aurelia Tower"]  # after "Genoa" the cursor passed "Marco Tellini": restart at 0
    assert texts(4) == ["\u2018The Glass Harp\u2019", "New\nAmsterdam"]
    # A factual entity that cannot be found is counted, not dropped.
    assert texts(5) == ["German"] and by_id["halluentity/5"].meta["unplaced_factual"] == 1
    # Overlapping hallucinated entities merge: "Royal Academy" [26, 39) + "Academy of Music" [32, 48).
    assert [(s.start, s.end) for s in by_id["halluentity/9"].hallu_spans] == [(26, 48)]
    entities = by_id["halluentity/1"].meta["entities"]
    assert [(e["text"], e["factual"]) for e in entities][:3] == [
        ("Anya Korvel", True),
        ("Latvian", True),
        ("1984", False),
    ]
    assert all(by_id["halluentity/1"].response[e["start"] : e["end"]] == e["text"] for e in entities)


def test_bad_rows_name_the_file_and_line(tmp_path):
    folder = tmp_path / "halluentity"
    folder.mkdir()
    path = folder / "HalluEntity.jsonl"
    good = {"prompt": "Tell me a bio of A.", "response": "A is B.", "entity": ["A"], "entity_label": [True]}
    path.write_text(json.dumps(good) + "\n\n" + json.dumps({**good, "entity": "A"}) + "\n")
    with pytest.raises(SourceError, match=rf"^{path}:3: entity: Input should be a valid list"):
        adapters.create("halluentity").load(tmp_path)
    path.write_text(json.dumps(good) + "\n{oops\n")
    with pytest.raises(SourceError, match=rf"^{path}:2: not valid JSON .*expected HalluEntity JSON lines"):
        adapters.create("halluentity").load(tmp_path)


def test_subject_of_bio_prompts():
    from shambench.adapters.halluentity import subject_of

    assert subject_of("Tell me a bio of Marie Curie.") == "Marie Curie"
    assert subject_of("tell me a biography of Lionel Messi") == "Lionel Messi"
    assert subject_of("Who won the 1998 World Cup?") is None

"""A run's fingerprint: everything of its examples a number depends on. A rescore on changed data stops with
exit status 2 naming what changed (soft labels, annotators, labels, meta...), or with --accept-changed-data says
so loudly and records it; old runs (fingerprint 1) are still read; the board names the cause."""

from __future__ import annotations

import hashlib
import json
from typing import Any, get_args, get_origin

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from shambench.cli import main
from shambench.io import write_jsonl
from shambench.runs.rundir import (
    _PART_KEYS,
    EXAMPLE_PARTS,
    FINGERPRINT,
    changed_parts,
    example_parts,
    examples_hash,
    fingerprints,
    load_config,
)
from shambench.schema import Annotations, Example, Reading, SoftSpan, Span, Step

EXAMPLES = [
    Example(id="a", dataset="toy", task="summ", response="Paris is in Italy.", hallu_spans=[[12, 17]]),
    Example(id="b", dataset="toy", task="summ", response="Rome is in Italy.", meta={"lang": "en"}),
]
# Each change touches one part only, and none of them the ids, responses or gold spans that fingerprint 1 hashed.
CHANGES = {
    "soft labels": {"soft_spans": [{"start": 12, "end": 17, "prob": 0.5}]},
    "meta (languages, source facts)": {"meta": {"lang": "fr"}},
    "gold spans and their labels": {"hallu_spans": [{"start": 12, "end": 17, "label": "entity"}]},
    "questions": {"question": "Where is Paris?"},
}


def changed(example: Example, update: dict) -> Example:
    return Example.model_validate({**example.model_dump(), **update})


def run_of(tmp_path, examples=EXAMPLES):
    path = tmp_path / "examples.jsonl"
    write_jsonl(path, examples)
    run = tmp_path / "run"
    args = ["eval", "--detector", "all", "--examples", str(path), "--run-dir", str(run), "--bootstrap", "10"]
    result = CliRunner().invoke(main, [*args, "--no-progress"])
    assert result.exit_code == 0, result.output
    return path, run


def test_a_new_run_records_every_part_and_its_fingerprint(tmp_path):
    _, run = run_of(tmp_path)
    config = load_config(run)
    assert (config.fingerprint, config.examples_hash) == (FINGERPRINT, examples_hash(EXAMPLES))
    assert config.example_parts == example_parts(EXAMPLES) and set(config.example_parts) == set(EXAMPLE_PARTS)
    assert examples_hash(list(reversed(EXAMPLES))) == config.examples_hash  # order-independent


@pytest.mark.parametrize("part", sorted(CHANGES))
def test_a_change_of_any_part_stops_a_rescore_and_names_that_part(tmp_path, part):
    path, run = run_of(tmp_path)
    write_jsonl(path, [changed(EXAMPLES[0], CHANGES[part]), EXAMPLES[1]])
    assert changed_parts(load_config(run), [changed(EXAMPLES[0], CHANGES[part]), EXAMPLES[1]]) == [part]
    before = (run / "results.json").read_text()
    result = CliRunner().invoke(main, ["score", str(run), "--bootstrap", "10"])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: the data changed since the run was made: {part} differ")
    assert "--accept-changed-data" in result.stderr and "Traceback" not in result.output
    assert (run / "results.json").read_text() == before  # nothing rewritten


def test_accepting_changed_data_rescores_loudly_and_records_it(tmp_path):
    path, run = run_of(tmp_path)
    write_jsonl(path, [changed(EXAMPLES[0], CHANGES["soft labels"]), EXAMPLES[1]])
    result = CliRunner().invoke(main, ["score", str(run), "--bootstrap", "10", "--accept-changed-data"])
    assert result.exit_code == 0, result.output
    assert "CHANGED DATA: the data changed since the run was made: soft labels differ" in result.stderr
    results = json.loads((run / "results.json").read_text())
    assert results["run"]["data_changed"] == ["soft labels"]


def test_the_context_is_not_part_of_it(tmp_path):
    # A context provider's evidence is recorded apart (context_provenance): replacing it changes no number.
    _, run = run_of(tmp_path)
    assert changed_parts(load_config(run), [changed(EXAMPLES[0], {"context": "other evidence"}), EXAMPLES[1]]) is None


def test_a_run_of_fingerprint_1_is_still_read_and_checked_as_it_was(tmp_path):
    path, run = run_of(tmp_path)
    config = json.loads((run / "config.json").read_text())
    config["examples_hash"] = examples_hash(EXAMPLES, fingerprint=1)
    del config["fingerprint"], config["example_parts"]
    (run / "config.json").write_text(json.dumps(config))
    assert CliRunner().invoke(main, ["score", str(run), "--bootstrap", "10"]).exit_code == 0
    # what fingerprint 1 did not cover goes unnoticed there, as before...
    assert changed_parts(load_config(run), [changed(EXAMPLES[0], CHANGES["soft labels"]), EXAMPLES[1]]) is None
    # ...and what it did is caught, without a part to name
    write_jsonl(path, [changed(EXAMPLES[0], {"response": "Paris is in Spain."}), EXAMPLES[1]])
    result = CliRunner().invoke(main, ["score", str(run), "--bootstrap", "10"])
    assert result.exit_code == 2
    assert "its examples (an older run: which part, it does not record) differ" in result.stderr


def test_the_board_names_the_cause(tmp_path):
    path, run = run_of(tmp_path)
    write_jsonl(path, [EXAMPLES[0], changed(EXAMPLES[1], CHANGES["meta (languages, source facts)"])])
    site = tmp_path / "site"
    result = CliRunner().invoke(main, ["leaderboard", "build", "--runs", str(run), "--out", str(site), "--no-reported"])
    assert result.exit_code == 0, result.output
    board = json.loads((site / "leaderboard.json").read_text())
    (why,) = board["skipped"].values()
    assert why.startswith("not rescored from its journal: the data changed since the run was made: meta")


# --- fingerprints: both hashes from one serialization of each part, equal to their definitions -------------------


def parts_by_definition(examples) -> dict[str, str]:
    """Each part's hash as `example_parts` defined it: the part's model_dump_json a line, in id order."""
    out = {}
    for part, fields in EXAMPLE_PARTS.items():
        h = hashlib.sha256()
        for ex in sorted(examples, key=lambda e: e.id):
            h.update(ex.model_dump_json(include=fields).encode() + b"\n")
        out[part] = h.hexdigest()
    return out


def test_the_parts_are_every_field_but_the_context_in_order():
    joined = [field for fields in EXAMPLE_PARTS.values() for field in Example.model_fields if field in fields]
    assert joined == [field for field in Example.model_fields if field != "context"]
    assert sum(map(len, EXAMPLE_PARTS.values())) == len(joined)


texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
# ids and names hold no control or format character (shambench.schema.Name)
names = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs", "Cc", "Cf"]), max_size=12)
meta_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def examples(draw, i: int = 0) -> Example:
    response = draw(st.text(min_size=2, max_size=30))
    end = len(response)
    reading = {
        "annotator": draw(names),
        "spans": [[0, 1]],
        "others": [],
        "others_soft": [{"start": 1, "end": end, "prob": 0.25}],
    }
    optional = {
        "soft_spans": [{"start": 0, "end": end, "prob": draw(st.floats(0, 1))}],
        "steps": [{"start": 0, "end": end, "label": draw(st.integers(0, 1))}],
        "annotations": {
            "readings": [reading],
            "rule": draw(texts),
            "reproduces_gold": draw(st.booleans()),
            # a reason named like a part's first field is a key inside a part (`_PART_KEYS`)
            "unplaced": draw(
                st.dictionaries(st.sampled_from(["meta", "steps", "question", "moved"]) | texts, st.integers())
            ),
        },
    }
    kept = draw(st.sets(st.sampled_from(sorted(optional))))
    return Example.model_validate(
        {
            "id": f"{i}/{draw(names)}",
            "dataset": draw(names),
            "task": draw(names),
            "split": draw(st.sampled_from(["test", "dev"])),
            "question": draw(texts),
            "context": draw(texts),
            "response": response,
            "hallu_spans": draw(st.sampled_from([[], [[0, 1]], [[1, end, "entity"]]])),
            "meta": draw(st.dictionaries(texts, meta_values, max_size=3)),
            **{key: optional[key] for key in kept},
        }
    )


@given(
    st.lists(st.integers(0, 10**6), min_size=1, max_size=4, unique=True).flatmap(
        lambda ids: st.tuples(*(examples(i) for i in ids))
    )
)
def test_fingerprints_are_examples_hash_and_the_parts_by_definition(drawn):
    assert fingerprints(list(drawn)) == (examples_hash(list(drawn)), parts_by_definition(drawn))


def test_fingerprints_of_a_subclass_with_fields_of_its_own():
    class Tagged(Example):
        tag: str = "x"

    tagged = [Tagged(**ex.model_dump()) for ex in EXAMPLES]
    assert fingerprints(tagged) == (examples_hash(tagged), parts_by_definition(tagged))
    assert fingerprints(tagged)[0] != fingerprints(EXAMPLES)[0]  # the tag is in the whole hash


def nested_models(annotation) -> set[type[BaseModel]]:
    """The pydantic models an annotation holds, at any depth of containers or unions."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {annotation} | {m for f in annotation.model_fields.values() for m in nested_models(f.annotation)}
    return {m for arg in get_args(annotation) for m in nested_models(arg)}


def free_keys(annotation) -> bool:
    """Whether an annotation holds a mapping or an untyped value, whose keys are not field names."""
    return get_origin(annotation) is dict or annotation is Any or any(free_keys(arg) for arg in get_args(annotation))


def test_no_key_inside_the_parts_before_meta_is_taken_for_a_part():
    # fingerprints cuts each example's JSON at the first ',"<first field of a part>":' after the previous part: a
    # model inside a part with a field of such a name, or free keys, would be cut there
    firsts = {key.decode()[2:-2] for key in _PART_KEYS}
    inside = set().union(*(nested_models(f.annotation) for n, f in Example.model_fields.items() if n != "meta"))
    assert inside == {Span, SoftSpan, Step, Reading, Annotations}
    assert not firsts & {name for model in inside for name in model.model_fields}
    free = {(m.__name__, n) for m in inside for n, f in m.model_fields.items() if free_keys(f.annotation)}
    assert free == {("Annotations", "unplaced")}  # serialized by part when a key of it is "meta"
    assert not [n for n, f in Example.model_fields.items() if n not in ("meta", "context") and free_keys(f.annotation)]


def test_an_unplaced_reason_named_meta_is_in_the_annotators_part():
    ex = Example.model_validate(
        {**EXAMPLES[0].model_dump(), "annotations": {"readings": [], "rule": "r", "unplaced": {"x": 1, "meta": 2}}}
    )
    assert fingerprints([ex]) == (examples_hash([ex]), parts_by_definition([ex]))

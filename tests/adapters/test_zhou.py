"""Zhou et al. 2021 adapter: token labels to character spans, on the real release and on invented files."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shambench.adapters.zhou import SYSTEMS, spans_of_labels
from shambench.data.adapter import adapters
from shambench.errors import SourceError
from tests.conftest import require_shared


def _load(data_dir: Path):
    return adapters.create("zhou").load(data_dir)


def _tokens_in_spans(text: str, spans) -> list[str]:
    return [m.group() for m in re.finditer(r"\S+", text) if any(s.start <= m.start() < s.end for s in spans)]


@pytest.fixture(scope="module")
def real():
    folder = require_shared("zhou", "eval_data")
    return folder.parent, _load(folder.parent.parent)


def test_real_counts_per_system(real):
    _, result = real
    # Everything released is kept (SHAM-Bench kept 1,995 / 479 without saying which rows it dropped).
    assert Counter(ex.task for ex in result.examples) == {"summ": 2000, "mt": 484}
    assert result.dropped == {}
    assert Counter(ex.meta["system"] for ex in result.examples) == {
        "BERTS2S": 500,
        "PtGen": 500,
        "TConvS2S": 500,
        "TranS2S": 500,
        "trans2s": 236,
        "mbart": 248,
    }
    assert len({ex.id for ex in result.examples}) == 2484


def test_real_spans_cover_exactly_the_tokens_labelled_1(real):
    root, result = real
    hallucinated_lines, hallucinated_tokens = Counter(), Counter()
    for system in SYSTEMS:
        examples = [ex for ex in result.examples if ex.meta["system"] == system.name]
        labels = (root / system.file("label")).read_text().splitlines()
        targets = (root / system.file("target")).read_text(encoding="utf-8").split("\n")
        for ex, line, target in zip(examples, labels, targets, strict=False):
            assert ex.response == target
            released = [tok for tok, lab in zip(target.split(" "), line.split()) if lab == "1"]
            assert _tokens_in_spans(ex.response, ex.hallu_spans) == released
            assert all(0 <= s.start < s.end <= len(ex.response) for s in ex.hallu_spans)
            hallucinated_lines[system.name] += bool(ex.hallu_spans)
            hallucinated_tokens[system.name] += len(released)
    # SOURCE.md's per-system lines with >= 1 hallucinated token, and hallucinated tokens.
    assert hallucinated_lines == {
        "BERTS2S": 441,
        "PtGen": 447,
        "TConvS2S": 464,
        "TranS2S": 462,
        "trans2s": 175,
        "mbart": 159,
    }
    assert hallucinated_tokens == {
        "BERTS2S": 3373,
        "PtGen": 4687,
        "TConvS2S": 4760,
        "TranS2S": 4297,
        "trans2s": 1061,
        "mbart": 468,
    }


def test_real_ids_come_from_the_bbc_ids_and_mt_lines(real):
    root, result = real
    docids = (root / SYSTEMS[0].file("docid")).read_text().split()
    xsum = [ex for ex in result.examples if ex.meta["system"] == "BERTS2S"]
    assert [ex.id for ex in xsum] == [f"zhou/xsum-BERTS2S/{d}" for d in docids]
    mbart = [ex for ex in result.examples if ex.meta["system"] == "mbart"]
    assert [ex.id for ex in mbart[:2]] == ["zhou/mt-mbart/1", "zhou/mt-mbart/2"]
    assert mbart[0].context == (root / "eval_data/mt/mbart.source").read_text(encoding="utf-8").split("\n")[0]


def test_runs_of_labelled_tokens_become_one_span_each():
    text = "the cat sat on the red mat"
    # Tokens: the[0,3) cat[4,7) sat[8,11) on[12,14) the[15,18) red[19,22) mat[23,26).
    spans = spans_of_labels(text, ["0", "1", "1", "0", "0", "1", "1"])
    assert [(s.start, s.end) for s in spans] == [(4, 11), (19, 26)]
    assert [text[s.start : s.end] for s in spans] == ["cat sat", "red mat"]
    assert spans_of_labels(text, ["1"] * 7)[0].model_dump(include={"start", "end"}) == {"start": 0, "end": 26}


_token = st.text(
    st.characters(blacklist_categories=("Zs", "Cc", "Cs", "Zl", "Zp"), blacklist_characters=" "), min_size=1
)


@given(st.lists(st.tuples(_token, st.booleans()), min_size=1, max_size=30))
def test_spans_cover_the_labelled_tokens_and_nothing_else(tokens):
    text = " ".join(tok for tok, _ in tokens)
    labels = ["1" if flag else "0" for _, flag in tokens]
    spans = spans_of_labels(text, labels)
    assert _tokens_in_spans(text, spans) == [tok for tok, flag in tokens if flag]
    # Spans never touch: a run ends only at an unlabelled token, so each span is one maximal run.
    assert all(a.end < b.start for a, b in zip(spans, spans[1:]))
    assert len(spans) == sum(1 for i, (_, flag) in enumerate(tokens) if flag and (i == 0 or not tokens[i - 1][1]))


def _write_release(tmp_path: Path, rows: dict[str, list[tuple[str, str]]] | None = None) -> Path:
    """Every system's files, each with the given `(target, labels)` lines (default: two sound lines)."""
    root = tmp_path / "zhou"
    rows = rows or {}
    for system in SYSTEMS:
        lines = rows.get(system.name, [("a quiet town", "0 0 1"), ("rain fell all day", "1 1 0 0")])
        columns = {
            "docid": [str(30000000 + i) for i in range(len(lines))],
            "source": [f"Invented article {i} about a town." for i in range(len(lines))],
            "target": [target for target, _ in lines],
            "label": [labels for _, labels in lines],
        }
        for ext in system.extensions:
            path = root / system.file(ext)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(f"{line}\n" for line in columns[ext]), encoding="utf-8")
    return root


def test_invented_release_loads_with_defective_lines_counted(tmp_path):
    _write_release(
        tmp_path,
        {
            "PtGen": [("one two three", "0 1"), ("fine words here", "0 0 1")],
            "mbart": [("", ""), ("some output\x0cwith a form feed", "0 1 1 1 1 1")],
        },
    )
    result = _load(tmp_path)
    # 6 systems x 2 lines = 12; PtGen's first line has 2 labels for 3 tokens and mbart's first is empty.
    assert len(result.examples) == 10
    assert result.dropped == {"label count differs from the target's token count": 1, "empty target": 1}
    by_id = {ex.id: ex for ex in result.examples}
    first = by_id["zhou/xsum-BERTS2S/30000000"]
    # "a quiet " is 8 characters: "town" is [8, 12).
    assert (first.task, [(s.start, s.end) for s in first.hallu_spans]) == ("summ", [(8, 12)])
    assert first.context == "Invented article 0 about a town."
    assert first.meta == {"system": "BERTS2S", "corpus": "xsum", "line": 1}
    # A form feed separates tokens but does not end the line: some[0,4) output[5,11) with[12,16) a[17,18)
    # form[19,23) feed[24,28), the last five labelled 1.
    mt = by_id["zhou/mt-mbart/2"]
    assert (mt.task, mt.response) == ("mt", "some output\x0cwith a form feed")
    assert [(s.start, s.end) for s in mt.hallu_spans] == [(5, 28)]


def test_label_other_than_0_or_1_drops_the_line(tmp_path):
    _write_release(tmp_path, {"TranS2S": [("a b", "0 2"), ("c d", "1 0")]})
    result = _load(tmp_path)
    assert result.dropped == {"label other than 0 or 1": 1}


def test_files_with_different_line_counts_are_named(tmp_path):
    root = _write_release(tmp_path)
    label = root / SYSTEMS[2].file("label")
    label.write_text(label.read_text().splitlines()[0] + "\n")
    with pytest.raises(SourceError, match=r"line counts differ .*TConvS2S\.label has 1.*expected one line per example"):
        _load(tmp_path)


def test_missing_file_is_named(tmp_path):
    root = _write_release(tmp_path)
    (root / "eval_data/mt/trans2s.target").unlink()
    with pytest.raises(SourceError, match=r"trans2s\.target: file not found"):
        _load(tmp_path)


def test_real_summaries_get_their_three_workers_from_xsumfaith(real):
    require_shared("xsumfaith")
    _, result = real
    summ = [ex for ex in result.examples if ex.task == "summ"]
    # Every XSum summary joins XSumFaith by (BBC id, system); one has two workers there.
    assert Counter(len(ex.annotations.readings) for ex in summ) == {3: 1999, 2: 1}
    assert all(ex.annotations is None for ex in result.examples if ex.task == "mt")
    # The three workers' token majority is Zhou's released labels on 1,912 of the 2,000 summaries.
    assert sum(ex.annotations.reproduces_gold for ex in summ) == 1912


def _write_workers(data_dir: Path, rows: list[str]) -> None:
    root = data_dir / "xsumfaith"
    root.mkdir()
    header = "bbcid,system,summary,hallucination_type,hallucinated_span,hallucinated_span_start,hallucinated_span_end"
    (root / "hallucination_annotations_xsum_summaries.csv").write_text(
        "".join(f"{line}\n" for line in [header + ",worker_id", *rows]), encoding="utf-8"
    )


def test_invented_workers_beside_the_tokens_both_others_marked(tmp_path):
    _write_release(tmp_path)
    # "a quiet town" (Zhou labels 0 0 1): a[0,1) quiet[2,7) town[8,12); spans given 1-based.
    _write_workers(
        tmp_path,
        [
            "30000000,BERTS2S,a quiet town,extrinsic,quiet town,3,13,wid_0",
            "30000000,BERTS2S,a quiet town,extrinsic,town,9,13,wid_1",
            "30000000,BERTS2S,a quiet town,extrinsic,own,10,13,wid_2",
            "30000001,BERTS2S,rain fell all day,NULL,NULL,-1,-1,wid_0",
            "30000001,BERTS2S,rain fell all day,extrinsic,rain,1,5,wid_1",
        ],
    )
    by_id = {ex.id: ex for ex in _load(tmp_path).examples}
    first = by_id["zhou/xsum-BERTS2S/30000000"].annotations
    readings = {r.annotator: r for r in first.readings}
    assert [(s.start, s.end) for s in readings["wid_0"].spans] == [(2, 12)]
    # Left out wid_0, both others touch "town": it is their gold (a token counts when a span overlaps it).
    assert [(s.start, s.end) for s in readings["wid_0"].others] == [(8, 12)]
    # Left out wid_2, only one other marks "quiet": not both, so "town" alone.
    assert [(s.start, s.end) for s in readings["wid_2"].others] == [(8, 12)]
    assert first.reproduces_gold is True  # "town" by three, "quiet" by one: 0 0 1, as Zhou released
    second = by_id["zhou/xsum-BERTS2S/30000001"].annotations
    # Two workers: each is the other's gold; their majority ("rain" by one of two) is not Zhou's "rain fell".
    assert [(r.annotator, [(s.start, s.end) for s in r.others]) for r in second.readings] == [
        ("wid_0", [(0, 4)]),
        ("wid_1", []),
    ]
    assert second.reproduces_gold is False
    # Summaries XSumFaith does not hold get no annotators.
    assert by_id["zhou/xsum-PtGen/30000000"].annotations is None

"""XSumFaith: the three workers' spans placed on their summaries, on the real release and on invented files."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shambench.adapters.xsumfaith import (
    ANNOTATIONS,
    EMPTY,
    GOLD_ARTICLES,
    NO_ARTICLE,
    NOT_FOUND,
    STRAY_NULL,
    TIED,
    AnnotatedSummary,
    occurrences,
    place_span,
    read_annotations,
)
from shambench.data.adapter import adapters
from shambench.errors import SourceError
from shambench.schema import Span
from tests.conftest import require_shared

HEADER = (
    "bbcid,system,summary,hallucination_type,hallucinated_span,hallucinated_span_start,hallucinated_span_end,worker_id"
)
# Offsets of S1 = r"the cat\'s owner said the cat sat." (34 characters):
# the[0,3) cat\'s[4,10) owner[11,16) said[17,21) the[22,25) cat[26,29) sat.[30,34).
S1 = r"the cat\'s owner said the cat sat."
# S2 = "a dog and a dog." (16): a[0,1) dog[2,5) and[6,9) a[10,11) dog.[12,16).
S2 = "a dog and a dog."
ROWS = [
    f"100,BERTS2S,{S1},extrinsic,owner,12,17,wid_0",  # 1-based: S1[11:16]
    f"100,BERTS2S,{S1},intrinsic,cat,26,29,wid_0",  # 0-based: the second "cat", 1 from the 1-based anchor 25
    f"100,BERTS2S,{S1},extrinsic,the cat sat,21,32,wid_1",  # shifted: at 22, 2 from the anchor 20
    rf"100,BERTS2S,{S1},extrinsic,\nthe cat\\'s owner,0,19,wid_1",  # the release's escapes around the text
    f"100,BERTS2S,{S1},NULL,NULL,-1,-1,wid_2",
    f"200,Gold,{S2},extrinsic,dog,8,11,wid_0",  # "dog" at 2 and 12, both 5 from the anchor 7
    f"200,Gold,{S2},extrinsic,cow,1,4,wid_0",
    f"200,Gold,{S2},extrinsic, ,2,3,wid_1",
    f"200,Gold,{S2},intrinsic,dog ,13,17,wid_1",  # trailing space stripped: S2[12:15]
    f"200,Gold,{S2},NULL,kevin,-1,-1,wid_2",
    f"200,Gold,{S2},extrinsic,a dog,1,6,wid_2",
]


def _write(tmp_path: Path, rows: list[str], header: str = HEADER) -> Path:
    root = tmp_path / "xsumfaith"
    root.mkdir()
    # The release is CRLF-terminated.
    (root / ANNOTATIONS).write_bytes("".join(line + "\r\n" for line in [header, *rows]).encode())
    return root


def _ranges(spans: list[Span]) -> list[tuple[int, int, str | None]]:
    return [(s.start, s.end, s.label) for s in spans]


def test_each_worker_gets_the_spans_placed_by_text(tmp_path):
    result = read_annotations(_write(tmp_path, ROWS))
    first, second = result.summaries
    assert (first.bbcid, first.system, first.summary) == ("100", "BERTS2S", S1)
    assert _ranges(first.workers["wid_0"]) == [(11, 16, "extrinsic"), (26, 29, "intrinsic")]
    assert _ranges(first.workers["wid_1"]) == [(0, 16, "extrinsic"), (22, 33, "extrinsic")]
    assert first.workers["wid_2"] == []
    assert S1[0:16] == r"the cat\'s owner" and S1[22:33] == "the cat sat"
    # The tied "dog" and the absent "cow" leave wid_0 with no span; wid_1's blank span is not placed.
    assert _ranges(second.workers["wid_0"]) == []
    assert _ranges(second.workers["wid_1"]) == [(12, 15, "intrinsic")]
    assert _ranges(second.workers["wid_2"]) == [(0, 5, "extrinsic")]
    assert result.placed == {"offset": 4, "nearest": 1, "unescaped": 1}
    assert result.unplaced == {TIED: 1, NOT_FOUND: 1, EMPTY: 1}
    assert result.ignored == {STRAY_NULL: 1}


def test_majority_is_more_than_half_of_the_workers_per_token(tmp_path):
    first, second = read_annotations(_write(tmp_path, ROWS)).summaries
    # S1 tokens: the, cat\'s, owner, said, the, cat, sat. -> wid_0 marks owner and cat, wid_1 the..owner and
    # the cat sat: 2 votes on owner and cat only.
    assert first.token_votes() == [1, 1, 2, 0, 1, 2, 1]
    assert first.majority_labels() == ["0", "0", "1", "0", "0", "1", "0"]
    assert second.token_votes() == [1, 1, 0, 0, 1]
    assert second.majority_labels() == ["0"] * 5
    # With two workers a majority needs both.
    pair = AnnotatedSummary(
        bbcid="1", system="PtGen", summary="a b", workers={"w0": [Span(start=0, end=3)], "w1": [Span(start=2, end=3)]}
    )
    assert pair.majority_labels() == ["0", "1"]


@pytest.mark.parametrize(
    ("rows", "header", "message"),
    [
        (ROWS, HEADER.replace(",worker_id", ""), "header lacks column(s) worker_id"),
        ([f"100,BERTS2S,{S1},extrinsic,owner,twelve,17,wid_0"], HEADER, ":2: hallucinated_span_start is 'twelve'"),
        ([f"100,BERTS2S,{S1},made-up,owner,12,17,wid_0"], HEADER, ":2: hallucination_type is 'made-up'"),
        ([f"100,BERTS2S,{S1},extrinsic,owner,12,17"], HEADER, ":2: expected 8 comma-separated fields"),
        (
            [f"100,BERTS2S,{S1},NULL,NULL,-1,-1,wid_0", f"100,BERTS2S,{S2},NULL,NULL,-1,-1,wid_1"],
            HEADER,
            ":3: summary differs from the earlier rows of bbcid 100, system BERTS2S",
        ),
    ],
)
def test_malformed_files_are_refused_with_file_and_line(tmp_path, rows, header, message):
    root = _write(tmp_path, rows, header)
    with pytest.raises(SourceError, match=re.escape(message)) as err:
        read_annotations(root)
    assert ANNOTATIONS in str(err.value)


def test_a_missing_file_names_the_download_command(tmp_path):
    with pytest.raises(SourceError, match="shambench data download xsumfaith"):
        read_annotations(tmp_path)


@given(
    summary=st.text(alphabet="ab  ", max_size=20),
    workers=st.lists(st.lists(st.tuples(st.integers(0, 20), st.integers(1, 6)), max_size=3), max_size=4),
)
def test_token_votes_count_the_workers_overlapping_each_token(summary, workers):
    marked = {
        f"w{k}": [Span(start=a, end=min(a + n, len(summary))) for a, n in spans if a < len(summary)]
        for k, spans in enumerate(workers)
    }
    entry = AnnotatedSummary(bbcid="1", system="s", summary=summary, workers=marked)
    tokens = [(m.start(), m.end()) for m in re.finditer(r"\S+", summary)]
    expected = [
        sum(any(s.start < end and start < s.end for s in spans) for spans in marked.values()) for start, end in tokens
    ]
    assert entry.token_votes() == expected


def test_occurrences_include_overlapping_ones():
    assert occurrences("aaaa", "aa") == [0, 1, 2]
    assert occurrences("a dog and a dog.", "dog") == [2, 12]
    assert occurrences("abc", "x") == []


@given(text=st.text(alphabet="ab", max_size=20), needle=st.text(alphabet="ab", min_size=1, max_size=3))
def test_occurrences_are_every_start_of_the_needle(text, needle):
    assert occurrences(text, needle) == [i for i in range(len(text)) if text.startswith(needle, i)]


@given(
    summary=st.text(alphabet="ab \\'", min_size=1, max_size=30),
    cut=st.tuples(st.integers(0, 30), st.integers(1, 8)),
    start=st.integers(-1, 40),
)
def test_a_placed_span_is_the_nearest_occurrence_of_its_text(summary, cut, start):
    text = summary[cut[0] : cut[0] + cut[1]]
    found = place_span(summary, text, start)
    needle = text.strip()
    if not needle:
        assert found == EMPTY
        return
    occurrences = [i for i in range(len(summary)) if summary.startswith(needle, i)]
    anchor = start - 1 + len(text) - len(text.lstrip())
    nearest = min(abs(i - anchor) for i in occurrences)
    if found == TIED:
        assert [abs(i - anchor) for i in occurrences].count(nearest) == 2
        return
    assert not isinstance(found, str)
    at, end, method = found
    assert summary[at:end] == needle and abs(at - anchor) == nearest
    assert method == ("offset" if nearest <= 1 else "nearest")


@pytest.fixture(scope="module")
def real():
    return read_annotations(require_shared("xsumfaith"))


def test_real_file_every_span_row_is_placed(real):
    # SOURCE.md: 2,500 summaries (500 articles x 5 systems), one with 2 workers; 10,397 span rows; 788 NULL rows.
    assert len(real.summaries) == 2500
    assert Counter(s.system for s in real.summaries) == dict.fromkeys(
        ("BERTS2S", "PtGen", "TConvS2S", "TranS2S", "Gold"), 500
    )
    assert [(s.bbcid, s.system) for s in real.summaries if len(s.workers) != 3] == [("35266927", "PtGen")]
    # The 39 spans not verbatim in their summary all carry the release's `\n` / `\\` escapes.
    assert real.placed == {"offset": 10027, "nearest": 331, "unescaped": 39}
    assert real.unplaced == {}
    assert real.ignored == {STRAY_NULL: 7}
    spans = [s for summary in real.summaries for worker in summary.workers.values() for s in worker]
    assert len(spans) == 10397
    assert Counter(s.label for s in spans) == {"extrinsic": 7860, "intrinsic": 2537}


def _zhou_lines(root: Path, system: str, ext: str) -> list[str]:
    return (root / system / f"{system}.{ext}").read_text(encoding="utf-8").split("\n")[:-1]


def test_real_summaries_are_zhous_targets_and_the_majority_mostly_its_labels(real):
    zhou = require_shared("zhou", "eval_data", "xsum")
    by_key = {(s.bbcid, s.system): s for s in real.summaries}
    agree, tokens, agree_tokens = Counter(), Counter(), Counter()
    for system in ("BERTS2S", "PtGen", "TConvS2S", "TranS2S", "Gold"):
        docids, targets, labels = (_zhou_lines(zhou, system, ext) for ext in ("docid", "target", "label"))
        for docid, target, label in zip(docids, targets, labels, strict=True):
            summary = by_key[(docid.strip(), system)]
            assert summary.summary == target
            mine, theirs = summary.majority_labels(), label.split()
            agree[system] += mine == theirs
            tokens[system] += len(theirs)
            agree_tokens[system] += sum(a == b for a, b in zip(mine, theirs, strict=True))
    # Zhou's aggregation is unpublished; where it differs, spans its labels ignore are those with the release's
    # escapes, and a few whose offsets it read differently (e.g. "1 april" marked by all three workers).
    assert agree == {"BERTS2S": 485, "PtGen": 474, "TConvS2S": 475, "TranS2S": 478, "Gold": 494}
    assert tokens == {"BERTS2S": 8992, "PtGen": 10169, "TConvS2S": 9000, "TranS2S": 9193, "Gold": 10595}
    assert agree_tokens == {"BERTS2S": 8959, "PtGen": 10115, "TConvS2S": 8938, "TranS2S": 9156, "Gold": 10546}


def _write_zhou_articles(data_dir: Path, articles: dict[str, str]) -> None:
    """Zhou's `Gold.docid` and `Gold.source`, listing `articles`."""
    for name, lines in zip(GOLD_ARTICLES, (list(articles), list(articles.values()))):
        path = data_dir / "zhou" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def test_the_adapter_keeps_gold_summaries_with_their_article_and_majority_spans(tmp_path):
    gold = [f"300,Gold,{S1}," + row.split(f"{S1},", 1)[1] for row in ROWS[:5]]
    _write(tmp_path, [*ROWS, *gold, f"400,Gold,{S2},NULL,NULL,-1,-1,wid_0"])
    _write_zhou_articles(tmp_path, {"300": "The article of 300.", "999": "Another article."})
    result = adapters.create("xsumfaith").load(tmp_path)
    # Only Gold is read (BERTS2S is summ/zhou); 200 and 400 have no article in Zhou's files.
    [example] = result.examples
    assert (example.id, example.partition, example.context) == (
        "xsumfaith/gold/300",
        "summ/xsumfaith-gold",
        "The article of 300.",
    )
    assert example.response == S1
    # Majority tokens "owner" and "cat" (see test_majority_is_more_than_half_of_the_workers_per_token).
    assert [(s.start, s.end) for s in example.hallu_spans] == [(11, 16), (26, 29)]
    assert example.meta == {"system": "Gold", "bbcid": "300", "workers": 3}
    assert result.dropped == {NO_ARTICLE: 2}
    # Spans of the Gold rows only: 300's (2 at the offset, 1 nearest, 1 unescaped) and 200's (2 at the offset,
    # the tied, absent and blank ones, and the stray NULL text).
    assert result.spans == {
        "placed: offset": 4,
        "placed: nearest": 1,
        "placed: unescaped": 1,
        f"unplaced: {TIED}": 1,
        f"unplaced: {NOT_FOUND}": 1,
        f"unplaced: {EMPTY}": 1,
        f"not a span: {STRAY_NULL}": 1,
    }


def test_the_adapter_needs_zhous_articles(tmp_path):
    _write(tmp_path, ROWS)
    with pytest.raises(SourceError, match="shambench data download zhou"):
        adapters.create("xsumfaith").load(tmp_path)


def test_real_gold_partition(shared_data):
    result = adapters.create("xsumfaith").load(shared_data)
    assert len(result.examples) == 500 and result.dropped == {}
    assert len({ex.id for ex in result.examples}) == 500
    # 430 summaries with a majority span (Zhou's Gold labels: 429), 687 spans over 3,933 of 10,595 tokens (3,886).
    assert sum(bool(ex.hallu_spans) for ex in result.examples) == 430
    assert sum(len(ex.hallu_spans) for ex in result.examples) == 687
    assert result.spans == {"placed: offset": 1983, "placed: nearest": 91, "placed: unescaped": 9}
    zhou = shared_data / "zhou" / "eval_data" / "xsum" / "Gold"
    article = dict(zip(_zhou_lines(zhou.parent, "Gold", "docid"), _zhou_lines(zhou.parent, "Gold", "source")))
    assert all(ex.context == article[ex.meta["bbcid"]] for ex in result.examples)


def test_the_download_is_the_pinned_release_file():
    [remote] = adapters.create("xsumfaith").remote_files
    assert remote.url == (
        "https://raw.githubusercontent.com/google-research-datasets/xsum_hallucination_annotations/"
        f"4abdbb2c807cb93c1df1188a1992d20a55cdcc34/{ANNOTATIONS}"
    )
    assert remote.path == ANNOTATIONS
    assert remote.sha256 == hashlib.sha256(require_shared("xsumfaith", ANNOTATIONS).read_bytes()).hexdigest()


def test_zhous_adapter_declares_the_article_files():
    declared = {remote.path for remote in adapters.create("zhou").remote_files}
    assert set(GOLD_ARTICLES) <= declared

"""`shambench analyze` and `shambench show` on real run directories made with offline baselines."""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from shambench.cli import main
from tests.run_helpers import eval_run, write_jsonl

EXAMPLES = [
    {
        "id": "a",
        "dataset": "toy",
        "task": "qa",
        "question": "Capital of France?",
        "context": "Paris is the capital.",
        "response": "The capital is Lyon.",
        "hallu_spans": [[15, 19]],
    },
    {"id": "b", "dataset": "toy", "task": "summ", "context": "A cat sat.", "response": "A cat sat.", "hallu_spans": []},
]


def _runs(tmp_path):
    ex = write_jsonl(tmp_path / "ex.jsonl", EXAMPLES)
    for det in ("overlap", "all"):
        eval_run(ex, det, tmp_path / det)
    return CliRunner()


def _assert_real_png(path):
    import matplotlib.image as mpimg

    img = mpimg.imread(path)
    assert img.shape[0] > 100 and img.shape[1] > 100
    # not blank: many distinct colours, and not all white
    assert len(np.unique(img.reshape(-1, img.shape[-1]), axis=0)) > 10
    assert (img[..., :3] < 0.9).any()


def test_analyze_two_runs_writes_json_and_figures(tmp_path):
    runner = _runs(tmp_path)
    out = tmp_path / "an"
    res = runner.invoke(main, ["analyze", str(tmp_path / "overlap"), str(tmp_path / "all"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads((out / "analysis.json").read_text())
    # the table says what each column is, and where the files went
    printed = " ".join(res.stdout.split())
    assert "false alarms: share of predicted spans overlapping no gold span;" in printed
    assert "F1 no-gold / all-hallu: mean span F1 over the examples with no gold span / with every token gold" in printed
    assert f"analysis.json (with the definitions) and the figures written to {out.resolve()}" in printed
    by_det = {r["detector"]: r for r in data["runs"]}
    # the definitions analyze --help promises, not a class docstring
    assert "A gold span is *recovered* when any predicted span overlaps it" in by_det["overlap"]["definitions"]
    assert "`f1_no_gold`" in by_det["overlap"]["definitions"]
    # overlap flags exactly "Lyon" (absent from the context): recovered, no boundary error
    ov = by_det["overlap"]["datasets"]["qa/toy"]
    assert ov["recovered_share"] == 1.0 and ov["boundary"]["over_share"] == 0.0
    # `all` flags "The capital is Lyon." (5 tokens) around the 1-token gold span: 4 tokens over
    al = by_det["all"]["datasets"]["qa/toy"]
    assert al["boundary"]["over_mean"] == 4.0
    assert by_det["all"]["datasets"]["summ/toy"]["f1_no_gold"] == 0.0
    for png in ("f1_tasks.png", "pr_scatter.png", "rates_0_overlap.png", "rates_1_all.png"):
        _assert_real_png(out / png)


def test_analyze_says_which_folder_it_wrote_by_default(tmp_path, monkeypatch):
    # one run: RUN_DIR/analysis; several: ./analysis, named as an absolute folder (the current one is tmp_path here)
    runner = _runs(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for runs, folder in (
        ([tmp_path / "overlap"], tmp_path / "overlap" / "analysis"),
        ([tmp_path / "overlap", tmp_path / "all"], work / "analysis"),
    ):
        res = runner.invoke(main, ["analyze", *map(str, runs), "--no-figures"])
        assert res.exit_code == 0, res.output
        printed = " ".join(res.stdout.split())
        assert (
            f"analysis.json (with the definitions) written to {folder.resolve()} (the default folder; --out DIR writes elsewhere)"
            in printed
        )
        assert (folder / "analysis.json").is_file()


def test_show_highlights_one_example(tmp_path):
    runner = _runs(tmp_path)
    res = runner.invoke(main, ["show", str(tmp_path / "overlap"), "--id", "a"])
    assert res.exit_code == 0, res.output
    # not a terminal: the spans are marked in plain text (overflow flags exactly the gold "Lyon")
    assert "The capital is [[{{Lyon}}]]." in res.output and "Capital of France?" in res.output
    assert "[[gold, missed]]  {{predicted, not gold}}" in res.output
    bad = runner.invoke(main, ["show", str(tmp_path / "overlap"), "--id", "nope"])
    assert bad.exit_code == 2 and "no example with id 'nope'" in bad.output


def test_segments_mark_agreement_misses_and_false_alarms():
    from shambench.reporting.highlight import segments
    from shambench.schema import Span

    # gold "capital is Lyon" [4,19), predicted "is Lyon." [12,20)
    out = segments("The capital is Lyon.", [Span(start=4, end=19)], [Span(start=12, end=20)])
    assert out == [("The ", None), ("capital ", "gold"), ("is Lyon", "both"), (".", "pred")]


def test_show_html_page_and_leaderboard_links_to_it(tmp_path):
    runner = _runs(tmp_path)
    page = tmp_path / "ex.html"
    res = runner.invoke(main, ["show", str(tmp_path / "overlap"), "--html", str(page)])
    assert res.exit_code == 0, res.output
    text = page.read_text()
    # overlap flags exactly the gold "Lyon": marked as agreement, in example a's section
    assert '<section id="a" data-partition="qa/toy" data-f1="1.000">' in text
    assert 'The capital is <mark class="both">Lyon</mark>.' in text
    site = tmp_path / "site"
    res = runner.invoke(
        main,
        [
            "leaderboard",
            "build",
            "--runs",
            str(tmp_path / "overlap"),
            "--out",
            str(site),
            "--no-reported",
            "--example-pages",
        ],
    )
    assert res.exit_code == 0, res.output
    board = json.loads((site / "leaderboard.json").read_text())
    link = board["entries"][0]["examples_page"]
    # the same examples as `show --html` writes, under the board's title
    linked = (site / link).read_text()
    assert "<title>overlap: examples</title>" in linked and "<title>overlap</title>" in text
    assert linked[linked.index("<section") :] == text[text.index("<section") :]
    assert f'href="{link}"' in (site / "index.html").read_text()


def test_leaderboard_example_pages_are_paginated_as_show_html_is(tmp_path, monkeypatch):
    import shambench.reporting.highlight

    runner = _runs(tmp_path)
    monkeypatch.setattr(shambench.reporting.highlight, "PER_PAGE", 1)
    site = tmp_path / "site"
    args = ["leaderboard", "build", "--runs", str(tmp_path / "overlap"), "--out", str(site), "--no-reported"]
    res = runner.invoke(main, [*args, "--example-pages"])
    assert res.exit_code == 0, res.output
    link = json.loads((site / "leaderboard.json").read_text())["entries"][0]["examples_page"]
    first = Path(link).stem
    # one file of every example before: megabytes for a whole board's run
    pages = sorted(p.name for p in (site / "examples").iterdir())
    assert pages == sorted([f"{first}.html", *(f"{first}-{k}.html" for k in range(2, len(EXAMPLES) + 1))])
    assert f"page 1 of {len(EXAMPLES)}: examples 1-1" in (site / link).read_text()


def test_white_space_carries_only_what_both_sides_share():
    from shambench.reporting.highlight import segments
    from shambench.schema import Span

    # gold "capital city" whole, predicted "capital" and "city" apart: the space between is agreement, not a miss
    text = "The capital city."
    out = segments(text, [Span(start=4, end=16)], [Span(start=4, end=11), Span(start=12, end=16)])
    assert out == [("The ", None), ("capital city", "both"), (".", None)]
    # a missed gold span stays one run across its spaces; the spaces at its edges take no mark
    assert segments("a  b c", [Span(start=0, end=6)], []) == [("a  b c", "gold")]
    assert segments("x a b y", [Span(start=1, end=6)], []) == [("x ", None), ("a b", "gold"), (" y", None)]


def test_show_html_pages_link_each_other_and_say_what_they_hold(tmp_path):
    runner = _runs(tmp_path)
    page = tmp_path / "out" / "all.html"
    res = runner.invoke(main, ["show", str(tmp_path / "all"), "--html", str(page), "--per-page", "1"])
    assert res.exit_code == 0, res.output
    assert "2 examples -> " in res.output and "(2 pages: all.html, all-2.html)" in res.output
    first, second = page.read_text(), (tmp_path / "out" / "all-2.html").read_text()
    assert '<section id="a"' in first and '<section id="b"' not in first and '<section id="b"' in second
    assert '<p class="meta" id="pages">pages: 1 <a href="all-2.html">2</a></p>' in first
    assert '<p class="meta" id="pages">pages: <a href="all.html">1</a> 2</p>' in second
    assert "page 2 of 2: examples 2-2" in second
    # the run's overall score heads every page; the title is the detector, once
    assert f"run {tmp_path / 'all'}" in first and "overall span F1 " in first and "<title>all</title>" in first
    assert "2 of the run&#x27;s 2 examples" in first
    # one F1 per card (in the scores line), and the partition menu does not claim the whole run
    assert first.count("span F1 0.333") == 1 and ">all on this page</option>" in first


def test_show_html_stores_each_context_once_and_escapes_it(tmp_path):
    shared = "Source </script><script>alert(1)</script> text."
    rows = [
        {
            "id": f"r{i}",
            "dataset": "toy",
            "task": "summ",
            "context": shared,
            "response": f"Reply {i}.",
            "hallu_spans": [],
        }
        for i in range(3)
    ]
    eval_run(write_jsonl(tmp_path / "ex.jsonl", rows), "none", tmp_path / "run")
    page = tmp_path / "p.html"
    assert CliRunner().invoke(main, ["show", str(tmp_path / "run"), "--html", str(page)]).exit_code == 0
    text = page.read_text()
    start = text.index('<script type="application/json" id="contexts">') + len(
        '<script type="application/json" id="contexts">'
    )
    data = text[start : text.index("</script>", start)]
    assert json.loads(data) == {"0": shared} and "<" not in data
    assert text.count('<details data-context="0">') == 3 and "alert(1)</script>" not in text


def test_show_html_sorts_and_filters_by_per_example_scores(tmp_path):
    runner = _runs(tmp_path)
    page = tmp_path / "p.html"
    # `all` on a: P 1/5 (Lyon of 5 tokens), R 1 -> span F1 2/6; on b: no gold, 4 tokens flagged -> 0.
    res = runner.invoke(main, ["show", str(tmp_path / "all"), "--html", str(page), "--sort", "-f1"])
    assert res.exit_code == 0, res.output
    text = page.read_text()
    assert text.index('<section id="a"') < text.index('<section id="b"')
    assert "span F1 0.333 (P 0.200, R 1.000) · sentence F1 1.000" in text
    res = runner.invoke(main, ["show", str(tmp_path / "all"), "--html", str(page), "--sort", "f1"])
    text = page.read_text()
    assert text.index('<section id="b"') < text.index('<section id="a"')
    res = runner.invoke(main, ["show", str(tmp_path / "all"), "--html", str(page), "--max-f1", "0.2"])
    assert res.exit_code == 0 and "1 examples" in res.output
    assert '<section id="b"' in page.read_text() and '<section id="a"' not in page.read_text()
    res = runner.invoke(main, ["show", str(tmp_path / "all"), "--html", str(page), "--partition", "qa/toy"])
    assert '<section id="a"' in page.read_text() and '<section id="b"' not in page.read_text()


def test_show_html_escapes_everything(tmp_path):
    nasty = {
        "id": "<img src=x onerror=alert(1)>",
        "dataset": "toy",
        "task": "qa",
        "question": "<b>q</b>",
        "response": "<script>alert(1)</script>",
        "hallu_spans": [[0, 8]],
    }
    eval_run(write_jsonl(tmp_path / "ex.jsonl", [nasty]), "all", tmp_path / "run")
    runner = CliRunner()
    res = runner.invoke(main, ["show", str(tmp_path / "run"), "--html", str(tmp_path / "p.html")])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "p.html").read_text()
    assert "<script>alert" not in text and "<img src=x" not in text and "<b>q</b>" not in text
    assert '<mark class="both">&lt;script&gt;</mark>' in text


def test_show_html_gives_per_example_f1_filters_and_one_partition(tmp_path):
    runner = _runs(tmp_path)
    page = tmp_path / "all.html"
    res = runner.invoke(main, ["show", str(tmp_path / "all"), "--html", str(page)])
    assert res.exit_code == 0, res.output
    text = page.read_text()
    # `all` on a: 5 tokens predicted, 1 gold -> P 1/5, R 1, F1 1/3; on b: a prediction without gold -> 0.
    assert '<section id="a" data-partition="qa/toy" data-f1="0.333">' in text and "span F1 0.333" in text
    assert '<section id="b" data-partition="summ/toy" data-f1="0.000">' in text
    assert text.count("<script>") == 1 and "script-src 'sha256-" in html.unescape(text)
    one = tmp_path / "summ.html"
    res = runner.invoke(main, ["show", str(tmp_path / "all"), "--html", str(one), "--partition", "summ/toy"])
    assert res.exit_code == 0 and "1 examples" in res.output
    assert '<section id="b"' in one.read_text() and '<section id="a"' not in one.read_text()
    bad = runner.invoke(main, ["show", str(tmp_path / "all"), "--html", str(one), "--partition", "mt/toy"])
    assert bad.exit_code == 2 and "no partition mt/toy in this run (it has qa/toy, summ/toy)" in bad.output


def test_show_html_lays_each_examples_figures_out_apart_in_a_browser(tmp_path):
    from tests.leaderboard.cdp import Browser, chromium, overlapping_blocks, run_together

    executable = chromium()
    runner = _runs(tmp_path)
    page = tmp_path / "all.html"
    assert runner.invoke(main, ["show", str(tmp_path / "all"), "--html", str(page)]).exit_code == 0
    browser = Browser(executable, tmp_path / "profile")
    try:
        browser.set_viewport(800, 900)
        browser.open(page.as_uri())
        # Per example: its id, partition, scores line and response, each under the one before.
        assert browser.evaluate("document.querySelectorAll('section .scores').length") == 2
        assert overlapping_blocks(browser, "section") == []
        assert run_together(browser) == []
    finally:
        browser.close()


def test_show_html_filter_runs_in_a_browser(tmp_path):
    from tests.leaderboard.cdp import Browser, chromium

    executable = chromium()
    runner = _runs(tmp_path)
    page = tmp_path / "all.html"
    assert runner.invoke(main, ["show", str(tmp_path / "all"), "--html", str(page)]).exit_code == 0
    browser = Browser(executable, tmp_path / "profile")
    try:
        browser.open(page.as_uri())
        shown = "[...document.querySelectorAll('section')].filter(s => !s.hidden).map(s => s.id)"
        assert browser.evaluate(shown) == ["a", "b"]
        set_value = (
            "{{ const f = document.querySelector('form.filter'); f.elements.{0}.value = {1!r}; "
            "f.dispatchEvent(new Event('input')); }}"
        )
        browser.evaluate(set_value.format("f1max", "0.2"))
        assert browser.evaluate(shown) == ["b"]
        assert browser.evaluate("document.getElementById('shown').textContent") == "1 of 2 shown"
        browser.evaluate(set_value.format("f1max", ""))
        browser.evaluate(set_value.format("id", "A"))
        assert browser.evaluate(shown) == ["a"]
        # a context is put in place when its details are opened
        context = "document.querySelector('section#a details pre').textContent"
        assert browser.evaluate(context) == ""
        opened = (
            "new Promise(r => { const d = document.querySelector('section#a details');"
            " d.addEventListener('toggle', () => r(), {once: true}); d.open = true; })"
        )
        browser.evaluate(opened)  # returns once the page's own toggle handler has run
        assert browser.evaluate(context) == "Paris is the capital."
    finally:
        browser.close()


TYPED = [
    # Tokens of "It is red and big.": It [0, 2), is [3, 5), red [6, 9), and [10, 13), big [14, 17), . [17, 18).
    {"id": "t", "dataset": "typed", "task": "qa", "question": "Colour?", "context": "It is blue.",
     "response": "It is red and big.", "hallu_spans": [[6, 9, "colour"], [14, 17, "size"]]},
]  # fmt: skip


def test_analyze_shows_recall_per_error_type(tmp_path):
    ex = write_jsonl(tmp_path / "ex.jsonl", TYPED)
    eval_run(ex, "all", tmp_path / "all")
    eval_run(ex, "none", tmp_path / "none")
    out = tmp_path / "an"
    res = CliRunner().invoke(main, ["analyze", str(tmp_path / "all"), str(tmp_path / "none"), "--out", str(out),
                                    "--no-figures"])  # fmt: skip
    assert res.exit_code == 0, res.output
    runs = {r["detector"]: r for r in json.loads((out / "analysis.json").read_text())["runs"]}
    assert {t: s["char_recall"]["recall"] for t, s in runs["all"]["types"]["datasets"]["typed"]["types"].items()} == {
        "colour": 1.0,
        "size": 1.0,
    }
    assert runs["none"]["types"]["datasets"]["typed"]["types"]["size"]["token_recall"]["recall"] == 0.0
    lines = [" ".join(line.split()) for line in res.stdout.splitlines()]
    # source, type, run, gold chars, char recall [CI], gold tokens, token recall [CI], typed F1 (none: unlabelled)
    assert "typed colour all 3 1.000 [1.000-1.000] 1 1.000 [1.000-1.000] -" in lines
    assert "typed size none 3 0.000 [0.000-0.000] 1 0.000 [0.000-0.000] -" in lines

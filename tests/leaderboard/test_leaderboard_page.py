"""The built page in headless Chromium: rows render, sorting reorders them, a hostile name stays text.

Needs Debian's `chromium` (`.ci/run` installs it): under CI=true a missing browser fails the test, elsewhere it skips
and says why (`tests.leaderboard.cdp.chromium`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from shambench.leaderboard.build import DEFAULT_REPORTED, build, write_site
from tests.leaderboard.cdp import Browser, cell_parts, chromium, run_together
from tests.leaderboard.toy import make_run, write_annotated, write_examples

XSS = "<img src=x onerror=alert(1)>"
SCRIPT_XSS = "<script>window.pwned = 1</script>"
SPAN_ROWS = "table.board[data-level=span] tbody.main tr.entry"


@pytest.fixture(scope="module")
def page(toy_runs, tmp_path_factory):
    """The toy leaderboard plus two runs with hostile names, open in headless Chromium."""
    executable = chromium()
    root = tmp_path_factory.mktemp("page")
    examples = write_examples(root / "examples.jsonl")
    # One gold token of three found (q1) -> span F1 context_qa (1 + 1) / 2 = 1, summ 0 -> overall 0.5.
    make_run(root / "hostile" / "img", examples, XSS, spans={"q1": [[13, 16]]})
    # Nothing predicted: same scores as `none` (overall 0.25).
    make_run(root / "hostile" / "script", examples, SCRIPT_XSS, spans={})
    _, html = write_site(build([toy_runs / "runs", root / "hostile"], None), root / "site")
    browser = Browser(executable, root / "profile")
    try:
        browser.open(html.as_uri())
        yield browser
    finally:
        browser.close()


def _names(browser: Browser) -> list[str]:
    return browser.evaluate(
        f"[...document.querySelectorAll('{SPAN_ROWS}')].map(r => r.querySelector('.name a').textContent)"
    )


def _click(browser: Browser, header: str) -> None:
    browser.evaluate(
        "[...document.querySelectorAll('table.board[data-level=span] thead th button')]"
        f".find(b => b.textContent === {header!r}).click()"
    )


def test_rows_render_in_rank_order(page):
    # overall span F1: exact 1, XSS 0.5, none 0.25 = SCRIPT_XSS 0.25 (tie -> sentence F1 0.25 both -> name: "<" < "n"),
    # all 0.1736.
    assert _names(page) == ["exact", XSS, SCRIPT_XSS, "none", "all"]
    assert page.evaluate("document.querySelectorAll('table.board[data-level=sentence] tr.entry').length") == 5
    assert page.evaluate("document.querySelectorAll('svg.strip g.mark').length") == 2 * 5 * 2  # levels×runs×tasks


def test_sorting_by_a_column_reorders_the_rows(page):
    _click(page, "span F1")  # the headline (first of the three span F1 columns); first click: descending
    assert _names(page) == ["exact", XSS, SCRIPT_XSS, "none", "all"]
    _click(page, "span F1")  # second click: ascending (ties keep their order)
    assert _names(page) == ["all", SCRIPT_XSS, "none", XSS, "exact"]
    _click(page, "summ")  # summ span F1: exact 1, all 2/9, the rest 0 -> descending
    assert _names(page)[:2] == ["exact", "all"]
    _click(page, "#")
    assert page.evaluate(
        "[...document.querySelectorAll('table.board[data-level=span] thead th')]"
        ".filter(th => th.getAttribute('aria-sort')).map(th => th.textContent.trim() + ':' + th.getAttribute('aria-sort'))"
    ) == ["#:descending"]


def test_hostile_names_show_as_text_and_run_nothing(page):
    texts = page.evaluate("[...document.querySelectorAll('.name a')].map(a => a.textContent)")
    assert XSS in texts and SCRIPT_XSS in texts
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.evaluate("document.querySelectorAll('script').length") == 1
    assert page.evaluate("typeof window.pwned") == "undefined"
    assert not [e for e in page.events if e.get("method") == "Page.javascriptDialogOpening"]
    detail = page.evaluate("document.querySelector('#details').textContent")
    assert XSS in detail and SCRIPT_XSS in detail


@pytest.fixture(scope="module")
def wide_board(tmp_path_factory):
    """A board with the paper's six tasks and nine partitions (the packaged reported rows), at 1400 px."""
    executable = chromium()
    root = tmp_path_factory.mktemp("wide")
    examples = write_examples(root / "examples.jsonl")
    make_run(root / "runs" / "exact", examples, "exact")
    make_run(root / "runs" / "none", examples, "none")
    _, html = write_site(build([root / "runs"], DEFAULT_REPORTED), root / "site")
    browser = Browser(executable, root / "profile")
    try:
        browser.set_viewport(1400, 900)
        browser.open(html.as_uri())
        yield browser, root
    finally:
        browser.close()


def test_every_task_and_partition_column_is_visible_at_1400_px(wide_board):
    browser, root = wide_board
    shot = browser.screenshot(root / "board.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert browser.evaluate("innerWidth") == 1400
    # Nothing scrolls sideways: neither the page nor any table's box.
    assert browser.evaluate("document.documentElement.scrollWidth") <= 1400
    assert browser.evaluate("[...document.querySelectorAll('.scroll')].every(d => d.scrollWidth <= d.clientWidth)")
    # The paper's 6 task columns in each level's table; the 2 toy partitions and the paper's 9 in the last.
    edges = browser.evaluate(
        "[...document.querySelectorAll('th.task, th.dataset')].map(th => { const r = th.getBoundingClientRect();"
        " return [th.textContent.trim(), r.left, r.right]; })"
    )
    assert len([e for e in edges if "/" not in e[0]]) == 2 * 6
    assert len([e for e in edges if "/" in e[0]]) == 11
    assert all(left >= 0 and right <= 1400 for _, left, right in edges), edges


def test_reference_rows_are_labelled_and_marked_in_the_charts(wide_board):
    browser, _ = wide_board
    rows = browser.evaluate(
        "[...document.querySelectorAll('table.board[data-level=span] tbody.main tr.entry')]"
        ".map(r => [r.cells[0].textContent.trim(), r.querySelector('.name a').textContent, "
        "r.querySelector('.badge') ? r.querySelector('.badge').textContent : ''])"
    )
    # Beside the rank, the order with the next row: exact is above none under every convention and resample.
    assert rows == [["1holds", "exact", ""], ["–", "none", "reference"]]
    # Per level, each of the two toy tasks carries one dot (exact) and one hollow square (none).
    assert browser.evaluate("document.querySelectorAll('svg.strip g.mark.reference rect').length") == 2 * 2
    assert browser.evaluate("document.querySelectorAll('svg.strip g.mark.ranked circle').length") == 2 * 2


@pytest.fixture(scope="module")
def human_board(tmp_path_factory):
    """A board with the human reference row (30 items read by three annotators), two ranked rows with their gaps
    and alternative annotator tests, and CIs in the key columns, at 1400 px."""
    executable = chromium()
    root = tmp_path_factory.mktemp("human")
    examples, spans = write_annotated(root / "examples.jsonl")
    make_run(root / "runs" / "exact", examples, "exact", spans)
    make_run(root / "runs" / "none", examples, "none", {})
    _, html = write_site(build([root / "runs"], None), root / "site")
    browser = Browser(executable, root / "profile")
    try:
        browser.set_viewport(1400, 900)
        browser.open(html.as_uri())
        yield browser
    finally:
        browser.close()


def test_each_figure_and_its_ci_gap_or_test_lie_on_lines_of_their_own(human_board):
    parts = cell_parts(human_board)
    # The human row's CI; per ranked row its gap and its test; the key columns' CIs of both levels.
    assert human_board.evaluate("document.querySelectorAll('table[data-level=agreement] td .ci').length") == 3
    assert human_board.evaluate("document.querySelectorAll('table[data-level=agreement] td .alt').length") == 2
    assert len(parts) >= 5 + 2 * 2
    assert [(cell, top, above) for cell, top, above in parts if top < above - 0.5] == []
    assert run_together(human_board) == []


def test_the_committed_page_lays_its_figures_out_apart(tmp_path):
    committed = Path(__file__).parents[2] / "leaderboard" / "site" / "index.html"
    browser = Browser(chromium(), tmp_path / "profile")
    try:
        browser.set_viewport(1400, 900)
        browser.open(committed.as_uri())
        parts = cell_parts(browser)
        assert browser.evaluate("document.querySelectorAll('table[data-level=agreement] td .ci').length") > 0
        assert [(cell, top, above) for cell, top, above in parts if top < above - 0.5] == []
        assert run_together(browser) == []
    finally:
        browser.close()

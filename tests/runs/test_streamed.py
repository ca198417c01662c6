"""A new run of an API detector sends its requests while the corpora load (`shambench.runs.streamed`, run by
`shambench.runs.evaluate.streamed_evaluation`): the same run directory as the unstreamed path, nothing written
when loading fails or is interrupted, and a feed that never blocks the event loop."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.data.adapter import LoadResult, adapters
from shambench.errors import DataError
from shambench.llm.loop import ENDED, Feed, LoopThread
from shambench.runs import evaluate
from shambench.runs.evaluate import run_evaluation
from shambench.runs.selection import select_datasets, select_examples
from shambench.runs.spec import RunSpec, Selection
from shambench.runs.streamed import HeldJournal
from tests.run_helpers import without_times

FIXTURES = Path(__file__).parents[1] / "adapters" / "fixtures"
ANSWER = '{"incorrect_spans": [{"text": "the"}]}'


@pytest.fixture
def server(openai_server, monkeypatch):
    monkeypatch.setenv("STREAM_TEST_KEY", "k")
    openai_server.script = lambda req: ANSWER
    return openai_server


def eval_args(server, run_dir: Path, *extra: str) -> list[str]:
    args = ["eval", "--detector", "openai", "--model", "m", "--base-url", server.base_url]
    args += ["--api-key-env", "STREAM_TEST_KEY", "--data-dir", str(FIXTURES), "--no-progress", "--bootstrap", "20"]
    return [*args, "--run-dir", str(run_dir), *extra]


def run_cli(server, run_dir: Path, *extra: str):
    return CliRunner().invoke(main, eval_args(server, run_dir, *extra))


def journal(run_dir: Path) -> dict[str, dict]:
    rows = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    return {row["id"]: row for row in rows}


def slow_load(monkeypatch, name: str, until: threading.Event | None = None, fail: bool = False) -> dict[str, float]:
    """Make dataset `name` load only once `until` is set (then fail with `fail`); when its load ended, in `ended`."""
    adapter = type(adapters.get(name).factory())
    load = adapter.load
    ended: dict[str, float] = {}

    def slow(self, data_dir, split="test"):
        assert until is None or until.wait(60), f"{name}'s load waited a minute for its event"
        ended["at"] = time.time()
        if fail:
            raise DataError(f"{name}: unreadable (a test's failure)")
        return load(self, data_dir, split)

    monkeypatch.setattr(adapter, "load", slow)
    return ended


def after_requests(server, n: int) -> threading.Event:
    """An event set once the server has answered `n` requests."""
    answered, script, lock = threading.Event(), server.script, threading.Lock()
    count = [0]

    def counting(req):
        with lock:
            count[0] += 1
            reply = script(req)
            if count[0] >= n:
                answered.set()
            return reply

    server.script = counting
    return answered


def after_held(monkeypatch, n: int) -> threading.Event:
    """An event set once `n` predictions were handed to the journal of a streamed run (held or journaled)."""
    handed, append = threading.Event(), HeldJournal.append
    count = [0]

    def counting(self, pred):
        append(self, pred)
        count[0] += 1
        if count[0] >= n:
            handed.set()

    monkeypatch.setattr(HeldJournal, "append", counting)
    return handed


def unstreamed(monkeypatch) -> None:
    monkeypatch.setattr(evaluate, "streams", lambda detector: False)


def test_a_streamed_run_writes_what_the_unstreamed_run_writes(server, tmp_path, monkeypatch):
    streamed_calls: list[bool] = []
    real = evaluate.streams
    monkeypatch.setattr(evaluate, "streams", lambda det: streamed_calls.append(real(det)) or real(det))
    monkeypatch.setenv("SHAMBENCH_CACHE_DIR", str(tmp_path / "cache-a"))
    first = run_cli(server, tmp_path / "streamed", "--limit", "4")
    assert first.exit_code == 0, first.output
    assert streamed_calls == [True]
    unstreamed(monkeypatch)
    monkeypatch.setenv("SHAMBENCH_CACHE_DIR", str(tmp_path / "cache-b"))  # both runs send every request
    second = run_cli(server, tmp_path / "unstreamed", "--limit", "4")
    assert second.exit_code == 0, second.output
    a, b = tmp_path / "streamed", tmp_path / "unstreamed"
    config = json.loads((a / "config.json").read_text())
    assert config["n_examples"] == 16 and config["limit"] == 4
    assert config["datasets"] == ["favabench", "halluentity", "mushroom", "ragtruth"]
    assert without_times(config) == without_times(json.loads((b / "config.json").read_text()))
    results = json.loads((a / "results.json").read_text())
    assert without_times(results) == without_times(json.loads((b / "results.json").read_text()))
    assert (a / "per_example.jsonl").read_bytes() == (b / "per_example.jsonl").read_bytes()
    assert journal(a) == journal(b) and len(journal(a)) == 16
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    # The same lines printed, the run directory's line with its counts among them.
    assert "(16 of 16 examples to run)" in first.output
    assert first.output.replace(str(a), "DIR") == second.output.replace(str(b), "DIR")


def test_a_dataset_failing_after_requests_began_leaves_nothing(server, tmp_path, monkeypatch):
    slow_load(monkeypatch, "halluentity", after_requests(server, 1), fail=True)
    run_dir = tmp_path / "runs" / "mine" / "run"  # in folders that do not exist yet
    result = run_cli(server, run_dir, "--datasets", "mushroom,halluentity")
    assert result.exit_code == 2, result.output
    assert server.log, "the first dataset's requests were sent while the second loaded"
    assert list(tmp_path.iterdir()) == []  # nor the folders made for it
    unstreamed(monkeypatch)
    before = len(server.log)
    today = run_cli(server, tmp_path / "today", "--datasets", "mushroom,halluentity")
    assert (today.exit_code, len(server.log)) == (2, before)  # today's path sends nothing
    assert result.output == today.output
    assert "error: dataset halluentity not loaded: halluentity: unreadable (a test's failure)" in result.output


def test_a_directory_given_beforehand_is_kept_and_stays_empty_but_for_its_lock(server, tmp_path, monkeypatch):
    slow_load(monkeypatch, "halluentity", after_requests(server, 1), fail=True)
    run_dir = tmp_path / "given"
    run_dir.mkdir()
    result = run_cli(server, run_dir, "--datasets", "mushroom,halluentity")
    assert result.exit_code == 2, result.output
    assert [p.name for p in run_dir.iterdir()] == [".lock"]


def test_predictions_made_while_loading_are_journaled_after_the_config(server, tmp_path, monkeypatch):
    ended = slow_load(monkeypatch, "mushroom", after_held(monkeypatch, 6))
    seen: list[tuple[int, bool, bool]] = []
    real_open = HeldJournal.open

    def open_(self):
        config = tmp_path / "run" / "config.json"
        held, before = len(self.held), config.exists()
        real_open(self)
        seen.append((held, before, config.exists()))

    monkeypatch.setattr(HeldJournal, "open", open_)
    spec = RunSpec.of(
        detector="openai",
        datasets="halluentity,mushroom",
        data_dir=FIXTURES,
        run_dir=tmp_path / "run",
        n_resamples=20,
        model="m",
        base_url=server.base_url,
        api_key_env="STREAM_TEST_KEY",
    )
    run = run_evaluation(spec).run
    # Every halluentity request was answered while mushroom loaded: held, then journaled once config.json existed.
    held, config_before, config_after = seen[0]
    assert held == 6 and not config_before and config_after
    assert server.first_at is not None and server.first_at < ended["at"]
    assert sorted(journal(run.run_dir)) == sorted(ex.id for ex in run.examples) and len(run.examples) == 12
    assert [ex.dataset for ex in run.examples] == ["halluentity"] * 6 + ["mushroom"] * 6


def test_an_interruption_while_loading_journals_nothing_and_exits_130(server, tmp_path, monkeypatch):
    interrupting = threading.Event()
    slow_load(monkeypatch, "mushroom", interrupting)

    def interrupted(self, pred):
        interrupting.set()
        raise KeyboardInterrupt

    monkeypatch.setattr(HeldJournal, "append", interrupted)
    run_dir = tmp_path / "run"
    result = run_cli(server, run_dir, "--datasets", "halluentity,mushroom")
    assert result.exit_code == 130, result.output
    assert "interrupted before the run started: no example was run" in result.output
    assert not run_dir.exists()
    assert not [t for t in threading.enumerate() if t.name == "shambench-loading"]


def test_a_selection_of_no_examples_is_todays_error(server, tmp_path, monkeypatch):
    adapter = type(adapters.get("halluentity").factory())
    monkeypatch.setattr(adapter, "load", lambda self, data_dir, split="test": LoadResult(examples=[]))
    result = run_cli(server, tmp_path / "run", "--datasets", "halluentity")
    unstreamed(monkeypatch)
    today = run_cli(server, tmp_path / "today", "--datasets", "halluentity")
    assert (result.exit_code, today.exit_code) == (2, 2)
    assert result.output == today.output and "no examples selected" in result.output
    assert not (tmp_path / "run").exists() and server.log == []


def test_the_feed_wakes_waiting_workers_without_blocking_the_loop():
    feed: Feed[int] = Feed()
    waiting = threading.Event()

    async def take_all():
        got = []
        while (item := await feed.take()) is not ENDED:
            got.append(item)
        return got

    async def consume():
        workers = [asyncio.create_task(take_all()) for _ in range(3)]
        await asyncio.sleep(0)  # each worker runs to its first take and waits there
        waiting.set()
        return sorted(item for got in await asyncio.gather(*workers) for item in got)

    async def other_work():
        return "ran"

    loop = LoopThread("feed-test")
    try:
        future = loop.submit(consume())
        assert waiting.wait(60)
        # The three workers wait for items, and the loop still runs other work: a wait that blocked it would not.
        assert loop.submit(other_work()).result(60) == "ran" and not future.done()
        feed.put([1, 2])
        feed.put([3])
        feed.close()
        assert future.result(60) == [1, 2, 3]
    finally:
        loop.close()


def test_a_feed_closed_with_an_error_raises_it_at_the_next_take():
    feed: Feed[int] = Feed()
    feed.put([1])
    feed.close(DataError("gone"))
    feed.put([2])  # ignored once closed

    async def take():
        return await feed.take()

    with pytest.raises(DataError, match="gone"):
        asyncio.run(take())


def test_a_systematic_failure_while_loading_leaves_a_run_to_resume_as_today(server, tmp_path, monkeypatch):
    server.script = lambda req: "not json at all"
    slow_load(monkeypatch, "mushroom", after_held(monkeypatch, 8))
    run_dir = tmp_path / "run"
    result = run_cli(server, run_dir, "--datasets", "favabench,halluentity,mushroom")
    assert result.exit_code == 2, result.output
    assert "continue with: shambench eval --resume" in result.output
    # The requests stopped at the eighth failure, loading ended, then config.json and the journal were written.
    config = json.loads((run_dir / "config.json").read_text())
    assert config["n_examples"] == 18
    lines = journal(run_dir)
    assert len(lines) >= 8 and all(row["error"] for row in lines.values())
    assert set(lines) <= {f"favabench/{i}" for i in range(20)} | {f"halluentity/{i}" for i in range(20)}


def test_select_datasets_hands_each_dataset_as_select_examples_selects_it():
    handed: list[list[str]] = []
    chosen = Selection(datasets="mushroom,favabench", data_dir=FIXTURES, limit=2)
    examples, selection = select_datasets(chosen, lambda exs: handed.append([ex.id for ex in exs]), lambda: None)
    today, today_selection = select_examples(chosen)
    assert [ex.id for ex in examples] == [ex.id for ex in today] == [i for ids in handed for i in ids]
    assert [len(ids) for ids in handed] == [2, 2] and handed[0][0].startswith("mushroom")
    assert selection == today_selection and selection["limit"] == 2


def test_select_datasets_stops_handing_at_the_first_failure_and_raises_todays_error(monkeypatch):
    slow_load(monkeypatch, "favabench", fail=True)
    slow_load(monkeypatch, "ragtruth", fail=True)
    handed: list[int] = []
    failed: list[bool] = []
    chosen = Selection(datasets="mushroom,favabench,halluentity,ragtruth", data_dir=FIXTURES)
    with pytest.raises(DataError) as streamed:
        select_datasets(chosen, lambda exs: handed.append(len(exs)), lambda: failed.append(True))
    with pytest.raises(DataError) as today:
        select_examples(chosen)
    assert handed == [6] and failed == [True]  # mushroom only; halluentity loads but is not handed
    assert str(streamed.value) == str(today.value)
    assert str(today.value).count("not loaded") == 2  # both failures named

"""The OpenAI-compatible client pool against the local test server: retries, timeouts, cache, accounting."""

from __future__ import annotations

import asyncio
import contextlib
import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shambench.errors import DataError
from shambench.http import LOOP_CLOCK, Clock
from shambench.llm.cache import ResponseCache
from shambench.llm.client import LLMClient, LLMError
from shambench.llm.endpoint import Endpoint
from shambench.llm.pricing import cost_of, load_prices, price_of
from shambench.llm.retry import AdaptiveGate, backoff, retry_after
from tests.manual_clock import ManualClock
from tests.openai_server import Fault, OpenAIServer
from tests.run_helpers import Background, wait_until

FAST = {"backoff_base": 0.001, "max_retries": 3}


def client_for(server, cache=None, clock: Clock = LOOP_CLOCK, **endpoint) -> LLMClient:
    endpoint = {**FAST, **endpoint}
    return LLMClient(Endpoint(model="gpt-5-mini", base_url=server.base_url, **endpoint), cache=cache, clock=clock)


def ask(client: LLMClient, prompts: list[str], accept=None) -> list:
    """Each prompt's Completion (or LLMError), through the client's worker pool."""

    async def one(prompt):
        try:
            return await client.chat([{"role": "user", "content": prompt}], {"temperature": 0}, accept)
        except LLMError as err:
            return err

    return list(client.map(prompts, one))


def first_attempt(kind: str, retry: str | None = None):
    """A fault plan failing the first attempt of every prompt."""
    return lambda req: Fault(kind, retry) if req.attempt == 1 else None


def test_answer_usage_and_cost(openai_server):
    openai_server.reasoning_tokens = 5
    (reply,) = ask(client_for(openai_server), ["hello there"])
    # Prompt "hello there" = 2 words; reply '{"incorrect_spans": []}' = 2 words + 5 reasoning tokens = 7.
    # gpt-5-mini: $0.25 / $2.00 per million -> (2 * 0.25 + 7 * 2.00) / 1e6 = 14.5e-6.
    u = reply.usage
    assert (u.input_tokens, u.output_tokens, u.reasoning_tokens) == (2, 7, 5)
    assert u.cost == pytest.approx(14.5e-6)
    assert (u.requests, u.retries, u.cache_hit) == (1, 0, 0)
    assert reply.text == '{"incorrect_spans": []}' and reply.finish_reason == "stop"
    assert openai_server.log[0].body["temperature"] == 0


def test_completions_endpoint(openai_server):
    openai_server.script = lambda req: " upon a time"
    client = client_for(openai_server)

    async def one(prompt):
        return await client.complete(prompt, {"max_tokens": 5})

    (reply,) = list(client.map(["Once"], one))
    assert reply.text == " upon a time"
    assert openai_server.log[0].path == "/v1/completions"
    assert openai_server.log[0].body["prompt"] == "Once"


@pytest.mark.parametrize("kind", ["500", "429", "malformed"])
def test_retryable_failures_are_retried_and_counted(openai_server, kind):
    openai_server.faults = first_attempt(kind, "0")
    replies = ask(client_for(openai_server), ["a", "b", "c"])
    # Each of 3 prompts fails once, then succeeds: 6 requests, 1 retry each.
    assert all(r.usage.requests == 2 and r.usage.retries == 1 for r in replies)
    assert len(openai_server.log) == 6
    assert openai_server.count(fault=kind) == 3


def test_retry_after_is_honoured(openai_server):
    openai_server.faults = first_attempt("429", "0.6")
    clock = ManualClock()
    (reply,) = ask(client_for(openai_server, clock=clock), ["x"])
    # The backoff alone would be under 1 ms (base 0.001 s); the server asked for 0.6 s, and that is the pause.
    assert clock.slept == [0.6]
    assert reply.usage.retries == 1


def test_timeouts_are_retried(openai_server):
    # The first attempt is held open until the test ends: only its deadline can give up on it, and that passes when
    # the test moves the client's clock on by the timeout (not before: 599 s leave it waiting).
    openai_server.faults = first_attempt("hang")
    clock = ManualClock()
    try:
        asking = Background(lambda: ask(client_for(openai_server, clock=clock, timeout=600), ["x"]), "asking")
        wait_until(lambda: len(openai_server.held()) == 1, "the first attempt held")
        clock.advance(599)
        clock.advance(1)
        (reply,) = asking.result()
        assert openai_server.log[0].fault == "hang" and openai_server.log[0].status is None  # still held
    finally:
        openai_server.release()
    assert reply.text and (reply.usage.requests, reply.usage.retries) == (2, 1)


def test_a_trickling_reply_meets_the_whole_requests_deadline(openai_server):
    # A byte every 20 ms never leaves a read waiting for 0.5 s: only a deadline on the whole request ends it.
    openai_server.faults = lambda req: Fault("trickle")
    try:
        (err,) = ask(client_for(openai_server, timeout=0.5, max_retries=1), ["x"])
    finally:
        openai_server.release()
    assert isinstance(err, LLMError) and err.usage.requests == 2
    assert err.reason.startswith("timeout: no complete reply within 0.5 s") and "\n" not in err.reason


def test_a_gzip_bomb_stops_at_the_reply_size_limit(openai_server):
    openai_server.faults = lambda req: Fault("bomb")
    (err,) = ask(client_for(openai_server, max_retries=0, max_response_bytes=1 << 20), ["x"])
    assert isinstance(err, LLMError) and "larger than the 1048576-byte limit" in err.reason


def test_exhausted_retries_fail_with_the_reason(openai_server):
    openai_server.faults = lambda req: Fault("500")
    (err,) = ask(client_for(openai_server, max_retries=2), ["x"])
    assert isinstance(err, LLMError)
    assert err.reason.startswith("HTTP 500") and "after 3 attempts" in err.reason
    assert (err.usage.requests, err.usage.retries) == (3, 2)
    assert len(openai_server.log) == 3


def test_client_errors_are_not_retried(openai_server):
    openai_server.faults = lambda req: Fault("400")
    (err,) = ask(client_for(openai_server), ["x"])
    assert isinstance(err, LLMError) and err.reason.startswith("HTTP 400")
    assert err.usage.requests == 1 and len(openai_server.log) == 1


def test_cache_hits_make_no_request(openai_server):
    cache = ResponseCache()
    first = ask(client_for(openai_server, cache=cache), ["a", "b"])
    again = ask(client_for(openai_server, cache=cache), ["a", "b", "c"])
    assert [r.usage.cache_hit for r in first] == [0, 0]
    assert sorted(r.usage.cache_hit for r in again) == [0, 1, 1]
    # 2 first answers + only "c" the second time.
    assert len(openai_server.log) == 3
    hit = next(r for r in again if r.usage.cache_hit)
    assert (hit.usage.requests, hit.usage.input_tokens, hit.usage.cost) == (0, 0, 0.0)


def test_cache_key_ignores_transport_settings(openai_server):
    cache = ResponseCache()
    ask(client_for(openai_server, cache=cache, max_concurrency=1, timeout=5), ["a"])
    (reply,) = ask(client_for(openai_server, cache=cache, max_concurrency=7, timeout=9, max_retries=0), ["a"])
    assert reply.usage.cache_hit == 1 and len(openai_server.log) == 1


def test_rejected_answers_are_not_cached(openai_server):
    cache = ResponseCache()

    def reject(completion):
        raise ValueError("not what I wanted")

    (err,) = ask(client_for(openai_server, cache=cache), ["a"], accept=reject)
    assert isinstance(err, LLMError) and err.reason == "unusable output: not what I wanted"
    assert err.text == '{"incorrect_spans": []}' and err.usage.requests == 1
    (ok,) = ask(client_for(openai_server, cache=cache), ["a"], accept=lambda c: len(c.text))
    assert ok.parsed == len('{"incorrect_spans": []}') and ok.usage.cache_hit == 0
    assert len(openai_server.log) == 2


def settled(client: LLMClient, server: OpenAIServer, together: int) -> LLMClient:
    """`client` after its first request (which goes out alone), with `server` holding the next ones until
    `together` of them are in flight at once: the overlap a test counts is then the client's, not the machine's."""
    ask(client, ["the first request"])
    server.gather(together)
    return client


def test_concurrency_is_bounded(openai_server):
    client = settled(client_for(openai_server, max_concurrency=4), openai_server, 4)
    replies = ask(client, [str(i) for i in range(20)])
    assert len(replies) == 20 and not any(isinstance(r, LLMError) for r in replies)
    assert openai_server.peak == 4


def test_monitor_receives_counters(openai_server):
    openai_server.faults = first_attempt("500")

    class Counting:
        def __init__(self):
            self.seen: dict[str, float] = {}

        def count(self, key, n=1):
            self.seen[key] = self.seen.get(key, 0) + n

    monitor = Counting()
    client = client_for(openai_server)

    async def one(prompt):
        return await client.chat([{"role": "user", "content": prompt}])

    list(client.map(["a b", "c"], one, monitor))
    # 2 prompts x (1 failure + 1 success); input tokens 2 + 1 words; output 2 words each.
    assert monitor.seen["requests"] == 4 and monitor.seen["retries"] == 2
    assert monitor.seen["input_tokens"] == 3 and monitor.seen["output_tokens"] == 4


def test_worker_exception_reaches_the_caller(openai_server):
    client = client_for(openai_server)

    async def boom(item):
        await asyncio.sleep(0)
        raise RuntimeError(f"bad item {item}")

    with pytest.raises(RuntimeError, match="bad item"):
        list(client.map([1, 2, 3], boom))


def test_api_key_is_sent_and_redacted(openai_server, monkeypatch):
    monkeypatch.setenv("TEST_LLM_KEY", "sk-test-SECRET123")
    openai_server.faults = lambda req: Fault("400")
    (err,) = ask(client_for(openai_server, api_key_env="TEST_LLM_KEY"), ["x"])
    assert openai_server.log[0].authorization == "Bearer sk-test-SECRET123"
    assert "SECRET123" not in err.reason


def test_missing_key_for_openai_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(DataError, match="set NO_SUCH_KEY_VAR"):
        Endpoint(model="gpt-5-mini", api_key_env="NO_SUCH_KEY_VAR").api_key()


def test_retry_after_header_forms():
    assert retry_after({"retry-after-ms": "250"}) == 0.25
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({}) is None
    now = datetime(2026, 12, 5, 4, 0, 0, tzinfo=UTC)
    when = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after({"retry-after": when}, now=now.timestamp) == 30.0
    assert retry_after({"retry-after": when}, now=(now + timedelta(minutes=1)).timestamp) == 0.0


@given(attempt=st.integers(1, 12), base=st.floats(0.001, 5), limit=st.floats(0.01, 60), seed=st.integers(0, 99))
def test_backoff_is_equal_jitter_within_bounds(attempt, base, limit, seed):
    ceiling = min(limit, base * 2 ** (attempt - 1))
    assert ceiling / 2 <= backoff(attempt, base, limit, random.Random(seed)) <= ceiling


def test_prices_match_by_name_prefix_and_provider():
    assert price_of("gpt-5-mini").input == 0.25
    assert price_of("gpt-5-mini-2025-08-07").output == 2.00
    assert price_of("openai/gpt-4o-mini").input == 0.15
    assert price_of("Qwen/Qwen3-4B") is None
    # 1000 input and 500 output tokens of gpt-5-mini: (1000 * 0.25 + 500 * 2.00) / 1e6 = 0.00125.
    assert cost_of("gpt-5-mini", 1000, 500) == pytest.approx(0.00125)
    assert cost_of("Qwen/Qwen3-4B", 1000, 500) == 0.0


def test_user_price_file_overrides(tmp_path, monkeypatch):
    prices = tmp_path / "prices.yaml"
    prices.write_text("gpt-5-mini:\n  input: 1.0\n  output: 3.0\nmy-model:\n  input: 2\n  output: 4\n")
    monkeypatch.setenv("SHAMBENCH_PRICING", str(prices))
    load_prices.cache_clear()
    try:
        # (1e6 * 1.0 + 1e6 * 3.0) / 1e6 = 4.0 and (1e6 * 2 + 0) / 1e6 = 2.0
        assert cost_of("gpt-5-mini", 1_000_000, 1_000_000) == 4.0
        assert cost_of("my-model", 1_000_000, 0) == 2.0
        assert price_of("gpt-5-nano").input == 0.05
        prices.write_text("gpt-5-mini: [1, 2]\n")
        load_prices.cache_clear()
        with pytest.raises(DataError, match="prices.yaml"):
            load_prices()
    finally:
        monkeypatch.delenv("SHAMBENCH_PRICING")
        load_prices.cache_clear()


def test_endpoint_identity_is_what_detectors_record_and_never_the_key(monkeypatch):
    from shambench.detection.detector import create_detector
    from shambench.llm.endpoint import Endpoint

    monkeypatch.setenv("SOME_KEY", "sk-secret")
    ep = Endpoint(model="m", base_url="http://127.0.0.1:9/v1", api_key_env="SOME_KEY", max_concurrency=3)
    assert ep.identity() == {"model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "SOME_KEY"}
    det = create_detector("openai", model="m", base_url="http://127.0.0.1:9/v1", api_key_env="SOME_KEY")
    params = det.params()
    assert {k: params[k] for k in ep.identity()} == ep.identity()
    assert "sk-secret" not in repr(params)


# --- real servers: structured-output negotiation, the served model, slots, timeouts ---------------------------

SCHEMA_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "x", "strict": True, "schema": {"type": "object", "required": ["a"]}},
}


def ask_structured(client: LLMClient, prompts: list[str]) -> list:
    async def one(prompt):
        try:
            return await client.chat([{"role": "user", "content": prompt}], {"response_format": SCHEMA_FORMAT})
        except LLMError as err:
            return err

    return list(client.map(prompts, one))


def formats_sent(server) -> list:
    return [r.body.get("response_format", {}).get("type", "none") for r in server.log]


def test_llama_cpp_python_rejection_falls_back_once_for_every_request(openai_server):
    openai_server.accepted_formats = frozenset({"text", "json_object"})
    notes: list[str] = []
    client = LLMClient(Endpoint(model="m", base_url=openai_server.base_url, **FAST), on_note=notes.append)
    replies = ask_structured(client, [str(i) for i in range(10)])
    assert not any(isinstance(r, LLMError) for r in replies)
    # One rejected json_schema request (never retried), then all ten in json_object with the schema alongside.
    assert formats_sent(openai_server) == ["json_schema"] + ["json_object"] * 10
    assert openai_server.count(status=500) == 1
    assert all(
        r.body["response_format"]["schema"] == {"type": "object", "required": ["a"]} for r in openai_server.log[1:]
    )
    assert {r.structured for r in replies} == {"json_object+schema"}
    assert len(notes) == 1 and "using json_object+schema" in notes[0]


def test_a_rejection_naming_only_the_accepted_types_is_understood(openai_server):
    openai_server.faults = lambda req: (
        Fault("500", message="Input should be 'text' or 'json_object'")
        if req.body.get("response_format", {}).get("type") == "json_schema"
        else None
    )
    replies = ask_structured(client_for(openai_server), ["a", "b"])
    assert not any(isinstance(r, LLMError) for r in replies)
    assert formats_sent(openai_server) == ["json_schema", "json_object", "json_object"]


def test_a_server_taking_no_format_ends_on_the_prompt_alone(openai_server):
    openai_server.accepted_formats = frozenset({"text"})
    replies = ask_structured(client_for(openai_server), ["a", "b", "c"])
    assert not any(isinstance(r, LLMError) for r in replies)
    assert formats_sent(openai_server) == ["json_schema", "json_object", "json_object", "none", "none", "none"]
    assert {r.structured for r in replies} == {"prompt"}


def test_the_negotiated_mode_is_remembered_for_the_endpoint(openai_server):
    openai_server.accepted_formats = frozenset({"text", "json_object"})
    cache = ResponseCache()
    ask_structured(client_for(openai_server, cache=cache), ["a"])
    openai_server.reset()
    again = ask_structured(client_for(openai_server, cache=cache), ["a", "b"])
    # "a" is a cache hit under the json_object+schema body; "b" goes out in that mode at once.
    assert formats_sent(openai_server) == ["json_object"] and sorted(r.usage.cache_hit for r in again) == [0, 1]


def test_a_forced_mode_is_not_negotiated(openai_server):
    openai_server.accepted_formats = frozenset({"text", "json_object"})
    client = LLMClient(Endpoint(model="m", base_url=openai_server.base_url, **FAST), structured="json_schema")
    (err,) = ask_structured(client, ["a"])
    assert isinstance(err, LLMError) and err.status == 500 and "-p structured=MODE" in err.reason
    assert formats_sent(openai_server) == ["json_schema"]
    with pytest.raises(DataError, match="structured='xml'"):
        LLMClient(Endpoint(model="m"), structured="xml")


def test_a_validation_error_with_status_500_is_not_retried(openai_server):
    openai_server.faults = lambda req: Fault("500", message="1 validation error for Request: Field required")
    (err,) = ask(client_for(openai_server), ["a"])
    assert isinstance(err, LLMError) and err.usage.requests == 1 and len(openai_server.log) == 1
    openai_server.reset()
    openai_server.faults = first_attempt("500")
    (ok,) = ask(client_for(openai_server), ["a"])
    assert ok.usage.retries == 1


def test_the_served_model_is_recorded_said_once_and_keys_the_cache(openai_server):
    openai_server.served_model = "smollm2-cpp"
    cache, notes = ResponseCache(), []
    endpoint = Endpoint(model="Qwen/Qwen3-4B", base_url=openai_server.base_url, **FAST)
    replies = ask(LLMClient(endpoint, cache=cache, on_note=notes.append), ["a", "b", "c"])
    assert {r.served_model for r in replies} == {"smollm2-cpp"}
    assert len(notes) == 1 and "'smollm2-cpp', not the requested 'Qwen/Qwen3-4B'" in notes[0]
    # Same alias, same model: one live request learns who answers, the rest come from the cache.
    openai_server.reset()
    again = ask(LLMClient(endpoint, cache=cache), ["a", "b", "c"])
    assert len(openai_server.log) == 1 and sum(r.usage.cache_hit for r in again) == 2
    # Another model behind the same alias never gets the first one's answers.
    openai_server.reset()
    openai_server.served_model = "tinyllama"
    other = ask(LLMClient(endpoint, cache=cache), ["a", "b", "c"])
    assert len(openai_server.log) == 3 and {r.served_model for r in other} == {"tinyllama"}
    assert not any(r.usage.cache_hit for r in other)


def counted_keys(monkeypatch) -> list[dict]:
    """The parts of every request cache key the client computes from now on."""
    import shambench.llm.client as client_module

    parts: list[dict] = []
    real = client_module.cache_key
    monkeypatch.setattr(client_module, "cache_key", lambda p: parts.append(p) or real(p))
    return parts


def test_one_cache_key_per_request_the_one_its_answer_is_stored_under(openai_server, monkeypatch):
    cache = ResponseCache()
    client = client_for(openai_server, cache=cache)
    ask(client, ["warm-up"])  # the first request also settles the mode and the served model
    keys = counted_keys(monkeypatch)
    replies = ask(client, ["a", "b", "c"])
    assert len([p for p in keys if "body" in p]) == 3
    assert all(cache.get(r.key) is not None for r in replies)
    again = ask(client_for(openai_server, cache=cache), ["a", "b", "c"])
    assert [r.key for r in again] == [r.key for r in replies] and all(r.usage.cache_hit for r in again)


def test_an_answer_from_another_model_is_stored_under_a_key_that_names_it(openai_server, monkeypatch):
    openai_server.served_model = "smollm2-cpp"
    cache = ResponseCache()
    endpoint = Endpoint(model="Qwen/Qwen3-4B", base_url=openai_server.base_url, **FAST)
    keys = counted_keys(monkeypatch)
    (first,) = ask(LLMClient(endpoint, cache=cache), ["a"])
    # Looked up without the served model (not known yet), stored under a key with it.
    assert ["served_model" in p for p in keys if "body" in p] == [False, True]
    assert cache.get(first.key) is not None
    keys.clear()
    client = LLMClient(endpoint, cache=cache)
    ask(client, ["b"])
    ask(client, ["c"])  # served model known: its lookup key is the one stored
    assert ["served_model" in p for p in keys if "body" in p] == [False, True, True]


def test_a_dated_snapshot_is_the_requested_model():
    from shambench.llm.endpoint import same_model

    assert same_model("gpt-5-mini", "gpt-5-mini-2025-08-07") and same_model("m", None)
    assert not same_model("Qwen/Qwen3-4B", "smollm2-cpp")


def test_concurrency_is_capped_to_the_slots_the_server_reports(openai_server):
    openai_server.slots = 2
    notes: list[str] = []
    client = LLMClient(
        Endpoint(model="m", base_url=openai_server.base_url, max_concurrency=8, **FAST), on_note=notes.append
    )
    ask(settled(client, openai_server, 2), [str(i) for i in range(10)])
    assert openai_server.peak == 2 and len(notes) == 1 and "2 request(s) at a time" in notes[0]


def the_one_held(server: OpenAIServer, released: list[str], asking: Background) -> str:
    """The prompt of the one request the server holds, apart from those already released (failing at once when
    the requests all ended instead)."""

    def held() -> list[str]:
        return [r.prompt for r in server.held() if r.prompt not in released]

    wait_until(lambda: len(held()) == 1 or asking.ended(), "one request held at the server")
    assert len(held()) == 1, f"no request held: the requests ended with {asking.result()}"
    return held()[0]


def test_the_timeout_does_not_count_the_wait_for_a_connection(openai_server):
    # One connection, a 600 s timeout on the test's clock, three requests held at the server until the test lets
    # each go. The first is sent at 0 and answered at 500; the second waits for the connection until 500 and is
    # answered at 1000, 1000 s after it was asked but 500 after it was sent; the third, sent at 1000, times out at
    # 1600. Counted from when it was asked, the second would have timed out at 600.
    openai_server.faults = lambda req: Fault("hold") if req.prompt != "settle" else None
    clock = ManualClock()
    client = client_for(openai_server, clock=clock, max_concurrency=1, timeout=600, max_retries=0)

    async def three():
        try:
            await client.chat([{"role": "user", "content": "settle"}])  # the first request goes out alone
            asked = [client.chat([{"role": "user", "content": p}]) for p in ("a", "b", "c")]
            return dict(zip("abc", await asyncio.gather(*asked, return_exceptions=True), strict=True))
        finally:
            await client.aclose()

    released: list[str] = []
    try:
        asking = Background(lambda: asyncio.run(three()), "three requests")
        for step in (500, 500):
            released.append(the_one_held(openai_server, released, asking))
            clock.advance(step)
            openai_server.release(released[-1])
        last = the_one_held(openai_server, released, asking)
        clock.advance(600)
        replies = asking.result()
    finally:
        openai_server.release()
    assert [replies[p].usage.retries for p in released] == [0, 0] and replies[last].reason == (
        "timeout: no complete reply within 600 s"
    )
    assert len(openai_server.log) == 4


def test_the_gate_halves_on_a_429_and_grows_back_by_one_after_as_many_successes():
    said: list[int] = []
    gate = AdaptiveGate(8, said.append)

    async def run() -> list[int]:
        caps = []
        async with contextlib.AsyncExitStack() as slots:
            for _ in range(8):
                await slots.enter_async_context(gate.slot())
            for status in (429, 429, 429, 429):  # 8 in flight: 8 // 2 = 4, then 4 // 2 = 2, 1, and never below 1
                gate.after(status)
                caps.append(gate.cap)
        # Additive increase: one more after as many successes in a row as the bound (1, then 2, then 3); a 429
        # halves what is in flight (1 here, so the bound drops to 1) and starts the count again.
        async with gate.slot():
            for status in (200, 200, 200, 200, 200, 200, 429, 200):
                gate.after(status)
                caps.append(gate.cap)
        return caps

    assert asyncio.run(run()) == [4, 2, 1, 1, 2, 2, 3, 3, 3, 4, 1, 2]
    assert said == [4]  # said once, at the first lowering


def test_concurrency_adapts_to_429(openai_server):
    # The 8 requests after the client's first are held until all 8 are in flight, then refused with 429 (as a proxy
    # with a concurrency limit does): the first refusal halves the bound from 8 in flight to 4, said once; every
    # request then succeeds on a retry. Nothing here depends on how the replies interleave.
    openai_server.faults = lambda req: Fault("429", "0") if 2 <= req.n <= 9 else None
    notes: list[str] = []
    endpoint = Endpoint(
        model="m", base_url=openai_server.base_url, max_concurrency=8, backoff_base=0.01, max_retries=20
    )
    client = settled(LLMClient(endpoint, on_note=notes.append), openai_server, 8)
    replies = ask(client, [str(i) for i in range(40)])
    assert not any(isinstance(r, LLMError) for r in replies)
    assert sum(r.usage.retries for r in replies) == 8 and openai_server.count(status=429) == 8
    assert len(notes) == 1 and "rate-limiting (HTTP 429): at most 4 request(s) at once for now" in notes[0]

"""Replies that are not well-formed completions, size limits, authentication stops, credentials and the
endpoint in cache keys: the client against the local test server's misbehaviour modes."""

from __future__ import annotations

import json

import pytest

from shambench.errors import AuthenticationStopped, EndpointError, MalformedReply, ServerUnreachable
from shambench.llm.cache import ResponseCache
from shambench.llm.client import Completion, LLMClient, LLMError, cache_record
from shambench.llm.endpoint import DEFAULT_MAX_RESPONSE_BYTES, Endpoint, endpoint_url
from shambench.llm.wire import Usage, parse_reply
from tests.openai_server import MALFORMED_200, Fault, OpenAIServer
from tests.run_helpers import unless_hung

FAST = {"backoff_base": 0.001, "max_retries": 2}


def client_for(server, cache=None, **endpoint) -> LLMClient:
    return LLMClient(Endpoint(model="m", base_url=server.base_url, **{**FAST, **endpoint}), cache=cache)


def ask(client: LLMClient, prompts: list[str], accept=None) -> list:
    """Each prompt's Completion (or LLMError), in the prompts' order, through the client's worker pool."""

    async def one(prompt):
        try:
            return prompt, await client.chat([{"role": "user", "content": prompt}], {"logprobs": True}, accept)
        except LLMError as err:
            return prompt, err

    done = dict(client.map(prompts, one))
    return [done[p] for p in prompts]


def json_of(completion):
    return json.loads(completion.text)


# The one-line reason each persistent malformed reply ends with (after the retries).
REASONS = {
    "malformed": "malformed reply: the reply:1: not valid JSON",
    "null": "malformed reply: expected a JSON object, got null",
    "array": "malformed reply: expected a JSON object, got an array",
    "string": "malformed reply: expected a JSON object, got a string",
    "choices-null": "malformed reply: choices is null",
    "choices-empty": "malformed reply: choices is empty",
    "content-number": "malformed reply: message content is a number",
    "content-list": "malformed reply: message content is an array",
    "usage-string": "malformed reply: usage is a string",
    "usage-huge": "malformed reply: usage.prompt_tokens = 1000000000000000000000000000000 is not a plausible",
    "usage-negative": "malformed reply: usage.completion_tokens = -5 is not a plausible token count",
    "logprobs-shape": "malformed reply: logprobs.content is a string",
    "logprobs-nan": "malformed reply: top_logprobs logprob is a string",
    "deep-body": "malformed reply: the reply: nested deeper than 64 levels",
    "huge": f"malformed reply: larger than the {DEFAULT_MAX_RESPONSE_BYTES}-byte limit",
}


@pytest.mark.parametrize("kind", sorted(REASONS))
def test_every_malformed_reply_class_fails_one_item_after_retries_and_never_the_run(openai_server, kind):
    openai_server.faults = lambda req: Fault(kind) if "bad" in req.prompt else None
    bad, good = ask(client_for(openai_server), ["bad", "good"])
    assert isinstance(bad, LLMError) and bad.reason.startswith(REASONS[kind]), bad
    # Retried like a transient error: 1 + max_retries attempts, each counted.
    assert bad.reason.endswith("after 3 attempts") and bad.usage.requests == 3
    assert "\n" not in bad.reason and len(bad.reason) < 400
    assert good.text == '{"incorrect_spans": []}'
    assert openai_server.count() == 4


def test_a_malformed_first_reply_is_retried_and_the_second_used(openai_server):
    openai_server.faults = lambda req: Fault("choices-null") if req.attempt == 1 else None
    (reply,) = ask(client_for(openai_server), ["x"])
    assert reply.text == '{"incorrect_spans": []}' and reply.usage.retries == 1


def test_model_output_nested_thousands_deep_is_an_unusable_output_not_a_crash(openai_server):
    openai_server.faults = lambda req: Fault("deep-output")
    (reply,) = ask(client_for(openai_server), ["x"], accept=json_of)
    assert isinstance(reply, LLMError) and reply.reason == "unusable output: JSON nested too deeply"


def test_all_malformed_kinds_are_covered():
    assert set(MALFORMED_200) == set(REASONS) | {"deep-output"}


def test_the_size_limit_is_configurable(openai_server, monkeypatch):
    openai_server.script = lambda req: "y" * 5000
    (small,) = ask(client_for(openai_server, max_response_bytes=4096), ["x"])
    assert isinstance(small, LLMError) and small.reason.startswith("malformed reply: larger than the 4096-byte")
    monkeypatch.setenv("SHAMBENCH_MAX_RESPONSE_BYTES", "100000")
    assert Endpoint(model="m").max_response_bytes == 100_000
    (fits,) = ask(client_for(openai_server), ["x"])
    assert fits.text == "y" * 5000


def test_parse_reply_accepts_a_well_formed_body_and_reads_usage_and_logprobs():
    body = {
        "choices": [
            {
                "message": {"content": "hi", "reasoning_content": "think"},
                "finish_reason": "stop",
                "logprobs": {"content": [{"token": "hi", "logprob": -0.1, "top_logprobs": [{"token": "hi", "logprob": -0.1}, {"token": "yo", "logprob": -2.5}]}]},
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1.0, "completion_tokens_details": None},
    }  # fmt: skip
    reply = parse_reply("chat", json.dumps(body), "unpriced-model")
    assert (reply.text, reply.reasoning, reply.finish_reason) == ("hi", "think", "stop")
    assert reply.top_logprobs == {"hi": -0.1, "yo": -2.5}
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.reasoning_tokens) == (3, 1, 0)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"choices": [{"message": {"content": "a"}, "finish_reason": 7}]}, "finish_reason is a number"),
        ({"choices": [{"message": None}]}, "choices[0].message is null"),
        ({"choices": ["text"]}, "choices[0] is a string"),
        ({"choices": [{"message": {"content": "a"}}], "usage": {"prompt_tokens": True}}, "prompt_tokens is a boolean"),
        ({"choices": [{"message": {"content": "a"}}], "usage": {"prompt_tokens": 1.5}}, "= 1.5 is not a plausible"),
        ({"error": {"message": "overloaded"}}, "an error in an HTTP-200 body (overloaded)"),
    ],
)
def test_parse_reply_names_what_is_wrong(body, reason):
    with pytest.raises(MalformedReply) as err:
        parse_reply("chat", json.dumps(body), "m")
    assert reason in str(err.value)


def test_responses_and_completions_bodies_are_checked_too():
    with pytest.raises(MalformedReply, match="output is a string"):
        parse_reply("responses", json.dumps({"output": "x"}), "m")
    with pytest.raises(MalformedReply, match="an output item is a number"):
        parse_reply("responses", json.dumps({"output": [3]}), "m")
    with pytest.raises(MalformedReply, match=r"choices\[0\].text is an object"):
        parse_reply("completions", json.dumps({"choices": [{"text": {"a": 1}}]}), "m")
    top = {"choices": [{"text": "x", "logprobs": {"top_logprobs": [{"a": float("inf")}]}}]}
    with pytest.raises(MalformedReply, match="Infinity is not a JSON number"):
        parse_reply("completions", json.dumps(top), "m")


# --- authentication errors ---------------------------------------------------------------------------------------


def test_consecutive_authentication_errors_stop_the_run_early(openai_server):
    openai_server.faults = lambda req: Fault("401")
    client = client_for(openai_server, max_concurrency=1, auth_failures_to_stop=4)
    with pytest.raises(AuthenticationStopped, match="stopped after 4 consecutive authentication errors"):
        ask(client, [f"p{i}" for i in range(50)])
    # Not retried, and nothing sent after the fourth.
    assert openai_server.count() == 4


def test_a_success_resets_the_authentication_error_count(openai_server):
    # Every second prompt is refused: never two in a row, so the run goes on.
    openai_server.faults = lambda req: Fault("403") if int(req.prompt[1:]) % 2 else None
    out = ask(client_for(openai_server, max_concurrency=1, auth_failures_to_stop=2), [f"p{i}" for i in range(10)])
    assert sum(isinstance(o, LLMError) for o in out) == 5 and openai_server.count() == 10


def closed_port() -> int:
    """A loopback port nothing listens on (bound once, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_server_that_never_answers_stops_the_run_at_the_second_refused_connection():
    port = closed_port()
    client = LLMClient(Endpoint(model="m", base_url=f"http://127.0.0.1:{port}/v1", backoff_base=0.01), cache=None)
    with pytest.raises(ServerUnreachable) as stop:
        unless_hung(lambda: ask(client, [f"p{i}" for i in range(20)]), "the run against a closed port")
    message = str(stop.value)
    assert f"no server answers at http://127.0.0.1:{port}/v1" in message
    assert f"cannot connect to 127.0.0.1:{port}: connection refused, 2 attempts" in message
    assert "ssl:default" not in message


def test_a_server_that_answered_once_gets_the_full_retries_when_its_connections_fail(openai_server):
    client = client_for(openai_server, max_concurrency=1, max_retries=2)
    (first,) = ask(client, ["p0"])
    assert first.text
    client.endpoint = client.endpoint.model_copy(update={"base_url": f"http://127.0.0.1:{closed_port()}/v1"})
    (later,) = ask(client, ["p1"])
    assert isinstance(later, LLMError) and "connection refused after 3 attempts" in str(later)


def test_a_missing_key_is_said_for_a_remote_server_only(monkeypatch):
    monkeypatch.delenv("MY_KEY", raising=False)

    def note(url: str) -> str | None:
        return Endpoint(model="m", base_url=url, api_key_env="MY_KEY").missing_key_note()

    assert note("http://127.0.0.1:8000/v1") is None and note("http://localhost:8000/v1") is None
    assert note("https://llm.example.org/v1") == (
        "$MY_KEY is not set: requests to https://llm.example.org/v1 carry no key (a server that needs one answers 401)"
    )
    monkeypatch.setenv("MY_KEY", "sk-something-long")
    assert note("https://llm.example.org/v1") is None


# --- secrets ---------------------------------------------------------------------------------------------------


def test_a_key_echoed_at_the_cut_is_redacted_before_the_reason_is_shortened(openai_server, monkeypatch):
    key = "sk-proj-" + "A1b2C3d4" * 6
    monkeypatch.setenv("OPENAI_API_KEY", key)
    # The key straddles the 300-character cut of a reason: shortening first would leave a piece of it.
    openai_server.faults = lambda req: Fault("400", message="x" * 270 + " your key " + req.authorization)
    (err,) = ask(client_for(openai_server), ["x"])
    assert isinstance(err, LLMError) and err.reason.startswith("HTTP 400: xxx")
    assert "A1b2C3d4" not in err.reason and "A1b2" not in err.reason


@pytest.mark.parametrize(
    "url", ["http://user:pass@127.0.0.1:8000/v1", "http://token@host/v1", "https://:secret@api.example.com/v1"]
)
def test_base_urls_carrying_credentials_are_refused_without_repeating_them(url):
    with pytest.raises(EndpointError) as err:
        Endpoint(model="m", base_url=url)
    assert "credentials" in str(err.value) and "pass" not in str(err.value).replace("password", "")
    assert "secret" not in str(err.value) and "token" not in str(err.value)


def test_openai_base_url_from_the_environment_with_credentials_is_refused(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://u:p@127.0.0.1:9/v1")
    with pytest.raises(EndpointError, match=r"\$OPENAI_BASE_URL must not contain credentials"):
        Endpoint(model="m").url()


# --- the cache never crosses endpoints -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "identity"),
    [
        ("HTTP://LocalHost:80/v1/", "http://localhost/v1"),
        ("https://api.openai.com:443/v1", "https://api.openai.com/v1"),
        ("http://127.0.0.1:8000/v1?x=1#f", "http://127.0.0.1:8000/v1"),
        ("http://[::1]:8000/v1", "http://[::1]:8000/v1"),
    ],
)
def test_endpoint_url_normalises(url, identity):
    assert endpoint_url(url) == identity


def test_two_servers_with_one_model_name_never_share_cached_answers(openai_server, tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    openai_server.script = lambda req: "from A"
    with OpenAIServer(script=lambda req: "from B") as other:
        (a,) = ask(client_for(openai_server, cache=cache), ["same prompt"])
        (b,) = ask(client_for(other, cache=cache), ["same prompt"])
        (a_again,) = ask(client_for(openai_server, cache=cache), ["same prompt"])
        assert other.count() == 1
    assert (a.text, b.text, a_again.text) == ("from A", "from B", "from A")
    assert a_again.usage.cache_hit == 1 and openai_server.count() == 1
    cache.close()


def test_entries_keyed_without_the_endpoint_are_never_hit(openai_server, tmp_path):
    from shambench.llm.cache import cache_key

    cache = ResponseCache(tmp_path / "c.sqlite")
    body = {"messages": [{"role": "user", "content": "q"}], "logprobs": True}
    # The key an older version wrote for this request: model, kind and body only.
    cache.put(cache_key({"model": "m", "kind": "chat", "body": body}), "m", {"text": "stale", "finish_reason": "stop"})
    (reply,) = ask(client_for(openai_server, cache=cache), ["q"])
    assert reply.text == '{"incorrect_spans": []}' and openai_server.count() == 1
    cache.close()


def test_usages_add_up_field_by_field_and_keep_the_fields_of_their_own_class():
    from shambench.detectors.miprov2 import OptimisationUsage

    one = Usage(input_tokens=10, output_tokens=4, reasoning_tokens=1, cost=0.25, requests=2, retries=1)
    hit = Usage(cache_hit=1)
    assert one.plus(hit).plus(one) == Usage(
        input_tokens=20, output_tokens=8, reasoning_tokens=2, cost=0.5, requests=4, retries=2, cache_hit=1
    )
    total = OptimisationUsage(lm_calls=3, unparsed=1, failures=["boom"], requests=5).plus(one)
    assert type(total) is OptimisationUsage
    assert (total.lm_calls, total.unparsed, total.failures, total.requests, total.cost) == (3, 1, ["boom"], 7, 0.25)


def test_a_reply_cached_reads_back_as_it_was():
    # Text with an escape and a quote, log-probabilities (a finite number, which a reply's must be)
    top = '[{"token": "hi", "logprob": -0.1, "top_logprobs": [{"token": "hi", "logprob": -1e-7}, {"token": "yo", "logprob": -2.5}]}]'
    text = (
        '{"model": "m", "choices": [{"message": {"content": "h\\u00e9 \\"x\\""}, "finish_reason": "stop", '
        f'"logprobs": {{"content": {top}}}}}]}}'
    )
    reply = parse_reply("chat", text, "m")
    assert (reply.text, reply.top_logprobs) == ('hé "x"', {"hi": -1e-7, "yo": -2.5})
    record = json.loads(cache_record(reply))
    assert record == {
        "text": 'hé "x"',
        "reasoning": None,
        "finish_reason": "stop",
        "top_logprobs": reply.top_logprobs,
        "served_model": "m",
    }
    assert Completion(**record, usage=Usage(), key="k").top_logprobs == {"hi": -1e-7, "yo": -2.5}

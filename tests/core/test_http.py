"""The package's one HTTP stack: the blocking client of downloads and providers, proxies, bodies within a limit."""

from __future__ import annotations

import asyncio
import gzip
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from shambench.errors import MalformedReply
from shambench.http import (
    Client,
    Clock,
    ConnectError,
    StatusError,
    Timeout,
    TransportError,
    proxy_for,
    reach_scheduler,
    time_left,
)
from tests.run_helpers import HANG_SECONDS

BODY = bytes(range(256)) * 40  # 10,240 bytes
# A hostile body ends on its own after this many bytes or seconds, so that a client without its bounds fails the
# test instead of hanging it.
HOSTILE_BYTES = 64 << 20
HOSTILE_SECONDS = 5.0
BOMB = gzip.compress(b"\0" * HOSTILE_BYTES)  # about 64 KB that inflate to 64 MB


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/file")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path.startswith("/file"):
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.send_header("X-Query", self.path.partition("?")[2])
            self.end_headers()
            self.wfile.write(BODY)
        elif self.path == "/cut":
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY[:3000])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
        elif self.path in ("/trickle", "/endless"):
            self.send_response(200)
            self.end_headers()  # no length: the body ends when the connection closes
            piece, pause = (b"x", 0.02) if self.path == "/trickle" else (b"x" * 65536, 0.0)
            sent, until = 0, time.monotonic() + HOSTILE_SECONDS
            while sent < HOSTILE_BYTES and time.monotonic() < until:
                self.wfile.write(piece)
                self.wfile.flush()
                sent += len(piece)
                time.sleep(pause)
            self.close_connection = True
        elif self.path == "/bomb":
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(BOMB)))
            self.end_headers()
            self.wfile.write(BOMB)
        elif self.path == "/held":
            self.server.release.wait(60)  # type: ignore[attr-defined]
        else:
            self.send_error(404)


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.release = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.release.set()  # type: ignore[attr-defined]
    srv.shutdown()
    srv.server_close()


def test_a_redirected_get_reads_the_body_and_sends_the_query(server):
    with Client(timeout=10) as client:
        with client.get(f"{server}/moved") as reply:
            assert (reply.status, reply.reason) == (200, "OK") and b"".join(reply.chunks()) == BODY
        with client.get(f"{server}/file", params={"a": "1 2"}) as reply:
            assert reply.headers["x-query"] == "a=1+2" and reply.read(len(BODY)) == BODY
        with client.get(f"{server}/file") as reply, pytest.raises(MalformedReply, match="larger than the 1024-byte"):
            reply.read(1024)
        with client.get(f"{server}/missing") as reply:
            assert reply.status == 404
            with pytest.raises(StatusError, match="HTTP 404 Not Found"):
                reply.raise_for_status()


def test_a_broken_body_hands_on_every_byte_received_then_fails(server):
    received = []
    with (
        Client(timeout=10) as client,
        client.get(f"{server}/cut") as reply,
        pytest.raises(TransportError, match="ClientPayloadError"),
    ):
        for chunk in reply.chunks():
            received.append(chunk)
    assert b"".join(received) == BODY[:3000]


def test_no_connection_and_no_answer_are_transport_errors(server):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound but not listening: a connection is refused
        with (
            Client(timeout=10) as client,
            pytest.raises(ConnectError),
            client.get(f"http://127.0.0.1:{sock.getsockname()[1]}/"),
        ):
            pass
    with (
        Client(timeout=0.2) as client,
        pytest.raises(Timeout, match="no complete answer within 0.2 s"),
        client.get(f"{server}/held"),
    ):
        pass


def test_a_trickling_body_meets_the_requests_deadline(server):
    # A byte every 20 ms: no read ever waits 0.3 s, the whole request's deadline (0.3 s plus 1 s per 1,000 bytes)
    # is what ends it, with every byte received handed on first.
    received = []
    with (
        Client(timeout=0.3, min_rate=1000) as client,
        client.get(f"{server}/trickle") as reply,
        pytest.raises(Timeout, match=r"^no complete answer within 0.3 s \(plus 1 s per 1000 bytes received\)$"),
    ):
        for chunk in reply.chunks():
            received.append(chunk)
    assert 0 < len(b"".join(received)) < HOSTILE_SECONDS / 0.02
    # Read whole: the deadline grows with the bytes received, not with the limit (a gigabyte's worth at 1,000 bytes a
    # second would let the trickle run to its end).
    with (
        Client(timeout=0.3, min_rate=1000) as client,
        client.get(f"{server}/trickle") as reply,
        pytest.raises(Timeout),
    ):
        reply.read(1 << 30)


def test_an_endless_body_and_a_gzip_bomb_stop_at_the_byte_cap(server):
    with Client(timeout=10) as client:
        with client.get(f"{server}/endless") as reply, pytest.raises(MalformedReply, match="1048576-byte limit"):
            reply.read(1 << 20)
        # Decompressed: the decoded bytes are counted as they are inflated.
        with client.get(f"{server}/bomb") as reply, pytest.raises(MalformedReply, match="1048576-byte limit"):
            reply.read(1 << 20)
    with Client(timeout=10, decompress=False) as client, client.get(f"{server}/bomb") as reply:
        assert reply.read(1 << 20) == BOMB  # as sent: the compressed bytes, within the cap


def test_a_scheduler_that_accepts_and_never_answers_is_one_line_after_the_deadline(mute_port):
    pytest.importorskip("distributed")
    address = f"tcp://127.0.0.1:{mute_port}"
    with pytest.raises(Timeout) as caught:
        reach_scheduler(address, 0.3)
    assert str(caught.value) == f"no answer from the Dask scheduler at {address} within 0.3 s"
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, not listening: refused
        refused = f"tcp://127.0.0.1:{closed.getsockname()[1]}"
        # Dask tries a refused connection again until its deadline: either way one line naming the address.
        with pytest.raises(TransportError, match=f"Dask scheduler at {refused} ") as caught:
            reach_scheduler(refused, 0.3)
        assert "\n" not in str(caught.value)
    with pytest.raises(
        ConnectError, match="^cannot reach the Dask scheduler at nonsense://x \\(unknown address scheme"
    ):
        reach_scheduler("nonsense://x", 0.3)


def test_the_proxy_of_a_url_honours_no_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    monkeypatch.setenv("no_proxy", "internal.example")
    assert proxy_for("https://api.openai.com/v1") == "http://proxy.example:3128"
    assert proxy_for("https://internal.example/v1") is None
    assert proxy_for("http://api.openai.com/v1") is None  # no proxy named for plain http


def test_a_request_has_its_timeout_plus_a_second_per_min_rate_bytes_received():
    # Started at 10 with a 60 s timeout; at 15, with 32 KiB received at 16 KiB/s: 60 + 2 - 5 = 57 s left.
    assert time_left(10.0, 15.0, 60.0, 32 * 1024, 16 * 1024) == 57.0
    assert time_left(10.0, 75.0, 60.0, 0, 16 * 1024) == -5.0  # nothing received: past its deadline


# --- the deadlines of API requests (Clock.deadline): one timer per loop for requests that pass in order ------------


async def _within(clock: Clock, seconds: float, step) -> str:
    """'done' when `step` finished within the deadline, 'timeout' when the deadline ended it (and the task then
    goes on: a later await is not cancelled)."""
    try:
        async with clock.deadline(seconds):
            await step()
    except TimeoutError:
        await asyncio.sleep(0)
        return "timeout"
    return "done"


async def at_once() -> None:
    """A step that ends without waiting for anything."""


def test_requests_end_each_at_its_own_deadline():
    async def run() -> list[str]:
        clock, never, timed_out = Clock(), asyncio.Event(), asyncio.Event()

        async def after_the_timeout() -> None:
            await timed_out.wait()

        async def hung() -> None:
            try:
                await never.wait()
            finally:
                timed_out.set()

        # The oldest ends at once and leaves; the timer set for its deadline passes it on to the next one's. It
        # ends without giving the loop a turn, so however busy the machine its deadline cannot pass first.
        quick = await _within(clock, 0.05, at_once)
        stuck = asyncio.create_task(_within(clock, 0.05, hung))
        waiting = asyncio.create_task(_within(clock, 60, after_the_timeout))  # goes on once `stuck` has ended
        async with asyncio.timeout(HANG_SECONDS):  # a deadline that never passes fails the test, not hangs it
            return [quick, *await asyncio.gather(stuck, waiting)]

    assert asyncio.run(run()) == ["done", "timeout", "done"]


def test_a_shorter_deadline_after_a_longer_one_still_passes():
    # It would pass before the one already open: it gets its own timer.
    async def run() -> list[str]:
        clock, never, release = Clock(), asyncio.Event(), asyncio.Event()
        longer = asyncio.create_task(_within(clock, 60, release.wait))
        await asyncio.sleep(0)
        async with asyncio.timeout(HANG_SECONDS):
            shorter = await _within(clock, 0.05, never.wait)
        release.set()
        return [await longer, shorter]

    assert asyncio.run(run()) == ["done", "timeout"]


def test_a_shorter_deadline_after_a_longer_one_has_ended_passes_on_time():
    # The longer request's timer is still pending when it ends; the shorter one's deadline comes first.
    async def run() -> str:
        clock, never = Clock(), asyncio.Event()
        assert await _within(clock, HANG_SECONDS * 2, at_once) == "done"
        async with asyncio.timeout(HANG_SECONDS):
            return await _within(clock, 0.05, never.wait)

    assert asyncio.run(run()) == "timeout"


def test_a_cancel_from_elsewhere_is_no_timeout():
    async def run() -> None:
        clock, never = Clock(), asyncio.Event()
        request = asyncio.create_task(_within(clock, 60, never.wait))
        await asyncio.sleep(0)
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request

    asyncio.run(run())

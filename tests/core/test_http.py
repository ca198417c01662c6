"""The package's one HTTP stack: the blocking client of downloads and providers, proxies, bodies within a limit."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from shambench.errors import MalformedReply
from shambench.http import Client, ConnectError, StatusError, Timeout, TransportError, proxy_for

BODY = bytes(range(256)) * 40  # 10,240 bytes


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
        pytest.raises(Timeout, match="no answer within 0.2 s"),
        client.get(f"{server}/held"),
    ):
        pass


def test_the_proxy_of_a_url_honours_no_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    monkeypatch.setenv("no_proxy", "internal.example")
    assert proxy_for("https://api.openai.com/v1") == "http://proxy.example:3128"
    assert proxy_for("https://internal.example/v1") is None
    assert proxy_for("http://api.openai.com/v1") is None  # no proxy named for plain http

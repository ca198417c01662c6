"""The test OpenAI server with OpenAI's Files and Batch API: `/v1/files` (multipart upload), `/v1/files/{id}`,
`/v1/files/{id}/content`, `/v1/batches` (create, and list with cursor pagination), `/v1/batches/{id}` and
`/v1/batches/{id}/cancel`, in the official formats (Batch input lines, output and error file lines, batch objects
with request counts).

A batch is validated on creation, then advances one step per status check: `validating` → `in_progress`, then
after `polls` further checks it answers every line with the same scripted function as the direct endpoints and
ends `completed` (or `final_status`: `expired` answers only `answer_limit` lines and reports the rest as
`batch_expired` in the error file, as OpenAI does; `cancelled` leaves them out). `hold` keeps batches
`in_progress` until cleared. `item_faults(request)` returns an HTTP status for a line that should fail (its error
goes to the error file). Direct chat requests still land in `log`; batch lines land in `batch_log` only, so a test
can assert that a run used batches alone; `seen` records every request of any kind, with its Authorization header
(a batch line's `Request.authorization` is that of the request that created its batch, for a script to echo).

A server that lies: `lies` maps a route (`upload`, `create`, `list`, `retrieve`, `content`) to a handler that
answers instead of the honest one, e.g. `endless(...)`, `trickle(...)`, `silent` or `replying(...)` below. Each of
them gives up after HANG_BOUND seconds (or when the server stops) and notes in `lied` how it ended, so a client
that does not cut it short fails its test rather than hanging it.

    def test_x(batch_server):
        batch_server.script = lambda req: '{"incorrect_spans": []}'
        ... --batch --base-url batch_server.base_url ...
        assert len(batch_server.batches) == 1 and not batch_server.log
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import zlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from tests.openai_server import OpenAIServer, Request, prompt_of

BATCH_ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings")
HANG_BOUND = 60.0
"""Seconds a lying handler keeps going before it gives up (only a client that does not cut it short sees that)."""

Lie = Callable[["BatchServer", web.Request], Awaitable[web.StreamResponse]]


@dataclass
class BatchServer(OpenAIServer):
    """An OpenAI-compatible test server that also runs batches (see the module docstring)."""

    polls: int = 1
    """Status checks a batch stays `in_progress` before it is answered (0: answered at the first check)."""
    hold: bool = False
    """Keep every batch `in_progress` while set."""
    final_status: str = "completed"
    """How an answered batch ends: `completed`, `expired` or `cancelled`."""
    answer_limit: int | None = None
    """With `expired`/`cancelled`: how many lines are answered first."""
    item_faults: Callable[[Request], int | None] | None = None
    """An HTTP status for a batch line that should fail, else None."""
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    batch_log: list[Request] = field(default_factory=list)
    status_checks: int = 0
    """`GET /v1/batches/{id}` requests served."""
    seen: list[tuple[str, str, str | None]] = field(default_factory=list)
    """Every request received, of any path: (method, path, Authorization header)."""
    lies: dict[str, Lie] = field(default_factory=dict)
    """Handlers answering instead of the honest ones, by route name (see the module docstring)."""
    lied: list[str] = field(default_factory=list)
    """How each lying handler ended: `cut off` (the client went away), `gave up` (HANG_BOUND passed) or `done`."""

    @web.middleware
    async def _note(self, request: web.Request, handler: Callable) -> web.StreamResponse:
        self.seen.append((request.method, request.path, request.headers.get("Authorization")))
        return await handler(request)

    def _lie(self, route: str) -> Lie | None:
        return self.lies.get(route)

    def released(self) -> bool:
        """Whether the server is stopping (lying handlers then end)."""
        return self._release is not None and self._release.is_set()

    def _routes(self, app: web.Application) -> None:
        super()._routes(app)
        app.middlewares.append(self._note)
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/v1/files/{id}", self._file)
        app.router.add_get("/v1/files/{id}/content", self._content)
        app.router.add_post("/v1/batches", self._create)
        app.router.add_get("/v1/batches", self._list)
        app.router.add_get("/v1/batches/{id}", self._retrieve)
        app.router.add_post("/v1/batches/{id}/cancel", self._cancel)

    # ------------------------------------------------------------------------------------------------- files

    def _store(self, name: str, purpose: str, data: bytes) -> dict[str, Any]:
        file_id = f"file-{len(self.files) + 1:04d}"
        meta = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
            "status": "processed",
        }
        self.files[file_id] = {**meta, "data": data}
        return meta

    def _public(self, file_id: str) -> dict[str, Any]:
        return {k: v for k, v in self.files[file_id].items() if k != "data"}

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        if lie := self._lie("upload"):
            return await lie(self, request)
        form = await request.post()
        upload, purpose = form.get("file"), form.get("purpose")
        if upload is None or not hasattr(upload, "file") or purpose not in ("batch", "fine-tune", "assistants"):
            return _error(400, "expected multipart fields `file` and `purpose`")
        return web.json_response(self._store(upload.filename, str(purpose), upload.file.read()))

    async def _file(self, request: web.Request) -> web.Response:
        file_id = request.match_info["id"]
        if file_id not in self.files:
            return _error(404, f"No such File object: {file_id}")
        return web.json_response(self._public(file_id))

    async def _content(self, request: web.Request) -> web.StreamResponse:
        if lie := self._lie("content"):
            return await lie(self, request)
        file_id = request.match_info["id"]
        if file_id not in self.files:
            return _error(404, f"No such File object: {file_id}")
        return web.Response(body=self.files[file_id]["data"], content_type="application/octet-stream")

    # ----------------------------------------------------------------------------------------------- batches

    async def _create(self, request: web.Request) -> web.StreamResponse:
        if lie := self._lie("create"):
            return await lie(self, request)
        body = await request.json()
        file_id, endpoint = body.get("input_file_id"), body.get("endpoint")
        if file_id not in self.files:
            return _error(404, f"No such File object: {file_id}")
        if endpoint not in BATCH_ENDPOINTS or body.get("completion_window") != "24h":
            return _error(400, "endpoint must be a batch endpoint and completion_window '24h'")
        batch_id = f"batch_{len(self.batches) + 1:04d}"
        now = int(time.time())
        lines = [json.loads(line) for line in self.files[file_id]["data"].decode().splitlines() if line.strip()]
        self.batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": endpoint,
            "errors": None,
            "input_file_id": file_id,
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "expires_at": now + 86400,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
            "_auth": request.headers.get("Authorization"),
            "_lines": lines,
            "_checks": 0,
        }
        return web.json_response(self._batch(batch_id))

    def _batch(self, batch_id: str) -> dict[str, Any]:
        return {k: v for k, v in self.batches[batch_id].items() if not k.startswith("_")}

    async def _list(self, request: web.Request) -> web.StreamResponse:
        if lie := self._lie("list"):
            return await lie(self, request)
        limit = int(request.query.get("limit", 20))
        ids = sorted(self.batches, reverse=True)  # newest first, as OpenAI lists them
        after = request.query.get("after")
        if after in ids:
            ids = ids[ids.index(after) + 1 :]
        page = ids[:limit]
        data = [self._batch(i) for i in page]
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "first_id": page[0] if page else None,
                "last_id": page[-1] if page else None,
                "has_more": len(ids) > limit,
            }
        )

    async def _retrieve(self, request: web.Request) -> web.StreamResponse:
        if lie := self._lie("retrieve"):
            return await lie(self, request)
        batch_id = request.match_info["id"]
        if batch_id not in self.batches:
            return _error(404, f"No such Batch object: {batch_id}")
        self.status_checks += 1
        self._advance(self.batches[batch_id])
        return web.json_response(self._batch(batch_id))

    async def _cancel(self, request: web.Request) -> web.Response:
        batch_id = request.match_info["id"]
        if batch_id not in self.batches:
            return _error(404, f"No such Batch object: {batch_id}")
        batch = self.batches[batch_id]
        if batch["status"] not in ("completed", "failed", "expired", "cancelled"):
            batch["status"] = "cancelling"
        return web.json_response(self._batch(batch_id))

    def _advance(self, batch: dict[str, Any]) -> None:
        status = batch["status"]
        if status == "validating":
            problem = _invalid(batch["_lines"], batch["endpoint"])
            if problem:
                batch["status"] = "failed"
                batch["errors"] = {"object": "list", "data": [{"code": "invalid_request", "message": problem}]}
            else:
                batch["status"] = "in_progress"
                if self.polls == 0 and not self.hold:
                    self._finish(batch, self.final_status)
            return
        if status == "cancelling":
            self._finish(batch, "cancelled")
            return
        if status != "in_progress" or self.hold:
            return
        batch["_checks"] += 1
        if batch["_checks"] >= self.polls:
            self._finish(batch, self.final_status)

    def _finish(self, batch: dict[str, Any], final: str) -> None:
        """Answer the lines (all, or `answer_limit` when the batch ends early) and write the output files."""
        limit = len(batch["_lines"]) if final == "completed" else (self.answer_limit or 0)
        output, errors = [], []
        for n, line in enumerate(batch["_lines"]):
            if n >= limit:
                if final == "expired":
                    error = {
                        "code": "batch_expired",
                        "message": "This request could not be executed before the completion window expired.",
                    }
                    errors.append(
                        {"id": f"batch_req_{n}", "custom_id": line["custom_id"], "response": None, "error": error}
                    )
                continue
            result = self._line(batch, n, line)
            (output if result["response"]["status_code"] == 200 else errors).append(result)
        batch["request_counts"] = {
            "total": len(batch["_lines"]),
            "completed": len(output),
            "failed": len(errors),
        }
        base = batch["id"]
        if output:
            batch["output_file_id"] = self._store(f"{base}_output.jsonl", "batch_output", _jsonl(output))["id"]
        if errors:
            batch["error_file_id"] = self._store(f"{base}_error.jsonl", "batch_output", _jsonl(errors))["id"]
        batch["status"] = final

    def _line(self, batch: dict[str, Any], n: int, line: dict[str, Any]) -> dict[str, Any]:
        body = line["body"]
        prompt = prompt_of(body)
        key = hashlib.sha256(prompt.encode()).hexdigest()[:16]
        req = Request(len(self.batch_log) + 1, line["url"], body, prompt, key, 1, batch["_auth"])
        self.batch_log.append(req)
        status = self.item_faults(req) if self.item_faults else None
        if status:
            req.status = status
            response = {
                "status_code": status,
                "request_id": f"req_{n}",
                "body": {"error": {"message": "internal error", "type": "server_error"}},
            }
        else:
            req.status = 200
            kind = "chat" if line["url"].endswith("chat/completions") else line["url"].rsplit("/", 1)[-1]
            response = {
                "status_code": 200,
                "request_id": f"req_{n}",
                "body": self._payload(kind, body, req, self.script(req)),
            }
        return {
            "id": f"batch_req_{batch['id']}_{n}",
            "custom_id": line["custom_id"],
            "response": response,
            "error": None,
        }


# --- lies ------------------------------------------------------------------------------------------------------


async def _stream(
    server: BatchServer,
    request: web.Request,
    pieces: Iterator[bytes],
    pause: float = 0.0,
    headers: dict[str, str] | None = None,
) -> web.StreamResponse:
    """A 200 reply whose body is `pieces`, one every `pause` seconds, until they run out, the client goes away,
    HANG_BOUND passes or the server stops; `lied` notes which."""
    reply = web.StreamResponse(headers={"Content-Type": "application/octet-stream", **(headers or {})})
    await reply.prepare(request)
    until = asyncio.get_running_loop().time() + HANG_BOUND
    how = "done"
    try:
        for piece in pieces:
            if server.released() or asyncio.get_running_loop().time() > until:
                how = "gave up"
                break
            await reply.write(piece)
            await asyncio.sleep(pause)
    except (ConnectionError, asyncio.CancelledError):
        how = "cut off"
    server.lied.append(how)
    return reply


def endless(line: bytes, gzip: bool = False) -> Lie:
    """A body that repeats `line` without end, as fast as it is read; `gzip`: compressed, each megabyte of it a
    few kilobytes sent (a decompression bomb)."""

    def pieces() -> Iterator[bytes]:
        packer = zlib.compressobj(wbits=31) if gzip else None
        block = line * max(1, (1 << 20) // len(line))
        while True:
            yield block if packer is None else packer.compress(block) + packer.flush(zlib.Z_SYNC_FLUSH)

    async def lie(server: BatchServer, request: web.Request) -> web.StreamResponse:
        return await _stream(server, request, pieces(), headers={"Content-Encoding": "gzip"} if gzip else None)

    return lie


async def trickle(server: BatchServer, request: web.Request) -> web.StreamResponse:
    """A body of spaces (white space a JSON reader skips) sent a byte every 50 ms: a reply that never completes."""

    def spaces() -> Iterator[bytes]:
        while True:
            yield b" "

    return await _stream(server, request, spaces(), pause=0.05)


async def silent(server: BatchServer, request: web.Request) -> web.StreamResponse:
    """A connection accepted and never answered."""
    assert server._release is not None
    try:
        await asyncio.wait_for(server._release.wait(), HANG_BOUND)
    except TimeoutError:
        pass
    except asyncio.CancelledError:
        server.lied.append("cut off")
        raise
    server.lied.append("gave up")
    return _error(503, "gave up")


def replying(
    body: bytes | Callable[[web.Request], bytes], status: int = 200, headers: dict[str, str] | None = None
) -> Lie:
    """A reply of `body` (or of what it returns for the request) with `status` and `headers`, at once."""

    async def lie(server: BatchServer, request: web.Request) -> web.StreamResponse:
        data = body(request) if callable(body) else body
        server.lied.append("done")
        return web.Response(body=data, status=status, content_type="application/json", headers=headers)

    return lie


def _invalid(lines: list[dict[str, Any]], endpoint: str) -> str | None:
    """Why a batch input file is refused (duplicate custom_id, wrong method or url, no body), else None."""
    seen = set()
    for n, line in enumerate(lines, start=1):
        custom = line.get("custom_id")
        if not isinstance(custom, str) or custom in seen:
            return f"line {n}: missing or duplicate custom_id"
        seen.add(custom)
        if line.get("method") != "POST" or line.get("url") != endpoint or not isinstance(line.get("body"), dict):
            return f"line {n}: expected method POST, url {endpoint} and a body"
        if not line["body"].get("model"):
            return f"line {n}: the body names no model"
    return None


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=status)


@pytest.fixture
def batch_server() -> Iterator[BatchServer]:
    """A started batch-capable test server (answered on the first status check after validation)."""
    with BatchServer() as server:
        yield server

"""The Batch API's gate (shambench/llm/batchapi.py): bodies inflated a bounded piece at a time, and calls that a
lying list cannot hold. The calls against a hostile server, end to end, are in tests/runs/test_batch.py."""

from __future__ import annotations

import json
import zlib

import pytest

from shambench.errors import DataError, MalformedReply
from shambench.http import CHUNK_BYTES
from shambench.llm.batchapi import BatchAPI, Inflater
from shambench.llm.endpoint import Endpoint


def gzipped(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=31)
    return packer.compress(data) + packer.flush()


def test_a_decompression_bomb_comes_out_a_bounded_piece_at_a_time():
    bomb = gzipped(b"\n" * (64 * CHUNK_BYTES))  # 4 MiB of new lines, a few kilobytes sent
    assert len(bomb) < CHUNK_BYTES // 4
    inflater = Inflater("gzip")
    pieces = inflater.feed(bomb)
    # One piece of the body is in hand before the next is inflated: a cap can stop it after a piece.
    assert next(pieces) == b"\n" * CHUNK_BYTES
    rest = list(pieces)
    assert [len(p) for p in rest] == [CHUNK_BYTES] * 63
    inflater.end()


@pytest.mark.parametrize("coding", ["gzip", "deflate", ""])
@pytest.mark.parametrize("size", [1, 7, 4096, CHUNK_BYTES, None])
def test_any_split_of_a_body_inflates_to_the_same_bytes(coding, size):
    # Exactly two pieces' worth: the stream ends where a full piece comes out (no false "bytes after the end").
    data = bytes(range(256)) * (2 * CHUNK_BYTES // 256)
    sent = {"gzip": gzipped(data), "deflate": zlib.compress(data), "": data}[coding]
    step = size or len(sent)
    inflater = Inflater(coding)
    out = b"".join(b"".join(inflater.feed(sent[i : i + step])) for i in range(0, len(sent), step))
    inflater.end()
    assert out == data


@pytest.mark.parametrize(
    ("sent", "why"),
    [
        (gzipped(b"x" * 1000)[:-9], "malformed reply: its gzip body ends early"),
        (gzipped(b"x" * 1000) + b"more", "malformed reply: bytes after the end of its gzip body"),
        (b"plain text", "malformed reply: not valid gzip data (Error -3 while decompressing data: incorrect header"),
    ],
)
def test_a_body_that_is_not_what_its_coding_says_is_refused(sent, why):
    inflater = Inflater("gzip")
    with pytest.raises(MalformedReply) as caught:
        list(inflater.feed(sent))
        inflater.end()
    assert str(caught.value).startswith(why)


def test_a_batch_list_that_never_ends_is_read_within_a_bound(batch_server, monkeypatch):
    import shambench.llm.batchapi as batchapi
    from tests.batch_server import replying

    served = []

    def page(request) -> bytes:  # a further page every time, each with a new cursor
        served.append(request.query.get("after"))
        n = len(served)
        return json.dumps({"data": [{"id": f"b{n}", "input_file_id": "other"}], "has_more": True}).encode()

    monkeypatch.setattr(batchapi, "MAX_LIST_PAGES", 3)
    batch_server.lies["list"] = replying(page)
    with BatchAPI(Endpoint(model="m", base_url=batch_server.base_url)) as api:
        with pytest.raises(DataError) as caught:
            api.find("file-x")
        assert str(caught.value) == (
            f"Batch API at {batch_server.base_url}: listing batches failed: the batch list goes on past 3 pages of 100"
        )
        assert served == [None, "b1", "b2"]
        # A list whose cursor does not move ends there: the batch was not made.
        served.clear()
        batch_server.lies["list"] = replying(
            lambda request: served.append(1) or b'{"data": [{"id": "b1"}], "has_more": true, "last_id": "b1"}'
        )
        assert api.find("file-x") is None and len(served) == 2

"""Throughput of the prompted detector against a local OpenAI-compatible server with a fixed latency.

    .venv/bin/python benchmarks/bench_api.py [--examples 2000] [--latency 0.1] [--concurrency 64]

The test server (`tests/openai_server.py`) runs in its own process, so the CPU time measured here is the
client's alone: prompt rendering, HTTP, JSON, caching, span location and Prediction building. With every request
taking `latency` seconds and `concurrency` of them in flight, no client can finish faster than the ideal
examples x latency / concurrency; the target is at least 85% of that throughput. For scale, the same requests are
also sent by a bare aiohttp loop (no cache, parsing, retries or journal): on a loaded machine that floor, not the
harness, is what keeps both below the ideal. A second pass over the same examples must come entirely from the
response cache and make zero requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from shambench.detection.detector import create_detector
from shambench.schema import Example

TARGET_SHARE = 0.85
REPO = Path(__file__).resolve().parents[1]


def invented_examples(n: int, first: int = 0) -> list[Example]:
    """n short open-QA examples with one distinct response each (so none is a cache hit of another)."""
    return [
        Example(
            id=f"bench/{i}",
            dataset="bench",
            task="open_qa",
            question=f"Where does the river Ilsa{i} rise, and how long is it?",
            response=f"The river Ilsa{i} rises in the Varn hills and is {100 + i} kilometres long.",
        )
        for i in range(first, first + n)
    ]


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    """The test server in a child process, and its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.openai_server", "--latency", str(latency)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    return proc, proc.stdout.readline().strip()


def server_requests(base_url: str) -> int:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/_stats") as reply:
        return json.load(reply)["requests"]


def timed_pass(examples: list[Example], base_url: str, concurrency: int) -> tuple[float, float, int]:
    """(wall seconds, client CPU seconds, failed predictions) of one pass of the detector."""
    detector = create_detector("openai", model="bench-model", base_url=base_url, max_concurrency=concurrency)
    wall, cpu = time.perf_counter(), time.process_time()
    failed = sum(pred.error is not None for pred in detector.predict(examples))
    return time.perf_counter() - wall, time.process_time() - cpu, failed


def bare_pass(examples: list[Example], base_url: str, concurrency: int) -> float:
    """Wall seconds for the same chat requests from a bare aiohttp loop with the same concurrency."""
    from shambench.detectors.prompts import messages_for

    return bare_seconds([{"model": "bare", "messages": messages_for(ex)} for ex in examples], base_url, concurrency)


def bare_seconds(bodies: list[dict], base_url: str, concurrency: int) -> float:
    """Wall seconds a bare aiohttp loop (no cache, parsing, retries or journal) takes to send the chat request
    bodies, `concurrency` at a time, and read each reply's JSON."""
    import aiohttp

    async def run() -> None:
        pending = iter(bodies)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

            async def worker() -> None:
                for body in pending:
                    async with session.post(f"{base_url}/chat/completions", json=body) as reply:
                        await reply.json()

            await asyncio.gather(*(worker() for _ in range(concurrency)))

    start = time.perf_counter()
    asyncio.run(run())
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.1, help="seconds the server takes per request")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()

    os.environ["SHAMBENCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="shambench-bench-cache-")
    examples = invented_examples(args.examples)
    proc, base_url = start_server(args.latency)
    try:
        # Warm up on other examples first, so that one-time imports and connection set-up are not timed.
        timed_pass(invented_examples(args.concurrency, first=args.examples), base_url, args.concurrency)
        before = server_requests(base_url)
        wall, cpu, failed = timed_pass(examples, base_url, args.concurrency)
        sent = server_requests(base_url) - before
        cached_wall, cached_cpu, _ = timed_pass(examples, base_url, args.concurrency)
        cached_sent = server_requests(base_url) - before - sent
        bare = bare_pass(examples, base_url, args.concurrency)
    finally:
        proc.terminate()
        proc.wait()

    ideal = args.examples * args.latency / args.concurrency
    share = ideal / wall
    print(f"{args.examples} examples, latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}")
    print(f"  ideal time       {ideal:7.2f} s   ({args.examples / ideal:7.1f} requests/s)")
    print(f"  achieved         {wall:7.2f} s   ({args.examples / wall:7.1f} requests/s)")
    print(
        f"  share of ideal   {share:7.1%}    target >= {TARGET_SHARE:.0%}: {'met' if share >= TARGET_SHARE else 'MISSED'}"
    )
    print(f"  bare aiohttp     {bare:7.2f} s   ({ideal / bare:.1%} of ideal: the machine's floor right now)")
    print(f"  client CPU       {cpu:7.2f} s   ({cpu / args.examples * 1000:.2f} ms per request)")
    print(f"  requests sent    {sent}   failed predictions {failed}")
    print(f"  cached re-run    {cached_wall:7.2f} s   ({cached_cpu / args.examples * 1000:.2f} ms CPU per example)")
    print(f"  requests sent    {cached_sent}   (target 0: {'met' if cached_sent == 0 else 'MISSED'})")


if __name__ == "__main__":
    main()

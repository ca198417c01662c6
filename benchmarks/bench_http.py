"""Which HTTP library the package's one stack (`shambench/http.py`) should be: the same chat requests sent by a
bare aiohttp loop and by a bare httpx loop, alternately, against the test server in its own process.

    .venv/bin/python benchmarks/bench_http.py [--requests 2000] [--latency 0.05] [--concurrency 64] [--repeats 3]

Each loop keeps `concurrency` requests in flight and reads each reply's JSON, nothing else (no cache, parsing,
retries), so what differs is the library: its CPU per request (measured in this process: the server runs in
another) and the wall time it takes. Prints the medians and each repeat.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from benchmarks.bench_api import start_server


async def aiohttp_loop(bodies: list[bytes], url: str, concurrency: int) -> None:
    """The bodies sent through one aiohttp session, `concurrency` at a time."""
    import aiohttp

    pending = iter(bodies)
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def worker() -> None:
            for body in pending:
                async with session.post(url, data=body, headers=headers) as reply:
                    await reply.read()

        await asyncio.gather(*(worker() for _ in range(concurrency)))


async def httpx_loop(bodies: list[bytes], url: str, concurrency: int) -> None:
    """The bodies sent through one httpx client, `concurrency` at a time."""
    import httpx

    pending = iter(bodies)
    headers = {"Content-Type": "application/json"}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, trust_env=False) as client:

        async def worker() -> None:
            for body in pending:
                reply = await client.post(url, content=body, headers=headers)
                await reply.aread()

        await asyncio.gather(*(worker() for _ in range(concurrency)))


LOOPS = {"aiohttp": aiohttp_loop, "httpx": httpx_loop}


def timed(name: str, bodies: list[bytes], url: str, concurrency: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one loop over the bodies."""
    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(LOOPS[name](bodies, url, concurrency))
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    import orjson

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the server takes per request")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    bodies = [
        orjson.dumps(
            {"model": "bare", "messages": [{"role": "user", "content": f"Where does the river Ilsa{i} rise?"}]}
        )
        for i in range(args.requests)
    ]
    proc, base_url = start_server(args.latency)
    url = f"{base_url}/chat/completions"
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in LOOPS}
    try:
        for name in LOOPS:  # warm-up: imports and the server's first connections are not timed
            timed(name, bodies[: args.concurrency], url, args.concurrency)
        for _ in range(args.repeats):
            for name in LOOPS:
                seen[name].append(timed(name, bodies, url, args.concurrency))
    finally:
        proc.terminate()
        proc.wait()
    ideal = args.requests * args.latency / args.concurrency
    print(f"{args.requests} requests, latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}")
    for name, runs in seen.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        each = ", ".join(f"{w:.2f} s/{c / args.requests * 1e3:.3f} ms" for w, c in runs)
        print(
            f"  {name:8} wall {wall:6.2f} s ({ideal / wall:.1%} of ideal)  CPU {cpu / args.requests * 1e3:.3f} ms per "
            f"request   repeats: {each}"
        )


if __name__ == "__main__":
    main()

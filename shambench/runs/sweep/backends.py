"""Where a sweep's worker tasks run: processes on this machine (`LocalBackend`) or a Dask distributed cluster
(`DaskBackend`); `run_tasks` sends calls to one and sends a failed call again."""

from __future__ import annotations

import concurrent.futures as cf
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from shambench.errors import DataError, ParameterError, described
from shambench.extras import import_extra
from shambench.http import TransportError, reach_scheduler
from shambench.schema import Model

# Seconds a scheduler has to accept a connection and answer its handshake.
SCHEDULER_DEADLINE = 30.0


class Backend:
    """Where worker tasks run: `submit` returns a `concurrent.futures.Future`."""

    name = "backend"

    def slots(self) -> int:
        """How many tasks run at once."""
        raise NotImplementedError

    def submit(self, fn: Callable, *args: Any) -> cf.Future:
        """Start `fn(*args)` on a worker."""
        raise NotImplementedError

    def share(self, blob: bytes) -> Any:
        """A handle that tasks take in place of `blob` (the bytes themselves, unless the backend can do better)."""
        return blob

    def first_done(self, futures: Sequence[cf.Future]) -> set[cf.Future]:
        """The finished futures among `futures` (at least one; blocks until then)."""
        return cf.wait(futures, return_when=cf.FIRST_COMPLETED).done

    def close(self) -> None:
        """Stop the workers this backend started."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class LocalBackend(Backend):
    """Worker processes on this machine; a pool broken by a dying worker is replaced on the next submit."""

    name = "local"

    def __init__(self, workers: int):
        import multiprocessing

        self.workers = max(1, workers)
        # spawn, not fork: the driver runs threads (one per cell in flight), which fork would copy half-locked.
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._pool = self._new_pool()

    def _new_pool(self) -> cf.ProcessPoolExecutor:
        return cf.ProcessPoolExecutor(max_workers=self.workers, mp_context=self._context)

    def slots(self) -> int:
        return self.workers

    def submit(self, fn: Callable, *args: Any) -> cf.Future:
        with self._lock:
            try:
                return self._pool.submit(fn, *args)
            except cf.process.BrokenProcessPool:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool()
                return self._pool.submit(fn, *args)

    def close(self) -> None:
        with self._lock:
            self._pool.shutdown(wait=True, cancel_futures=True)


class DaskBackend(Backend):
    """A Dask distributed cluster: the scheduler at `scheduler`, else a local cluster of `workers` processes. A
    scheduler that does not connect and answer within `deadline` seconds (default SCHEDULER_DEADLINE) is a
    DataError naming its address."""

    name = "dask"

    def __init__(self, scheduler: str | None = None, workers: int = 2, deadline: float | None = None):
        distributed = import_extra("distributed", "dask", "The dask backend of sweeps")
        self.cluster = None
        deadline = SCHEDULER_DEADLINE if deadline is None else deadline
        if scheduler is not None:
            try:
                reach_scheduler(scheduler, deadline)
            except TransportError as err:
                raise DataError(str(err)) from None
        else:
            # Loopback only and no dashboard: a local cluster opens no outside connection.
            self.cluster = distributed.LocalCluster(
                n_workers=max(1, workers), threads_per_worker=1, host="127.0.0.1", dashboard_address=None
            )
            scheduler = self.cluster.scheduler_address
        try:
            self.client = distributed.Client(scheduler, set_as_default=False, timeout=deadline)
            # pure=False: a task sent again after a failure is a new task, not the failed one looked up again.
            self.executor = self.client.get_executor(pure=False)
        except OSError as err:
            self.close()
            raise DataError(f"cannot reach the Dask scheduler at {scheduler} ({err})") from None

    def slots(self) -> int:
        return max(1, sum(self.client.nthreads().values()))

    def submit(self, fn: Callable, *args: Any) -> cf.Future:
        return self.executor.submit(fn, *args)

    def share(self, blob: bytes) -> Any:
        # On every worker, so that the loss of one worker leaves copies; tasks then receive the bytes themselves.
        return self.client.scatter(blob, broadcast=True, hash=False)

    def close(self) -> None:
        if getattr(self, "client", None) is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def make_backend(name: str, workers: int, scheduler: str | None = None) -> Backend:
    """The backend called `name` (`local` or `dask`)."""
    if name == "local":
        if scheduler:
            raise DataError("--scheduler is for --backend dask")
        return LocalBackend(workers)
    if name == "dask":
        return DaskBackend(scheduler, workers)
    raise DataError(f"unknown backend {name!r} (expected local or dask)")


class TaskFailure(Model):
    """A task that failed on every attempt."""

    index: int
    """Position of the call in the list given to `run_tasks`."""
    attempts: int
    """How many times it was sent."""
    error: str
    """The last error, as `Type: message`."""
    usage: bool = False
    """The detector refused its parameters (`ParameterError`): a usage error, never sent again."""


def run_tasks(
    backend: Backend, calls: Sequence[tuple[Callable, tuple]], retries: int
) -> Iterator[tuple[int, Any, TaskFailure | None]]:
    """`(index, result, None)` for each call as it finishes, or `(index, None, failure)` once it has failed
    `retries + 1` times; a failed call (an exception, a dead worker) is sent again in the meantime."""
    attempts = dict.fromkeys(range(len(calls)), 1)
    futures = {backend.submit(fn, *args): i for i, (fn, args) in enumerate(calls)}
    while futures:
        for fut in backend.first_done(list(futures)):
            i = futures.pop(fut)
            try:
                result = fut.result()
            except Exception as err:  # a task's own error, or the backend's news of a lost worker
                # Bad input or parameters fail the same way every time: sending them again only wastes time.
                if attempts[i] <= retries and not isinstance(err, DataError):
                    attempts[i] += 1
                    fn, args = calls[i]
                    futures[backend.submit(fn, *args)] = i
                else:
                    error = described(err)
                    usage = isinstance(err, ParameterError)
                    yield i, None, TaskFailure(index=i, attempts=attempts[i], error=error, usage=usage)
                continue
            yield i, result, None

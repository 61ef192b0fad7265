"""Worker processes for the Python that runs inside the engine (CBOR, RE2, ed25519, lenses).

The embedded engine (Sail) runs a ``mapInArrow`` function in its own process, the driver's, under
one GIL: however many partitions it runs at once, their Python takes turns on one core. The
functions of the pipelines therefore hand their Arrow batches to a pool of worker processes
(:func:`map_batches`) and wait for the results, which leaves the GIL to the engine. On Apache
Spark the functions already run in Python worker processes, one per task slot, and run inline:
a pool in each of them would only add processes to the same cores. Which case holds is decided
where the function runs, not from the settings: a function runs in the pool only in the process
that planned it (``home``), which is the embedded engine's (a lake's settings may name one
engine while a test or a move between engines runs the pipeline on another).

Batches travel as Arrow IPC streams (a slice of a batch as just its rows: a pickled slice would
carry all of its parent's buffers), cut into pieces of at most :data:`SLICE_ROWS` rows so that
every worker has work while the engine hands over one large batch.
"""

from __future__ import annotations

import gc
import multiprocessing
import multiprocessing.connection
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from lakehouse.config import Settings

SLICE_ROWS = 2048  # rows per task by default: several tasks per engine batch, each worth the trip
_POOL: ProcessPoolExecutor | None = None
_POOL_SIZE = 0  # the processes of _POOL
_POOL_LOCK = threading.Lock()
_STARTING: threading.Thread | None = None  # the thread of the last start(), until stop() joins it
# imported once by the fork server, so that no worker imports them on its first task: the
# pipelines' modules, and pandas, which pyarrow imports on its first conversion from Python
# objects (about 0.8 s of CPU per worker otherwise)
_PRELOAD = ["pandas", "lakehouse.spark.bronze", "lakehouse.spark.silver", "lakehouse.spark.gold"]


def processes_for(settings: Settings) -> int:
    """How many worker processes a run with these settings starts ahead (:func:`start`): this
    machine's cores on the embedded engine (Sail, in this process), 0 on Apache Spark or a remote
    endpoint, whose Python workers are processes already. Where a function really runs decides
    whether it uses them (:func:`map_batches`)."""
    if settings.embedded_sail:
        return os.cpu_count() or 1
    return 0


def _exit_with_parent() -> None:
    """Worker initializer: end this worker when the process that started the pool ends, even by
    ``os._exit`` or a kill (a worker left behind would hold the pool's pipes and the caller's
    standard streams open)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def pool(processes: int | None = None) -> ProcessPoolExecutor:
    """The worker processes of this interpreter, started on first use and kept for later runs;
    ``processes`` of them, by default as many as this machine's cores.

    ``forkserver``: the workers are forked from a small server process, never from the engine's
    process (whose native threads a fork would copy in an unknown state). The server preloads the
    pipelines' Python modules. As with any multiprocessing code, a script that runs a pipeline
    needs an ``if __name__ == "__main__":`` guard (the workers import the main module; the
    ``lakehouse`` command and pytest have one).
    """
    global _POOL, _POOL_SIZE
    with _POOL_LOCK:
        if _POOL is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(_PRELOAD)
            _POOL_SIZE = processes or os.cpu_count() or 1
            _POOL = ProcessPoolExecutor(max_workers=_POOL_SIZE, mp_context=context, initializer=_exit_with_parent)
        return _POOL


def start(processes: int | None = None) -> None:
    """Start the worker processes in the background and return at once: they take a fraction of a
    second to start, which a run spends planning. A failure here is left for the first task to
    meet and report. Nothing to start for ``processes`` 0 (inline)."""
    global _STARTING
    if processes == 0:
        return

    def run() -> None:
        with suppress(Exception):
            pool(processes).submit(os.getpid)

    _STARTING = threading.Thread(target=run, name="start-workers", daemon=True)
    _STARTING.start()


def stop() -> None:
    """End the worker processes, once a :func:`start` under way has finished. A command calls it
    before it exits: an interpreter that ended while its pool was still starting now and then
    waited forever for the pool's manager thread."""
    global _POOL, _STARTING
    starting, _STARTING = _STARTING, None
    if starting is not None:
        starting.join()
    with _POOL_LOCK:
        ending, _POOL = _POOL, None
    if ending is not None:
        ending.shutdown(wait=True, cancel_futures=True)


def drop() -> None:
    """Forget the pool (after a worker died); the next use starts a new one."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None:
            _POOL.shutdown(wait=False, cancel_futures=True)
        _POOL = None


def to_ipc(batch: pa.RecordBatch) -> bytes:
    """One batch as an Arrow IPC stream (only its rows, when it is a slice)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def from_ipc(data: bytes) -> pa.RecordBatch:
    """The batch of :func:`to_ipc`."""
    return pa.ipc.open_stream(data).read_next_batch()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while one batch is turned into another: the objects
    a batch function makes (rows, decoded messages, states) die by reference counting when it
    returns, and the collector's passes over them while they live took a tenth of the instance
    pass's CPU (7.7 s against 6.9 s for 3,000 instance logs of the 1M bench history)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _run_task(fn: Callable[[pa.RecordBatch], pa.RecordBatch], data: bytes) -> bytes:
    with collector_paused():
        return to_ipc(fn(from_ipc(data)))


def arrow_function(fn: Callable[[pa.RecordBatch], pa.RecordBatch], what: str, *,
                   tasks: Callable[[Iterable[pa.RecordBatch]], Iterable[pa.RecordBatch]] | None = None
                   ) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function that applies ``fn`` to every batch through :func:`map_batches`,
    stamped with this process as its ``home`` (call it where the step is planned).

    Args:
        fn: a function of one batch, picklable (a module-level function or a ``functools.partial``
            of one).
        what: the step, for the message when a worker dies.
        tasks: the batches of a partition -> the batches ``fn`` is applied to, each whole (e.g.
            :func:`lakehouse.spark.groups.group_tasks`, whole groups of rows); by default each
            batch cut into slices of at most :data:`SLICE_ROWS` rows.
    """
    home = os.getpid()

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return map_batches(fn, batches, what, home, tasks=tasks)

    return run


def slices(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each batch cut into slices of at most :data:`SLICE_ROWS` rows, in order (an empty batch as
    itself: its result still carries the output schema)."""
    for batch in batches:
        for offset in range(0, max(batch.num_rows, 1), SLICE_ROWS):
            yield batch.slice(offset, SLICE_ROWS)


def map_batches(fn: Callable[[pa.RecordBatch], pa.RecordBatch], batches: Iterable[pa.RecordBatch],
                what: str, home: int, *,
                tasks: Callable[[Iterable[pa.RecordBatch]], Iterable[pa.RecordBatch]] | None = None
                ) -> Iterator[pa.RecordBatch]:
    """``fn`` of every task's batch, in order: in the worker pool when this is the ``home``
    process, two per worker in flight; else inline.

    Args:
        fn: a function of one batch; picklable (a module-level function or a ``functools.partial``
            of one) when it runs in the pool.
        batches: the engine's input batches.
        what: the step, for the message when a worker dies.
        home: the id of the process that planned the step (``os.getpid()`` there): only there
            does the engine run the function in its own process.
        tasks: the input batches -> the batches ``fn`` gets (:func:`arrow_function`); by default
            :func:`slices` in the pool, and the input batches as they come inline.

    Raises:
        concurrent.futures.process.BrokenProcessPool: a worker died (the message names the step);
            the pool is started afresh on the next call. An error ``fn`` raises is raised here.
    """
    if os.getpid() != home:  # another engine's Python worker: a whole engine batch a call, unless tasks cut them
        for batch in tasks(batches) if tasks else batches:
            with collector_paused():
                result = fn(batch)
            yield result
        return
    workers = pool()
    window: deque[Future[bytes]] = deque()
    limit = 2 * _POOL_SIZE
    try:
        for batch in (tasks or slices)(batches):
            window.append(workers.submit(_run_task, fn, to_ipc(batch)))
            while len(window) >= limit:
                yield from_ipc(window.popleft().result())
        while window:
            yield from_ipc(window.popleft().result())
    except BrokenProcessPool as exc:
        drop()
        raise BrokenProcessPool(
            f"a worker process died during the {what} ({exc}); nothing of this run was stored. A script that "
            "runs a pipeline needs an `if __name__ == \"__main__\":` guard, since the workers import the main "
            "module") from exc
    finally:
        for pending in window:
            pending.cancel()

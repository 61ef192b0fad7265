"""The bronze layer: landing lines checked in the engine, accepted entries and rejected lines.

LAKEHOUSE.md, Layers; FORMAT.md section 2; SEMANTICS.md section 7. Landing files are read inside
the engine by :func:`check_landing_ranges` (a ``mapInArrow`` over rows naming a file and a range
of its lines), which checks each line on its own (:func:`lakehouse.core.landing.check_line`)
in a pool of worker processes.
"""

from __future__ import annotations

import gzip
import io
import multiprocessing
import multiprocessing.connection
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import repeat
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse.core.landing import LineOutcome, check_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ENTRIES_DDL = (
    "entry_hash STRING, author STRING, log_id BIGINT, seq_num BIGINT, backlink STRING, skiplink STRING, "
    "payload_hash STRING, payload_size BIGINT, end_of_feed BOOLEAN, entry BINARY, payload BINARY, "
    "source_file STRING, source_line BIGINT, batch_id BIGINT, ingested_at TIMESTAMP"
)
REJECTED_DDL = (
    "source_file STRING, source_sha STRING, source_line BIGINT, raw STRING, entry BINARY, payload BINARY, "
    "entry_hash STRING, reason_code STRING, reason STRING, batch_id BIGINT, rejected_at TIMESTAMP"
)
FILES_DDL = "source_file STRING, source_sha STRING, size BIGINT, lines BIGINT, batch_id BIGINT, ingested_at TIMESTAMP"
RANGES_DDL = "source_file STRING, source_sha STRING, path STRING, first_line BIGINT, last_line BIGINT"
CHECKED_DDL = (
    "accepted BOOLEAN, entry_hash STRING, author STRING, log_id BIGINT, seq_num BIGINT, backlink STRING, "
    "skiplink STRING, payload_hash STRING, payload_size BIGINT, end_of_feed BOOLEAN, entry BINARY, "
    "payload BINARY, source_file STRING, source_sha STRING, source_line BIGINT, raw STRING, "
    "reason_code STRING, reason STRING"
)
_CHECKED_SCHEMA = pa.schema([
    ("accepted", pa.bool_()), ("entry_hash", pa.string()), ("author", pa.string()), ("log_id", pa.int64()),
    ("seq_num", pa.int64()), ("backlink", pa.string()), ("skiplink", pa.string()),
    ("payload_hash", pa.string()), ("payload_size", pa.int64()), ("end_of_feed", pa.bool_()),
    ("entry", pa.binary()), ("payload", pa.binary()), ("source_file", pa.string()),
    ("source_sha", pa.string()), ("source_line", pa.int64()), ("raw", pa.string()),
    ("reason_code", pa.string()), ("reason", pa.string()),
])
_CHUNK_LINES = 2048  # lines per task of a worker process


def open_landing(path: str) -> io.TextIOBase:
    """Open a landing file as text (gzip'd when it ends ``.gz``); bad UTF-8 is kept escaped."""
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="backslashreplace", newline=None)
    return open(path, encoding="utf-8", errors="backslashreplace", newline=None)  # noqa: SIM115


def _lines(path: str, first: int, last: int) -> Iterator[tuple[int, str]]:
    with open_landing(path) as handle:
        for number, line in enumerate(handle, start=1):
            if number < first:
                continue
            if number > last:
                break
            yield number, line.rstrip("\r\n")


def _row(outcome: LineOutcome, source_file: str, sha: str, number: int, raw: str) -> dict[str, Any]:
    entry = outcome.entry
    row: dict[str, Any] = {
        "accepted": outcome.accepted,
        "entry_hash": outcome.entry_hash.hex() if outcome.entry_hash is not None else None,
        "entry": outcome.entry_bytes, "payload": outcome.payload,
        "source_file": source_file, "source_sha": sha, "source_line": number,
        "raw": None if outcome.accepted else raw,
        "reason_code": outcome.code, "reason": outcome.reason or None,
    }
    if entry is not None:
        row.update(author=entry.author.hex(), log_id=entry.log_id, seq_num=entry.seq_num,
                   backlink=entry.backlink.hex() if entry.backlink else None,
                   skiplink=entry.skiplink.hex() if entry.skiplink else None,
                   payload_hash=entry.payload_hash.hex(), payload_size=entry.payload_size,
                   end_of_feed=entry.end_of_feed)
    return row


def _to_batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=_CHECKED_SCHEMA)


def _check_chunk(numbered: list[tuple[int, str]], source_file: str, sha: str, max_payload: int) -> pa.RecordBatch:
    """Check consecutive lines of one landing file (in a worker process) -> their ``CHECKED_DDL`` rows."""
    return _to_batch([_row(check_line(raw, max_payload=max_payload), source_file, sha, number, raw)
                      for number, raw in numbered])


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


_POOL: ProcessPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _process_pool(workers: int) -> ProcessPoolExecutor:
    """The worker processes of this interpreter, started on first use and kept for later ingests.

    Processes, not threads: the embedded engine runs Python functions in its own process, under
    one GIL, and only the signature check itself would leave it. ``forkserver``: the workers are
    forked from a small server process, never from the engine's process (whose native threads a
    fork would copy in an unknown state). The server preloads this module. As with any
    multiprocessing code, a script that runs an ingest needs an ``if __name__ == "__main__":``
    guard (the workers import the main module; the ``lakehouse`` command and pytest have one).
    """
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload([__name__])
            _POOL = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_exit_with_parent)
        return _POOL


def _drop_pool() -> None:
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None:
            _POOL.shutdown(wait=False, cancel_futures=True)
        _POOL = None


def check_landing_ranges(max_payload: int, processes: int | None = None) -> Any:
    """A ``mapInArrow`` function: rows of :data:`RANGES_DDL` in, rows of :data:`CHECKED_DDL` out.

    Each range's lines are read here and checked in chunks of :data:`_CHUNK_LINES` by a pool of
    worker processes (:func:`_process_pool`), which return Arrow batches in line order.

    Args:
        max_payload: the largest accepted payload, in bytes.
        processes: worker processes for the checks (default: the machine's cores).

    Raises:
        concurrent.futures.process.BrokenProcessPool: a worker died (the message says which file
            and the usual cause); the pool is started afresh on the next call.
    """
    workers = processes or os.cpu_count() or 1

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pool = _process_pool(workers)
        for batch in batches:
            for task in batch.to_pylist():
                numbered = list(_lines(task["path"], task["first_line"], task["last_line"]))
                chunks = [numbered[i:i + _CHUNK_LINES] for i in range(0, len(numbered), _CHUNK_LINES)]
                try:
                    yield from pool.map(_check_chunk, chunks, repeat(task["source_file"]),
                                        repeat(task["source_sha"]), repeat(max_payload))
                except BrokenProcessPool as exc:
                    _drop_pool()
                    raise BrokenProcessPool(
                        f"a worker process checking {task['source_file']} died ({exc}); nothing of this "
                        "batch was stored. A script that runs an ingest needs an "
                        "`if __name__ == \"__main__\":` guard, since the workers import the main module") from exc

    return run


def accepted_entries(checked: DataFrame, batch_id: int) -> DataFrame:
    """Accepted lines as ``bronze.entries`` rows, one per entry hash (the first line wins)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    first = Window.partitionBy("entry_hash").orderBy("source_file", "source_line")
    return (
        checked.where(F.col("accepted"))
        .withColumn("_n", F.row_number().over(first))
        .where(F.col("_n") == 1)
        .select(
            "entry_hash", "author", "log_id", "seq_num", "backlink", "skiplink", "payload_hash",
            "payload_size", "end_of_feed", "entry", "payload", "source_file", "source_line",
            F.lit(batch_id).cast("bigint").alias("batch_id"),
            F.current_timestamp().alias("ingested_at"),
        )
    )


def rejected_lines(checked: DataFrame, batch_id: int) -> DataFrame:
    """Rejected lines as ``bronze.rejected`` rows."""
    from pyspark.sql import functions as F

    return checked.where(~F.col("accepted")).select(
        "source_file", "source_sha", "source_line", "raw", "entry", "payload", "entry_hash",
        "reason_code", "reason", F.lit(batch_id).cast("bigint").alias("batch_id"),
        F.current_timestamp().alias("rejected_at"),
    )

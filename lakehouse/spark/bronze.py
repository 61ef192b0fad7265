"""The bronze layer: landing lines checked in the engine, accepted entries and rejected lines.

LAKEHOUSE.md, Layers; FORMAT.md section 2; SEMANTICS.md section 7. Landing files are read inside
the engine by :func:`check_landing_ranges` (a ``mapInArrow`` over rows naming a file and a range
of its lines), which checks each line on its own (:func:`lakehouse.core.landing.check_line`)
with a thread pool for the signature checks (pynacl releases the GIL).
"""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
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
_OUT_ROWS = 8192


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


def check_landing_ranges(max_payload: int, threads: int | None = None) -> Any:
    """A ``mapInArrow`` function: rows of :data:`RANGES_DDL` in, rows of :data:`CHECKED_DDL` out.

    Args:
        max_payload: the largest accepted payload, in bytes.
        threads: worker threads for the checks (default: the machine's cores).
    """
    workers = threads or os.cpu_count() or 1

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for batch in batches:
                for task in batch.to_pylist():
                    numbered = list(_lines(task["path"], task["first_line"], task["last_line"]))
                    outcomes = pool.map(lambda raw: check_line(raw, max_payload=max_payload),
                                        (raw for _, raw in numbered), chunksize=512)
                    rows: list[dict[str, Any]] = []
                    for (number, raw), outcome in zip(numbered, outcomes, strict=True):
                        rows.append(_row(outcome, task["source_file"], task["source_sha"], number, raw))
                        if len(rows) >= _OUT_ROWS:
                            yield _to_batch(rows)
                            rows = []
                    if rows:
                        yield _to_batch(rows)

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

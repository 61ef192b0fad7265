"""The bronze layer: landing lines checked in the engine, accepted entries and rejected lines.

LAKEHOUSE.md, Layers; FORMAT.md section 2; SEMANTICS.md section 7. Landing files are read inside
the engine by :func:`check_landing_ranges` (a ``mapInArrow`` over rows naming a file and a range
of its lines), which checks each line on its own (:func:`lakehouse.core.landing.check_line`)
in a pool of worker processes.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from itertools import islice, repeat
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse.core.landing import check_line
from lakehouse.spark import workers
from lakehouse.spark.catalog import ENTRIES_DDL, REJECTED_DDL
from lakehouse.spark.delta import columns as ddl_columns
from lakehouse.spark.delta import staged_writer
from lakehouse.spark.groups import arrow_schema, batch_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

RANGES_DDL = "source_file STRING, source_sha STRING, path STRING, first_line BIGINT, last_line BIGINT"
CHECKED_DDL = (
    "accepted BOOLEAN, entry_hash STRING, author STRING, log_id BIGINT, seq_num BIGINT, backlink STRING, "
    "skiplink STRING, payload_hash STRING, payload_size BIGINT, end_of_feed BOOLEAN, entry BINARY, "
    "payload BINARY, source_file STRING, source_sha STRING, source_line BIGINT, raw STRING, "
    "reason_code STRING, reason STRING, raw_bytes BINARY"
)
_CHECKED_SCHEMA = arrow_schema(CHECKED_DDL)
_CHUNK_LINES = 512  # lines per task of a worker process: small, so that both finish a range together


def open_landing(path: str) -> io.BufferedIOBase:
    """Open a landing file for reading bytes (gzip'd when its name ends ``.gz``)."""
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")  # noqa: SIM115


def _spans(path: str, first: int, last: int) -> Iterator[tuple[str | bytes, int, int, int, int]]:
    """Cut lines ``first..last`` of a landing file into spans of up to :data:`_CHUNK_LINES` lines.

    Lines end at ``\\n`` (JSON Lines), as ``scan_landing`` counts them. Yields ``(source, offset,
    size, first_line, lines)``: for a plain file ``source`` is its path and the worker reads
    ``size`` bytes at byte ``offset``; a gzip'd file cannot be read from the middle, so ``source``
    is then the span's bytes themselves (and ``offset`` is 0).
    """
    packed = path.endswith(".gz")
    with open_landing(path) as handle:
        offset = sum(map(len, islice(handle, first - 1)))  # the bytes of the lines before the range
        start, remaining = first, last - first + 1
        while remaining > 0:
            span = list(islice(handle, min(_CHUNK_LINES, remaining)))
            if not span:  # the file has fewer lines: the caller counts what was found
                break
            size = sum(map(len, span))
            yield (b"".join(span) if packed else path), (0 if packed else offset), size, start, len(span)
            offset += size
            start += len(span)
            remaining -= len(span)


def _span_lines(source: str | bytes, offset: int, size: int, count: int) -> list[str]:
    """The lines of one span of :func:`_spans` (in a worker process), without their line ends.

    Bytes that are not UTF-8 are kept as lone surrogates (``surrogateescape``), so that a line's exact
    bytes can be told apart from its text (:func:`_line_bytes`).

    Raises:
        ValueError: the file no longer holds ``count`` lines there (it changed during the ingest).
    """
    if isinstance(source, bytes):
        data = source
    else:
        with open(source, "rb") as handle:
            handle.seek(offset)
            data = handle.read(size)
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    if data.endswith(b"\n"):
        lines.pop()
    if len(lines) != count or len(data) != size:
        where = "a gzip'd span" if isinstance(source, bytes) else f"{source} at byte {offset}"
        raise ValueError(f"{where}: expected {count} lines in {size} bytes, found {len(lines)} in {len(data)}; "
                         "the file changed during the ingest")
    return lines


_NO_ENTRY = (None,) * 8  # author .. end_of_feed of a rejected line


def _line_bytes(text: str) -> bytes | None:
    """The exact bytes of a line :func:`_span_lines` gave when they are not UTF-8, else None."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape")
    return None


def _not_utf8(text: str) -> str:
    """The reason for a line that is not UTF-8: its first such byte and where it is."""
    at = next(n for n, ch in enumerate(text) if "\udc80" <= ch <= "\udcff")
    offset = len(text[:at].encode("utf-8", "surrogateescape"))
    return (f"not UTF-8 text: byte 0x{ord(text[at]) - 0xDC00:02x} at byte {offset + 1} of the line; raw_bytes "
            "holds the line as it came")


def _check_span(source: str | bytes, offset: int, size: int, first_line: int, count: int, source_file: str,
                sha: str, max_payload: int) -> pa.RecordBatch:
    """Check one span of :func:`_spans` (in a worker process) -> its lines' ``CHECKED_DDL`` rows.

    Per line this is the check and one tuple; the columns are made from the tuples at the end.
    """
    rows: list[tuple[Any, ...]] = []
    append = rows.append
    for number, text in enumerate(_span_lines(source, offset, size, count), start=first_line):
        if number == 1 and text.startswith("\ufeff"):  # a UTF-8 byte order mark opens the file, not the line
            text = text[1:]
        raw = text.rstrip("\r")
        exact = _line_bytes(raw)
        if exact is not None:  # JSON is UTF-8 text (RFC 8259): a line that is not is not read further
            append((False, None, *_NO_ENTRY, None, None, number, exact.decode("utf-8", "replace"), "not_utf8",
                    _not_utf8(raw), exact))
            continue
        outcome = check_line(raw, max_payload=max_payload)
        entry = outcome.entry
        if entry is not None:
            backlink, skiplink = entry.backlink, entry.skiplink
            append((True, outcome.entry_hash.hex(), entry.author.hex(), entry.log_id, entry.seq_num,  # type: ignore[union-attr]
                    backlink.hex() if backlink else None, skiplink.hex() if skiplink else None,
                    entry.payload_hash.hex(), entry.payload_size, entry.end_of_feed, outcome.entry_bytes,
                    outcome.payload, number, None, None, None, None))
        else:
            entry_hash = outcome.entry_hash
            append((False, entry_hash.hex() if entry_hash is not None else None, *_NO_ENTRY, outcome.entry_bytes,
                    outcome.payload, number, raw, outcome.code, outcome.reason or None, None))
    n = len(rows)
    columns: list[Any] = list(zip(*rows, strict=True)) if rows else [()] * 17
    columns[12:12] = [[source_file] * n, [sha] * n]
    return batch_of(columns, _CHECKED_SCHEMA)


def _check_spans(spans: list[tuple[str | bytes, int, int, int, int, str, str]], max_payload: int) -> list[pa.RecordBatch]:
    """Check several spans in one task of a worker process (:func:`_check_span` each): the spans of
    many small landing files, so that a file of one line does not cost a round trip to a worker."""
    return [_check_span(*span, max_payload) for span in spans]


def _span_tasks(spans: list[tuple[str | bytes, int, int, int, int]], files: list[str], shas: list[str]
                ) -> list[list[tuple[str | bytes, int, int, int, int, str, str]]]:
    """Spans (with their file and SHA-256) grouped into worker tasks of about :data:`_CHUNK_LINES`
    lines, in order: a span of a large file is a task, the spans of small files share one."""
    tasks: list[list[tuple[str | bytes, int, int, int, int, str, str]]] = []
    lines = _CHUNK_LINES
    for span, name, sha in zip(spans, files, shas, strict=True):
        if lines >= _CHUNK_LINES:
            tasks.append([])
            lines = 0
        tasks[-1].append((*span, name, sha))
        lines += span[4]
    return tasks


LANDING_CHANGED = "a landing file changed during the ingest"
"""What a task's error says when a landing file went away or changed while the engine read it
(:func:`landing_changed` finds it in the engine's error)."""


def landing_changed(error: BaseException) -> str | None:
    """The message of a :data:`LANDING_CHANGED` error a task raised, from the engine's error that
    carries it (its traceback's last lines), else None."""
    for line in reversed(str(error).splitlines()):
        if LANDING_CHANGED in line:
            return line[line.index(LANDING_CHANGED):].strip()
    return None


def start_workers(processes: int | None = None) -> None:
    """Start the worker processes of :func:`check_landing_ranges` in the background and return at
    once (:func:`lakehouse.spark.workers.start`): they take a fraction of a second to start, which
    an ingest spends scanning files."""
    workers.start(processes)


def check_landing_ranges(max_payload: int, processes: int | None = None) -> Any:
    """A ``mapInArrow`` function: rows of :data:`RANGES_DDL` in, rows of :data:`CHECKED_DDL` out.

    Each range is cut here into spans of :data:`_CHUNK_LINES` lines (:func:`_spans`), and the spans
    of every range of an Arrow batch (many small files, or parts of a large one) go to a pool of
    worker processes (:func:`lakehouse.spark.workers.pool`) in one map, which reads and checks
    them and returns Arrow batches in line order. Lines end at ``\\n``; a ``\\r`` before it is
    dropped.

    Args:
        max_payload: the largest accepted payload, in bytes.
        processes: worker processes for the checks (default: the machine's cores).

    Raises:
        concurrent.futures.process.BrokenProcessPool: a worker died (the message says which file
            and the usual cause); the pool is started afresh on the next call.
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pool = workers.pool(processes)
        for batch in batches:
            spans: list[tuple[str | bytes, int, int, int, int]] = []
            files: list[str] = []
            shas: list[str] = []
            for task in batch.to_pylist():
                first, last = task["first_line"], task["last_line"]
                try:
                    found_spans = list(_spans(task["path"], first, last))
                except OSError as exc:
                    raise ValueError(f"{LANDING_CHANGED}: {task['source_file']} could not be read "
                                     f"({exc.strerror or exc})") from None
                found = sum(span[4] for span in found_spans)
                if found != last - first + 1:
                    raise ValueError(f"{LANDING_CHANGED}: {task['source_file']} had lines {first}..{last}, and "
                                     f"{found} of them were found")
                spans += found_spans
                files += [task["source_file"]] * len(found_spans)
                shas += [task["source_sha"]] * len(found_spans)
            if not spans:
                continue
            # one map over the spans of every file of the batch, small files' spans sharing a
            # task: many small files keep every worker busy, a round trip each task, not each file
            try:
                for checked in pool.map(_check_spans, _span_tasks(spans, files, shas), repeat(max_payload)):
                    yield from checked
            except BrokenProcessPool as exc:
                workers.drop()
                named = files[0] if len(set(files)) == 1 else f"{len(set(files))} files ({files[0]} to {files[-1]})"
                raise BrokenProcessPool(
                    f"a worker process checking {named} died ({exc}); nothing of this "
                    "batch was stored. A script that runs an ingest needs an "
                    "`if __name__ == \"__main__\":` guard, since the workers import the main module") from exc

    return run


def write_staged(checked: DataFrame, path: str) -> None:
    """Append checked lines to a staging parquet folder (:func:`lakehouse.spark.delta.staged_writer`),
    neither compressed nor dictionary-encoded.

    The folder is read once and dropped, and its hashes, entries and payloads are all distinct:
    compressing them or trying dictionaries costs the engine time and saves nothing that lasts.
    """
    staged_writer(checked, "append").option("dictionary_enabled", "false").parquet(path)


def accepted_entries(checked: DataFrame, batch_id: int, *, repeated: bool = True) -> DataFrame:
    """Accepted lines as ``bronze.entries`` rows, one per entry hash (the first line wins).

    Args:
        checked: rows of :data:`CHECKED_DDL`.
        batch_id: the ingest's batch.
        repeated: whether some entry hash may be on several accepted lines. False skips the
            ranking of lines by hash, a sort of every row, when the caller has counted none.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    accepted = checked.where(F.col("accepted"))
    if repeated:
        first = Window.partitionBy("entry_hash").orderBy("source_file", "source_line")
        accepted = accepted.withColumn("_n", F.row_number().over(first)).where(F.col("_n") == 1)
    return _as_declared(accepted, ENTRIES_DDL, batch_id=F.lit(batch_id).cast("bigint"),
                        ingested_at=F.current_timestamp())


def rejected_lines(checked: DataFrame, batch_id: int) -> DataFrame:
    """Rejected lines as ``bronze.rejected`` rows."""
    from pyspark.sql import functions as F

    return _as_declared(checked.where(~F.col("accepted")), REJECTED_DDL, batch_id=F.lit(batch_id).cast("bigint"),
                        rejected_at=F.current_timestamp())


def _as_declared(df: DataFrame, ddl: str, **stamps: Any) -> DataFrame:
    """The columns of table declaration ``ddl``, in its order: ``stamps`` (name -> engine column) for
    those the checked lines do not carry, ``df``'s for the others."""
    return df.select(*(stamps[c].alias(c) if c in stamps else c for c in ddl_columns(ddl)))

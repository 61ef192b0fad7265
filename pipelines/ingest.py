"""``make ingest``: landing files -> ``bronze.entries`` and ``bronze.rejected``.

LAKEHOUSE.md (Layers), FORMAT.md section 2, SEMANTICS.md section 7. Steps:

1. find landing files (``*.jsonl``, ``*.jsonl.gz``; hidden and staged files are skipped) whose
   content (SHA-256) is not in ``bronze.files`` yet; a file that extends one ingested under its
   name (lines appended) is read from its first new line (:func:`skip_ingested_lines`);
2. check every line in the engine (:func:`lakehouse.spark.bronze.check_landing_ranges`), range by
   range, into a staging folder, with progress;
3. append to ``bronze.entries`` the accepted entries whose hash is new, to ``bronze.rejected``
   the rejected lines not already there (by file content and line), then the files to
   ``bronze.files``.

Each append is idempotent against what is already stored, so a run that died between any two
commits is completed by the next one, with nothing lost and nothing twice.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse.config import landing_folder
from lakehouse.errors import LandingError
from lakehouse.progress import progress
from lakehouse.spark import bronze, catalog, delta
from lakehouse.spark.groups import spark_schema
from lakehouse.spark.retry import retried
from lakehouse.spark.tables import is_delta_table, register_table, remove_tree, staging_folder

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.config import Settings
    from lakehouse.spark.tables import TableRef

# the columns of bronze.entries whose min/max statistics the Delta log keeps: what reads filter on
# (silver reads the batches past its watermark). Statistics of the hashes, entries and payloads
# would skip nothing and cost a quarter of the append (measured: 204 ms against 150 ms per 99,000 rows)
ENTRIES_STATS_COLUMNS = "batch_id,author,log_id,seq_num"
RANGE_PARTITIONS = os.cpu_count() or 1
"""Partitions of an ingest step's line ranges: one per core (each runs the checks on the worker pool)."""


@dataclass(frozen=True)
class LandingFile:
    """A landing file: its name relative to the landing folder, path, SHA-256 of its content, size
    and lines. ``bad`` says why a file cannot be read (a ``.jsonl.gz`` that is not gzip or is cut
    short); such a file has no lines, and its SHA-256 is that of its bytes as stored."""

    name: str
    path: str
    sha: str
    size: int
    lines: int
    bad: str | None = None
    first: int = 1  # its first line not ingested yet: past the lines of an earlier copy it extends


@dataclass
class IngestSummary:
    """What one ingest did. ``rejected`` counts lines by reason code."""

    batch_id: int | None = None
    files_new: int = 0
    files_seen: int = 0
    lines: int = 0
    new: int = 0
    duplicate: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    bad_files: dict[str, str] = field(default_factory=dict)  # landing file -> why it cannot be read
    copies: dict[str, str] = field(default_factory=dict)  # new landing file -> the ingested file it repeats
    seconds: float = 0.0
    retried: list[str] = field(default_factory=list)  # transient engine failures survived

    @property
    def entries_per_second(self) -> float:
        return self.lines / self.seconds if self.seconds else 0.0


def scan_landing(landing: str) -> list[LandingFile]:
    """Every landing file under ``landing`` (recursively), sorted by name, with hash and line count.

    A ``.jsonl.gz`` that cannot be decompressed (not gzip, cut short, corrupt) is listed with
    ``bad`` set to the reason, so that it is recorded and the other files go on.
    """
    root = landing_folder(landing)
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or any(part.startswith(".") for part in path.relative_to(root).parts):
            continue
        if not (path.name.endswith(".jsonl") or path.name.endswith(".jsonl.gz")):
            continue
        name, size = str(path.relative_to(root)), path.stat().st_size
        try:
            sha, lines = _content_hash_and_lines(path)
        except (OSError, EOFError, zlib.error) as exc:
            if not path.name.endswith(".gz"):
                raise
            raw = hashlib.sha256(path.read_bytes()).hexdigest()
            found.append(LandingFile(name, str(path.resolve()), raw, size, 0, _gzip_problem(exc)))
            continue
        found.append(LandingFile(name, str(path.resolve()), sha, size, lines))
    return found


def _content_hash_and_lines(path: Path) -> tuple[str, int]:
    """SHA-256 (hex) of a landing file's content (decompressed for ``.gz``) and its line count."""
    digest = hashlib.sha256()
    lines = 0
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        last = b"\n"
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            lines += chunk.count(b"\n")
            last = chunk[-1:]
        if last != b"\n":
            lines += 1
    return digest.hexdigest(), lines


def _prefix_hash(path: Path, lines: int) -> str:
    """SHA-256 (hex) of a landing file's first ``lines`` lines, each with its line end."""
    digest = hashlib.sha256()
    opener = gzip.open if path.name.endswith(".gz") else open
    left = lines
    with opener(path, "rb") as handle:
        while left and (chunk := handle.read(1 << 20)):
            count = chunk.count(b"\n")
            if count >= left:
                end = -1
                for _ in range(left):
                    end = chunk.index(b"\n", end + 1)
                chunk, count = chunk[:end + 1], left
            digest.update(chunk)
            left -= count
    return digest.hexdigest()


def skip_ingested_lines(new_files: list[LandingFile], known: list[tuple[str, str, int]]) -> list[LandingFile]:
    """Start a landing file past the lines an earlier copy of it brought in: when lines were
    appended to an ingested file, its first lines are those of a file ``bronze.files`` lists under
    the same name (same count, same SHA-256), and only the lines after them are new.

    Args:
        new_files: files whose content SHA-256 is not in ``bronze.files``.
        known: ``(source_file, source_sha, lines)`` rows of ``bronze.files``.

    Returns:
        ``new_files``, each with ``first`` set to its first line not ingested yet (1 for a file
        that extends no earlier copy, or that changed within its earlier lines: it is read whole).
    """
    by_name: dict[str, list[tuple[int, str]]] = {}
    for name, sha, lines in known:
        by_name.setdefault(name, []).append((lines, sha))
    out = []
    for f in new_files:
        for lines, sha in sorted(by_name.get(f.name, []), reverse=True):
            if f.bad is None and 0 < lines < f.lines and _prefix_hash(Path(f.path), lines) == sha:
                f = replace(f, first=lines + 1)
                break
        out.append(f)
    return out


def _gzip_problem(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "the gzip stream is cut short (the file is truncated)"
    if isinstance(exc, gzip.BadGzipFile):
        return f"not a gzip file ({exc})"
    return f"the gzip stream is corrupt ({exc})"


def _bad_file_rows(spark: SparkSession, files: list[LandingFile], batch_id: int) -> DataFrame:
    """``bronze.rejected`` rows for landing files that cannot be read: one per file, at line 0,
    reason code ``bad_file`` (SEMANTICS.md section 7: nothing that arrives is lost silently)."""
    from pyspark.sql import functions as F

    rows = [(f.name, f.sha, 0, None, None, None, None, "bad_file", f"{f.name}: {f.bad}", batch_id, None)
            for f in files]
    ddl = catalog.REJECTED_DDL.replace(", rejected_at TIMESTAMP", "")
    return spark.createDataFrame(rows, spark_schema(ddl)).withColumn("rejected_at", F.current_timestamp())


def _read_delta(spark: SparkSession, location: str) -> DataFrame | None:
    return spark.read.format("delta").load(location) if is_delta_table(location) else None


def _batch_entries(spark: SparkSession, entries_t: TableRef, batch_id: int) -> int:
    """The entries batch ``batch_id`` stored in ``bronze.entries``: its rows are in files of their
    own (one append), counted from those files' statistics in the Delta log
    (:func:`lakehouse.spark.deltalog.snapshot`: ``numRecords`` of each file whose ``batch_id`` is
    the batch at least and at most), not by an engine query (on Apache Spark a statement of 0.5 s
    a run); by the engine when a file's statistics do not tell (none, or a file that holds that
    batch and others)."""
    from pyspark.sql import functions as F

    from lakehouse.spark import deltalog

    try:
        added = 0
        for f in deltalog.snapshot(entries_t.location).files_past("batch_id", batch_id - 1):
            if f.minima.get("batch_id") != batch_id or f.maxima.get("batch_id") != batch_id:
                raise LookupError(f"{f.path}: its statistics do not tell the batch's rows")
            added += f.records or 0
        return added
    except (OSError, LookupError, deltalog.DeltaLogError):
        return spark.read.format("delta").load(entries_t.location).where(F.col("batch_id") == batch_id).count()


def _ranges(files: list[LandingFile], batch_rows: int) -> list[list[tuple[str, str, str, int, int]]]:
    """Group files' line ranges into steps of at most ``batch_rows`` lines (a file may be split).

    The steps are as few as ``batch_rows`` allows and of nearly equal size, so that no step is a
    small remainder that pays a whole engine job for a few lines.
    """
    total = sum(f.lines - f.first + 1 for f in files)
    steps = -(-total // batch_rows) if total else 0
    size = -(-total // steps) if steps else batch_rows
    chunks: list[list[tuple[str, str, str, int, int]]] = []
    current: list[tuple[str, str, str, int, int]] = []
    room = size
    for f in files:
        first = f.first
        while first <= f.lines:
            take = min(room, f.lines - first + 1)
            current.append((f.name, f.sha, f.path, first, first + take - 1))
            first += take
            room -= take
            if room == 0:
                chunks.append(current)
                current, room = [], size
    if current:
        chunks.append(current)
    return chunks


def repeated_files(landing: list[LandingFile], listed: list[tuple[str, str, int]]) -> list[tuple[LandingFile, str]]:
    """The landing files whose content was ingested before under another name (a re-delivery):
    nothing of them is read again, and the summary names each once, since they are then listed in
    ``bronze.files`` under their own name.

    Args:
        landing: the landing files (:func:`scan_landing`).
        listed: ``(source_file, source_sha, lines)`` rows of ``bronze.files``.

    Returns:
        ``(file, name of the first ingested file with its content)`` pairs, in landing order.
    """
    pairs = {(name, sha) for name, sha, _ in listed}
    first: dict[str, str] = {}
    for name, sha, _ in sorted(listed):
        first.setdefault(sha, name)
    return [(f, first[f.sha]) for f in landing if f.sha in first and (f.name, f.sha) not in pairs]


def _append_files(spark: SparkSession, files_t: TableRef, files: list[LandingFile], batch_id: int) -> None:
    """List ``files`` in ``bronze.files`` as taken in by batch ``batch_id``."""
    at = datetime.now(timezone.utc)
    delta.append_rows(spark, [(f.name, f.sha, f.size, f.lines, batch_id, at) for f in files], catalog.FILES_DDL, files_t)


@retried("ingest")
def run_ingest(spark: SparkSession, settings: Settings) -> IngestSummary:
    """Ingest every new landing file. See the module docstring.

    Args:
        spark: the session.
        settings: ``landing``, ``lake_root``, ``max_payload``, ``batch_rows``.

    Returns:
        The summary (files, lines, new, duplicate, rejected by reason).
    """
    from pyspark.sql import functions as F

    started = time.monotonic()
    bronze.start_workers()  # they start while the landing files are scanned
    root = settings.lake_root
    entries_t = catalog.ENTRIES.at(root)
    rejected_t = catalog.REJECTED.at(root)
    files_t = catalog.FILES.at(root)
    summary = IngestSummary()

    landing = scan_landing(settings.landing)
    summary.files_seen = len(landing)
    # a row per landing file taken in: read by this process (delta.read_arrow), not an engine query
    files_read = delta.read_arrow(spark, files_t)
    listed = sorted({(str(name), str(sha), int(lines)) for name, sha, lines in zip(
        *(files_read.column(c).to_pylist() for c in ("source_file", "source_sha", "lines")), strict=True)}
        ) if files_read is not None else []
    known = {sha for _, sha, _ in listed}
    copies = repeated_files(landing, listed)
    summary.copies = {f.name: same for f, same in copies}
    new_files = skip_ingested_lines([f for f in landing if f.sha not in known], listed)
    summary.files_new = len(new_files)
    summary.bad_files = {f.name: f.bad for f in new_files if f.bad is not None}
    if not new_files and not copies:
        summary.seconds = time.monotonic() - started
        return summary

    batch_id = 1
    for ref in (entries_t, rejected_t, files_t):
        top = delta.integer_max(spark, ref, "batch_id")
        if top is not None:
            batch_id = max(batch_id, (top[0] or 0) + 1)
    summary.batch_id = batch_id
    if not new_files:  # only copies: listed, so that they are named once
        _append_files(spark, files_t, [f for f, _ in copies], batch_id)
        register_table(spark, files_t)
        summary.seconds = time.monotonic() - started
        return summary

    staging = staging_folder(root, "ingest")
    remove_tree(staging)
    total = sum(f.lines - f.first + 1 for f in new_files)
    checker = bronze.check_landing_ranges(settings.max_payload)
    chunks = _ranges([f for f in new_files if f.bad is None], max(settings.batch_rows, 1))
    with progress("checking landing lines", total, "lines") as bar:
        for chunk in chunks:
            # a partition per core, not per range: each partition is an engine task and a staged
            # file, which cost more than checking a small landing file's lines
            ranges = spark.createDataFrame(chunk, bronze.RANGES_DDL).repartition(min(len(chunk), RANGE_PARTITIONS))
            try:
                bronze.write_staged(ranges.mapInArrow(checker, bronze.CHECKED_DDL), staging)
            except Exception as exc:
                changed = bronze.landing_changed(exc)
                if changed is None:
                    raise
                raise LandingError(f"{changed}; nothing of this batch was stored, and `make ingest` run again reads "
                                   "the landing folder as it is then", code="landing_changed") from None
            bar.advance(sum(last - first + 1 for _, _, _, first, last in chunk))
    # empty files only: nothing was staged, and there is no line to check
    checked = (spark.read.parquet(staging) if chunks
               else spark.createDataFrame([], spark_schema(bronze.CHECKED_DDL)))
    counts = checked.groupBy("accepted", "reason_code").agg(
        F.count("*").alias("count"), F.count_distinct("entry_hash").alias("hashes")).collect()
    accepted_lines = sum(r["count"] for r in counts if r["accepted"])
    repeated = accepted_lines > sum(r["hashes"] for r in counts if r["accepted"])

    entries = bronze.accepted_entries(checked, batch_id, repeated=repeated)
    existing = _read_delta(spark, entries_t.location)
    if existing is not None:
        entries = entries.join(existing.select("entry_hash"), "entry_hash", "left_anti")
    delta.append(entries, entries_t, **{"delta.dataSkippingStatsColumns": ENTRIES_STATS_COLUMNS})

    rejected = bronze.rejected_lines(checked, batch_id)
    if summary.bad_files:
        rejected = rejected.unionByName(_bad_file_rows(spark, [f for f in new_files if f.bad is not None], batch_id))
    existing = _read_delta(spark, rejected_t.location)
    if existing is not None:
        rejected = rejected.join(existing.select("source_sha", "source_line"), ["source_sha", "source_line"],
                                 "left_anti")
    delta.append(rejected, rejected_t, mergeSchema="true")  # a lake from before raw_bytes gains the column

    _append_files(spark, files_t, new_files + [f for f, _ in copies], batch_id)

    summary.rejected = Counter({r["reason_code"]: r["count"] for r in counts if not r["accepted"]})
    if summary.bad_files:
        summary.rejected["bad_file"] = len(summary.bad_files)
    summary.lines = accepted_lines + sum(summary.rejected.values())
    summary.new = _batch_entries(spark, entries_t, batch_id)
    summary.duplicate = accepted_lines - summary.new
    remove_tree(staging)
    for ref in (entries_t, rejected_t, files_t):
        register_table(spark, ref)
    summary.seconds = time.monotonic() - started
    return summary

"""Compaction of a lake table (``lakehouse optimize``): its rows written again into fewer files and
without deletion vectors, the same rows, as new Delta versions (every earlier version stays
readable by time travel: nothing is vacuumed).

What a run leaves behind, and what is written again here, read from the table's Delta log
(:func:`lakehouse.spark.deltalog.snapshot`), so that the cost follows what is fragmented, not the
table:

- A table in buckets (:mod:`lakehouse.spark.buckets`: the gold tables, ``silver.instance_states``,
  ``silver.messages``, ``silver.cascade_removed``): each bucket that holds more than one data file,
  or a file with a deletion vector, is written again as one file (an overwrite whose
  ``replaceWhere`` names those buckets by their partition values, :func:`lakehouse.spark.delta.write_buckets`);
  the other buckets' files stay. A run's appends add a file to each bucket they touch, and a
  ``MERGE`` with deletion vectors marks rows and adds a file: both end here. Buckets are written in
  commits of about :data:`CHUNK_BYTES` each, so that memory follows that, not the table.
- A table appended to in order of a run or batch column (:data:`ORDER_COLUMNS`: bronze's tables,
  the change tables, ``silver.gold_versions``): the small files at its end (each under
  :data:`SMALL_FILE_BYTES`, their values of that column past every other file's, told by the
  files' statistics), once there are :data:`MIN_SMALL_FILES` of them, written again as files of
  about :data:`TARGET_FILE_BYTES` (an overwrite whose ``replaceWhere`` is ``column >= least``; in
  that column's order on Apache Spark, :func:`_in_order`): the files before them stay, and so does what the engine skips by their
  statistics (a run reads bronze past its watermark).
- Any other table with deletion vectors, deleted rows, or :data:`MIN_SMALL_FILES` small files is
  written whole, in that column's order when it has one.

Both engines run each write (Sail 0.7 and Delta Lake on Apache Spark: overwrites with
``replaceWhere`` on a partition column and on a data column); the rows written are those read
through Delta, deletion vectors applied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.spark import deltalog
    from lakehouse.spark.tables import TableRef

TARGET_FILE_BYTES = 128 << 20
"""The size of the files a compaction writes, about (of an appended table's end, or a table
written whole; a table in buckets keeps a file a bucket)."""
SMALL_FILE_BYTES = TARGET_FILE_BYTES // 4
"""A data file under this size counts as small (a run's append)."""
MIN_SMALL_FILES = 8
"""Small files from which an appended table's end (or a table without buckets) is compacted."""
WHOLE_BYTES_LIMIT = 1 << 30
"""The largest table (its data files' bytes) a compaction writes whole, in one commit; a larger
one without buckets whose small files are not at its end is left as it is (:attr:`Compaction.left`)."""
CHUNK_BYTES = 256 << 20
"""The data files' bytes a compaction of buckets writes again in one commit, about (a bucket is
never split): memory follows this, not the table."""
ORDER_COLUMNS = ("batch_id", "_gold_run", "gold_run", "run_id")
"""The integer columns, in order of preference, that a table's rows are appended in order of."""

How = Literal["buckets", "tail", "whole"]


@dataclass(frozen=True)
class Compaction:
    """What compacting one table writes again.

    Attributes:
        table: the table's qualified name (``layer.name``).
        files: its data files now.
        deletion_vectors: how many of them have a deletion vector.
        how: ``buckets`` (the buckets in ``chunks``), ``tail`` (the rows with ``order`` at least
            ``since``), ``whole``; None: nothing to compact.
        chunks: for ``buckets``, the bucket values written again, one tuple a commit.
        order: the column rows are written in order of (:data:`ORDER_COLUMNS`), if any.
        since: for ``tail``, the least value of ``order`` written again.
        files_rewritten: the data files the compaction takes out.
        bytes_rewritten: their size, in bytes.
        files_after: the data files the table has after it (as planned).
        left: why a table that has something to compact is left as it is (None: it is not).
    """

    table: str
    files: int
    deletion_vectors: int
    how: How | None = None
    chunks: tuple[tuple[int, ...], ...] = ()
    order: str | None = None
    since: int | None = None
    files_rewritten: int = 0
    bytes_rewritten: int = 0
    files_after: int = 0
    partition_columns: tuple[str, ...] = field(default=(), repr=False)
    properties: dict[str, str] = field(default_factory=dict, repr=False)
    left: str | None = None

    @property
    def commits(self) -> int:
        """The Delta commits the compaction makes."""
        return len(self.chunks) if self.how == "buckets" else int(self.how is not None)

    def describe(self) -> str:
        """What is written again, in a few words (a summary line)."""
        if self.how == "buckets":
            buckets = sum(len(chunk) for chunk in self.chunks)
            return f"{buckets:,} bucket(s) of {self.files_rewritten:,} file(s)"
        if self.how == "tail":
            return f"its last {self.files_rewritten:,} small file(s) ({self.order} >= {self.since})"
        if self.how == "whole":
            return f"whole ({self.files_rewritten:,} file(s))"
        return "nothing"


def plan(ref: TableRef, snap: deltalog.Snapshot, *, whole: bool = False) -> Compaction:
    """What compacting the table ``ref`` (its Delta log as read: ``snap``) writes again; see the
    module's text for the rules. Reads nothing more.

    Args:
        whole: the table written whole whatever its layout (in its partitions, its buckets kept).
    """
    from lakehouse.spark import buckets

    live = [f for f in snap.files if f.records != 0 or f.deletion_vector]
    base = Compaction(ref.qualified, len(snap.files), sum(1 for f in snap.files if f.deletion_vector),
                      order=_order_column(snap), partition_columns=snap.partition_columns,
                      properties={k: v for k, v in snap.properties.items() if k.startswith("delta.")})
    if whole:
        return _whole(base, snap)
    if buckets.of_snapshot(snap) is not None:
        return _buckets_plan(base, snap)
    if snap.partition_columns or any(f.deleted or f.deletion_vector for f in live):
        return _bounded(_whole(base, snap)) if _fragmented_whole(snap) else base
    small = [f for f in live if f.size < SMALL_FILE_BYTES]
    if len(small) < MIN_SMALL_FILES:
        return base
    tail = _tail(live, base.order) if base.order is not None else None
    if tail is not None and len(tail[0]) >= MIN_SMALL_FILES:
        files, since = tail
        size = sum(f.size for f in files)
        return _replace(base, how="tail", since=since, files_rewritten=len(files), bytes_rewritten=size,
                        files_after=len(snap.files) - len(files) + _files_for(size))
    return _bounded(_whole(base, snap))


def _bounded(whole: Compaction) -> Compaction:
    """A whole write, unless the table is past :data:`WHOLE_BYTES_LIMIT`: then nothing, and why."""
    if whole.bytes_rewritten <= WHOLE_BYTES_LIMIT:
        return whole
    return _replace(whole, how=None, left=f"{whole.bytes_rewritten / (1 << 30):.1f} GiB without buckets, past the "
                    f"{WHOLE_BYTES_LIMIT >> 30} GiB written whole in one commit", files_rewritten=0,
                    bytes_rewritten=0, files_after=whole.files)


def plans(refs: Iterable[TableRef], unread: dict[str, str] | None = None) -> Iterator[tuple[TableRef, Compaction]]:
    """Each table's compaction as :func:`plan` gives it from its Delta log (no engine query); a
    table whose log is not read here is left out (and named in ``unread``, with why, when given)."""
    from lakehouse.spark import deltalog

    for ref in refs:
        try:
            yield ref, plan(ref, deltalog.snapshot(ref.location))
        except (OSError, deltalog.DeltaLogError) as e:
            if unread is not None:
                unread[ref.qualified] = str(e)


def _replace(base: Compaction, **changes: object) -> Compaction:
    from dataclasses import replace

    return replace(base, **changes)  # type: ignore[arg-type]


def _order_column(snap: deltalog.Snapshot) -> str | None:
    """The first of :data:`ORDER_COLUMNS` that the table has as an integer column."""
    types = {f.get("name"): f.get("type") for f in snap.schema.get("fields", [])}
    return next((c for c in ORDER_COLUMNS if types.get(c) in ("long", "integer", "short", "byte")), None)


def _fragmented_whole(snap: deltalog.Snapshot) -> bool:
    """Whether a table compacted only whole needs it: deleted rows, a deletion vector, or
    :data:`MIN_SMALL_FILES` small files (a partitioned table: more than one file a partition)."""
    if any(f.deleted or f.deletion_vector for f in snap.files):
        return True
    if snap.partition_columns:
        partitions = {tuple(sorted(f.partition_values.items())) for f in snap.files}
        return len(snap.files) > len(partitions)
    return sum(1 for f in snap.files if f.size < SMALL_FILE_BYTES) >= MIN_SMALL_FILES


def _files_for(size: int) -> int:
    return max(1, math.ceil(size / TARGET_FILE_BYTES))


def _whole(base: Compaction, snap: deltalog.Snapshot) -> Compaction:
    size = sum(f.size for f in snap.files)
    partitions = {tuple(sorted(f.partition_values.items())) for f in snap.files}
    after = len(partitions) if snap.partition_columns else _files_for(size)
    return _replace(base, how="whole", files_rewritten=len(snap.files), bytes_rewritten=size, files_after=after)


def _buckets_plan(base: Compaction, snap: deltalog.Snapshot) -> Compaction:
    """The buckets holding more than one file, or a file with deletion vector or deleted rows, in
    chunks of about :data:`CHUNK_BYTES`."""
    from lakehouse.spark import buckets

    due = {b: files for b, files in sorted(buckets.files_of(snap).items())
           if len(files) > 1 or any(f.deleted or f.deletion_vector for f in files)}
    if not due:
        return base
    chunks: list[tuple[int, ...]] = []
    chunk: list[int] = []
    size = 0
    for b, files in due.items():
        bucket_size = sum(f.size for f in files)
        if chunk and size + bucket_size > CHUNK_BYTES:
            chunks.append(tuple(chunk))
            chunk, size = [], 0
        chunk.append(b)
        size += bucket_size
    chunks.append(tuple(chunk))
    rewritten = [f for files in due.values() for f in files]
    return _replace(base, how="buckets", chunks=tuple(chunks), files_rewritten=len(rewritten),
                    bytes_rewritten=sum(f.size for f in rewritten),
                    files_after=len(snap.files) - len(rewritten) + len(due))


def _tail(files: list[deltalog.DataFile], order: str) -> tuple[list[deltalog.DataFile], int] | None:
    """The small files at the end of a table appended in order of ``order``, and the least value of
    it they hold: every other file's greatest value below it. None when a file's statistics do not
    tell its least and greatest value (or it holds nulls there)."""
    bounds = []
    for f in files:
        low, high = f.minima.get(order), f.maxima.get(order)
        if f.records is None or f.null_counts.get(order, 0) or not _integer(low) or not _integer(high):
            return None
        bounds.append((int(low), int(high), f))  # type: ignore[arg-type]
    bounds.sort(key=lambda b: (b[0], b[1]))
    start = len(bounds)
    while start > 0 and bounds[start - 1][2].size < SMALL_FILE_BYTES:
        start -= 1
    # the tail starts past every value of the files before it: shrink it until it does
    while start < len(bounds):
        before = max((high for _, high, _ in bounds[:start]), default=None)
        if before is None or bounds[start][0] > before:
            break
        start += 1
    if start == len(bounds):
        return None
    return [f for _, _, f in bounds[start:]], bounds[start][0]


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def compact(spark: SparkSession, ref: TableRef, compaction: Compaction, done: Callable[[], None] | None = None) -> int:
    """Write again what ``compaction`` (:func:`plan`, of the table's latest snapshot) names, as
    :attr:`Compaction.commits` new Delta versions of the same rows.

    Args:
        done: called after each commit.

    Returns:
        The commits made.
    """
    from lakehouse.spark import delta

    read = spark.read.format("delta").load(ref.location)
    if compaction.how == "buckets":
        for chunk in compaction.chunks:
            delta.write_buckets(read.where(delta.buckets_where(chunk)), ref, chunk)
            if done is not None:
                done()
        return len(compaction.chunks)
    if compaction.how == "tail":
        assert compaction.order is not None and compaction.since is not None
        where = f"`{compaction.order}` >= {int(compaction.since)}"
        rows = _in_order(read.where(where), compaction.order, _files_for(compaction.bytes_rewritten))
        rows.write.format("delta").mode("overwrite").option("replaceWhere", where).save(ref.location)
        delta.committed(ref)
    elif compaction.how == "whole":
        if compaction.partition_columns:
            rows = read.repartition(max(compaction.files_after, 1), *compaction.partition_columns)
        else:
            rows = _in_order(read, compaction.order, _files_for(compaction.bytes_rewritten))
        # the table's Delta properties named again: delta.overwrite sets any the write did not keep
        delta.overwrite(rows, ref, partition_by=compaction.partition_columns, **compaction.properties)
    else:
        return 0
    if done is not None:
        done()
    return 1


def _in_order(rows: DataFrame, order: str | None, files: int) -> DataFrame:
    """``rows`` in ``files`` partitions (a file each), in ranges of ``order`` and sorted by it
    within each when there is such a column. Apache Spark writes them so; Sail's Delta writer
    keeps neither the ranges nor the order (probed with 0.7: one file, rows as they came), which
    costs only the skipping of row groups within the files written here: the predicate that
    chose them keeps every earlier file out of their range."""
    if order is None:
        return rows.repartition(files)
    return rows.repartitionByRange(files, order).sortWithinPartitions(order)

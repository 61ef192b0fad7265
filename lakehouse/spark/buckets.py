"""The bucketed layout of the gold tables, of ``silver.instance_states`` and of ``silver.messages``: a
partition column of the instance id's hash (of the author's, for the messages), so that a run that
replaces the rows of a few instances, or reads their states, or the messages of a few logs, reads
only their buckets.

Why: a run replaces the rows of the instances it touched (:func:`lakehouse.spark.delta.replace_rows`,
a MERGE), and finding the rows to take out is a scan of the table; the ids are hashes, spread over
every file, and Sail 0.7.2 does not prune a MERGE's target by file statistics, even with the ids
as literals (``python -m tests.benchmarks.merge_scan``, Run AK). Partition values in the MERGE's
condition do prune it (on Apache Spark too: Delta Lake prunes a MERGE's target by the condition's
predicates on the target alone): with a table cut into buckets of about :data:`BUCKET_ROWS` rows, a run that touches k
instances of a table reads at most k buckets, however large the table.

The column, :data:`COLUMN` (INT): ``count + (h mod count)``, where ``h`` is the id's first two bytes
after its two-byte YASMF prefix (characters 5 to 8 of its hex, FORMAT.md section 1: uniform, as
a BLAKE3 hash's; of an author's public key, its characters 5 to 8 too, as uniform) and ``count``
the table's number of buckets, a power of two. The value carries the
count (the highest power of two not above it), so that a merge finds it in any file's partition
value, in the Delta log, without a table property the engines store differently. The count is
chosen when a table is written whole (:func:`count_for`, from its rows) and kept until it is
written whole again (a first run, a rebuild, a compaction).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from lakehouse.spark import deltalog
    from lakehouse.spark.tables import TableRef

COLUMN = "_bucket"
DDL = f"`{COLUMN}` INT"
BUCKET_ROWS = 4096
"""Rows a bucket holds about, when its table is written whole: a merge that touches a bucket reads
all of it, and a read of the whole table opens a file per bucket at least."""
MAX_BUCKETS = 4096


def count_for(rows: int, per_bucket: int | None = None) -> int:
    """The number of buckets for a table of ``rows`` rows: the power of two nearest above
    ``rows / per_bucket`` (:data:`BUCKET_ROWS` by default), at least 1, at most :data:`MAX_BUCKETS`."""
    per_bucket = BUCKET_ROWS if per_bucket is None else per_bucket
    count = 1
    while count * per_bucket < rows and count < MAX_BUCKETS:
        count *= 2
    return count


def hash_column(key: str = "instance_id") -> Column:
    """The 16-bit hash of the id in column ``key`` (0..65535), in the engine; 0 when the id has no
    hex there (not an entry hash: every row of such ids is in one bucket)."""
    from pyspark.sql import functions as F

    return F.coalesce(F.conv(F.substring(key, 5, 4), 16, 10).cast("int"), F.lit(0))


def hash_of(instance_id: str) -> int | None:
    """The 16-bit hash of one hex id, in Python, as :func:`hash_column` gives it in the engine; None
    when its characters 5 to 8 are not four hex digits (the engine's value is then not certain)."""
    digits = instance_id[4:8]
    if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
        return None
    return int(digits, 16)


def column(count: int, key: str = "instance_id") -> Column:
    """The :data:`COLUMN` of each row, for a table of ``count`` buckets, named so."""
    from pyspark.sql import functions as F

    return (F.lit(count) + F.pmod(hash_column(key), F.lit(count))).cast("int").alias(COLUMN)


def count_of(values: Iterable[str | None]) -> int | None:
    """A table's number of buckets, from the partition values of its files (strings, as the Delta
    log keeps them): None when it has none (no file yet) or one is not a bucket value."""
    counts = set()
    for value in values:
        if value is None or not value.isdigit() or int(value) < 1:
            return None
        counts.add(1 << (int(value).bit_length() - 1))
    return counts.pop() if len(counts) == 1 else None


def values_for(hashes: Iterable[int], count: int) -> list[int]:
    """The :data:`COLUMN` values of ids with these 16-bit hashes (:func:`hash_column`), in a table of
    ``count`` buckets: what a merge's condition names, so that the engine reads only their files."""
    return sorted({count + h % count for h in hashes})


def of_snapshot(snap: deltalog.Snapshot) -> int | None:
    """The number of buckets of a table (:func:`count_of`), from a snapshot of its Delta log; None
    when it has none: partitioned otherwise or not at all (written before it had buckets), or empty."""
    if snap.partition_columns != (COLUMN,):
        return None
    return count_of(f.partition_values.get(COLUMN) for f in snap.files)


def files_of(snap: deltalog.Snapshot) -> dict[int, list[deltalog.DataFile]]:
    """The data files of a table in buckets (``snap``, a snapshot of its Delta log), by their
    :data:`COLUMN` value (a file without one under 0)."""
    found: dict[int, list[deltalog.DataFile]] = {}
    for f in snap.files:
        found.setdefault(int(f.partition_values.get(COLUMN) or 0), []).append(f)
    return found


def read_files(spark: SparkSession, location: str, snap: deltalog.Snapshot, named: Iterable[int], ddl: str,
               key: str = "instance_id") -> DataFrame | None:
    """The rows of the buckets ``named`` (:data:`COLUMN` values) of the table at ``location`` in
    buckets of the ids in column ``key``, read from the data files its Delta log lists for them
    (``snap``, its current snapshot) as parquet of columns ``ddl`` (the table's but :data:`COLUMN`),
    with :data:`COLUMN` computed again from ``key``: not through Delta, whose read replays the log
    in the engine (a file a bucket and more). At 10,000,000 messages Sail read 40 one-file buckets
    of a gold table (2,048 files) in 0.14-0.18 s so from a cold page cache, 0.18-0.23 s through
    Delta (0.02 against 0.06 s warm); but the hundred buckets of a trickle's authors in
    ``silver.messages`` (some 300 files, 250,000 rows) in 1.5-1.7 s against 1.3-1.4: for a few
    small files only.

    Returns None, for the caller to read through Delta, when the table has no buckets, when one of
    those files has a deletion vector (only Delta leaves its deleted rows out), or when a column is
    an array (or another nested type): Sail's union of such rows with the new ones then failed
    (``column 3 has type List(Utf8, field: 'element') in one input, but the union schema expects
    List(Utf8)``: the list's item field named otherwise), with a cast to the column's type too."""
    from lakehouse.spark import delta, deltalog

    count = of_snapshot(snap)
    if count is None or any("<" in kind for _, kind in delta.typed(ddl)):
        return None
    wanted = {str(n) for n in named}
    files = [f for f in snap.files if f.partition_values.get(COLUMN) in wanted]
    if any(f.deletion_vector for f in files):
        return None
    rows = (spark.read.schema(ddl).parquet(*(deltalog.data_path(location, f) for f in files)) if files
            else spark.createDataFrame([], ddl))
    return rows.select("*", column(count, key))


def condition(hashes: Iterable[int] | None, count: int, alias: str = "t") -> str | None:
    """The condition of a MERGE on a table of ``count`` buckets whose keys have these 16-bit hashes
    (:func:`hash_column`): ``t._bucket IN (...)``, with literals, which the engines prune the
    target's files by (:func:`lakehouse.spark.delta.replace_rows`'s ``within``); None when it
    would name every bucket, or when the hashes are not known (None) or none (every file is read)."""
    named = values_for(hashes, count) if hashes is not None else []
    return f"{alias}.`{COLUMN}` IN ({', '.join(map(str, named))})" if 0 < len(named) < count else None


def hashes_of(ids: DataFrame, key: str = "instance_id") -> set[int]:
    """The 16-bit hashes (:func:`hash_column`) of the ids in column ``key`` of ``ids``, in one job."""
    from pyspark.sql import functions as F

    found = ids.select(F.collect_set(hash_column(key)).alias("hashes")).collect()
    return {int(h) for h in found[0]["hashes"]} if found else set()


def where_in(frame: DataFrame, hashes: Iterable[int | None], count: int | None) -> DataFrame:
    """The rows of ``frame`` (a bucketed table as read, with :data:`COLUMN`) in the buckets of ids
    with these 16-bit hashes, as a literal predicate on the partition column (the engine reads
    only those files); ``frame`` as it is when ``count`` is None (the table has no buckets) or a
    hash is None (not known: :func:`hash_of`); no rows (and no file read) when there is no hash."""
    from pyspark.sql import functions as F

    hashes = set(hashes)
    if count is None or None in hashes:
        return frame
    named = values_for((h for h in hashes if h is not None), count)
    return frame.where(F.col(COLUMN).isin(named) if named else F.lit(False))


def write(rows: DataFrame, ref: TableRef, count: int, key: str = "instance_id", **options: str) -> None:
    """Replace a table's contents with ``rows`` as one new Delta version, in ``count`` buckets of
    the ids in column ``key`` (the partition column :data:`COLUMN` added to its columns, a file
    per bucket), with these table properties (``options``)."""
    from lakehouse.spark import delta

    delta.overwrite(rows.select("*", column(count, key)).repartition(count, COLUMN), ref, partition_by=[COLUMN],
                    **options)


def lay_out(rows: DataFrame, ref: TableRef, snap: deltalog.Snapshot, key: str = "instance_id", **options: str) -> None:
    """Write a table that has no buckets yet (``snap``: its Delta log as read) again, whole, in
    buckets of the ids in column ``key`` (:func:`write`), as many as its rows call for: counted by
    its Delta log, else by the engine."""
    write(rows, ref, count_for(snap.rows if snap.rows is not None else rows.count()), key, **options)


def layout(location: str) -> tuple[deltalog.Snapshot | None, int | None]:
    """A table's latest snapshot, read from its Delta log without the engine
    (:func:`lakehouse.spark.deltalog.snapshot`), and its number of buckets (:func:`of_snapshot`):
    (None, None) when the log cannot be read that way (no table there, or one this reader does not
    know); the snapshot and None when the table has no buckets."""
    import contextlib

    from lakehouse.spark import deltalog

    with contextlib.suppress(OSError, deltalog.DeltaLogError):
        snap = deltalog.snapshot(location)
        return snap, of_snapshot(snap)
    return None, None

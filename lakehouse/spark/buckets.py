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

import contextlib
import threading
from collections.abc import Iterable, Mapping
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


def value_of(h: int, count: int) -> int:
    """The :data:`COLUMN` value of an id whose 16-bit hash is ``h`` (:func:`hash_of`), in a table of
    ``count`` buckets: :func:`column`'s, in Python."""
    return count + h % count


def values_for(hashes: Iterable[int], count: int) -> list[int]:
    """The :data:`COLUMN` values of ids with these 16-bit hashes (:func:`hash_column`), in a table of
    ``count`` buckets: what a merge's condition names, so that the engine reads only their files."""
    return sorted({value_of(h, count) for h in hashes})


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


SLICED_FROM = 1_024
"""Buckets from which :func:`write`, given a staging folder (silver's whole writes of its messages
and states give one), writes a table a slice of its buckets at a time: the engine's shuffle into
one partition a bucket holds what it writes in memory (Sail 0.7.2 spills none of it), so a table
written in one job costs memory in proportion to the table. At 10,000,000 messages
(``silver.messages``, 4,096 buckets) one job took 37 s at a peak of 6.8 GiB, eight slices 44 s
at 1.3 GiB (``tests/benchmarks/README.md``, Run BL). Below it (at 1,000,000 messages every table
has at most 256 buckets), one job. Gold tables are not given one: at 10,000,000 messages their
whole writes in slices took 1.5 times as long (the first gold run, 242 s against 163 s); their
writes in one job take turns instead (:data:`_ONE_LARGE_JOB`)."""
SLICE_BYTES = 256 * 2**20
"""Staged bytes (uncompressed parquet) that one commit of a write in slices takes at most (a slice
of more is written alone): what bounds its memory."""
STAGED_SLICES = 64
"""The slices a write in slices stages its rows in (at most; a slice is a run of ``count / 64``
consecutive buckets), which its commits then take a few at a time, up to :data:`SLICE_BYTES`."""
SLICE_ROW_GROUP_ROWS = 8_192
"""Rows a row group of a staged slice holds at most (:func:`lakehouse.spark.delta.staged_writer`):
the staging write keeps every slice's file open, each with a row group in memory on Sail."""
_SLICE = "lakehouse_slice"  # no leading underscore: engines and pyarrow skip such folders
UNFINISHED = "unfinished"
"""The folder, in a job's staging folder, of the markers of writes in slices that have begun
committing and not ended: a file per table, named after it (:func:`unfinished`)."""


_ONE_LARGE_JOB = threading.Lock()
"""Held by a write in one job of :data:`SLICED_FROM` buckets or more (:func:`write`), whose memory
follows its table: such writes of one process (a gold run's table writers) take turns. The first
gold run at 10,000,000 messages (20 tables of 2,048 buckets, four writers) peaked at 5.0 GiB in its
tables step with the four writing at once, at 2.1 GiB one at a time, in as long (77.6 s against
83.4; ``tests/benchmarks/README.md``, Run BM). Smaller writes, the trickle's among them, go on
beside it."""


def write(rows: DataFrame, ref: TableRef, count: int, key: str = "instance_id", *, staging: str | None = None,
          **options: str) -> None:
    """Replace a table's contents with ``rows``, in ``count`` buckets of the ids in column ``key``
    (the partition column :data:`COLUMN` added to its columns, a file per bucket), with these table
    properties (``options``).

    As one new Delta version, or, given a ``staging`` folder (the run's) and at least
    :data:`SLICED_FROM` buckets, a slice of the buckets at a time (:func:`_write_in_slices`): its
    memory then follows a slice, not the table, and it commits several versions, the first of
    which holds only the first slices' rows. Until the last, a marker in the staging folder says
    so (:func:`unfinished`), for the job's next run to write the table again when this one stops
    before. A table of :data:`SLICED_FROM` buckets or more written in one job (gold's) waits for
    any other such write of the process to end (:data:`_ONE_LARGE_JOB`).
    """
    from lakehouse.spark import delta

    if staging is None or count < SLICED_FROM:
        with _ONE_LARGE_JOB if count >= SLICED_FROM else contextlib.nullcontext():
            delta.overwrite(rows.select("*", column(count, key)).repartition(count, COLUMN), ref,
                            partition_by=[COLUMN], **options)
        return
    _write_in_slices(rows, ref, count, key, staging, options)


def _write_in_slices(rows: DataFrame, ref: TableRef, count: int, key: str, staging: str,
                     options: Mapping[str, str]) -> None:
    """:func:`write` a slice at a time: the rows staged once in :data:`STAGED_SLICES` slices of
    consecutive buckets (parquet partitioned by slice: a write that needs no shuffle), then a
    commit for each run of slices up to :data:`SLICE_BYTES`, each its buckets in one partition
    apiece: the first overwrites the table, the others add to it.

    Not a ``replaceWhere`` of each run's buckets, which would leave every bucket whole meanwhile:
    Sail (0.7.2) unions the rows it writes so with the table's, and refuses a list column read
    from parquet against the table's type of it."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, StructField, StructType

    from lakehouse.spark import delta
    from lakehouse.spark.tables import remove_file, remove_tree

    spark = rows.sparkSession
    slices = min(count, STAGED_SLICES)
    per = count // slices
    folder = f"{staging}/slices_{ref.name}"
    bucketed = rows.select("*", column(count, key))
    schema = bucketed.schema
    # every slice's file is open at once, each holding a row group: 64 of 8,192 rows hold about what
    # a group step's ten parts of 65,536 do
    (delta.staged_writer(bucketed.withColumn(_SLICE, F.floor((F.col(COLUMN) - F.lit(count)) / F.lit(per)).cast("int")),
                         row_group_rows=SLICE_ROW_GROUP_ROWS)
     .partitionBy(_SLICE).parquet(folder))
    # the slices each commit takes: consecutive ones that have rows, up to SLICE_BYTES
    runs: list[list[int]] = []
    taken = 0
    for n, size in sorted(delta.staged_part_bytes(folder, _SLICE).items()):
        if runs and taken + size <= SLICE_BYTES:
            runs[-1].append(n)
            taken += size
        else:
            runs.append([n])
            taken = size
    marker = f"{staging}/{UNFINISHED}/{ref.name}"
    _touch(marker)
    if not runs:  # no rows: the table emptied in one commit
        delta.overwrite(spark.createDataFrame([], schema), ref, partition_by=[COLUMN], **options)
    # the folder read whole, each run's slices chosen by their partition values: Sail reads
    # several paths as a union of scans, which refuses a list column's parquet type likewise
    staged = spark.read.schema(StructType([*schema.fields, StructField(_SLICE, IntegerType())])).parquet(folder)
    for at, run in enumerate(runs):
        part = staged.where(F.col(_SLICE).isin(run)).drop(_SLICE).repartition(len(run) * per, COLUMN)
        if at == 0:
            delta.overwrite(part, ref, partition_by=[COLUMN], **options)
        else:
            delta.append(part, ref)
    remove_file(marker)
    remove_tree(folder)


def _touch(marker: str) -> None:
    """Write the (empty) file ``marker``, its folders made as needed (a local path or a store URI)."""
    from lakehouse.spark.tables import filesystem_of

    filesystem, path = filesystem_of(marker)
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with filesystem.open_output_stream(path) as out:
        out.write(b"")


def unfinished(staging: str) -> list[str]:
    """The tables whose write in slices (:func:`write`) a run of a job began committing and did not
    end: the markers in its staging folder (``staging``), sorted; none when there is none. Such a
    table may hold only some of its buckets: the job's next run writes it again (a rebuild)."""
    from pyarrow import fs

    from lakehouse.spark.tables import filesystem_of

    filesystem, path = filesystem_of(f"{staging}/{UNFINISHED}")
    found = filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True))
    return sorted(info.base_name for info in found if info.type == fs.FileType.File)


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
    from lakehouse.spark import deltalog

    with contextlib.suppress(OSError, deltalog.DeltaLogError):
        snap = deltalog.snapshot(location)
        return snap, of_snapshot(snap)
    return None, None

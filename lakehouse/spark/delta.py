"""Small portable Delta helpers: create-if-missing, append, MERGE or a rewrite from a DataFrame, reads.

Only statements that Sail, a Spark Connect cluster and Apache Spark with delta-spark all run
(LAKEHOUSE.md, Engine): DataFrame writes in ``delta`` format at explicit locations and SQL MERGE
against a temporary view. Small tables whose rows this process holds (a run's bookkeeping) are
read and written by the ``deltalake`` package instead (:func:`read_arrow`, :func:`append_rows`,
:func:`replace_with_rows`): the same Delta versions, without an engine statement each.

Every Delta commit of the pipelines goes through these helpers, and each one passes
:func:`committed` after it: the crash tests end a run right after any chosen commit.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import threading
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from lakehouse.spark.tables import TableRef, is_delta_table
from lakehouse.store import arrow_uri

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, DataFrameWriter, SparkSession

    from lakehouse.config import Settings
    from lakehouse.spark import deltalog

FAULT_ENV = "LAKEHOUSE_FAULT_AFTER"
"""Crash tests: the process ends (exit 70) right after the commit this names: a table name
(``entries``), or the commit's number in the process (``3``: the third)."""
FAULT_EXIT = 70

on_commit: Callable[[int, str], None] | None = None
"""In-process crash tests: called with (commit number in the process, table name) after each commit."""

_numbers = itertools.count(1)
_numbering = threading.Lock()


def committed(ref: TableRef) -> None:
    """Mark one Delta commit to ``ref`` as done (the table writers run in threads: numbers are
    taken under a lock). Ends the process when :data:`FAULT_ENV` names this commit."""
    with _numbering:
        number = next(_numbers)
    if os.environ.get(FAULT_ENV) in (ref.name, str(number)):
        os._exit(FAULT_EXIT)
    if on_commit is not None:
        on_commit(number, ref.name)


def read(spark: SparkSession, ref: TableRef) -> DataFrame | None:
    """The table's current version, or None when it does not exist yet."""
    if not is_delta_table(ref.location):
        return None
    return spark.read.format("delta").load(ref.location)


def integer_max(spark: SparkSession, ref: TableRef, *columns: str) -> tuple[int | None, ...] | None:
    """The greatest value of each integer column of the table's current version (None for an
    empty column), or None when the table does not exist yet.

    Read from the files' statistics in its Delta log (:meth:`lakehouse.spark.deltalog.Snapshot.integer_max`),
    without an engine job: a run starts by asking the greatest batch of bronze and the last run of
    ``silver.runs``, and each such question cost Apache Spark a job of a few tenths of a second.
    Asked of the engine when the statistics do not tell (a file without them, or with deleted rows)
    or the log cannot be read that way.
    """
    from pyspark.sql import functions as F

    from lakehouse.spark import deltalog

    if not is_delta_table(ref.location):
        return None
    try:
        snap = deltalog.snapshot(ref.location)
        return tuple(snap.integer_max(c) for c in columns)
    except (OSError, LookupError, deltalog.DeltaLogError):
        row = spark.read.format("delta").load(ref.location).agg(*(F.max(c) for c in columns)).collect()[0]
        return tuple(None if v is None else int(v) for v in row)


def ensure(spark: SparkSession, ref: TableRef, ddl: str) -> DataFrame:
    """The table, created empty with schema ``ddl`` when missing."""
    if not is_delta_table(ref.location):
        append(spark.createDataFrame([], ddl), ref)
    return spark.read.format("delta").load(ref.location)


HERE_ROWS = 50_000
"""Rows up to which a write goes from this process by the ``deltalake`` package (the rows fetched
from the engine as Arrow, or computed here) rather than by an engine statement: the rows fetched
where :func:`here_rows_for` allows it (a small gold table written whole or in its touched buckets,
:func:`lakehouse.spark.gold.write_table`, :func:`lakehouse.spark.gold.rewrite_rows`; a small run's
silver writes of tables without deletion vectors, ``pipelines.silver``), and on either engine a
gold table's rows computed here from a change held here (``rewrite_rows``' ``here``)."""


def here_rows_for(settings: Settings) -> int:
    """Rows up to which a write goes from this process by the ``deltalake`` package
    (:data:`HERE_ROWS`): on Apache Spark and a remote endpoint, where an engine write of a small
    table is a statement of seconds; none (0) on the embedded engine, whose write of such a table
    takes a tenth of a second and the rows' trip to this process as long or longer
    (``tests/benchmarks/README.md``, Run BV: a 50,000-row table, Apache Spark 4.6 s by the engine
    against 0.5-0.6 s so, Sail 0.10-0.17 s against 0.29-0.40 s, 0.23-0.30 s of it the rows' trip)."""
    return 0 if settings.embedded_sail else HERE_ROWS


def append(source: DataFrame, ref: TableRef, **options: str) -> None:
    """Append ``source``'s rows to the table (created when missing), as one new Delta version."""
    source.write.format("delta").mode("append").options(**options).save(ref.location)
    committed(ref)


def append_rows(spark: SparkSession, rows: Sequence[tuple[Any, ...]], ddl: str, ref: TableRef) -> None:
    """Append rows held by this process (tuples in the order of ``ddl``, a flat DDL string: what
    :func:`row` gives) to the table, created when missing, as one new Delta version.

    Written by the ``deltalake`` package, not the engine, when the table exists and the package
    can write it (:func:`_package_write`): a run's bookkeeping rows (``silver.runs``,
    ``silver.gold_versions``, ``silver.gold_changes``, ``silver.registrations``, ``bronze.files``)
    are a few to a few dozen, and on Apache Spark each append of them through the engine was a
    statement of 0.5-1.2 s (the table's snapshot, a job, its commit; 0.01-0.02 s by the package;
    Sail took 0.01-0.04 s either way: ``tests/benchmarks/README.md``, Run BU). Through the engine
    otherwise: no rows, a table not created yet, or one the package refuses (a writer feature it
    lacks, a schema that differs from ``ddl``).
    """
    if not (rows and _package_write(rows, ddl, ref, "append")):
        append(spark.createDataFrame(list(rows), ddl), ref)


def _package_write(rows: Sequence[tuple[Any, ...]], ddl: str, ref: TableRef, mode: Literal["append", "overwrite"]
                   ) -> bool:
    """Write ``rows`` (in the order of ``ddl``) to the existing table ``ref`` with the ``deltalake``
    package (:func:`_package_write_arrow`)."""
    import pyarrow as pa

    from lakehouse.spark.groups import arrow_schema, batch_of

    schema = arrow_schema(ddl)
    columns = [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in schema]
    return _package_write_arrow(pa.Table.from_batches([batch_of(columns, schema)]), ref, mode)


def _package_write_arrow(table: pa.Table | Callable[[DeltaTable], pa.Table | None], ref: TableRef,
                         mode: Literal["append", "overwrite"], *, partition_by: Sequence[str] = (),
                         properties: Mapping[str, str] | None = None, predicate: str | None = None) -> bool:
    """Write an Arrow table to the existing table ``ref`` with the ``deltalake`` package, as one new
    Delta version (``mode``: ``append`` or ``overwrite``, which keeps the table's schema), and pass
    :func:`committed`; at every :data:`CHECKPOINT_INTERVAL`-th version (or the table's own
    ``delta.checkpointInterval``) a checkpoint of it too, as the engines leave one after their
    commits, so that its log's replay stays short however many runs append to it.

    False, having written nothing, when the table does not exist, its columns are not the
    written ones, its partition columns are not ``partition_by``, its table properties are not
    ``properties`` (the engine then writes it, changing its schema, partitioning or properties
    when it overwrites), or the package refuses it (a feature it lacks).

    Args:
        table: the rows, or what gives them from the table as the package opened it (called
            only once its partitioning and properties are found writable here: a query the
            engine answers with ``toArrow``, whose columns are then compared, not asked of the
            engine beforehand, a round trip of its own on Spark Connect; or rows computed here
            from the stored ones, read at the version the write commits after). None from it:
            not written here.
        partition_by: the partition columns the table must have (none: it must have none).
        properties: ``delta.*`` table properties the table must have as given.
        predicate: with ``overwrite``, replace only the rows it holds of (a SQL predicate on the
            partition columns: their files are removed, none other), every row written one of them.
    """
    if not is_delta_table(ref.location):
        return False
    from deltalake import DeltaTable, write_deltalake
    from deltalake.exceptions import DeltaError

    try:
        target = DeltaTable(arrow_uri(ref.location))
        metadata = target.metadata()
        have = metadata.configuration
        if (list(metadata.partition_columns) != list(partition_by)
                or any(have.get(k) != v for k, v in (properties or {}).items() if k.startswith("delta."))):
            return False
        data = table(target) if callable(table) else table
        if data is None or [f.name for f in target.schema().fields] != data.column_names:
            return False
        if predicate is None:
            write_deltalake(target, data, mode=mode)
        else:
            write_deltalake(target, data, mode="overwrite", predicate=predicate)
    except DeltaError:
        return False
    committed(ref)
    interval = int(have.get("delta.checkpointInterval") or CHECKPOINT_INTERVAL)
    if target.version() % interval == 0:
        with contextlib.suppress(DeltaError, OSError):  # the commit stands; a later one checkpoints
            target.create_checkpoint()
    return True


def append_arrow(spark: SparkSession, table: pa.Table, ddl: str, ref: TableRef) -> None:
    """Append an Arrow table held by this process (of schema ``ddl``, a flat DDL string whose
    columns are the table's) to an existing Delta table, as one new Delta version: by the
    ``deltalake`` package (:func:`append_rows` says why), or by the engine when the package
    refuses the table."""
    if not _package_write_arrow(table, ref, "append"):
        from lakehouse.spark.groups import spark_schema

        append(spark.createDataFrame(table, spark_schema(ddl)), ref)


CHECKPOINT_INTERVAL = 10
"""Versions between two checkpoints of a table the ``deltalake`` package writes (:func:`_package_write_arrow`):
Delta's default ``delta.checkpointInterval``, which both engines follow after their own commits."""


def read_arrow(spark: SparkSession, ref: TableRef) -> pa.Table | None:
    """A small table's current version in this process, as an Arrow table (its columns in the
    table's order), or None when the table does not exist yet.

    Its log read by the ``deltalake`` package and its files by pyarrow, not by the engine: a run
    reads its bookkeeping tables whole (``silver.gold_versions``, ``silver.registrations``,
    ``silver.schema_entries``, the change feed's index), and on Apache Spark each read was a query
    of 0.3-1 s, most of it the table's snapshot (0.02-0.04 s so). Through the engine (``toArrow``)
    when the table is partitioned, needs more than the first reader version (deletion vectors,
    column mapping), or the package cannot read its log.
    """
    import pyarrow as pa
    import pyarrow.dataset as ds
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    from lakehouse.spark.tables import filesystem_of

    if not is_delta_table(ref.location):
        return None
    try:
        table = DeltaTable(arrow_uri(ref.location))
        # a partition's values are in the log, not its files; a reader feature (deletion vectors,
        # column mapping) changes what the files mean: the engine reads such a table
        plain = table.protocol().min_reader_version == 1 and not table.metadata().partition_columns
        schema, uris = pa.schema(table.schema().to_arrow()).remove_metadata(), table.file_uris()
    except DeltaError:
        plain = False
    if not plain:
        return spark.read.format("delta").load(ref.location).toArrow()
    # its data files read by pyarrow itself: the package's to_pyarrow_table reads them through a
    # file system of its own, and the process then ended now and then with SIGABRT at exit
    # ("terminate called without an active exception": 5 exits in 10 of a script that only read)
    filesystem, _ = filesystem_of(ref.location)
    paths = [uri.split("://", 1)[1] if "://" in uri else uri for uri in uris]
    return ds.dataset(paths, schema=schema, format="parquet", filesystem=filesystem).to_table()


def read_rows(spark: SparkSession, ref: TableRef) -> list[Any] | None:
    """A small table's current version as ``collect()`` gives it (:func:`arrow_rows` of
    :func:`read_arrow`), or None when the table does not exist yet."""
    table = read_arrow(spark, ref)
    return None if table is None else arrow_rows(table)


def arrow_rows(table: pa.Table) -> list[Any]:
    """An Arrow table's rows as ``collect()`` gives them: pyspark ``Row``\\ s, TIMESTAMP values as
    naive datetimes in UTC (the session's time zone, :data:`lakehouse.spark.session._DEFAULT_CONF`),
    BINARY as ``bytes``."""
    import pyarrow as pa
    from pyspark.sql import Row

    columns = []
    for field, column in zip(table.schema, table.columns, strict=True):
        if pa.types.is_timestamp(field.type) and field.type.tz is not None:
            column = column.cast(pa.timestamp(field.type.unit))  # the UTC wall clock, without its zone
        columns.append(column.to_pylist())
    names = table.column_names
    return [Row(**dict(zip(names, values, strict=True))) for values in zip(*columns, strict=True)]


def upsert(spark: SparkSession, ref: TableRef, ddl: str, source: DataFrame, key: str | Sequence[str],
           stamp: str, bucketed: tuple[int, str] | None = None, *, snap: deltalog.Snapshot | None = None,
           properties: Mapping[str, str] | None = None, here_rows: int = 0, source_rows: int | None = None) -> None:
    """Write the table again, as one new Delta version, with ``source``'s rows in place of the rows
    with the same ``key`` and added where there are none; a source row equal (null-safe) in every
    other column to the row it replaces keeps that row's ``stamp`` (e.g. the run that last changed it).

    A MERGE that updates only rows that differ, in one job that reads the table once: the
    embedded engine's MERGE replaces every file of the table whatever matched, and runs its
    source plan several times. When no key of ``source`` is in the table, its rows are appended
    instead, unless its Delta log counts :data:`APPEND_FILES_LIMIT` data files or more (appends add
    small files; the rewrite gathers them again): a run that adds a hundred messages to a table
    of a million appends them instead of writing the million again. That no key is there is told
    by the table's statistics when they can (:func:`_keys_past`), else by a join with its keys.

    A table in buckets (``bucketed``) is written again only in the buckets ``source`` touches
    (:func:`write_buckets`, a file each; :func:`_upsert_buckets`), unless its rows outgrew its
    buckets (more than twice the rows :func:`lakehouse.spark.buckets.count_for` gives them), when
    it is written whole in as many as its rows call for.

    Args:
        ddl: the table's schema, created empty when missing; ``source`` has its columns.
        key: the key column, unique in ``source`` and in the table; or columns: the key and columns
            whose values it determines (equal in ``source`` and the table for the same key), joined on
            too, so that the engine can skip the table's files that hold none of ``source``'s values
            of them (on Sail, the join's filter on their range).
        stamp: the column a row keeps from the row it replaces when nothing else differs.
        bucketed: ``(count, column)`` when the table is in ``count`` buckets of the ids in that
            column (:mod:`lakehouse.spark.buckets`): appended rows carry their bucket, and each
            bucket is allowed :data:`COMPACT_FILES_PER_PARTITION` data files before the buckets a
            run touches are written again.
        snap: the table's current snapshot, when the caller read its Delta log
            (:func:`lakehouse.spark.deltalog.snapshot`); read here otherwise.
        properties: table properties it is written whole with (set then where it lacks them).
        here_rows, source_rows: rows appended, and the buckets of a table in buckets written
            again, are written by the ``deltalake`` package from this process (the rows fetched
            from the engine as Arrow: :func:`write_buckets`' ``here``) when ``source`` holds at
            most ``source_rows`` rows (the caller's bound) and they, with the stored rows of the
            buckets written again, are at most ``here_rows`` (0: never; Apache Spark's statement
            of such a write costs a second, Run BY of ``tests/benchmarks/README.md``). A table
            written whole is written by the engine.
    """
    import contextlib

    from lakehouse.spark import buckets, deltalog

    table = ensure(spark, ref, ddl)
    cols, keys = columns(ddl), [key] if isinstance(key, str) else list(key)
    files, limit, rows = APPEND_FILES_LIMIT, APPEND_FILES_LIMIT, None
    with contextlib.suppress(OSError, deltalog.DeltaLogError):  # unread: written again (an equal choice)
        snap = snap if snap is not None else deltalog.snapshot(ref.location)
        files, rows = len(snap.files), snap.rows
        if bucketed is not None:
            limit = files_allowed(snap, limit)
    # the rows left for stored ones written beside the source's, when the package writes (None: it does not)
    budget = here_rows - source_rows if source_rows is not None and here_rows > 0 and source_rows <= here_rows else None
    if (bucketed is not None and snap is not None and rows is not None and buckets.of_snapshot(snap) == bucketed[0]
            and 2 * bucketed[0] >= buckets.count_for(rows)):
        _upsert_buckets(spark, ref, table, snap, source, cols, keys, stamp, bucketed, here_rows=budget)
        return
    if files < limit and ((snap is not None and _keys_past(snap, source, keys))
                          or source.join(table.select(*keys), keys, "left_semi").isEmpty()):
        appended = source.select(*cols, *([buckets.column(*bucketed)] if bucketed is not None else []))
        if not (budget is not None
                and append_here(appended, ref, [buckets.COLUMN] if bucketed is not None else [])):
            append(appended, ref)
        return
    written = _upserted(table, source, cols, keys, stamp)
    if bucketed is None:
        overwrite(written, ref, **(properties or {}))
        return
    buckets.write(written, ref, buckets.count_for(rows if rows is not None else written.count()), bucketed[1],
                  **(properties or {}))


def _upserted(stored: DataFrame, source: DataFrame, cols: Sequence[str], keys: Sequence[str], stamp: str) -> DataFrame:
    """``stored``'s rows whose key is not in ``source``, and ``source``'s rows, each keeping the
    ``stamp`` of the stored row it replaces when no other column differs (:func:`upsert`)."""
    from pyspark.sql import functions as F

    compared = [c for c in cols if c not in (*keys, stamp)]
    old = stored.select(*keys, *(F.col(c).alias(f"_old_{c}") for c in [*compared, stamp]))
    same = F.lit(True)
    for c in compared:
        same = same & F.col(c).eqNullSafe(F.col(f"_old_{c}"))
    kept_stamp = F.when(F.col(f"_old_{stamp}").isNotNull() & same, F.col(f"_old_{stamp}")).otherwise(F.col(stamp))
    fresh = source.join(old, list(keys), "left").select(*(kept_stamp.alias(c) if c == stamp else F.col(c) for c in cols))
    kept = stored.join(source.select(*keys), list(keys), "left_anti").select(*cols)
    return kept.unionByName(fresh)


def _upsert_buckets(spark: SparkSession, ref: TableRef, table: DataFrame, snap: deltalog.Snapshot, source: DataFrame,
                    cols: Sequence[str], keys: Sequence[str], stamp: str, bucketed: tuple[int, str], *,
                    here_rows: int | None = None) -> None:
    """:func:`upsert` into a table in ``bucketed[0]`` buckets, as one or two new Delta versions: when
    a key of ``source`` is stored, every bucket its rows fall in is written again (:func:`write_buckets`:
    their stored rows upserted, a file each); otherwise the buckets among them that hold
    :data:`COMPACT_FILES_PER_PARTITION` data files are (with their new rows), and ``source``'s
    other rows appended to theirs. The other buckets' files stay as they are. What ``source``
    touches is found in one job: its buckets (the hashes of its ``bucketed[1]`` column) and, where
    the statistics tell, whether its keys are past the table's (:func:`_keys_past`). A run's cost
    then follows the buckets it touches, where the whole write followed the table (at 10,000,000
    messages, 4,096 buckets: every row written again when a run re-judged one stored message, or
    once the table held four files a bucket). A run cut short between the two commits has its
    new rows in the full buckets only; its next run finds them stored (the first case).

    ``here_rows``: ``source``'s rows are few, written by the ``deltalake`` package from this
    process (:func:`write_buckets`' ``here``), and so are the buckets written again when their
    stored rows are at most this many; None: by the engine."""
    from pyspark.sql import functions as F

    from lakehouse.spark import buckets

    count, column = bucketed
    past_column = _past_column(snap, keys)
    facts = [F.collect_set(buckets.hash_column(column)).alias("hashes")]
    if past_column is not None:
        facts.append(F.min(past_column[0]).alias("least"))
    found = source.agg(*facts).collect()[0]
    named = buckets.values_for((int(h) for h in found["hashes"]), count)
    if not named:
        return
    stored_files = buckets.files_of(snap)
    full = [n for n in named if len(stored_files.get(n, ())) >= COMPACT_FILES_PER_PARTITION]
    past = past_column is not None and _past(past_column[1], found["least"])
    rows = source.select(*cols, buckets.column(count, column))
    if not (past or source.join(table.select(*keys), list(keys), "left_semi").isEmpty()):
        full = named  # a stored row replaced: every bucket the source touches is written again
    if full:
        in_full = rows.where(F.col(buckets.COLUMN).isin(full))
        stored = table.where(buckets_where(full))
        held = [f.records - f.deleted if f.records is not None else None for n in full for f in stored_files.get(n, ())]
        write_buckets(_upserted(stored, in_full.select(*cols), cols, keys, stamp)
                      .select(*cols, buckets.column(count, column)), ref, full,
                      here=here_rows is not None and None not in held and sum(h or 0 for h in held) <= here_rows)
        rows = rows.where(~F.col(buckets.COLUMN).isin(full))
    if len(full) < len(named) and not (here_rows is not None and append_here(rows, ref, [buckets.COLUMN])):
        append(rows, ref)


def _past_column(snap: deltalog.Snapshot, keys: Sequence[str]) -> tuple[str, int | None] | None:
    """The first integer key column whose greatest stored value the statistics tell
    (:meth:`lakehouse.spark.deltalog.Snapshot.integer_max`; None when the table holds none), and
    that value; None when no key column's statistics tell."""
    for column in keys:
        try:
            return column, snap.integer_max(column)
        except LookupError:
            continue
    return None


def _keys_past(snap: deltalog.Snapshot, source: DataFrame, keys: Sequence[str]) -> bool:
    """Whether no row of ``source`` can have its key in the table of ``snap``, told by the table's
    statistics: a key column of integers whose least value in ``source`` is greater than its
    greatest in the table (:meth:`lakehouse.spark.deltalog.Snapshot.integer_max`; a null key
    matches nothing). A run's new messages, keyed by hash and batch, come in batches later than
    any stored: one small query of ``source`` instead of its join with the table's keys (at
    10,000,000 messages Sail took 2.9-5.7 s for that join, 0.24-0.28 s at 1,000,000). False
    when no key column's statistics tell."""
    from pyspark.sql import functions as F

    told = _past_column(snap, keys)
    if told is None:
        return False
    column, top = told
    if top is None:  # the table holds no value of it
        return True
    return _past(top, source.agg(F.min(column)).collect()[0][0])


def _past(top: int | None, least: object) -> bool:
    """Whether keys whose least value is ``least`` (None: no row, or only nulls) are all past a
    table whose greatest is ``top`` (None: it holds no value)."""
    return top is None or least is None or (isinstance(least, int) and least > top)


def replace_rows(spark: SparkSession, ref: TableRef, ddl: str, rows: DataFrame, keys: DataFrame,
                 key: str | tuple[str, ...], within: str | None = None) -> None:
    """Take the rows whose ``key`` is in ``keys`` out of the table and add ``rows``, as one new Delta
    version: a MERGE of a delete marker per key and the new rows. On a table with deletion vectors
    (``delta.enableDeletionVectors``) neither engine writes a file of the table again: the rows
    taken out are marked in a deletion vector of their file, and ``rows`` are a new file.

    Written as SQL over a temporary view of its own (a name per call: the gold tables are written
    by several threads of one session at a time). ``WHEN NOT MATCHED BY SOURCE`` is not used: it
    makes both engines scan the whole table.

    Args:
        ddl: the table's columns (flat DDL), which ``rows`` has.
        rows: the rows to add; their keys are in ``keys``.
        keys: the key's columns: every key to take out (a key not in the table is no error).
        key: the key column; or key columns, compared null-safe (a null matches a null: rows of
            two kinds, each keyed by a column the other leaves null).
        within: a condition on the table's columns (as ``t.<column>``) that holds for every row of
            ``keys`` in it, with literals only: the engine then reads only the files it can hold
            (partition values; e.g. ``t._bucket IN (65, 70)``, :mod:`lakehouse.spark.buckets`).
    """
    import uuid

    from pyspark.sql import functions as F

    kinds = typed(ddl)
    cols = [name for name, _ in kinds]
    key_cols = (key,) if isinstance(key, str) else key
    markers = keys.select(*key_cols).distinct()
    # the markers' other columns typed as the table's: an untyped null does not cast to an array
    source = (markers.select(*(F.col(c) if c in key_cols else F.lit(None).cast(kind).alias(c) for c, kind in kinds),
                             F.lit(True).alias("_gone"))
              .unionByName(rows.select(*(F.col(f"`{c}`") for c in cols), F.lit(False).alias("_gone"))))
    view = f"lakehouse_merge_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    quoted = ", ".join(f"`{c}`" for c in cols)
    same = " AND ".join(f"t.`{c}` {'=' if isinstance(key, str) else '<=>'} s.`{c}`" for c in key_cols)
    try:
        spark.sql(f"MERGE INTO delta.`{ref.location}` AS t USING {view} AS s "
                  f"ON {f'({within}) AND ' if within else ''}{same} AND s._gone WHEN MATCHED THEN DELETE "
                  f"WHEN NOT MATCHED AND NOT s._gone THEN INSERT ({quoted}) "
                  f"VALUES ({', '.join(f's.`{c}`' for c in cols)})").collect()
    finally:
        spark.catalog.dropTempView(view)
    committed(ref)


def replace_buckets(spark: SparkSession, ref: TableRef, ddl: str, rows: DataFrame, keys: DataFrame, key: str,
                    named: Sequence[int], snap: deltalog.Snapshot | None = None, *, here: bool = False) -> None:
    """Write the buckets ``named`` of a table in buckets (:mod:`lakehouse.spark.buckets`) again, as
    one new Delta version: their rows but those whose ``key`` is in ``keys``, and ``rows``; the other
    buckets' files as they are. A copy on write of the touched buckets (an overwrite whose
    ``replaceWhere`` names them by their partition values, a file a bucket), where
    :func:`replace_rows` marks rows in deletion vectors and adds a file to each touched bucket: no
    file or deletion vector is left behind to compact, and with buckets of about a thousand rows it
    costs about what that MERGE does (``tests/benchmarks/README.md``, Run BE).

    Given the table's current snapshot (``snap``, read by the caller), the touched buckets' rows are
    read from their data files (:func:`lakehouse.spark.buckets.read_files`): the engine then
    replays the table's log once (for the write), not twice.

    Args:
        ddl: the table's columns but :data:`lakehouse.spark.buckets.COLUMN` (flat DDL).
        rows: the rows to add, with :data:`lakehouse.spark.buckets.COLUMN`; each in a bucket of
            ``named`` (the engine refuses a row outside them).
        keys: one column, ``key``: every key to take out of those buckets.
        key: the key column, the ids the table is in buckets of.
        named: the buckets written again, those of every key and row (a few of the table's).
        here: :func:`write_buckets`'s.
    """
    from lakehouse.spark import buckets

    cols = [*columns(ddl), buckets.COLUMN]
    stored = buckets.read_files(spark, ref.location, snap, named, ddl, key) if snap is not None else None
    if stored is None:
        stored = spark.read.format("delta").load(ref.location).where(buckets_where(named))
    kept = stored.join(keys.select(key).distinct(), key, "left_anti").select(*cols)
    write_buckets(kept.unionByName(rows.select(*cols)), ref, named, here=here)


def buckets_where(named: Iterable[int], *, quoted: bool = True) -> str:
    """The predicate naming buckets ``named`` of a table in buckets (:mod:`lakehouse.spark.buckets`)
    by their partition values, literals the engines prune files by; the column name in backticks
    (Spark SQL) unless not ``quoted`` (the ``deltalake`` package's predicates)."""
    from lakehouse.spark import buckets

    column = f"`{buckets.COLUMN}`" if quoted else buckets.COLUMN
    return f"{column} IN ({', '.join(str(int(n)) for n in sorted(named))})"


def write_buckets(rows: DataFrame, ref: TableRef, named: Sequence[int], *, here: bool = False) -> None:
    """Replace the buckets ``named`` of a table in buckets with ``rows`` (its columns, the bucket
    column among them, every row in one of those buckets: the engine refuses others), as one new
    Delta version: an overwrite whose ``replaceWhere`` names them (:func:`buckets_where`), a file a
    bucket; the table's other files stay as they are.

    ``here``: the rows are few (the caller knows): written so by the ``deltalake`` package from
    this process (the rows fetched from the engine as Arrow, an overwrite whose predicate names
    the buckets) when it can write the table (:func:`_package_write_arrow`), which on Apache Spark
    costs a fraction of the engine's statement (``tests/benchmarks/README.md``, Run BW)."""
    from lakehouse.spark import buckets

    if here and _package_write_arrow(
            lambda _: engine_arrow(rows), ref, "overwrite", partition_by=[buckets.COLUMN],
            predicate=buckets_where(named, quoted=False)):
        return

    # each bucket in one partition: a file a bucket
    (rows.repartition(len(named), buckets.COLUMN)
     .write.format("delta").mode("overwrite").option("replaceWhere", buckets_where(named)).save(ref.location))
    committed(ref)


LOG_CHECKPOINT_COMMITS = 100
"""Commits between the checkpoints :func:`checkpoint_log` writes of a table that keeps every commit
for time travel: a replay of at most this many JSON commits after the last one. On Sail a trickle's
write of a gold table cost 0.15 s on a fresh log and 0.84 s after 300 commits; 0.46-0.51 s with a
checkpoint (``python -m tests.benchmarks.log_age --shape rewrite``, docs/engines.md "A lake's age")."""
CHECKPOINT_HINT = "_last_checkpoint"
HINT_WINDOW = 5
"""Versions from a due checkpoint (:func:`checkpoint_due`) through which :func:`checkpoint_log` still
takes away a ``_last_checkpoint`` hint: one left by a run that died between writing the checkpoint and
taking its hint away goes at the table's next write through it, and the other writes send no
request for it (a run writes some 40 gold and change tables; on a store, 40 deletes a run)."""


def checkpoint_due(name: str, version: int) -> bool:
    """Whether :func:`checkpoint_log` checkpoints version ``version`` of the table ``name``: one
    version in :data:`LOG_CHECKPOINT_COMMITS`, at an offset taken from the name, so that the tables
    a run writes together (every gold table and change table of a schema) do not all come due in
    the same run (a checkpoint costs about half a second a gold table at 300 commits)."""
    return version > 0 and _since_due(name, version) == 0


def _since_due(name: str, version: int) -> int:
    """Versions from the last version at or before ``version`` at which :func:`checkpoint_due` says
    ``name`` comes due (that version itself when it is one)."""
    return (version + zlib.crc32(name.encode())) % LOG_CHECKPOINT_COMMITS


def checkpoint_log(ref: TableRef, version: int) -> bool:
    """Bound the Delta log a table's readers and writers replay, for a table that keeps every commit
    for time travel (the engines write no checkpoint of it: ``delta.checkpointInterval`` is
    :data:`lakehouse.spark.session.TIME_TRAVEL_CHECKPOINT_INTERVAL`): a gold table, or its change
    table, after each write of a gold run.

    At one version in :data:`LOG_CHECKPOINT_COMMITS` (:func:`checkpoint_due`; ``version``, the one
    the caller just committed), a classic checkpoint of it is written by the ``deltalake`` package, and its
    ``_last_checkpoint`` hint taken away: Sail cannot travel to a version before the checkpoint the
    hint names (LAKEHOUSE.md, engine caveats), and without it both engines, and
    :mod:`lakehouse.spark.deltalog`, find the last checkpoint at or before the version they read,
    so every version stays readable. The package removes no commit (``cleanup_metadata`` is not
    called). A hint an earlier run left, dying between the two, is taken away at the table's next
    write through here within :data:`HINT_WINDOW` versions of the checkpoint (a gold run writes a
    table once; only commits of other jobs, such as ``lakehouse optimize``, could pass it by): the
    hint is looked for only then, not at every write.

    Returns whether a checkpoint was written: not at other versions, nor of a table the package
    cannot read (a reader feature it lacks, such as deletion vectors in a table of an earlier
    release: that table replays its whole log, as before).
    """
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    from lakehouse.spark.tables import remove_file

    written = False
    if checkpoint_due(ref.name, version):
        try:
            DeltaTable(arrow_uri(ref.location), version=version).create_checkpoint()
            written = True
        except (DeltaError, OSError):
            written = False
    since = _since_due(ref.name, version)
    if since < HINT_WINDOW and version - since > 0:  # within the window of a checkpoint that may have left one
        remove_file(f"{ref.location.rstrip('/')}/_delta_log/{CHECKPOINT_HINT}")
    return written


DELETION_VECTORS = {"delta.enableDeletionVectors": "true"}
"""The table property of the tables whose rows runs replace by key (:func:`replace_rows`)."""
COMPACT_FILES = 64
"""Data files from which :func:`mergeable` says to write a table whole again (compact it): each run that
replaces rows adds a file or two; a partitioned table is allowed :data:`COMPACT_FILES_PER_PARTITION`
files a partition (a run adds one to each partition it touches) when that is more."""
COMPACT_FILES_PER_PARTITION = 4
COMPACT_DELETED_SHARE = 0.2
"""The share of a table's written rows that deletion vectors take out from which :func:`mergeable` says
to write it whole again: its readers skip those rows, at the cost of reading them."""


def files_allowed(snap: deltalog.Snapshot, floor: int) -> int:
    """The data files a table may have before it is written whole again: ``floor``, or
    :data:`COMPACT_FILES_PER_PARTITION` for each of its partitions (buckets) when that is more."""
    partitions = len({tuple(sorted(f.partition_values.items())) for f in snap.files})
    return max(floor, COMPACT_FILES_PER_PARTITION * partitions)


def mergeable(ref: TableRef, snap: deltalog.Snapshot | None = None, *, whole_rows: int | None = None,
              deletion_vectors: bool = True) -> bool:
    """Whether rows of the table are best replaced by :func:`replace_rows` (or, with
    ``deletion_vectors`` False, :func:`replace_buckets`, which writes none): it has deletion vectors
    (written since they were turned on; unless ``deletion_vectors`` is False), fewer files than :data:`COMPACT_FILES` (or
    :data:`COMPACT_FILES_PER_PARTITION` a partition), deletion vectors take out less than
    :data:`COMPACT_DELETED_SHARE` of its rows, and, given ``whole_rows``, its Delta log counts
    more live rows than that (a smaller table, or one whose rows the log does not count, is
    cheaper written whole than merged: :data:`lakehouse.spark.gold.WHOLE_TABLE_ROWS`,
    :data:`pipelines.silver.WHOLE_STATES_ROWS`); all read from its Delta log
    (:func:`lakehouse.spark.deltalog.snapshot`, unless the caller read it: ``snap``). Otherwise the
    caller writes it whole, with :data:`DELETION_VECTORS`, which compacts it."""
    from lakehouse.spark import deltalog

    if snap is None:
        try:
            snap = deltalog.snapshot(ref.location)
        except (OSError, deltalog.DeltaLogError):
            return False
    return ((not deletion_vectors or snap.properties.get("delta.enableDeletionVectors") == "true")
            and len(snap.files) < files_allowed(snap, COMPACT_FILES)
            and snap.deleted_share < COMPACT_DELETED_SHARE
            and (whole_rows is None or (snap.rows is not None and snap.rows > whole_rows)))


APPEND_FILES_LIMIT = 32
"""Data files from which :func:`upsert` writes a table again rather than append to it."""


def overwrite(source: DataFrame, ref: TableRef, partition_by: Sequence[str] = (), **options: str) -> None:
    """Replace the table's contents (and schema, and partitioning) with ``source``, as one new Delta
    version.

    Args:
        partition_by: the partition columns (none: the table is not partitioned).
        options: Delta writer options, such as table properties (``delta.checkpointInterval``).
    """
    writer = source.write.format("delta").mode("overwrite").option("overwriteSchema", "true").options(**options)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(ref.location)
    committed(ref)
    # neither engine sets a writer's table properties on a table that exists: set here when missing
    wanted = {k: v for k, v in options.items() if k.startswith("delta.")}
    if wanted:
        from lakehouse.spark import deltalog

        have = deltalog.metadata(ref.location).get("configuration") or {}
        missing = {k: v for k, v in wanted.items() if have.get(k) != v}
        if missing:
            set_properties(source.sparkSession, ref, missing)


def engine_arrow(frame: DataFrame) -> pa.Table:
    """``frame``'s rows in this process as an Arrow table (``toArrow``), its arrays copied afresh (a
    ``take`` of every row) for the ``deltalake`` package to write.

    Why the copy: Apache Spark's Arrow (Java Arrow) leaves an empty array's offsets buffer empty,
    as the format allows; the package (arrow-rs) read past it when it split such rows by partition
    and panicked ("range start index ... out of range for slice of length 0", apache/arrow-rs#1824),
    seen on a gold table's list column in a batch whose lists were all empty or null. The copy
    costs milliseconds at the few tens of thousands of rows written so."""
    import numpy as np
    import pyarrow as pa

    table = frame.toArrow()
    return table.take(pa.array(np.arange(table.num_rows, dtype=np.int64)))


def overwrite_here(source: DataFrame, ref: TableRef, partition_by: Sequence[str] = (), **options: str) -> bool:
    """Replace an existing table's contents with ``source``, as one new Delta version, written by the
    ``deltalake`` package from this process: the engine answers the query (:func:`engine_arrow`),
    and no engine statement writes. Meant for a table of at most a few tens of thousands of rows
    (the caller knows its rows): on Apache Spark an engine write of such a table was a statement
    of 1.8-4.7 s (its old snapshot, the job, the commit and the new snapshot), 0.16-0.60 s so
    (``tests/benchmarks/README.md``, Run BV).

    Returns:
        Whether it wrote. False, having written nothing, when the table does not exist, has other
        partition columns than ``partition_by`` or other ``delta.*`` table properties than
        ``options`` (the engine asked for no rows), other columns than the rows fetched, or the
        package refuses it (:func:`_package_write_arrow`): :func:`overwrite` then writes it.
    """
    return _package_write_arrow(lambda _: engine_arrow(source), ref, "overwrite", partition_by=partition_by,
                                properties=options)


def append_here(source: DataFrame, ref: TableRef, partition_by: Sequence[str] = ()) -> bool:
    """Append ``source``'s rows to an existing table, as one new Delta version, written by the
    ``deltalake`` package from this process (:func:`engine_arrow`): :func:`overwrite_here`'s
    append, for rows the caller knows are few.

    Returns:
        Whether it wrote: False, having written nothing, as :func:`overwrite_here` (other partition
        columns than ``partition_by``, other columns, a table the package refuses): :func:`append`
        then writes them.
    """
    return _package_write_arrow(lambda _: engine_arrow(source), ref, "append", partition_by=partition_by)


def rewrite_here(ref: TableRef, rewrite: Callable[[pa.Table], pa.Table | None], *, partition_by: Sequence[str] = (),
                 properties: Mapping[str, str] | None = None, predicate: str | None = None) -> bool:
    """A new version of an existing table computed in this process from its stored rows, read and
    written by the ``deltalake`` package: no engine statement. Meant for a change held here whose
    rows and those it replaces are a few tens of thousands at most (a small run's gold table: on
    Apache Spark each engine statement of such a run costs a second or more).

    Args:
        rewrite: the stored rows read (every row, or those ``predicate`` holds of, as the package
            reads them: its Arrow types) -> the rows written in their place (the table's
            columns), or None: not here.
        partition_by, properties: what the table must have (:func:`_package_write_arrow`).
        predicate: the rows read and replaced, a SQL predicate on the partition columns only (the
            files of the other partitions are neither read nor removed: every row written must
            be one it holds of); None: every row, an overwrite.

    Returns:
        Whether it wrote: False, having written nothing, when the package cannot write the table
        here (:func:`_package_write_arrow`: it does not exist, other columns, partitioning or
        properties, a feature the package lacks such as deletion vectors) or ``rewrite`` gives None.
    """
    def rows(target: DeltaTable) -> pa.Table | None:
        return rewrite(target.to_pyarrow_dataset(file_pruning_predicate=predicate).to_table())

    return _package_write_arrow(rows, ref, "overwrite", partition_by=partition_by, properties=properties,
                                predicate=predicate)


def set_properties(spark: SparkSession, ref: TableRef, properties: Mapping[str, str]) -> None:
    """Set table properties (``ALTER TABLE ... SET TBLPROPERTIES``, a commit of the table's
    metaData alone): by path on Apache Spark; Sail names no table by path in that statement, so
    through a catalog name of its own, dropped after (a table named with a location: its files
    stay)."""
    import uuid

    listed = ", ".join(f"'{k}' = '{v}'" for k, v in sorted(properties.items()))
    try:
        spark.sql(f"ALTER TABLE delta.`{ref.location}` SET TBLPROPERTIES ({listed})").collect()
    except Exception:  # noqa: BLE001 - the engine does not know the path as a table
        name = f"lakehouse_properties_{uuid.uuid4().hex}"
        location = ref.location.replace("'", "\\'")
        spark.sql(f"CREATE TABLE {name} USING delta LOCATION '{location}'")
        try:
            spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ({listed})").collect()
        finally:
            spark.sql(f"DROP TABLE IF EXISTS {name}")
    committed(ref)


def overwrite_rows(spark: SparkSession, rows: Sequence[tuple[Any, ...]], ddl: str, ref: TableRef) -> bool:
    """Replace a small table's contents with ``rows`` (tuples in the order of ``ddl``, flat), unless
    it holds exactly these rows already (as a multiset, read back here by :func:`read_rows`: meant
    for tables of a few thousand rows). A table whose columns differ from ``ddl`` is written.

    Why: a commit costs more than the read, most on Apache Spark (its jobs and the snapshot
    of the new version, a second or more there beside the other writes of a run, against the
    tenths of a second of a read), and a run that changes nothing in the table would otherwise
    leave a new Delta version of the same rows.

    Returns:
        Whether it wrote a new version.
    """
    stored = read_arrow(spark, ref)
    if holds_rows(None if stored is None else stored.column_names, arrow_rows(stored) if stored is not None else (),
                  rows, ddl):
        return False
    replace_with_rows(spark, rows, ddl, ref)
    return True


def replace_with_rows(spark: SparkSession, rows: Sequence[tuple[Any, ...]], ddl: str, ref: TableRef) -> None:
    """Replace a small table's contents (and schema) with ``rows`` (tuples in the order of ``ddl``,
    flat), as one new Delta version: written by the ``deltalake`` package when the table exists
    with the columns of ``ddl`` (:func:`append_rows` says why), by the engine otherwise (a new
    table, one of other columns, one the package refuses)."""
    if not _package_write(rows, ddl, ref, "overwrite"):
        overwrite(spark.createDataFrame(list(rows), ddl), ref)


PACKAGE_STAGED_ROWS = 200_000
"""Rows of a staged folder up to which :func:`replace_with_staged` writes them to their table by
the ``deltalake`` package from this process (its memory: about 100 bytes a row of ``silver.logs``,
whose 150,000 rows at 10,000,000 messages are the largest such table); past it, the engine."""


def replace_with_staged(staged: DataFrame, path: str, ddl: str, ref: TableRef) -> None:
    """Replace a table's contents with a staged folder's rows (``staged``, read from ``path`` by
    :func:`stage`; of schema ``ddl``, flat), as one new Delta version: by the ``deltalake`` package
    from this process when the table exists with the columns of ``ddl`` and the folder holds at
    most :data:`PACKAGE_STAGED_ROWS` rows (a write of a small table was a statement of 1-1.6 s on
    Apache Spark), by the engine otherwise."""
    from lakehouse.spark.groups import arrow_schema

    if not (staged_rows(path) <= PACKAGE_STAGED_ROWS
            and _package_write_arrow(read_staged(path, arrow_schema(ddl)), ref, "overwrite")):
        overwrite(staged, ref)


def holds_rows(stored_columns: Sequence[str] | None, stored_rows: Iterable[Sequence[Any]],
               rows: Iterable[tuple[Any, ...]], ddl: str) -> bool:
    """Whether a table as read (``stored_columns``: its columns, None when it does not exist;
    ``stored_rows``: its rows, in the order of ``ddl``) has exactly the columns of ``ddl`` and
    holds exactly ``rows`` (as a multiset: order aside, a repeated row counts):
    :func:`overwrite_rows` writes only when not."""
    from collections import Counter

    return (stored_columns is not None and list(stored_columns) == columns(ddl)
            and Counter(map(tuple, stored_rows)) == Counter(rows))


def columns(ddl: str) -> list[str]:
    """The column names of a flat DDL string such as ``"a STRING, b BIGINT"``."""
    return [part.split()[0] for part in ddl.split(", ")]


def typed(ddl: str) -> list[tuple[str, str]]:
    """(name, type) of each column of a flat DDL string (:func:`columns`), names without backquotes."""
    return [(name.strip("`"), kind) for name, kind in (part.split(None, 1) for part in ddl.split(", "))]


@functools.lru_cache(maxsize=64)
def _names(ddl: str) -> tuple[str, ...]:
    return tuple(columns(ddl))


def row(ddl: str, **values: Any) -> tuple[Any, ...]:
    """A row of a table of schema ``ddl`` (flat), its values given by column name (a column not
    given is null), in the order of the DDL: what ``createDataFrame(rows, ddl)`` takes.

    Raises:
        KeyError: a name that is not a column of ``ddl``.
    """
    names = _names(ddl)
    unknown = values.keys() - set(names)
    if unknown:
        raise KeyError(f"not columns of {ddl!r}: {', '.join(sorted(unknown))}")
    return tuple(values.get(name) for name in names)


STAGE_COMPRESSION = "uncompressed"
"""The parquet compression of staged folders: none. A staged folder is read back once or a few
times within the run that writes it, then dropped, and Sail compresses parquet with zstd at level 3
unless told otherwise (Apache Spark with snappy): compression that would save nothing lasting took
a third of the engine's CPU in the instance pass. A silver and gold rebuild of the 1M bench
history on Sail, three runs each: the instance pass 13.7-14.1 s against 14.8-15.5 (its engine's CPU
3.9-4.3 s against 5.8-6.5), the projection about 0.4 s less. zstd at level 1 cost about 0.3 s
more of the engine's CPU a step than none."""
STAGE_ROW_GROUP_ROWS = 65_536
"""Rows a row group of a staged parquet file holds at most. Sail's parquet writer (0.7.2) keeps a
file's current row group in memory, 1,048,576 rows unless told, one per partition a write keeps
open: bronze's 10,000,000 entries written into 10 folders (a group step's split) peaked at
6.4 GiB so, at 1.3 GiB with 65,536 rows (0.9 with 16,384, 1.8 with 131,072; times alike, 39-49 s).
Apache Spark closes row groups by bytes (``parquet.block.size``) and ignores the option."""


def stage(df: DataFrame, path: str, ddl: str | None = None) -> DataFrame:
    """Write ``df`` to a staging parquet folder (:data:`STAGE_COMPRESSION`) and read it back, so later
    steps do not recompute it.

    The schema is given on read: an empty result leaves no parquet file to infer it from. It is
    ``df``'s own (an analysis of its plan, a round trip that resolves every Delta table it reads:
    0.07 s on Sail for a gold table's change feed), or ``ddl`` when the caller knows it: a DDL
    string whose columns are ``df``'s, in order, with their types.
    """
    _write_staged(df, path)
    return df.sparkSession.read.schema(ddl if ddl is not None else df.schema).parquet(path)


def _write_staged(df: DataFrame, path: str, mode: str = "overwrite") -> None:
    staged_writer(df, mode).parquet(path)


def staged_writer(df: DataFrame, mode: str = "overwrite", row_group_rows: int = STAGE_ROW_GROUP_ROWS
                  ) -> DataFrameWriter:
    """``df``'s writer for a staging parquet folder: :data:`STAGE_COMPRESSION`, row groups of
    ``row_group_rows`` (fewer for a write that keeps many partitions open: Sail holds a row group
    for each); the caller adds what else it needs (``partitionBy``) and the path."""
    return df.write.mode(mode).option("compression", STAGE_COMPRESSION).option("maxRowGroupSize", row_group_rows)


def append_staged(df: DataFrame, path: str) -> None:
    """Add ``df``'s rows to a staging parquet folder (:func:`stage`'s form), for a result written a
    part at a time and read back once whole."""
    _write_staged(df, path, "append")


def read_staged(path: str, schema: pa.Schema) -> pa.Table:
    """A staged folder's rows (:func:`stage`) read with pyarrow, not the engine, as an Arrow table of
    ``schema`` (a local path or a URI pyarrow reads, as the engine wrote it): no rows give an empty
    table (Sail then writes no folder at all, Apache Spark one without data files)."""
    import pyarrow.dataset as ds

    try:
        return ds.dataset(arrow_uri(path), format="parquet", schema=schema).to_table()
    except FileNotFoundError:  # Sail's write of no rows
        return schema.empty_table()


def staged_rows(path: str) -> int:
    """The rows of a staged folder (:func:`stage`), from its parquet files' footers, not the engine:
    a local path or a URI pyarrow reads; no rows give 0 (Sail then writes no folder at all)."""
    import pyarrow.dataset as ds

    try:
        return int(ds.dataset(arrow_uri(path), format="parquet").count_rows())
    except FileNotFoundError:  # Sail's write of no rows
        return 0


def staged_parts(path: str, column: str) -> list[int]:
    """The values of the integer partition ``column`` of a staged folder written with
    ``partitionBy`` (a ``column=<value>`` folder each), those with rows only: a local path or a URI
    pyarrow reads. No rows give ``[]``."""
    import pyarrow.dataset as ds

    try:
        dataset = ds.dataset(arrow_uri(path), format="parquet", partitioning="hive")
    except FileNotFoundError:  # Sail's write of no rows
        return []
    return sorted({int(v) for v in dataset.to_table(columns=[column]).column(column).to_pylist()})


def staged_part_bytes(path: str, column: str) -> dict[int, int]:
    """The bytes of each value of the integer partition ``column`` of a staged folder written with
    ``partitionBy`` (:func:`staged_parts`' folders), from a listing of its parquet files: those
    with rows only. A local path or a URI pyarrow reads; no rows give ``{}``."""
    from pyarrow import fs

    from lakehouse.spark.tables import filesystem_of

    filesystem, root = filesystem_of(path)
    sizes: dict[int, int] = {}
    for info in filesystem.get_file_info(fs.FileSelector(root, recursive=True, allow_not_found=True)):
        if info.type != fs.FileType.File or not info.base_name.endswith(".parquet"):
            continue
        part = next((p for p in info.path.split("/") if p.startswith(f"{column}=")), None)
        if part is not None:
            value = int(part.split("=", 1)[1])
            sizes[value] = sizes.get(value, 0) + int(info.size or 0)
    return sizes


def staged_counts(path: str, column: str) -> dict[str, int]:
    """The rows of a staged folder (:func:`stage`) per value of a text ``column``, read from its
    parquet files with pyarrow, not the engine: on Apache Spark a ``groupBy().count()`` is a query
    of a few jobs, 0.3-0.5 s of them for each gold table's change feed of a run. A local path or a
    URI pyarrow reads (``file://``, ``s3://``, ...), as the engine wrote it; no rows give ``{}`` (Sail
    then writes no folder at all, Apache Spark one without data files); a null value counts under ``""``."""
    import pyarrow as pa

    values = read_staged(path, pa.schema([(column, pa.string())]))
    counts = values.column(column).combine_chunks().value_counts()
    return {value or "": int(count) for value, count in zip(counts.field("values").to_pylist(),
                                                             counts.field("counts").to_pylist(), strict=True)}

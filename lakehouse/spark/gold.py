"""Gold transforms: typed rows per schema version from the instance states silver folds.

SEMANTICS.md section 5. The functions here project a schema's live states
(:data:`lakehouse.spark.catalog.STATES_DDL`) to its **wide frame** (one column per distinct column
of :class:`lakehouse.core.projection.Projection`, typed exactly, by a ``mapInArrow`` function),
from which each gold table is a select.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa

from lakehouse.core import changes as core_changes
from lakehouse.core.gold import InstanceState, gold_column, read_writes
from lakehouse.core.lenses import FieldType
from lakehouse.core.projection import Projection
from lakehouse.core.schemas import SchemaVersions
from lakehouse.spark import buckets, catalog, delta, deltalog, workers
from lakehouse.spark.groups import arrow_schema, batch_of, spark_schema
from lakehouse.spark.session import TIME_TRAVEL_CHECKPOINT_INTERVAL
from lakehouse.spark.tables import TableRef, delta_version, register_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SPARK_TYPES: Final[Mapping[str, str]] = {
    "varchar": "STRING",
    "text": "STRING",
    "integer": "BIGINT",
    "float": "DOUBLE",
    "boolean": "BOOLEAN",
    "timestamp": "TIMESTAMP",
    "relation": "STRING",
    "blob": "BINARY",
}
"""The Spark SQL type of each base field type in a gold table (FORMAT.md section 3)."""


def spark_type_ddl(ft: FieldType) -> str:
    """The Spark SQL type of a gold column for a field type (FORMAT.md section 3).

    Args:
        ft: the field type.

    Returns:
        ``STRING``, ``BIGINT``, ``DOUBLE``, ``BOOLEAN``, ``TIMESTAMP``, ``BINARY``, or
        ``ARRAY<...>`` of one of those (relations are ``STRING``: 68 hex characters).
    """
    scalar = SPARK_TYPES[ft.base]
    return f"ARRAY<{scalar}>" if ft.is_array else scalar

CHANGE_META = ("_gold_run BIGINT, _change STRING, _cause STRING, _silver_run BIGINT, _watermark BIGINT, "
               "_delta_version BIGINT")
"""The leading columns of a change table (:func:`changes_ddl`): the gold run; ``insert``,
``update`` or ``delete``; why (:data:`CAUSES`); the silver run and bronze batch the run reflects;
the gold table's Delta version the run wrote."""
CAUSES = ("message", "cascade", "revert", "new_table", "rebuild")


def gold_ddl(sv: SchemaVersions, version: int) -> str:
    """The Spark DDL of ``gold.<name>_v<version>``: ids, the lens's fields typed, then the row metadata."""
    fields = ", ".join(f"`{gold_column(f.name)}` {spark_type_ddl(f.type)}" for f in sv.lens(version))
    return (f"instance_id STRING, author STRING{', ' if fields else ''}{fields}, "
            "_version BIGINT, _last_entry STRING, _updates BIGINT")


def changes_ddl(sv: SchemaVersions, version: int) -> str:
    """The Spark DDL of ``gold.<name>_v<version>_changes``: :data:`CHANGE_META`, then the columns of
    the gold table (:func:`gold_ddl`), a row of the table: the one added (``insert``), removed
    (``delete``), or, for an update, the one before (``update_preimage``) and the one after
    (``update_postimage``) (:func:`lakehouse.core.changes.images`)."""
    return f"{CHANGE_META}, {gold_ddl(sv, version)}"


def row_changes(before: DataFrame, after: DataFrame, columns: list[str]) -> DataFrame:
    """What changed between two versions of a gold table: ``_change``, then ``columns``, the row it
    shows (:func:`lakehouse.core.changes.images`): an ``insert`` the row after, a ``delete`` the row
    before, an update two rows, its ``update_preimage`` (before) and its ``update_postimage``
    (after). An instance whose row is equal (null-safe, every column) in both is left out.

    Args:
        before, after: rows of the table (its ``columns``), each instance at most once.
        columns: the gold table's columns, ``instance_id`` and ``author`` first (:func:`gold_ddl`).
    """
    from pyspark.sql import functions as F

    rest = [c.strip("`") for c in columns if c != "instance_id"]  # names, as delta.columns may quote them
    # The image after the change keeps its columns' names from ``after`` until the comparison is
    # done: an alias of a compared column above the comparison would make Apache Spark's constraint
    # propagation copy the comparison once per alias and per copy (2^n copies for n columns: 21
    # columns filled a 4 GB driver). Only the columns before the change are renamed, below it, and
    # each image column is picked (a CASE, not an alias) after the rows are exploded.
    old = before.select("instance_id", *(F.col(f"`{c}`").alias(f"_b_{n}") for n, c in enumerate(rest)),
                        F.lit(True).alias("_in_b"))
    new = after.select("instance_id", *(F.col(f"`{c}`") for c in rest), F.lit(True).alias("_in_a"))
    same = F.lit(True)
    for n, c in enumerate(rest):
        same = same & F.col(f"_b_{n}").eqNullSafe(F.col(f"`{c}`"))
    kinds = (F.when(F.col("_in_b").isNull(), F.array(F.lit(core_changes.INSERT)))
             .when(F.col("_in_a").isNull(), F.array(F.lit(core_changes.DELETE)))
             .when(~same, F.array(F.lit(core_changes.PREIMAGE), F.lit(core_changes.POSTIMAGE))))
    joined = (old.join(new, "instance_id", "full_outer").withColumn("_kinds", kinds).where(F.col("_kinds").isNotNull())
              .select("*", F.explode("_kinds").alias("_change")))
    shows_before = F.col("_change").isin(core_changes.DELETE, core_changes.PREIMAGE)
    image = [F.when(shows_before, F.col(f"_b_{n}")).otherwise(F.col(f"`{c}`")).alias(c) for n, c in enumerate(rest)]
    return joined.select("_change", "instance_id", *image)


WIDE_META = "instance_id STRING, author STRING, _version BIGINT, _last_entry STRING, _updates BIGINT"


def wide_column(index: int) -> str:
    """The name of distinct column ``index`` of a :class:`Projection` in a wide frame."""
    return f"_c{index}"


def wide_ddl(projection: Projection) -> str:
    """The DDL of a schema's wide frame: the ids and row metadata, then one column per distinct
    column of ``projection`` (``_c0``, ``_c1``, ...), typed as the field it shows."""
    cols = "".join(f", {wide_column(i)} {spark_type_ddl(f.type)}" for i, f in enumerate(projection.columns))
    return WIDE_META + cols


def wide_batch(projection: Projection, states: Iterable[InstanceState], schema: pa.Schema) -> pa.RecordBatch:
    """Live states' rows of the wide frame (``schema``, :func:`wide_ddl`), built a column at a time
    (:meth:`lakehouse.core.projection.Projection.columns_of`)."""
    states = list(states)
    meta = [[getattr(state, name) for state in states]
            for name in ("instance_id", "author", "version", "last_entry", "updates")]
    return batch_of([*meta, *projection.columns_of([state.writes for state in states])], schema)


def wide_table(projection: Projection, states: Iterable[InstanceState]) -> pa.Table:
    """The wide rows (:func:`wide_ddl`) of live instance states held here, built in this process:
    those :func:`project_wide` gives (:func:`wide_batch`)."""
    return pa.Table.from_batches([wide_batch(projection, states, arrow_schema(wide_ddl(projection)))])


def wide_local(spark: SparkSession, wide: pa.Table, projection: Projection) -> DataFrame:
    """The wide frame of a :func:`wide_table`, sent to the engine with the plans that use it.

    For a few rows this spares the engine a Python function call (see
    ``pipelines.gold.LOCAL_PROJECTION_LIMIT``).
    """
    return spark.createDataFrame(wide, spark_schema(wide_ddl(projection)))


def local_rows(wide: pa.Table, projection: Projection, version: int) -> dict[str, tuple[Any, ...]]:
    """The rows of ``gold.<name>_v<version>`` (:func:`table_rows`) of a :func:`wide_table`, held
    here: instance id -> the row's other columns, in the table's order (:func:`gold_ddl`)."""
    names = ["author", *(wide_column(i) for _, i in projection.fields(version)), "_version", "_last_entry", "_updates"]
    columns = [wide.column(name).to_pylist() for name in names]
    return dict(zip(wide.column("instance_id").to_pylist(), zip(*columns, strict=True), strict=True))


def local_changes(before: Mapping[str, Sequence[Any]], after: Mapping[str, Sequence[Any]],
                  cause: Callable[[str, str], str], meta: Mapping[str, Any], ddl: str) -> pa.Table:
    """The rows of a change table (``ddl``, :func:`changes_ddl`) for what changed between two sets
    of a gold table's rows held here (:func:`local_rows`; :func:`lakehouse.core.changes.row_changes`):
    the rows :func:`row_changes` gives in the engine, with no engine query.

    Args:
        cause: (change, instance id) -> the change's cause (:data:`CAUSES`).
        meta: the value of each other column of :data:`CHANGE_META` (``_gold_run``, ...).
    """
    schema = arrow_schema(ddl)
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    image = schema.names[schema.get_field_index("instance_id"):]
    for change, instance in core_changes.row_changes(before, after):
        for kind, shows_before in core_changes.images(change):
            for name, value in zip(image, (instance, *(before if shows_before else after)[instance]), strict=True):
                columns[name].append(value)
            columns["_change"].append(kind)
            columns["_cause"].append(cause(change, instance))
            for name, value in meta.items():
                columns[name].append(value)
    return pa.Table.from_batches([batch_of([columns[name] for name in schema.names], schema)])


def _project_batch(projection: Projection, schema: pa.Schema, batch: pa.RecordBatch) -> pa.RecordBatch:
    """The wide rows of one batch of live state rows (a task of a worker process), as
    :func:`wide_batch` gives them, read a column at a time: no row dict or state object per
    instance, and each state's writes as CBOR gives them back (:func:`read_writes`), projected
    a column at a time (:meth:`lakehouse.core.projection.Projection.columns_of`)."""
    meta = [batch.column(name).to_pylist() for name in ("instance_id", "author", "version", "last_entry", "updates")]
    writes = [read_writes(data) for data in batch.column("writes").to_pylist()]
    return batch_of([*meta, *projection.columns_of(writes)], schema)


def project_wide(states: DataFrame, projection: Projection) -> DataFrame:
    """The wide frame (:func:`wide_ddl`) of live state rows of one schema (``catalog.STATES_DDL``): each
    state decoded once, each distinct column computed once, in an Arrow map function (Arrow, not
    pandas, so that a nullable BIGINT column keeps every int64 exactly); in worker processes on
    the embedded engine (:func:`lakehouse.spark.workers.arrow_function`)."""
    ddl = wide_ddl(projection)
    task = partial(_project_batch, projection, arrow_schema(ddl))
    return states.mapInArrow(workers.arrow_function(task, "gold projection"), spark_schema(ddl))


def table_rows(wide: DataFrame, projection: Projection, version: int) -> DataFrame:
    """The rows of ``gold.<name>_v<version>`` (:func:`gold_ddl`, in its column order) picked from a
    wide frame: a projection in the engine, no Python."""
    from pyspark.sql import functions as F

    fields = [F.col(wide_column(i)).alias(gold_column(name)) for name, i in projection.fields(version)]
    return wide.select("instance_id", "author", *fields, "_version", "_last_entry", "_updates")


# -- writes: a gold table written whole, in its touched buckets, or travelled back to and replayed -----
STATS_COLUMNS = 2  # the leading columns a gold table keeps min/max statistics of: instance_id, author
WHOLE_TABLE_ROWS = 50_000
"""Live rows up to which :func:`rewrite_rows` writes a gold table whole rather than only the
touched instances' buckets: a small table's touched ids are in most of its buckets. Measured
against the MERGE that wrote those rows before (``python -m tests.benchmarks.merge_scan --rows N
--keys 100``, 2 cores, the MERGE that names its buckets against :func:`write_table`: at 20,000
rows Apache Spark 3.6 s against 2.6, Sail 0.14 s against 0.13; at 100,000 rows and 100
instances, which touched nearly every bucket of 4,096 rows, 5.9 s against 4.8 and 0.20 s against
0.17)."""


BUCKET_ROWS = 1_024
"""Rows a bucket of a gold table holds about when it is written whole (:func:`write_table`): a run
writes again the buckets of the instances it touches (:func:`rewrite_rows`), so this is what it
writes a touched instance, and a whole read opens a file per bucket. At 1,000,000 messages (a
109,392-row table, 33 touched ids) the buckets written again cost 0.18 s at 128 buckets against
0.33 s at 32 (4,096 rows, :data:`lakehouse.spark.buckets.BUCKET_ROWS`), and the MERGE with
deletion vectors used before 0.21 and 0.23 s (``tests/benchmarks/README.md``, Run BE)."""


def write_table(rows: DataFrame, ref: TableRef, live_rows: int, *, here_rows: int = 0) -> None:
    """Replace a gold table's contents with ``rows`` (``gold_ddl``), as one new Delta version, in
    buckets of its instance ids (:mod:`lakehouse.spark.buckets`: the partition column ``_bucket``,
    their number chosen from ``live_rows``, the rows written, :data:`BUCKET_ROWS` a bucket), a file
    per bucket.

    Table properties: a large ``delta.checkpointInterval`` (time travel on Sail, LAKEHOUSE.md), and
    min/max statistics on the id columns only
    (``delta.dataSkippingNumIndexedCols``). The embedded engine (pysail 0.7.2) reads a DOUBLE column
    whose values in a file are all equal from the file's statistics in the Delta log, parsed one
    unit in the last place off for some values (990232.5988427799 reads back as 990232.59884278);
    without statistics on the field columns every value is read from the data file, as written.

    A table that exists with at most ``here_rows`` live rows (:func:`lakehouse.spark.delta.here_rows_for`)
    is written by the ``deltalake`` package from this process (:func:`lakehouse.spark.delta.overwrite_here`).
    """
    count = buckets.count_for(live_rows, BUCKET_ROWS)
    if not (here_rows > 0 and live_rows <= here_rows
            and delta.overwrite_here(rows.select("*", buckets.column(count)), ref, [buckets.COLUMN], **PROPERTIES)):
        buckets.write(rows, ref, count, **PROPERTIES)


PROPERTIES: Final = {"delta.checkpointInterval": str(TIME_TRAVEL_CHECKPOINT_INTERVAL),
                     "delta.dataSkippingNumIndexedCols": str(STATS_COLUMNS)}
"""A gold table's properties (:func:`write_table` says why)."""


def table_arrow(wide: pa.Table, projection: Projection, version: int) -> pa.Table:
    """The rows of ``gold.<name>_v<version>`` (:func:`gold_ddl`, typed as it is) picked from a
    :func:`wide_table` held here: :func:`table_rows` in this process."""
    schema = arrow_schema(gold_ddl(projection.sv, version))
    names = ["instance_id", "author", *(wide_column(i) for _, i in projection.fields(version)), "_version",
             "_last_entry", "_updates"]
    return wide.select(names).rename_columns(schema.names).cast(schema)


@dataclass(frozen=True)
class HereRows:
    """A merge's change held in this process: every touched id of the table's schema (``ids``, hex),
    and the rows of the live ones (``rows``: :func:`table_arrow`). With them :func:`rewrite_rows`
    computes the rows it writes here, from the stored ones the ``deltalake`` package reads."""

    ids: frozenset[str]
    rows: pa.Table


def _with_buckets(rows: pa.Table, count: int) -> pa.Table | None:
    """``rows`` with :data:`lakehouse.spark.buckets.COLUMN` for a table of ``count`` buckets, computed
    here (:func:`lakehouse.spark.buckets.hash_of`); None when an id's hash is not certain here."""
    hashes = [None if i is None else buckets.hash_of(i) for i in rows.column("instance_id").to_pylist()]
    if any(h is None for h in hashes):
        return None
    values = pa.array([buckets.value_of(h, count) for h in hashes if h is not None], pa.int32())
    return rows.append_column(pa.field(buckets.COLUMN, pa.int32()), values)


def _rewritten_here(stored: pa.Table, here: HereRows, count: int) -> pa.Table | None:
    """The rows a table of ``count`` buckets holds after a merge computed here: the ``stored`` ones
    (those read: every row, or those of the touched buckets) but the touched ids', and the new ones,
    each with its bucket: a kept row's as stored when every stored one is of ``count`` buckets, else
    computed here (:func:`_with_buckets`, a Python call a row), as the new ones' are; None when a row
    cannot be so (a type that does not cast, an id whose hash is not certain here): the engine
    writes the table instead."""
    import pyarrow.compute as pc

    schema = here.rows.schema
    try:
        kept = stored.filter(pc.invert(pc.is_in(stored.column("instance_id"),
                                                value_set=pa.array(sorted(here.ids), pa.string()))))
        values = kept.column(buckets.COLUMN).cast(pa.int32()) if buckets.COLUMN in kept.column_names else None
        kept = kept.select(schema.names).cast(schema)
    except (pa.ArrowException, KeyError):
        return None
    fresh = _with_buckets(here.rows, count)
    if fresh is None:
        return None
    # the kept rows' buckets as stored, when stored for this count (every value in [count, 2 count));
    # else computed again, a Python call a row
    if values is not None and values.null_count == 0 and (
            not len(values) or (pc.min(values).as_py() >= count and pc.max(values).as_py() < 2 * count)):
        kept = kept.append_column(pa.field(buckets.COLUMN, pa.int32()), values)
    else:
        kept = _with_buckets(kept, count)
        if kept is None:
            return None
    return pa.concat_tables([kept, fresh])


@dataclass(frozen=True)
class Rewritten:
    """A gold table after :func:`rewrite_rows`: how it was written (``buckets``: the touched
    instances' buckets written again, or ``whole``), its live rows and its Delta version."""

    how: str
    rows: int
    delta_version: int


def rewrite_rows(spark: SparkSession, sv: SchemaVersions, version: int, ref: TableRef, rows: DataFrame,
                 touched: DataFrame, hashes: set[int] | None = None, *, here_rows: int = 0,
                 here: HereRows | None = None) -> Rewritten:
    """Bring one gold table up to date with the touched instances, as one new Delta version: its
    other rows as they are, and the live touched ones projected again (the others drop out).

    The buckets of the touched ids written again (:func:`lakehouse.spark.delta.replace_buckets`):
    only the files of those buckets are read and replaced, so that the cost follows the touched
    instances, not the table, and the table keeps a file a bucket. The table is written whole
    instead (in buckets chosen again for its rows) when it has at most :data:`WHOLE_TABLE_ROWS`
    live rows (cheaper), when the touched ids are in every bucket or their hashes are not known,
    when it has no buckets yet, when its rows outgrew its buckets (more than twice
    :data:`BUCKET_ROWS` a bucket: a table written by an earlier release, or one that grew), or
    when :func:`lakehouse.spark.delta.mergeable` says an earlier release's merges left it too many
    files or deleted rows.

    Its live rows after the write come from its Delta log (the snapshot read before the write,
    advanced by the new commit: :func:`lakehouse.spark.deltalog.advanced`), not from a count of
    the schema's states, which would read every one of them; from a count of the table when the
    log cannot be read so.

    Args:
        rows: the table's rows (``gold_ddl``) of the live touched instances of this schema.
        touched: (schema, instance_id) of every touched instance of this schema.
        hashes: the 16-bit hashes of the touched ids (:func:`lakehouse.spark.buckets.hash_column`);
            None: unknown, the table is written whole.
        here_rows: :func:`write_table`'s, when written whole; when its touched buckets are written
            again, they are written so (:func:`lakehouse.spark.delta.write_buckets`) when they
            hold about that many rows at most.
        here: the change held here (:class:`HereRows`: ``touched`` and ``rows`` as Arrow). When
            the rows written (the whole table, or the touched buckets) are at most
            :data:`lakehouse.spark.delta.HERE_ROWS`, they are then computed in this process from
            the stored ones the ``deltalake`` package reads, and the engine runs no statement for
            the table (:func:`lakehouse.spark.delta.rewrite_here`), on either engine: no row makes
            the engine's trip to this process (on Sail it costs what the engine's write does,
            ``tests/benchmarks/README.md``, Run BZ).
    """
    ddl = gold_ddl(sv, version)
    cols = delta.columns(ddl)
    # one read of the Delta log for its rows, its buckets and how to write it
    snap, count = buckets.layout(ref.location)
    before = snap.rows if snap is not None else None
    named = buckets.values_for(hashes, count) if hashes is not None and count is not None else None
    if (snap is not None and count is not None and named and len(named) < count and before is not None
            and 2 * count >= buckets.count_for(before, BUCKET_ROWS)
            and delta.mergeable(ref, snap, whole_rows=WHOLE_TABLE_ROWS, deletion_vectors=False)):
        # the rows of the named buckets, about: what the write fetches when it is done here
        held = before * len(named) // count
        small = here_rows > 0 and held <= here_rows
        if not (here is not None and held <= delta.HERE_ROWS and delta.rewrite_here(
                ref, partial(_rewritten_here, here=here, count=count), partition_by=[buckets.COLUMN],
                predicate=delta.buckets_where(named, quoted=False))):
            delta.replace_buckets(spark, ref, ddl, rows.select(*cols, buckets.column(count)),
                                  touched.select("instance_id"), "instance_id", named, snap, here=small)
        how = "buckets"
    else:
        how = "whole"
        # its buckets chosen for its rows before: the rows after differ by the touched ones at most
        if not (here is not None and before is not None and 0 < before <= delta.HERE_ROWS and delta.rewrite_here(
                ref, partial(_rewritten_here, here=here, count=buckets.count_for(before, BUCKET_ROWS)),
                partition_by=[buckets.COLUMN], properties=PROPERTIES)):
            kept = spark.read.format("delta").load(ref.location).join(touched.select("instance_id"), "instance_id",
                                                                      "left_anti")
            whole = kept.select(*cols).unionByName(rows.select(*cols))
            write_table(whole, ref, before if before is not None else whole.count(), here_rows=here_rows)
    after = None
    if snap is not None:
        with contextlib.suppress(OSError, deltalog.DeltaLogError):
            after = deltalog.advanced(snap, ref.location)
    if after is not None and after.rows is not None:
        return Rewritten(how, after.rows, after.version)
    return Rewritten(how, spark.read.format("delta").load(ref.location).count(), delta_version(ref.location))


def replay(projection: Projection, version: int, ref: TableRef, delta_version_: int, replayed: DataFrame,
           live: DataFrame, staging: str, live_rows: int, *, here_rows: int = 0) -> None:
    """Time travel plus replay (SEMANTICS.md section 6) for one surviving table of a reverted schema.

    The table as of ``delta_version_`` (written before the first abandoned version appeared) keeps
    the rows of the instances that are live now and not in ``replayed`` (the instance ids with a
    message changed since the silver run that Delta version reflected); the others live now are
    projected again from their states (which already leave out the abandoned writes and keep
    every delete). ``staging``: the run's staging folder; ``live_rows``: the rows of ``live``;
    ``here_rows``: :func:`write_table`'s.
    """
    then = live.sparkSession.read.format("delta").option("versionAsOf", delta_version_).load(ref.location)
    keep_ids = (live.select("instance_id").join(replayed, "instance_id", "left_anti")
                .join(then.select("instance_id"), "instance_id", "left_semi"))
    kept = then.join(keep_ids, "instance_id", "left_semi")
    fresh = table_rows(project_wide(live.join(keep_ids, "instance_id", "left_anti"), projection), projection,
                         version)
    result = delta.stage(kept.select(*delta.columns(gold_ddl(projection.sv, version))).unionByName(fresh),
                         f"{staging}/replay_{ref.name}")
    write_table(result, ref, live_rows, here_rows=here_rows)


def append_versions(spark: SparkSession, ref: TableRef, rows: list[tuple[Any, ...]]) -> None:
    """Append a run's rows to ``silver.gold_versions``: a marker row (no table: the run happened,
    with the silver run and registrations it reflects), then one row per current gold table."""
    delta.append_rows(spark, rows, catalog.GOLD_VERSIONS_DDL, ref)
    register_table(spark, ref)

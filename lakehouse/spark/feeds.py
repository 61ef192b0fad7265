"""The change feed's transforms (README, Concepts: change feed): appending to a change table, and
the causes of a merged table's changes.

Every gold table ``gold.<name>_v<n>`` has a change table ``gold.<name>_v<n>_changes``
(:func:`lakehouse.spark.catalog.changes_table`); the gold job decides what changed
(:func:`lakehouse.spark.gold.row_changes`) and these functions say why and append it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from typing import TYPE_CHECKING, Any

from lakehouse.core.changes import DELETE, INSERT, POSTIMAGE, PREIMAGE, UPDATE, change_cause, counted
from lakehouse.core.messages import SchemaId
from lakehouse.core.registry import fed_table_name
from lakehouse.core.revert import SchemaPlan, TableAction
from lakehouse.core.schemas import SchemaVersions
from lakehouse.spark import catalog, delta
from lakehouse.spark import gold as G
from lakehouse.spark.cascades import Cascaded
from lakehouse.spark.catalog import changes_table
from lakehouse.spark.groups import arrow_schema, spark_schema
from lakehouse.spark.tables import TableRef, delta_version, is_delta_table, lake_tables

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class FeedRun:
    """What the change feeds of one gold run share.

    Attributes:
        gold_run, silver_run, watermark: the run, and the silver run and bronze batch it reflects.
        names, plans, schemas: the gold name, the run's plan and the versions of each schema.
        base: gold table -> the Delta version its feed's rows replay to (:func:`feed_start`).
        known: the last run's ``silver.gold_versions`` rows, by table name.
        staging: the run's staging folder.
    """

    spark: SparkSession
    root: str
    gold_run: int
    silver_run: int
    watermark: int
    names: Mapping[SchemaId, str]
    plans: Mapping[SchemaId, SchemaPlan]
    schemas: Mapping[SchemaId, SchemaVersions]
    base: Mapping[str, int]
    known: Mapping[str, Any]
    staging: str


def append_changes(changes: DataFrame, feed: TableRef) -> None:
    """Append rows to a change table, created with :data:`catalog.CHANGES_PROPERTIES` when missing."""
    if is_delta_table(feed.location):
        delta.append(changes, feed)
    else:
        delta.overwrite(changes, feed, **catalog.CHANGES_PROPERTIES)


LOCAL_CHANGES_ROWS = 100_000
"""Rows of a run's changes of one gold table up to which they are appended to its change table by
the ``deltalake`` package from this process (:func:`append_changes_here`), not by the engine: a
trickle's few changes were an engine statement per table, 0.5-1 s each on Apache Spark. Past
it, the engine appends them from its staged folder, so that this process does not hold them."""


def append_changes_here(spark: SparkSession, rows: pa.Table, ddl: str, feed: TableRef) -> None:
    """:func:`append_changes` of rows held by this process (an Arrow table of schema ``ddl``): by
    the ``deltalake`` package to a change table that exists (:func:`lakehouse.spark.delta.append_arrow`);
    a new one is created by the engine."""
    if is_delta_table(feed.location):
        delta.append_arrow(spark, rows, ddl, feed)
    else:
        append_changes(spark.createDataFrame(rows, spark_schema(ddl)), feed)


def cause_flags(cascaded: Cascaded, staging: str, *, touched_only: bool) -> DataFrame:
    """What :func:`causes` looks up, once for every merged table of the run, a row per instance id:
    the schemas of the instance logs whose changed messages name it (``_changed_in``: a message of
    another schema's log counts only for that schema's tables, as the message is not its own), and
    whether a cascade removes it (``_removed``) and its cascade verdict flipped (``_flipped``), each
    True or null; staged. Of the touched instances only when ``touched_only`` (the removed ones
    are many: 150,000 at 1,000,000 messages). One join per table instead of three: on Apache Spark
    each was a broadcast job of its own."""
    from pyspark.sql import functions as F

    touched = cascaded.touched.select("instance_id")

    def flagged(ids: DataFrame, schema: Any, removed: bool, flipped: bool) -> DataFrame:
        if touched_only:
            ids = ids.join(touched, "instance_id", "left_semi")
        return ids.select("instance_id", schema.cast("string").alias("schema"),
                          F.lit(removed or None).cast("boolean").alias("_removed"),
                          F.lit(flipped or None).cast("boolean").alias("_flipped"))

    rows = [flagged(cascaded.changed, F.col("schema"), False, False),
            flagged(cascaded.removed_of_touched if touched_only else cascaded.removed, F.lit(None), True, False)]
    if cascaded.flipped is not None:
        rows.append(flagged(cascaded.flipped, F.lit(None), False, True))
    flags = reduce(lambda a, b: a.unionByName(b), rows).groupBy("instance_id").agg(
        F.collect_set("schema").alias("_changed_in"), F.max("_removed").alias("_removed"),
        F.max("_flipped").alias("_flipped"))
    return delta.stage(flags, f"{staging}/cause_flags",
                       "instance_id STRING, _changed_in ARRAY<STRING>, _removed BOOLEAN, _flipped BOOLEAN")


def causes(changes: DataFrame, flags: DataFrame, sid: SchemaId) -> tuple[DataFrame, Any]:
    """The cause of each change of a merged table of schema ``sid`` (:func:`table_changes`): a delete of an
    instance a cascade removes is ``cascade``; a change of an instance with a changed message of
    its schema's logs ``message``; of one only a cascade's flip touched, ``cascade``. ``flags``:
    :func:`cause_flags`."""
    from pyspark.sql import functions as F

    cause = (F.when((F.col("_change") == "delete") & F.col("_removed").isNotNull(), "cascade")
             .when(F.array_contains("_changed_in", str(sid)), "message")
             .when(F.col("_flipped").isNotNull(), "cascade"))
    return changes.join(flags, "instance_id", "left"), cause.otherwise("message")


Rows = Mapping[str, tuple[Any, ...]]
"""A gold table's rows held here: instance id -> the row's other columns (:func:`lakehouse.spark.gold.local_rows`)."""


def change_tables(root: str) -> list[tuple[str, TableRef]]:
    """The lake's change tables (Delta tables of the gold layer named ``<table>_changes``), each with
    the name of the gold table it is the feed of."""
    return [(name, feed) for feed in lake_tables(root)
            if feed.layer == "gold" and (name := fed_table_name(feed.name)) is not None]


def feed_start(spark: SparkSession, root: str, finished: int) -> dict[str, int]:
    """Where each gold table's change feed stands, after taking out what an unfinished run left:
    its index rows, and the rows it appended to a change table (a change table whose Delta version
    is past the one the index recorded is checked for rows of later runs).

    Args:
        finished: the last gold run that finished.

    Returns:
        Gold table -> the Delta version of it its feed's rows replay to (from ``silver.gold_changes``).
    """
    from pyspark.sql import functions as F

    ref = catalog.GOLD_CHANGES.at(root)
    indexed = delta.read_arrow(spark, ref)  # the index, small: read by this process
    rows = [] if indexed is None else indexed.select(["gold_run", "table_name", "changes_version", "delta_version"]
                                                   ).to_pylist()
    if any(r["gold_run"] > finished for r in rows):
        index = spark.read.format("delta").load(ref.location)
        delta.overwrite(index.where(F.col("gold_run") <= finished), ref)
        rows = [r for r in rows if r["gold_run"] <= finished]
    latest = {r["table_name"]: r for r in sorted(rows, key=lambda r: r["gold_run"])}
    for name, feed in change_tables(root):
        recorded = int(latest[name]["changes_version"]) if name in latest else -1
        if delta_version(feed.location) > recorded:
            stored = spark.read.format("delta").load(feed.location)
            if stored.where(F.col("_gold_run") > finished).limit(1).count():
                delta.overwrite(stored.where(F.col("_gold_run") <= finished), feed, **catalog.CHANGES_PROPERTIES)
    if indexed is not None and "preimages" not in indexed.column_names:
        add_preimages(spark, root, {name: int(r["gold_run"]) for name, r in latest.items()})
    return {name: int(r["delta_version"]) for name, r in latest.items()}


def lacks_preimages(root: str) -> bool:
    """Whether the lake's change feeds are of the shape before pre-images (:func:`add_preimages`):
    its feed index (``silver.gold_changes``) has no ``preimages`` column. Read from the index's
    Delta log, not by the engine: a gold run with nothing to do asks it too."""
    from lakehouse.spark import deltalog

    location = catalog.GOLD_CHANGES.at(root).location
    if not is_delta_table(location):
        return False
    return "preimages" not in {field["name"] for field in deltalog.snapshot(location).schema["fields"]}


def add_preimages(spark: SparkSession, root: str, last_runs: Mapping[str, int]) -> list[str]:
    """Bring the change feeds of a lake from before pre-images to today's shape
    (:func:`lakehouse.core.changes.images`): each ``update`` row becomes the pair of the row before
    (``update_preimage``) and the row after (``update_postimage``), and each ``delete``, which
    held only the ids, the row it removed. The row before is the instance's row of the feed's
    previous change of it (the feed replayed gives the table as every run left it, note 22), found
    by a window over the feed in the engine: no table is read at an older version, which a vacuum
    may have taken. Then the index (``silver.gold_changes``) gains its ``preimages`` column and the
    change tables' new versions, last: a run that dies before it does this again, and a change
    table already in the new shape is left as it is. Once per lake, from :func:`feed_start`, after
    it took out what an unfinished run left.

    Args:
        last_runs: gold table -> the last gold run its index rows name.

    Returns:
        The gold tables whose change tables were written again.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    meta = set(delta.columns(G.CHANGE_META))
    rewritten: dict[str, int] = {}
    for name, feed in change_tables(root):
        stored = spark.read.format("delta").load(feed.location)
        # a delete of the old shape has no row: every gold row has its _version
        gone_bare = (F.col("_change") == DELETE) & F.col("_version").isNull()
        if not stored.where((F.col("_change") == UPDATE) | gone_bare).limit(1).count():
            continue
        image = [c for c in stored.columns if c not in meta and c not in ("_change", "instance_id")]
        # at most one row per instance and run: the one before it is its previous change's
        previous = F.lag(F.struct(*(F.col(f"`{c}`").alias(f"_p{n}") for n, c in enumerate(image)))).over(
            Window.partitionBy("instance_id").orderBy("_gold_run"))
        kinds = F.when(F.col("_change") == UPDATE, F.array(F.lit(PREIMAGE), F.lit(POSTIMAGE))).otherwise(
            F.array(F.col("_change")))
        paired = stored.select("*", previous.alias("_previous"), gone_bare.alias("_bare")).select(
            "*", F.explode(kinds).alias("_kind"))
        shows_previous = (F.col("_kind") == PREIMAGE) | F.col("_bare")
        columns = {c: F.when(shows_previous, F.col("_previous").getField(f"_p{n}")).otherwise(F.col(f"`{c}`"))
                   for n, c in enumerate(image)}
        columns["_change"] = F.col("_kind")
        delta.overwrite(paired.select(*(columns[c].alias(c) if c in columns else F.col(f"`{c}`")
                                        for c in stored.columns)), feed, **catalog.CHANGES_PROPERTIES)
        rewritten[name] = delta_version(feed.location)
    ref = catalog.GOLD_CHANGES.at(root)
    index = delta.read(spark, ref)
    if index is not None:
        # the latest row of a table written again names the change table's new version: a run
        # looks for an unfinished run's rows only in a change table past the version it names
        version = F.col("changes_version")
        for name, written in rewritten.items():
            if name in last_runs:
                version = F.when((F.col("table_name") == name) & (F.col("gold_run") == last_runs[name]),
                                 F.lit(written).cast("bigint")).otherwise(version)
        delta.overwrite(index.withColumn("changes_version", version).withColumn("preimages", F.lit(True)), ref)
    return sorted(rewritten)


def at_last(run: FeedRun, name: str) -> bool:
    """Whether the change feed of gold table ``name`` reached the table's version as the last run
    left it: a merge's feed then compares only the touched instances (:func:`table_changes`)."""
    prior, base = run.known.get(name), run.base.get(name)
    return prior is not None and base is not None and int(prior["delta_version"]) == base


def table_changes(run: FeedRun, cascaded: Cascaded, sid: SchemaId, version: int, way: TableAction, written: int,
                  written_at: datetime, rows_written: int, fresh: DataFrame | None = None, then: DataFrame | None = None,
                  cause_flags: DataFrame | None = None, here: tuple[Rows, Rows] | None = None,
                  flags_here: Mapping[str, tuple[Any, bool, bool]] | None = None) -> tuple[Any, ...]:
    """The change feed of one gold table the run wrote (its Delta version ``written``): the rows whose
    instances it inserted, updated or deleted since the version its feed reached
    (:func:`lakehouse.spark.gold.row_changes`), appended to its change table with their cause:

    - ``new_table``: the feed starts (a new version, a new registration): every row is an insert;
    - ``rebuild``: the table was written whole (``--rebuild``, a schema back from a wait);
    - ``revert``: a revert of the schema's versions (every change of its tables in that run);
    - ``cascade``: removed by a cascade, or back because the instance a cascade came from is;
    - ``message``: the instance's own create, update or delete.

    Only the touched instances are compared when the feed reached the table's last version (a
    ``merge`` or ``replay``), and a merge's rows after the change are those it wrote (``fresh``);
    a table written whole is never read back either: its rows are those it was written from
    (``fresh`` too).
    Their rows before it are those of the table as it was, or, when the merge follows the silver
    run the table reflects, their states then projected (``then``, :func:`pipelines.gold._states_before`): the
    table is not read, and the feed's cost grows with the changes only. A merge's causes are looked
    up in ``cause_flags`` (:func:`cause_flags`).

    When the rows before and after a merge were both projected here (``here``: each instance's
    row, :func:`lakehouse.spark.gold.local_rows`), they are compared here too, and its causes
    looked up in ``flags_here`` (the same flags, held here): the change table gets its rows with
    no engine query but the append (on Apache Spark, the staging of the changes was a few jobs a
    table).

    Args:
        written: the table's Delta version this run wrote.
        rows_written: the table's rows in that version (every one an insert when its feed starts).

    Returns:
        The table's ``silver.gold_changes`` row.
    """
    from pyspark.sql import functions as F

    spark, root = run.spark, run.root
    silver_run, watermark = run.silver_run, run.watermark
    name, plan = run.names[sid], run.plans[sid]
    ref = catalog.gold_table(root, name, version)
    cols = delta.columns(G.gold_ddl(run.schemas[sid], version))
    base = run.base.get(ref.name)
    feed = changes_table(root, ref.name)
    # the change table's columns that every row of this run has (CHANGE_META, but the change and cause)
    meta = {"_gold_run": run.gold_run, "_silver_run": silver_run, "_watermark": watermark, "_delta_version": written}
    stamp = [F.lit(value).cast("bigint").alias(name) for name, value in meta.items()]

    def as_of(delta_version_: int) -> DataFrame:  # read only where needed: a read resolves the table's log
        return spark.read.format("delta").option("versionAsOf", delta_version_).load(ref.location).select(*cols)

    # the table as this run left it: a whole write's own rows (a read of the new version resolves its
    # Delta log again, on Apache Spark a few jobs a table), else read
    def written_rows() -> DataFrame:
        return fresh.select(*cols) if way == "write" and fresh is not None else as_of(written)

    def index_row(rows: Mapping[str, int]) -> tuple[Any, ...]:  # rows: the change table's rows of each _change
        changes_version = delta_version(feed.location) if is_delta_table(feed.location) else -1
        if changes_version >= 0 and any(rows.values()):  # appended to: its log checkpointed now and then
            delta.checkpoint_log(feed, changes_version)
        counts: Counter[str] = Counter()
        for kind, n in rows.items():
            counts[counted(kind) or ""] += n
        return delta.row(catalog.GOLD_CHANGES_DDL, gold_run=run.gold_run, silver_run=silver_run, watermark=watermark,
                         schema=str(sid), name=name, version=version, table_name=ref.name, delta_version=written,
                         changes_version=changes_version, inserts=counts[INSERT], updates=counts[UPDATE],
                         deletes=counts[DELETE], written_at=written_at, preimages=True)

    if base is None:  # every row an insert: the table's rows (as the write gave them), copied in one job
        rows = rows_written
        if rows:
            append_changes(written_rows().select(stamp[0], F.lit("insert").alias("_change"),
                                                  F.lit("new_table").alias("_cause"), *stamp[1:], *cols), feed)
        return index_row({"insert": rows})
    if way != "write" and at_last(run, ref.name):
        if here is not None and (plan.mode == "revert" or flags_here is not None):
            return index_row(_changes_here(run, sid, version, feed, here, flags_here, meta))
        ids = cascaded.touched.where(F.col("schema") == str(sid)).select("instance_id")
        before = then.select(*cols) if then is not None else as_of(base).join(ids, "instance_id", "left_semi")
        after = fresh.select(*cols) if fresh is not None else as_of(written).join(ids, "instance_id", "left_semi")
    else:
        before, after = as_of(base), written_rows()
    changes = G.row_changes(before, after, cols)
    if way == "write":
        cause = F.lit("rebuild")
    elif plan.mode == "revert":
        cause = F.lit("revert")
    else:
        assert cause_flags is not None, "a merge's change feed has its causes looked up"
        changes, cause = causes(changes, cause_flags, sid)
    path = f"{run.staging}/changes_{ref.name}"
    ddl = G.changes_ddl(run.schemas[sid], version)
    staged = delta.stage(changes.select(stamp[0], "_change", cause.alias("_cause"), *stamp[1:], *cols), path, ddl)
    counts = delta.staged_counts(path, "_change")
    if counts and sum(counts.values()) <= LOCAL_CHANGES_ROWS:
        append_changes_here(run.spark, delta.read_staged(path, arrow_schema(ddl)), ddl, feed)
    elif counts:
        append_changes(staged, feed)
    return index_row(counts)


def _changes_here(run: FeedRun, sid: SchemaId, version: int, feed: TableRef, here: tuple[Rows, Rows],
                  flags: Mapping[str, tuple[Any, bool, bool]] | None, meta: Mapping[str, int]) -> dict[str, int]:
    """:func:`table_changes`'s changes of a merge whose rows before and after it are held here (``here``),
    compared here and appended to ``feed``, their causes looked up in ``flags`` (those of
    :func:`cause_flags`; None in a revert, whose changes are all ``revert``), with ``meta``'s
    values in the other columns of :data:`lakehouse.spark.gold.CHANGE_META`.

    Returns:
        The number of changes of each kind.
    """
    revert = run.plans[sid].mode == "revert"
    assert revert or flags is not None, "a merge's changes have their causes looked up"

    def cause(change: str, instance: str) -> str:
        if revert or flags is None:
            return "revert"
        changed_in, removed, flipped = flags.get(instance, (None, False, False))
        return change_cause(change, str(sid), changed_in, removed, flipped)

    ddl = G.changes_ddl(run.schemas[sid], version)
    rows = G.local_changes(*here, cause, meta, ddl)
    if rows.num_rows:
        append_changes_here(run.spark, rows, ddl, feed)
    return dict(Counter(rows.column("_change").to_pylist()))

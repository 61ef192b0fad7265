"""What the jobs read from the lake, in one place: the silver tables and the gold part's state
tables, registrations, the schemas silver knows (and those bronze holds), which registered schemas
wait, and instance states folded again from stored messages (LAKEHOUSE.md, Layers).

The jobs in ``pipelines/`` read the lake through these functions, never through another job;
what they decide from it is pure and lives in ``lakehouse/core`` (:mod:`lakehouse.core.registry`,
:mod:`lakehouse.core.schemalog`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lakehouse.core.messages import SchemaId, SchemaMeta
from lakehouse.core.registry import waits_of
from lakehouse.core.revert import SchemaPlan
from lakehouse.core.schemalog import build_schemas
from lakehouse.core.schemas import SchemaVersions
from lakehouse.core.statuses import SchemaState, decode
from lakehouse.spark import catalog, delta
from lakehouse.spark import silver as S
from lakehouse.spark.groups import map_group_batches
from lakehouse.spark.tables import TableRef

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def silver_tables(lake_root: str) -> dict[str, TableRef]:
    """The silver tables of a lake, by name."""
    return {t.name: t.at(lake_root) for t in catalog.SILVER}


def load_schemas(spark: SparkSession, lake_root: str) -> dict[SchemaId, SchemaVersions]:
    """Every schema log's versions, from the accepted entries of schema logs (:func:`schema_entries`)."""
    return build_schemas(schema_entries(spark, lake_root))


def schema_entries(spark: SparkSession, lake_root: str) -> list[Any]:
    """The accepted entries of every schema log as the last silver run left them
    (``catalog.SCHEMA_ENTRIES_DDL`` rows; none before the first materialize): read from
    ``silver.schema_entries``, or, in a lake from before that table, found in silver and bronze
    (:func:`found_schema_entries`)."""
    stored = delta.read_rows(spark, silver_tables(lake_root)["schema_entries"])
    if stored is not None:
        return stored
    found = found_schema_entries(spark, lake_root)
    return [] if found is None else found.collect()


def found_schema_entries(spark: SparkSession, lake_root: str) -> DataFrame | None:
    """The accepted entries of every schema log (``catalog.SCHEMA_ENTRIES_DDL``) found among every
    message of ``silver.messages`` and their payloads in bronze: what ``silver.schema_entries``
    holds, read the long way (None before the first materialize)."""
    from pyspark.sql import functions as F

    T = silver_tables(lake_root)
    logs, messages = delta.read(spark, T["logs"]), delta.read(spark, T["messages"])
    bronze = delta.read(spark, catalog.ENTRIES.at(lake_root))
    if logs is None or messages is None or bronze is None:
        return None
    purpose = logs.where(F.col("purpose") == "schema").select("author", "log_id")
    accepted = messages.where(F.col("log_status") == "accepted").select(*S.ACCEPTED_COLUMNS).join(purpose, ["author", "log_id"])
    return S.with_payloads(accepted, bronze, "end_of_feed").select(*delta.columns(catalog.SCHEMA_ENTRIES_DDL))


def refolded_states(spark: SparkSession, lake_root: str, logs: DataFrame,
                    schemas: Mapping[SchemaId, SchemaState], instances: DataFrame | None = None) -> DataFrame:
    """The instance states that instance logs would hold, their accepted messages judged again
    against ``schemas`` and folded as the instance pass does (:func:`lakehouse.spark.silver.instance_pass`):
    what a schema message not yet published would make of them (``lakehouse schema check`` asks
    it of a revert). Read only.

    Args:
        logs: ``author, log_id`` of instance logs (more columns are ignored).
        schemas: what the judgment knows of the logs' schema logs (:class:`SchemaState`).
        instances: ``author, log_id, instance``: when given, only the messages of ``logs`` that
            name one of these instances are judged (the others' states do not depend on them:
            :func:`pipelines.silver._affected`), and only these instances' states are given.

    Returns:
        ``STATES_DDL`` rows of every instance an applied message judged writes (deleted ones
        included, flagged).
    """
    from pyspark.sql import functions as F

    T, key = silver_tables(lake_root), ["author", "log_id"]
    purpose = (spark.read.format("delta").load(T["logs"].location).join(logs.select(*key), key, "left_semi")
               .select(*key, F.col("schema").alias("purpose_schema"), F.col("first_seq").alias("purpose_seq")))
    accepted = spark.read.format("delta").load(T["messages"].location).where(F.col("log_status") == "accepted")
    if instances is not None:
        accepted = accepted.join(instances.select(*key, "instance"), [*key, "instance"], "left_semi")
    accepted = accepted.select(*S.ACCEPTED_COLUMNS).join(purpose, key)
    bronze = spark.read.format("delta").load(catalog.ENTRIES.at(lake_root).location)
    rows = S.messages_to_judge(S.with_payloads(accepted, bronze))
    judged = map_group_batches(rows, key, S.instance_pass(schemas), S.INSTANCE_PASS_DDL, what="instance pass (check)")
    return judged.where(F.col("instance_id").isNotNull() & F.col("replaced").isNull()).select(
        *delta.columns(catalog.STATES_DDL))


def gold_state_tables(lake_root: str) -> dict[str, TableRef]:
    """The silver tables in which the gold part keeps its state, by name (they are not gold tables):
    registrations, the Delta version of every gold table per run, the instances removed by
    cascades, and the change feed's index (``gold_changes``)."""
    return {t.name: t.at(lake_root) for t in catalog.GOLD_STATE}


def registrations(spark: SparkSession, lake_root: str) -> dict[SchemaId, str]:
    """Registered schema -> its gold name."""
    rows = delta.read_rows(spark, gold_state_tables(lake_root)["registrations"])
    return {} if rows is None else {SchemaId.parse(r["schema"]): r["name"] for r in rows}


def known_schemas(spark: SparkSession, root: str) -> dict[SchemaId, str]:
    """Schema id -> meta name of every schema log the lake holds: those silver judged (their
    current meta name), and logs in bronze whose seq 1 entry is a ``schema-meta``."""
    from pyspark.sql import functions as F

    known = {sid: sv.meta.name for sid, sv in load_schemas(spark, root).items()}
    bronze = delta.read(spark, catalog.ENTRIES.at(root))
    if bronze is not None:
        for r in bronze.where(F.col("seq_num") == 1).select("author", "log_id", "payload").collect():
            sid = SchemaId(bytes.fromhex(r["author"]), int(r["log_id"]))
            if sid not in known:
                message = decode(bytes(r["payload"])).message
                if isinstance(message, SchemaMeta):
                    known[sid] = message.name
    return known


def waiting_schemas(spark: SparkSession, root: str) -> dict[SchemaId, tuple[str, str]]:
    """Every registered schema that waits, with its gold name and what it waits for (``make status``)."""
    names = registrations(spark, root)
    return {sid: (names[sid], why) for sid, why in waits_of(load_schemas(spark, root), names).items()}


_NAMING_KINDS = ("create", "update", "delete")
_CHANGED_DDL = "schema STRING, instance_id STRING, author STRING, changed_run BIGINT, unnamed BOOLEAN"
_READ_COLUMNS = "author STRING, log_id BIGINT, run_id BIGINT, kind STRING, instance STRING, entry_hash STRING"


def _changed_rows_here(spark: SparkSession, T: Mapping[str, TableRef], since: Mapping[str, int], lowest: int,
                       here_rows: int) -> DataFrame | None:
    """:func:`changed_instances`' changed rows (``_CHANGED_DDL``, distinct) found by this process:
    the data files of ``silver.messages`` whose statistics say they hold a row of a run after
    ``lowest`` read by pyarrow (those rows kept), ``silver.logs`` by the ``deltalake`` package
    (:func:`lakehouse.spark.delta.read_arrow`), the rows handed to the engine as a frame of their
    own. On Apache Spark the engine's query and its staged folder were a statement of 0.9-1.0 s a
    run (``tests/benchmarks/README.md``, Run BY).

    Args:
        since: schema -> the silver run after which its messages count as changed (-1: all).

    Returns:
        The rows, or None when the engine must find them: a file of the table has a deletion
        vector or no statistics of ``run_id``, its Delta log is not read here, or the files to
        read hold more than ``here_rows`` rows.
    """
    import pyarrow as pa
    import pyarrow.dataset as ds

    from lakehouse.spark import deltalog
    from lakehouse.spark.groups import arrow_schema, spark_schema
    from lakehouse.spark.tables import filesystem_of

    location = T["messages"].location
    try:
        chosen = deltalog.snapshot(location).files_past("run_id", lowest)
    except (OSError, LookupError, deltalog.DeltaLogError):
        return None
    if sum(f.records or 0 for f in chosen) > here_rows:
        return None
    logs = delta.read_arrow(spark, T["logs"])
    if logs is None:
        return None
    instance_logs = {(a, n): s for a, n, p, s in zip(*(logs.column(c).to_pylist() for c in
                                                       ("author", "log_id", "purpose", "schema")), strict=True)
                     if p == "instance" and s in since}
    found: set[tuple[Any, ...]] = set()
    if chosen:
        filesystem, root = filesystem_of(location)  # one file system for the table's files
        paths = [deltalog.data_path(root, f) for f in chosen]
        read = ds.dataset(paths, schema=arrow_schema(_READ_COLUMNS), format="parquet", filesystem=filesystem
                          ).to_table(filter=ds.field("run_id") > lowest)
        for author, log_id, run_id, kind, instance, entry_hash in zip(
                *(c.to_pylist() for c in read.columns), strict=True):
            if kind is None:  # an entry that lost its place in its log
                found.add((None, None, author, run_id, True))
            elif kind in _NAMING_KINDS:
                schema = instance_logs.get((author, log_id))
                if schema is not None and run_id > since[schema]:
                    found.add((schema, instance if instance is not None else entry_hash, None, None, False))
    schema = arrow_schema(_CHANGED_DDL)
    rows = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in sorted(found, key=str)], schema)
    return spark.createDataFrame(rows, spark_schema(_CHANGED_DDL))


def changed_instances(spark: SparkSession, root: str, plans: dict[SchemaId, SchemaPlan],
                      shown: Mapping[str, str] | None = None, *, staged: str, here_rows: int = 0
                      ) -> tuple[DataFrame, bool]:
    """(schema, instance_id) of the instances whose state may have changed: every instance of a
    "full" schema, and for the others those with a message whose silver row changed after the
    plan's silver run.

    A changed row with no message kind (its entry lost its place in the log, e.g. to a fork, and is
    no longer decoded; its log may have lost its purpose with it) no longer names the instance it
    wrote: every instance of its author is taken as changed (only an instance's author writes to
    it), those with a state and those a gold table of ``shown`` holds (whose state silver may
    have dropped with their log's purpose).

    ``silver.messages`` is read once: the changed rows of both kinds are staged in ``staged`` (a
    folder of the run's staging folder), and both sets are read from there (each read of the table
    replays its Delta log, which lists a file a bucket and more: 0.3-0.5 s on Sail at 10,000,000
    messages however few rows the query keeps).

    With ``here_rows`` (Apache Spark's :func:`lakehouse.spark.delta.here_rows_for`), the changed
    rows are found by this process when the files of ``silver.messages`` that can hold them hold
    at most that many rows (:func:`_changed_rows_here`): no engine query, no staged folder.

    Args:
        shown: schema -> the location of one of its gold tables as the last run left it.
        staged: the folder the changed rows are staged in, and ``<staged>_lost`` the instances
            when an entry lost its place (both written over).
        here_rows: rows of ``silver.messages``' files up to which they are read here (0: never).

    Returns:
        (the changed instances, whether an entry lost its place: an instance whose state silver
        dropped with it may then be named by no table, as a deleted one that cascades started from).
    """
    from pyspark.sql import functions as F

    T = silver_tables(root)
    since = {str(sid): -1 if plan.mode == "full" else plan.since for sid, plan in plans.items()}
    thresholds = spark.createDataFrame(list(since.items()), "schema STRING, threshold BIGINT")
    lowest = min(since.values(), default=0)
    rows = _changed_rows_here(spark, T, since, lowest, here_rows) if here_rows > 0 and lowest >= 0 else None
    if rows is None:
        logs = spark.read.format("delta").load(T["logs"].location)
        messages = spark.read.format("delta").load(T["messages"].location)
        instance_logs = (logs.where(F.col("purpose") == "instance")
                         .select("author", "log_id", "schema").join(thresholds, "schema"))
        # the lowest threshold as a literal too: the engine skips the files of earlier runs by their
        # statistics (a run's rows are in files of their own), which it cannot from the join's column
        # (at 1,000,000 messages: every stored message read, 0.39 s, for a run's hundred)
        changed = (messages.where(F.col("run_id") > lowest).drop("schema")
                   .join(instance_logs, ["author", "log_id"], "left"))
        named = F.col("kind").isin(*_NAMING_KINDS) & (F.col("run_id") > F.col("threshold"))
        # few or none unnamed: entries that lost their place in a log since the earliest plan's silver run
        unnamed = F.col("kind").isNull()
        rows = delta.stage(
            changed.where(named | unnamed).select(
                F.when(~unnamed, F.col("schema")).alias("schema"),
                F.when(~unnamed, F.coalesce("instance", "entry_hash")).alias("instance_id"),
                F.when(unnamed, F.col("author")).alias("author"), F.when(unnamed, F.col("run_id")).alias("changed_run"),
                unnamed.alias("unnamed")).distinct(), staged, _CHANGED_DDL)
    # distinct as staged: a named row's author and run are null
    found = rows.where(~F.col("unnamed")).select("schema", "instance_id")
    lost = rows.where(F.col("unnamed")).groupBy("author").agg(F.max("changed_run").alias("changed_run")).collect()
    if lost:
        authors = spark.createDataFrame([tuple(r) for r in lost], "author STRING, changed_run BIGINT")
        ids = spark.read.format("delta").load(T["instance_states"].location).select("schema", "instance_id", "author")
        for schema, location in sorted((shown or {}).items()):
            ids = ids.unionByName(spark.read.format("delta").load(location)
                                  .select(F.lit(schema).alias("schema"), "instance_id", "author"))
        # staged too (beside the rows): read by several steps, and it reads every state
        found = delta.stage(found.unionByName(ids.join(thresholds, "schema").join(authors, "author")
                                              .where(F.col("changed_run") > F.col("threshold"))
                                              .select("schema", "instance_id")).distinct(),
                            f"{staged}_lost", "schema STRING, instance_id STRING")
    return found, bool(lost)

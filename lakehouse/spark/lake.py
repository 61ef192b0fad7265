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


def changed_instances(spark: SparkSession, root: str, plans: dict[SchemaId, SchemaPlan],
                      shown: Mapping[str, str] | None = None, *, staged: str) -> tuple[DataFrame, bool]:
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

    Args:
        shown: schema -> the location of one of its gold tables as the last run left it.
        staged: the folder the changed rows are staged in, and ``<staged>_lost`` the instances
            when an entry lost its place (both written over).

    Returns:
        (the changed instances, whether an entry lost its place: an instance whose state silver
        dropped with it may then be named by no table, as a deleted one that cascades started from).
    """
    from pyspark.sql import functions as F

    T = silver_tables(root)
    logs = spark.read.format("delta").load(T["logs"].location)
    messages = spark.read.format("delta").load(T["messages"].location)
    thresholds = spark.createDataFrame(
        [(str(sid), -1 if plan.mode == "full" else plan.since) for sid, plan in plans.items()],
        "schema STRING, threshold BIGINT")
    instance_logs = (logs.where(F.col("purpose") == "instance")
                     .select("author", "log_id", "schema").join(thresholds, "schema"))
    lowest = min((-1 if plan.mode == "full" else plan.since for plan in plans.values()), default=0)
    # the lowest threshold as a literal too: the engine skips the files of earlier runs by their
    # statistics (a run's rows are in files of their own), which it cannot from the join's column
    # (at 1,000,000 messages: every stored message read, 0.39 s, for a run's hundred)
    changed = (messages.where(F.col("run_id") > lowest).drop("schema")
               .join(instance_logs, ["author", "log_id"], "left"))
    named = F.col("kind").isin("create", "update", "delete") & (F.col("run_id") > F.col("threshold"))
    # few or none unnamed: entries that lost their place in a log since the earliest plan's silver run
    unnamed = F.col("kind").isNull()
    rows = delta.stage(
        changed.where(named | unnamed).select(
            F.when(~unnamed, F.col("schema")).alias("schema"),
            F.when(~unnamed, F.coalesce("instance", "entry_hash")).alias("instance_id"),
            F.when(unnamed, F.col("author")).alias("author"), F.when(unnamed, F.col("run_id")).alias("changed_run"),
            unnamed.alias("unnamed")).distinct(), staged,
        "schema STRING, instance_id STRING, author STRING, changed_run BIGINT, unnamed BOOLEAN")
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

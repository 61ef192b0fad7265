"""``make materialize``, gold part, and ``make register``: registered schemas -> ``gold.<name>_v<n>``.

SEMANTICS.md section 5, notes 14-16 of ``docs/semantics-notes.md``. Steps:

1. the registered schemas (``silver.registrations``) that silver has seen and whose relations
   point only at registered schemas; the others wait, with what for;
2. the applied create/update/delete messages of their instance logs, folded per instance into a
   state (:func:`lakehouse.spark.gold.fold_states`): writes with their versions, ``_version``,
   ``_last_entry``, ``_updates``, deleted or not, and the ids its cascading relations point at;
3. cascades on the driver (:func:`lakehouse.core.gold.removed_by_cascade`);
4. for each schema and each version with a table, the live instances projected through the lens
   into a typed Delta table ``gold/<name>_v<n>`` (tables are created with a large
   ``delta.checkpointInterval`` so that every version stays readable by time travel on Sail);
5. one row per table in ``silver.gold_versions``: the Delta version written by this run, with the
   silver run and bronze batch it reflects (``lakehouse history``, time travel); the catalog then
   names ``gold.<name>_v<n>`` and ``gold.<name>`` (the latest version with a table), and no
   longer names the tables of abandoned versions.

The gold tables are recomputed from silver on every run that has something new (new silver run or
new registrations); a run with nothing new writes nothing.
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from lakehouse.core.gold import removed_by_cascade
from lakehouse.core.messages import SchemaId
from lakehouse.core.schemas import SchemaVersions
from lakehouse.errors import LakehouseError
from lakehouse.spark import delta
from lakehouse.spark import gold as G
from lakehouse.spark.session import TIME_TRAVEL_CHECKPOINT_INTERVAL
from lakehouse.spark.tables import TableRef, delta_version, register_gold, register_table, table
from pipelines.silver import load_schemas, silver_tables

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.config import Settings

NAME_RULE = re.compile(r"^[a-z][a-z0-9_]{0,47}$")


class RegistrationError(LakehouseError):
    """A ``register`` request that cannot be taken (unknown schema, bad or taken name)."""

    code = "registration"


@dataclass
class GoldTable:
    """One gold table written (or kept) by a run."""

    name: str
    schema: str
    version: int
    rows: int
    delta_version: int


@dataclass
class GoldSummary:
    """What one gold run did."""

    run_id: int = 0
    registered: int = 0
    waiting: dict[str, str] = field(default_factory=dict)
    unregistered: dict[str, str] = field(default_factory=dict)
    tables: list[GoldTable] = field(default_factory=list)
    instances: int = 0
    deleted: int = 0
    cascaded: int = 0
    up_to_date: bool = False
    seconds: float = 0.0


def gold_tables(lake_root: str) -> dict[str, TableRef]:
    """The silver tables that the gold part keeps, by name."""
    return {n: table(lake_root, "silver", n) for n in ("registrations", "gold_versions")}


def registrations(spark: SparkSession, lake_root: str) -> dict[SchemaId, str]:
    """Registered schema -> its gold name."""
    df = delta.read(spark, gold_tables(lake_root)["registrations"])
    return {} if df is None else {SchemaId.parse(r["schema"]): r["name"] for r in df.collect()}


def register_schema(spark: SparkSession, settings: Settings, schema: str, name: str | None) -> tuple[str, str, bool]:
    """Register a schema for gold (``make register SCHEMA=<author hex>:<log_id> NAME=<name>``).

    Args:
        schema: the schema id ``<author hex>:<log_id>``.
        name: the gold name (``gold.<name>``); defaults to the schema's meta name.

    Returns:
        (schema id, name, whether it was new).

    Raises:
        RegistrationError: the id does not parse, silver has not seen the schema, the name is not
            an identifier, or another schema has the name (the message says to give its own NAME).
    """
    root = str(settings.lake_root)
    try:
        sid = SchemaId.parse(schema)
    except LakehouseError as exc:
        raise RegistrationError(f"SCHEMA must be <author hex>:<log_id>: {exc}", code="bad_schema_id") from None
    schemas = load_schemas(spark, root)
    if sid not in schemas:
        raise RegistrationError(
            f"no schema {sid} in silver yet: publish it, then run `make ingest materialize` before registering",
            code="unknown_schema")
    chosen = name or schemas[sid].meta.name
    if not NAME_RULE.match(chosen):
        raise RegistrationError(
            f"{chosen!r} is not a gold table name (lowercase letters, digits and '_', starting with a letter); "
            "give one with NAME=<name>", code="bad_name")
    current = registrations(spark, root)
    if sid in current:
        if current[sid] == chosen:
            return str(sid), chosen, False
        raise RegistrationError(f"schema {sid} is already registered as {current[sid]!r}", code="registered")
    for other, other_name in current.items():
        if other_name == chosen:
            raise RegistrationError(
                f"the name {chosen!r} is taken by schema {other}; give this schema its own name with NAME=<name>",
                code="name_taken")
    ref = gold_tables(root)["registrations"]
    spark.createDataFrame([(str(sid), chosen, datetime.now(timezone.utc))], G.REGISTRATIONS_DDL) \
        .write.format("delta").mode("append").save(ref.location)
    register_table(spark, ref)
    return str(sid), chosen, True


def _waiting(schemas: dict[SchemaId, SchemaVersions], names: dict[SchemaId, str]) -> dict[SchemaId, str]:
    """Registered schemas that cannot have gold tables yet, with what they wait for.

    A schema waits until silver has seen it and every schema its relations point at (in any
    version) is registered and not waiting itself: cascades need the deletes of the targets.
    """
    waiting: dict[SchemaId, str] = {}
    targets: dict[SchemaId, set[SchemaId]] = {}
    for sid in names:
        if sid not in schemas:
            waiting[sid] = "not seen in silver yet"
            continue
        targets[sid] = {f.schema for v in schemas[sid] for f in v.lens if f.schema is not None}
        missing = sorted(f"{names.get(t, schemas[t].meta.name if t in schemas else '?')} ({t})"
                         for t in targets[sid] if t not in names)
        if missing:
            waiting[sid] = "relations to unregistered schema(s) " + ", ".join(missing)
    changed = True
    while changed:
        changed = False
        for sid, pointed in targets.items():
            blocked = sorted(names[t] for t in pointed if t in waiting and t != sid)
            if sid not in waiting and blocked:
                waiting[sid] = "relations to waiting schema(s) " + ", ".join(blocked)
                changed = True
    return waiting


def _applied_instance_messages(spark: SparkSession, root: str, active: list[SchemaId]) -> DataFrame:
    from pyspark.sql import functions as F

    T = silver_tables(root)
    logs = spark.read.format("delta").load(T["logs"].location)
    messages = spark.read.format("delta").load(T["messages"].location)
    bronze = spark.read.format("delta").load(table(root, "bronze", "entries").location)
    instance_logs = (logs.where((F.col("purpose") == "instance") & F.col("schema").isin([str(s) for s in active]))
                     .select("author", "log_id", F.col("schema").alias("log_schema")))
    applied = messages.where((F.col("status") == "applied") & F.col("kind").isin("create", "update", "delete"))
    return (applied.join(instance_logs, ["author", "log_id"])
            .join(bronze.select("entry_hash", "payload"), "entry_hash")
            .select(F.col("log_schema").alias("schema"), "author", "instance", "seq_num", "entry_hash", "payload"))


def _stamp(spark: SparkSession, root: str) -> tuple[int, int, int]:
    """(silver run, bronze watermark, registrations): what a gold run reflects."""
    from pyspark.sql import functions as F

    runs = delta.read(spark, silver_tables(root)["runs"])
    run, watermark = (runs.agg(F.max("run_id"), F.max("watermark")).collect()[0] if runs is not None else (0, 0))
    regs = delta.read(spark, gold_tables(root)["registrations"])
    return int(run or 0), int(watermark or 0), 0 if regs is None else regs.count()


def run_gold(spark: SparkSession, settings: Settings, *, rebuild: bool = False) -> GoldSummary:
    """Bring the gold tables up to date with silver and the registrations (module docstring).

    Returns:
        The summary: tables written with their rows and Delta versions, schemas waiting, schemas
        seen but not registered.
    """
    from pyspark.sql import functions as F

    started = time.monotonic()
    root = str(settings.lake_root)
    summary = GoldSummary()
    silver_run, watermark, n_regs = _stamp(spark, root)
    versions_ref = gold_tables(root)["gold_versions"]
    previous = delta.read(spark, versions_ref)
    last = previous.agg(F.max("gold_run"), F.max_by("silver_run", "gold_run"),
                        F.max_by("registrations", "gold_run")).collect()[0] if previous is not None else None
    summary.run_id = (last[0] or 0) + 1 if last else 1
    schemas = load_schemas(spark, root)
    names = registrations(spark, root)
    summary.registered = len(names)
    summary.unregistered = {str(s): sv.meta.name for s, sv in schemas.items() if s not in names}
    waiting = _waiting(schemas, names)
    summary.waiting = {str(s): why for s, why in waiting.items()}
    if last and not rebuild and (last[1], last[2]) == (silver_run, n_regs):
        register_gold(spark, root)
        summary.up_to_date = True
        summary.seconds = time.monotonic() - started
        return summary
    active = sorted((s for s in names if s not in waiting), key=str)
    if not active:
        register_gold(spark, root)
        summary.seconds = time.monotonic() - started
        return summary

    active_schemas = {s: schemas[s] for s in active}
    messages = _applied_instance_messages(spark, root, active)
    states = messages.groupBy("schema", "instance").applyInPandas(G.fold_states(active_schemas), G.STATES_DDL)
    staging = f"{root}/_staging/gold/states"
    states.write.mode("overwrite").parquet(staging)
    states = spark.read.schema(G.STATES_DDL).parquet(staging)

    deleted = [r["instance_id"] for r in states.where(F.col("deleted")).select("instance_id").collect()]
    edges = {r["instance_id"]: list(r["targets"])
             for r in states.where(F.size("targets") > 0).select("instance_id", "targets").collect()}
    removed = removed_by_cascade(deleted, edges)
    summary.deleted, summary.cascaded = len(deleted), len(removed)
    live = states.where(~F.col("deleted"))
    if removed:
        gone = spark.createDataFrame([(i,) for i in sorted(removed)], "instance_id STRING")
        live = live.join(gone, "instance_id", "left_anti")

    written_at = datetime.now(timezone.utc)
    version_rows = []
    for sid in active:
        sv, name = schemas[sid], names[sid]
        of_schema = live.where(F.col("schema") == str(sid))
        gold_versions = sv.gold_versions()
        for version in gold_versions:
            ref = table(root, "gold", f"{name}_v{version}")
            rows = of_schema.mapInArrow(G.project_rows(sv, version), G.gold_ddl(sv, version))
            (rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
             .option("delta.checkpointInterval", str(TIME_TRAVEL_CHECKPOINT_INTERVAL)).save(ref.location))
            count = spark.read.format("delta").load(ref.location).count()
            written = GoldTable(ref.name, str(sid), version, count, delta_version(ref.location))
            summary.tables.append(written)
            is_current = version == gold_versions[-1]
            version_rows.append((summary.run_id, silver_run, watermark, n_regs, str(sid), name, version, ref.name,
                                 ref.location, written.delta_version, is_current, count, written_at))
        summary.instances += of_schema.count()
    spark.createDataFrame(version_rows, G.GOLD_VERSIONS_DDL).write.format("delta").mode("append") \
        .save(versions_ref.location)
    register_table(spark, versions_ref)
    register_gold(spark, root)
    shutil.rmtree(f"{root}/_staging/gold", ignore_errors=True)
    summary.seconds = time.monotonic() - started
    return summary


def current_gold_rows(spark: SparkSession, lake_root: str) -> list[Any]:
    """The ``silver.gold_versions`` rows of the latest gold run (one per gold table), by name and version."""
    from pyspark.sql import functions as F

    df = delta.read(spark, gold_tables(lake_root)["gold_versions"])
    if df is None:
        return []
    last = df.agg(F.max("gold_run")).collect()[0][0]
    return df.where(F.col("gold_run") == last).orderBy("name", "version").collect()

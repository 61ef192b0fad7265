"""``make status``: what the lake holds, per layer and status (LAKEHOUSE.md, Who uses it and how)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from lakehouse.core.logs import BlockedLog, blocked_logs
from lakehouse.spark import catalog, delta
from lakehouse.spark.lake import waiting_schemas
from lakehouse.spark.tables import current_gold_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.config import Settings


@dataclass(frozen=True)
class LakeStatus:
    """What ``make status`` reports of a lake (the CLI renders it).

    Attributes:
        root: the lake root.
        rows: table (``layer.name``) -> its rows, None when it does not exist yet.
        bronze_batch: the latest ingest batch (None: nothing ingested).
        silver_watermark: the latest batch silver has materialized (0: none).
        rejected: (reason code, lines) of ``bronze.rejected``, most first.
        statuses: (status, reason code or "", entries) of ``silver.messages``.
        pending: (what they wait for, entries), most first, at most 20.
        blocked: the logs waiting behind a rejected entry (:func:`lakehouse.core.logs.blocked_logs`).
        forks: (author, log_id, fork seq, accepted seq) of the forked logs.
        schemas: (schema id, name, versions, current version, abandoned versions), by name.
        waiting: (gold name, schema id, what it waits for) of the registered schemas that wait.
        gold: (table, current name or None, schema version, rows, Delta version) of the current gold tables.
        to_compact: (table, data files, files with a deletion vector, what ``make optimize`` would
            write again) of the tables it would compact (:func:`lakehouse.spark.compaction.plan`).
    """

    root: str
    rows: dict[str, int | None]
    bronze_batch: int | None = None
    silver_watermark: int = 0
    rejected: list[tuple[str, int]] = field(default_factory=list)
    statuses: list[tuple[str, str, int]] = field(default_factory=list)
    pending: list[tuple[str, int]] = field(default_factory=list)
    blocked: list[BlockedLog] = field(default_factory=list)
    forks: list[tuple[str, int, int, int]] = field(default_factory=list)
    schemas: list[tuple[str, str, int, int, int]] = field(default_factory=list)
    waiting: list[tuple[str, str, str]] = field(default_factory=list)
    gold: list[tuple[str, str | None, int, int, int]] = field(default_factory=list)
    to_compact: list[tuple[str, int, int, str]] = field(default_factory=list)


COUNTED = (catalog.ENTRIES, catalog.REJECTED, catalog.MESSAGES, catalog.LOGS, catalog.SCHEMA_VERSIONS,
           catalog.SCHEMA_FIELDS)
"""The tables whose rows ``status`` counts."""


def lake_status(spark: SparkSession, settings: Settings) -> LakeStatus:
    """Read what the lake holds: rows per table, statuses, waiting, blocked and forked logs,
    schemas, waiting schemas, gold tables. Reads only."""
    from pyspark.sql import functions as F

    root = settings.lake_root
    counted = {t.qualified: delta.read(spark, t.at(root)) for t in COUNTED}
    status = LakeStatus(root, {name: df.count() if df is not None else None for name, df in counted.items()})
    bronze, rejected = counted[catalog.ENTRIES.qualified], counted[catalog.REJECTED.qualified]
    messages, logs = counted[catalog.MESSAGES.qualified], counted[catalog.LOGS.qualified]
    if bronze is not None:
        top = (delta.integer_max(spark, catalog.ENTRIES.at(root), "batch_id") or (None,))[0]
        done = (delta.integer_max(spark, catalog.RUNS.at(root), "watermark") or (None,))[0]
        status = replace(status, bronze_batch=int(top or 0), silver_watermark=int(done or 0))
    if rejected is not None:
        status.rejected.extend((r["reason_code"], int(r["count"]))
                               for r in rejected.groupBy("reason_code").count().orderBy(F.desc("count")).collect())
    if messages is not None:
        status.statuses.extend(
            (r["status"], r["reason_code"] or "", int(r["count"]))
            for r in messages.groupBy("status", "reason_code").count().orderBy("status", F.desc("count")).collect())
        waiting = messages.where(F.col("status") == "pending").groupBy("waits_for").count().orderBy(F.desc("count"))
        status.pending.extend((r["waits_for"], int(r["count"])) for r in waiting.limit(20).collect())
    if logs is not None and rejected is not None:
        status.blocked.extend(_blocked(logs, rejected))
    if logs is not None:
        status.forks.extend((r["author"], int(r["log_id"]), int(r["fork_seq"]), int(r["accepted_seq"]))
                            for r in logs.where(F.col("fork_seq").isNotNull()).collect())
    versions = counted[catalog.SCHEMA_VERSIONS.qualified]
    if versions is not None:
        agg = versions.groupBy("schema").agg(
            F.max_by("name", "version").alias("name"), F.count("*").alias("versions"),
            F.max("version").alias("current"),
            F.sum(F.when(F.col("abandoned"), 1).otherwise(0)).alias("abandoned"))
        status.schemas.extend((r["schema"], r["name"], int(r["versions"]), int(r["current"]), int(r["abandoned"]))
                              for r in agg.orderBy("name").collect())
    held = waiting_schemas(spark, root)
    status.waiting.extend((name, str(sid), why) for sid, (name, why) in sorted(held.items(), key=lambda kv: kv[1][0]))
    status.gold.extend((r["table_name"], r["name"] if r["is_current"] else None, int(r["version"]), int(r["rows"]),
                        int(r["delta_version"])) for r in current_gold_rows(spark, root))
    status.to_compact.extend(_to_compact(root))
    return status


def _to_compact(root: str) -> list[tuple[str, int, int, str]]:
    """What ``make optimize`` would write again, table by table, read from each table's Delta log
    (no engine query; a log this reader does not read is left out)."""
    from lakehouse.spark import compaction
    from lakehouse.spark.tables import lake_tables

    return [(planned.table, planned.files, planned.deletion_vectors, planned.describe())
            for _, planned in compaction.plans(lake_tables(root)) if planned.how is not None]


def _blocked(logs: DataFrame, rejected: DataFrame) -> list[BlockedLog]:
    """The logs with pending entries whose awaited entry was rejected at ingest (:func:`blocked_logs`);
    only the rejected lines of the waiting logs' authors are read into this process."""
    from pyspark.sql import functions as F

    waiting = [(r["author"], int(r["log_id"]), int(r["seq"])) for r in logs.where(F.col("pending") > 0).select(
        "author", "log_id", (F.coalesce(F.col("accepted_seq"), F.lit(0)) + 1).alias("seq")).collect()]
    if not waiting:
        return []
    authors = sorted({author for author, _, _ in waiting})
    lines = (rejected.where(F.col("entry").isNotNull()
                            & F.lower(F.hex(F.col("entry")).substr(3, 64)).isin(authors))
             .orderBy("batch_id", "source_file", "source_line")
             .select("entry", "reason_code", "source_file", "source_line").collect())
    return blocked_logs(waiting, ((bytes(r["entry"]), r["reason_code"], r["source_file"], r["source_line"])
                                  for r in lines))

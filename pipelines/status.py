"""``make status``: what the lake holds, per layer and status (LAKEHOUSE.md, Who uses it and how)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from lakehouse.core.logs import BlockedLog, blocked_logs
from lakehouse.spark import catalog, delta
from lakehouse.spark.lake import waiting_schemas
from lakehouse.spark.tables import current_gold_rows, table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.config import Settings


def lake_status(spark: SparkSession, settings: Settings) -> list[RenderableType]:
    """Rich tables describing the lake: layers, statuses, waiting and forked logs, schemas, waiting schemas,
    gold tables."""
    from pyspark.sql import functions as F

    root = str(settings.lake_root)
    out: list[RenderableType] = []
    layers = Table("table", "rows", title="lake " + root, title_justify="left")
    for layer, name in (("bronze", "entries"), ("bronze", "rejected"), ("silver", "messages"), ("silver", "logs"),
                        ("silver", "schema_versions"), ("silver", "schema_fields")):
        df = delta.read(spark, table(root, layer, name))
        layers.add_row(f"{layer}.{name}", f"{df.count():,}" if df is not None else "-")
    out.append(layers)
    bronze = delta.read(spark, catalog.ENTRIES.at(root))
    messages = delta.read(spark, catalog.MESSAGES.at(root))
    runs = delta.read(spark, catalog.RUNS.at(root))
    if bronze is not None:
        top = bronze.agg(F.max("batch_id")).collect()[0][0]
        done = runs.agg(F.max("watermark")).collect()[0][0] if runs is not None else 0
        behind = f"bronze batch {top}; silver has materialized up to batch {done or 0}"
        if (done or 0) < (top or 0):
            behind += " (run `make materialize`)"
        out.append(Text(behind))
    rejected = delta.read(spark, catalog.REJECTED.at(root))
    if rejected is not None:
        t = Table("reason", "lines", title="bronze.rejected by reason", title_justify="left")
        for r in rejected.groupBy("reason_code").count().orderBy(F.desc("count")).collect():
            t.add_row(r["reason_code"], f"{r['count']:,}")
        out.append(t)
    if messages is not None:
        t = Table("status", "reason", "entries", title="silver.messages by status", title_justify="left")
        for r in messages.groupBy("status", "reason_code").count().orderBy("status", F.desc("count")).collect():
            t.add_row(r["status"], r["reason_code"] or "", f"{r['count']:,}")
        out.append(t)
        waiting = messages.where(F.col("status") == "pending").groupBy("waits_for").count().orderBy(F.desc("count"))
        rows = waiting.limit(20).collect()
        if rows:
            t = Table("waits for", "entries", title="pending", title_justify="left")
            for r in rows:
                t.add_row(r["waits_for"], f"{r['count']:,}")
            out.append(t)
    logs = delta.read(spark, catalog.LOGS.at(root))
    if logs is not None and rejected is not None:
        blocked = _blocked(logs, rejected)
        if blocked:
            t = Table("author", "log_id", "waits for seq", "rejected at ingest", "line",
                      title="logs waiting behind a rejected entry: a rejected entry never becomes part of its log, "
                      "so the entries after it wait for good; its author must publish them again on a new log "
                      "(the line's reason says what to change)", title_justify="left")
            for b in blocked:
                t.add_row(b.author, str(b.log_id), str(b.seq_num), b.reason_code, b.where)
            out.append(t)
    if logs is not None:
        forks = logs.where(F.col("fork_seq").isNotNull()).collect()
        if forks:
            t = Table("author", "log_id", "fork at seq", "accepted up to", title="forked logs", title_justify="left")
            for r in forks:
                t.add_row(r["author"], str(r["log_id"]), str(r["fork_seq"]), str(r["accepted_seq"]))
            out.append(t)
    versions = delta.read(spark, catalog.SCHEMA_VERSIONS.at(root))
    if versions is not None:
        t = Table("schema", "name", "versions", "current", "abandoned", title="schemas", title_justify="left")
        agg = versions.groupBy("schema").agg(
            F.max_by("name", "version").alias("name"), F.count("*").alias("versions"),
            F.max("version").alias("current"),
            F.sum(F.when(F.col("abandoned"), 1).otherwise(0)).alias("abandoned"))
        for r in agg.orderBy("name").collect():
            t.add_row(r["schema"], r["name"], str(r["versions"]), str(r["current"]), str(r["abandoned"]))
        out.append(t)
    held = waiting_schemas(spark, root)
    if held:
        t = Table("registered as", "schema", "waits for", title="waiting schemas (no gold tables written until the "
                  "wait ends; `lakehouse register NAME --drop` drops a registration)", title_justify="left")
        for sid, (name, why) in sorted(held.items(), key=lambda kv: kv[1][0]):
            t.add_row(name, str(sid), why)
        out.append(t)
    gold = current_gold_rows(spark, root)
    if gold:
        t = Table("table", "schema version", "rows", "Delta version", title="gold tables", title_justify="left")
        for r in gold:
            t.add_row(f"gold.{r['table_name']}" + (f" (gold.{r['name']})" if r["is_current"] else ""),
                      str(r["version"]), f"{r['rows']:,}", str(r["delta_version"]))
        out.append(t)
    return out


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

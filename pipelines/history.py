"""``lakehouse history NAME``: a schema's versions and the Delta versions of its gold tables.

For an analyst who wants ``SELECT ... FROM gold.<name>_v<n> VERSION AS OF <k>``: every version of
the schema (kind, status, the fields it changed, abandoned or not), then, per gold table, which
Delta version each gold run wrote and the bronze batch it reflects (``silver.gold_versions``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse.core.messages import SchemaId
from lakehouse.errors import HistoryError
from lakehouse.spark import catalog, delta
from lakehouse.spark.lake import gold_state_tables, registrations

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.config import Settings


@dataclass
class SchemaHistory:
    """A schema's versions and the Delta versions of its gold tables.

    Attributes:
        schema: the schema id.
        name: the registered gold name (or the meta name when not registered).
        versions: one dict per schema version: version, kind, status, reason, target, abandoned,
            changes (``"create subject<text>"``, ...), gold_table (its table name or None).
        tables: gold table name -> list of dicts (gold_run, watermark, delta_version, rows,
            written_at, is_current), oldest first.
    """

    schema: str
    name: str
    versions: list[dict[str, Any]] = field(default_factory=list)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def schema_history(spark: SparkSession, settings: Settings, schema: str) -> SchemaHistory:
    """The history of one schema, by gold name, meta name or id.

    Raises:
        HistoryError: the lake has no such schema (the message lists the known names).
    """
    from pyspark.sql import functions as F

    root = settings.lake_root
    versions = delta.read(spark, catalog.SCHEMA_VERSIONS.at(root))
    if versions is None:
        raise HistoryError("the lake has no schemas yet: run `make ingest materialize` first")
    names = {str(sid): name for sid, name in registrations(spark, root).items()}
    metas = {r["schema"]: r["name"] for r in versions.groupBy("schema").agg(
        F.max_by("name", "version").alias("name")).collect()}
    by_name = {name: sid for sid, name in metas.items()} | {name: sid for sid, name in names.items()}
    sid = by_name.get(schema, schema)
    if sid not in metas:
        known = ", ".join(sorted(set(by_name))) or "none"
        raise HistoryError(f"no schema {schema!r} in the lake (known: {known})")
    SchemaId.parse(sid)
    history = SchemaHistory(sid, names.get(sid, metas[sid]))
    changes: dict[int, list[str]] = defaultdict(list)
    fields = delta.read(spark, catalog.SCHEMA_FIELDS.at(root))
    if fields is not None:
        for r in fields.where(F.col("schema") == sid).orderBy("version", "position").collect():
            detail = f"<{r['type']}>" if r["type"] and r["action"] == "create" else ""
            if r["action"] == "update":
                detail = " " + ", ".join(x for x in (
                    f"type {r['type']}" if r["type"] else "",
                    f"validation {r['validation']!r}" if r["validation"] else "",
                    f"default {r['default_value']}" if r["default_value"] not in (None, "null") else "") if x)
            if r["action"] == "rename":  # a lake holds rename rows only once a run that knows them wrote it
                detail = f">{r['renamed_to']}"
            changes[int(r["version"])].append(f"{r['action']} {r['name']}{detail}")
    gold_names = {}
    gold = delta.read(spark, gold_state_tables(root)["gold_versions"])
    if gold is not None:
        for r in gold.where((F.col("schema") == sid) & F.col("written")).orderBy("gold_run", "version").collect():
            gold_names[int(r["version"])] = r["table_name"]
            history.tables.setdefault(r["table_name"], []).append({
                "gold_run": r["gold_run"], "watermark": r["watermark"], "delta_version": r["delta_version"],
                "rows": r["rows"], "written_at": r["written_at"], "is_current": r["is_current"]})
    for r in versions.where(F.col("schema") == sid).orderBy("version").collect():
        v = int(r["version"])
        history.versions.append({
            "version": v, "kind": r["kind"], "status": r["status"], "reason": r["reason_code"],
            "target": r["target"], "abandoned": bool(r["abandoned"]), "changes": changes.get(v, []),
            "gold_table": gold_names.get(v) if r["has_gold_table"] else None})
    return history

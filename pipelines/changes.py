"""``lakehouse changes NAME``: the change feed of one gold table (one schema version).

Each gold table ``gold.<name>_v<n>`` has a change feed, ``gold.<name>_v<n>_changes``: per gold
run, the rows of the instances the run inserted, updated or deleted in that table, in that
version's shape: the row added, the row removed, an update's row before and row after
(:func:`lakehouse.core.changes.images`). A consumer pinned to a version
reads its feed from the run it last saw (``--since``), whatever later versions or reverts do.
``silver.gold_changes`` indexes it: per run and table, how many rows of each kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse.core.changes import POSTIMAGE, PREIMAGE, UPDATE, same_value
from lakehouse.core.registry import gold_table_name
from lakehouse.errors import ChangesError
from lakehouse.spark import delta
from lakehouse.spark.catalog import changes_table
from lakehouse.spark.lake import gold_state_tables, registrations
from lakehouse.spark.tables import is_delta_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.config import Settings


@dataclass
class ChangeFeed:
    """Part of one gold table's change feed.

    Attributes:
        table: the change table, ``gold.<name>_v<n>_changes``.
        version: the schema version.
        since: the gold run after which changes are shown.
        columns: the change table's columns (:data:`lakehouse.spark.gold.CHANGE_META`, then the
            gold table's).
        rows: the changes, at most ``limit``, by gold run then instance id.
        total: how many changes there are after ``since``.
        runs: per gold run after ``since`` that wrote the table: gold_run, watermark (bronze
            batch), delta_version (the gold table's), inserts, updates, deletes.
    """

    table: str
    version: int
    since: int
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    runs: list[dict[str, Any]] = field(default_factory=list)


def change_feed(spark: SparkSession, settings: Settings, name: str, version: int | None = None, since: int = 0,
                limit: int = 100) -> ChangeFeed:
    """The changes of ``gold.<name>_v<version>`` after gold run ``since``.

    Args:
        name: a registered gold name (or the schema id it is registered under).
        version: the schema version; default: the latest with a gold table.
        since: show the changes of later gold runs only (0: all).
        limit: at most this many rows in ``rows`` (``total`` counts them all).

    Raises:
        ChangesError: code ``unknown_name`` (the message lists the registered names), or
            ``no_feed`` (the message lists the versions that have one).
    """
    from pyspark.sql import functions as F

    root = settings.lake_root
    names = {str(sid): gold_name for sid, gold_name in registrations(spark, root).items()}
    gold_name = names.get(name, name)
    if gold_name not in names.values():
        known = ", ".join(sorted(names.values())) or "none"
        raise ChangesError(f"no registration named {name!r} (registered: {known})", code="unknown_name")
    index = delta.read(spark, gold_state_tables(root)["gold_changes"])
    mine = [] if index is None else index.where(F.col("name") == gold_name).orderBy("gold_run", "version").collect()
    tables = {int(r["version"]): r["table_name"] for r in mine}  # one per version, whatever the runs
    with_feed = sorted(v for v, name in tables.items() if is_delta_table(changes_table(root, name).location))
    if version is None:
        versions = delta.read(spark, gold_state_tables(root)["gold_versions"])
        current = [] if versions is None else versions.where(
            (F.col("name") == gold_name) & F.col("is_current")).agg(F.max("version")).collect()
        version = current[0][0] if current and current[0][0] is not None else (with_feed[-1] if with_feed else None)
    if version is None or version not in with_feed:
        which = f"version {version}" if version is not None else "any version"
        has = ", ".join(str(v) for v in with_feed) or "none yet (`make materialize` writes them)"
        raise ChangesError(f"{gold_name} has no change feed for {which} (versions with one: {has})")
    ref = changes_table(root, gold_table_name(gold_name, version))
    feed = spark.read.format("delta").load(ref.location).where(F.col("_gold_run") > since)
    columns = feed.columns
    total = feed.count()
    # an update's row before, then its row after
    rows = [r.asDict() for r in feed.orderBy("_gold_run", "instance_id", F.desc("_change")).limit(limit).collect()]
    runs = [{"gold_run": r["gold_run"], "watermark": r["watermark"], "delta_version": r["delta_version"],
             "inserts": r["inserts"], "updates": r["updates"], "deletes": r["deletes"]}
            for r in mine if int(r["version"]) == version and r["gold_run"] > since]
    return ChangeFeed(f"gold.{ref.name}", version, since, columns, rows, total, runs)


def as_read(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of a change feed (:attr:`ChangeFeed.rows`, in its order) as a reader scans them: an
    update's two rows as one, its ``_change`` ``update``, each column that differs as the pair
    ``(before, after)``; an update whose row before or after is not among ``rows`` (cut by a limit)
    stays as it is."""
    out: list[dict[str, Any]] = []
    for row in rows:
        last = out[-1] if out else None
        if (row["_change"] == POSTIMAGE and last is not None and last["_change"] == PREIMAGE
                and (last["_gold_run"], last["instance_id"]) == (row["_gold_run"], row["instance_id"])):
            out[-1] = {c: v if c in _META or same_value(last[c], v) else (last[c], v) for c, v in row.items()}
            out[-1]["_change"] = UPDATE
        else:
            out.append(row)
    return out


_META = frozenset(("_gold_run", "_change", "_cause", "_silver_run", "_watermark", "_delta_version", "instance_id"))

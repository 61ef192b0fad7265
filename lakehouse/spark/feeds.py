"""The change feed's transforms (README, Concepts: change feed): appending to a change table, and
the causes of a merged table's changes.

Every gold table ``gold.<name>_v<n>`` has a change table ``gold.<name>_v<n>_changes``
(:func:`lakehouse.spark.catalog.changes_table`); the gold job decides what changed
(:func:`lakehouse.spark.gold.row_changes`) and these functions say why and append it.
"""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING, Any

from lakehouse.core.messages import SchemaId
from lakehouse.spark import catalog, delta
from lakehouse.spark.cascades import Cascaded
from lakehouse.spark.tables import TableRef, is_delta_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def append_changes(changes: DataFrame, feed: TableRef) -> None:
    """Append rows to a change table, created with :data:`catalog.CHANGES_PROPERTIES` when missing."""
    if is_delta_table(feed.location):
        delta.append(changes, feed)
    else:
        delta.overwrite(changes, feed, **catalog.CHANGES_PROPERTIES)


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
            flagged(cascaded.removed, F.lit(None), True, False)]
    if cascaded.flipped is not None:
        rows.append(flagged(cascaded.flipped, F.lit(None), False, True))
    flags = reduce(lambda a, b: a.unionByName(b), rows).groupBy("instance_id").agg(
        F.collect_set("schema").alias("_changed_in"), F.max("_removed").alias("_removed"),
        F.max("_flipped").alias("_flipped"))
    return delta.stage(flags, f"{staging}/cause_flags",
                       "instance_id STRING, _changed_in ARRAY<STRING>, _removed BOOLEAN, _flipped BOOLEAN")


def causes(changes: DataFrame, flags: DataFrame, sid: SchemaId) -> tuple[DataFrame, Any]:
    """The cause of each change of a merged table of schema ``sid`` (:func:`_feed`): a delete of an
    instance a cascade removes is ``cascade``; a change of an instance with a changed message of
    its schema's logs ``message``; of one only a cascade's flip touched, ``cascade``. ``flags``:
    :func:`cause_flags`."""
    from pyspark.sql import functions as F

    cause = (F.when((F.col("_change") == "delete") & F.col("_removed").isNotNull(), "cascade")
             .when(F.array_contains("_changed_in", str(sid)), "message")
             .when(F.col("_flipped").isNotNull(), "cascade"))
    return changes.join(flags, "instance_id", "left"), cause.otherwise("message")

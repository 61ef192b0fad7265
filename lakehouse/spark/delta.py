"""Small portable Delta helpers: create-if-missing, MERGE from a DataFrame, reads.

Only statements that Sail, a Spark Connect cluster and Apache Spark with delta-spark all run
(LAKEHOUSE.md, Engine): DataFrame writes in ``delta`` format at explicit locations and SQL MERGE
against a temporary view.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from lakehouse.spark.tables import TableRef, is_delta_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read(spark: SparkSession, ref: TableRef) -> DataFrame | None:
    """The table's current version, or None when it does not exist yet."""
    if not is_delta_table(ref.location):
        return None
    return spark.read.format("delta").load(ref.location)


def ensure(spark: SparkSession, ref: TableRef, ddl: str) -> DataFrame:
    """The table, created empty with schema ``ddl`` when missing."""
    if not is_delta_table(ref.location):
        spark.createDataFrame([], ddl).write.format("delta").mode("append").save(ref.location)
    return spark.read.format("delta").load(ref.location)


def merge(spark: SparkSession, ref: TableRef, ddl: str, source: DataFrame, keys: list[str],
          update_columns: list[str] | None = None, *, insert: bool = True,
          only_changed: list[str] | None = None) -> None:
    """MERGE ``source`` into the table on ``keys``: update matched rows, insert the others.

    Args:
        update_columns: the columns to set on a match (default: all).
        insert: whether unmatched source rows are inserted.
        only_changed: update a matched row only when one of these columns differs (null-safe), so
            that unchanged rows keep their values (e.g. the ``run_id`` that last changed them).
    """
    ensure(spark, ref, ddl)
    view = f"_merge_{uuid.uuid4().hex[:12]}"
    source.createOrReplaceTempView(view)
    target = f"delta.`{ref.location}`"
    on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
    if update_columns is None:
        matched = "UPDATE SET *"
    else:
        matched = "UPDATE SET " + ", ".join(f"t.`{c}` = s.`{c}`" for c in update_columns)
    when = ""
    if only_changed:
        when = " AND NOT (" + " AND ".join(f"t.`{c}` <=> s.`{c}`" for c in only_changed) + ")"
    statement = f"MERGE INTO {target} t USING {view} s ON {on} WHEN MATCHED{when} THEN {matched}"
    if insert:
        statement += " WHEN NOT MATCHED THEN INSERT *"
    try:
        spark.sql(statement)
    finally:
        spark.catalog.dropTempView(view)


def overwrite(source: DataFrame, ref: TableRef) -> None:
    """Replace the table's contents (and schema) with ``source``, as one new Delta version."""
    source.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(ref.location)


def columns(ddl: str) -> list[str]:
    """The column names of a flat DDL string such as ``"a STRING, b BIGINT"``."""
    return [part.split()[0] for part in ddl.split(", ")]


def stage(df: DataFrame, path: str) -> DataFrame:
    """Write ``df`` to a staging parquet folder and read it back, so later steps do not recompute it.

    The schema is given on read: an empty result leaves no parquet file to infer it from.
    """
    df.write.mode("overwrite").parquet(path)
    return df.sparkSession.read.schema(df.schema).parquet(path)


"""The portable Delta helpers of :mod:`lakehouse.spark.delta`."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse.spark import delta
from lakehouse.spark.tables import table

pytestmark = pytest.mark.parity

DDL = "key STRING, value STRING, note STRING, run_id BIGINT"


def test_upsert_replaces_and_adds_rows_and_keeps_the_stamp_of_unchanged_ones(spark: Any, lake: Any) -> None:
    ref = table(str(lake.lake_root), "silver", "upserted")
    delta.upsert(spark, ref, DDL, spark.createDataFrame(
        [("same", "a", None, 1), ("changed", "b", "x", 1), ("untouched", "c", None, 1)], DDL), "key", "run_id")
    delta.upsert(spark, ref, DDL, spark.createDataFrame(
        [("same", "a", None, 2), ("changed", "b", "y", 2), ("new", "d", None, 2)], DDL), "key", "run_id")
    got = {r["key"]: (r["value"], r["note"], r["run_id"]) for r in spark.read.format("delta").load(ref.location).collect()}
    assert got == {"same": ("a", None, 1), "changed": ("b", "y", 2), "untouched": ("c", None, 1), "new": ("d", None, 2)}

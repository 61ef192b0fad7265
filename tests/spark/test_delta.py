"""The portable Delta helpers of :mod:`lakehouse.spark.delta`."""

from __future__ import annotations

from itertools import pairwise
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


def test_upsert_of_new_keys_only_appends_until_the_table_has_many_files(spark: Any, lake: Any,
                                                                         monkeypatch: Any) -> None:
    """New keys alone are appended (the table's files stay, a few are added); once the table has
    ``APPEND_FILES_LIMIT`` files, the next upsert writes it again, in fewer files."""
    monkeypatch.setattr(delta, "APPEND_FILES_LIMIT", 4)
    ref = table(str(lake.lake_root), "silver", "appended")
    files, rows = [], {}
    for n in range(6):
        batch = [(f"k{n}", str(n), None, n)]
        delta.upsert(spark, ref, DDL, spark.createDataFrame(batch, DDL).repartition(1), "key", "run_id")
        rows.update({k: (v, note, run) for k, v, note, run in batch})
        files.append(delta.data_files(ref))
        got = {r["key"]: (r["value"], r["note"], r["run_id"]) for r in spark.read.format("delta").load(ref.location).collect()}
        assert got == rows
    grew = [b - a for a, b in pairwise(files)]
    assert all(g > 0 for g in grew[:2]), files  # appended
    assert any(g < 0 for g in grew), files  # gathered by a rewrite
    assert max(files) <= 4 + max(grew), files

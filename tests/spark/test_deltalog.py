"""lakehouse.spark.deltalog: a table read from its own log gives the rows the engine reads, deletion
vectors (written by DELETE and by MERGE), time travel and checkpoints included, and a snapshot
advanced by the commits since is the one read whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakehouse.spark import deltalog

pytestmark = pytest.mark.parity


def _engine_rows(spark: Any, path: Path, version: int | None = None) -> list[tuple[Any, ...]]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return sorted(tuple(r) for r in reader.load(str(path)).collect())


def _log_rows(path: Path, version: int | None = None) -> list[tuple[Any, ...]]:
    table = deltalog.read_rows(str(path), version)
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


def _files(snap: deltalog.Snapshot) -> list[tuple[str, int | None, int]]:
    return sorted((f.path, f.records, f.deleted) for f in snap.files)


def test_rows_with_deletion_vectors_are_the_engines(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    path = tmp_path / "t"
    rows = spark.range(0, 5_000).select(F.sha2(F.col("id").cast("string"), 256).alias("k"), F.col("id").alias("v"),
                                         (F.col("id") * 0.5).alias("x"))
    rows.coalesce(1).write.format("delta").option("delta.enableDeletionVectors", "true").save(str(path))
    first = deltalog.snapshot(str(path))
    spark.sql(f"DELETE FROM delta.`{path}` WHERE v % 7 = 0").collect()
    steps = [deltalog.advanced(first, str(path))]
    source = spark.range(0, 5_000, 50).select(F.sha2(F.col("id").cast("string"), 256).alias("k"),
                                              (-F.col("id")).alias("v"), F.lit(1.5).alias("x"))
    source.createOrReplaceTempView("deltalog_source")
    try:
        spark.sql(f"MERGE INTO delta.`{path}` AS t USING deltalog_source AS s ON t.k = s.k "
                  "WHEN MATCHED THEN DELETE").collect()
    finally:  # the session is the test run's: a view left behind is listed by later tests
        spark.catalog.dropTempView("deltalog_source")
    steps.append(deltalog.advanced(steps[-1], str(path)))
    source.write.format("delta").mode("append").save(str(path))
    steps.append(deltalog.advanced(steps[-1], str(path)))
    snap = deltalog.snapshot(str(path))
    # a snapshot advanced commit by commit, or over all of them at once, is the one read whole
    for advanced in (steps[-1], deltalog.advanced(first, str(path))):
        assert (advanced.version, advanced.rows, _files(advanced)) == (snap.version, snap.rows, _files(snap))
    assert [step.rows for step in steps] == [deltalog.snapshot(str(path), v).rows for v in (1, 2, 3)]
    assert snap.version == 3 and any(f.deletion_vector for f in snap.files)
    assert snap.rows == spark.read.format("delta").load(str(path)).count()
    assert 0 < snap.deleted_share < 1
    for version in (0, 1, 2, None):
        assert _log_rows(path, version) == _engine_rows(spark, path, version), version


def test_a_table_past_a_checkpoint_is_read_from_it(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    for n in range(4):
        (spark.createDataFrame([(n, f"v{n}")], "id BIGINT, s STRING").write.format("delta").mode("append")
         .option("delta.checkpointInterval", "2").save(str(path)))
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 1").collect()
    assert list((path / "_delta_log").glob("*.checkpoint.parquet")), "both engines write checkpoints"
    assert _log_rows(path) == _engine_rows(spark, path) == [(0, "v0"), (2, "v2"), (3, "v3")]
    with pytest.raises(FileNotFoundError):
        deltalog.snapshot(str(path), 99)
    with pytest.raises(FileNotFoundError):
        deltalog.snapshot(str(tmp_path / "none"))


def test_the_greatest_value_comes_from_statistics_until_rows_are_deleted(spark: Any, tmp_path: Path) -> None:
    from lakehouse.spark import delta
    from lakehouse.spark.tables import TableRef

    path = tmp_path / "t"
    ref = TableRef("silver", "t", str(path))
    assert delta.integer_max(spark, ref, "id") is None  # no table yet
    (spark.createDataFrame([], "id BIGINT, n BIGINT").write.format("delta").option("delta.checkpointInterval", "2")
     .option("delta.enableDeletionVectors", "true").save(str(path)))
    assert delta.integer_max(spark, ref, "id", "n") == (None, None)  # a table with no rows
    for n in (3, 9, 5, 2):  # past a checkpoint: its files' statistics come from it
        rows = spark.createDataFrame([(n, -n), (n - 1, None)], "id BIGINT, n BIGINT")
        rows.coalesce(1).write.format("delta").mode("append").save(str(path))
    (spark.createDataFrame([(1, None)], "id BIGINT, n BIGINT").write.format("delta").mode("append")
     .save(str(path)))  # a file whose n is only null has no greatest n: it is left out
    assert (deltalog.snapshot(str(path)).integer_max("id"), deltalog.snapshot(str(path)).integer_max("n")) == (9, -2)
    assert delta.integer_max(spark, ref, "id", "n") == (9, -2)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 9").collect()
    snap = deltalog.snapshot(str(path))
    assert any(f.deleted for f in snap.files), "the DELETE left a deletion vector"
    with pytest.raises(LookupError):  # the file's statistics still count the deleted row
        snap.integer_max("id")
    assert delta.integer_max(spark, ref, "id", "n") == (8, -2)  # asked of the engine instead

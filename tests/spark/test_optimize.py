"""``lakehouse optimize``: compaction of the lake's tables (:mod:`lakehouse.spark.compaction`,
:mod:`pipelines.optimize`), on both engines."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from lakehouse.spark import buckets, compaction, delta, deltalog
from lakehouse.spark.tables import table
from pipelines.optimize import run_optimize
from pipelines.status import lake_status
from tests.lakes import run_cli

pytestmark = pytest.mark.parity

DDL = "instance_id STRING, value STRING, run_id BIGINT"
BUCKETED_DDL = f"{DDL}, {buckets.DDL}"
APPENDED_DDL = "batch_id BIGINT, line STRING"
IDS = [f"0000{n:04x}{'ab' * 30}" for n in range(16)]  # hash n: bucket 4 + n % 4 of 4


def rows_of(spark: Any, location: str, version: int | None = None) -> Counter[tuple[Any, ...]]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return Counter(tuple(r) for r in reader.load(location).collect())


def files_by_bucket(location: str) -> dict[str, list[deltalog.DataFile]]:
    found: dict[str, list[deltalog.DataFile]] = {}
    for f in deltalog.snapshot(location).files:
        found.setdefault(str(f.partition_values[buckets.COLUMN]), []).append(f)
    return found


def fragmented_buckets(spark: Any, lake: Any) -> Any:
    """``silver.states_like``: 16 ids in 4 buckets (4 to 7) with deletion vectors; a MERGE replaces
    an id of bucket 4 and takes one of bucket 5 out: bucket 4 gains a file, both a deletion vector."""
    ref = table(str(lake.lake_root), "silver", "states_like")
    buckets.write(spark.createDataFrame([(i, "v1", 1) for i in IDS], DDL), ref, 4, **delta.DELETION_VECTORS)
    new = spark.createDataFrame([(IDS[0], "v2", 2)], DDL).select("*", buckets.column(4))
    keys = spark.createDataFrame([(IDS[0],), (IDS[1],)], "instance_id STRING")
    delta.replace_rows(spark, ref, BUCKETED_DDL, new, keys, "instance_id", within="t.`_bucket` IN (4, 5)")
    return ref


def appended(spark: Any, lake: Any, batches: int) -> Any:
    """``bronze.appended_like``: a first batch of 300 rows, then ``batches`` appends of a row each."""
    ref = table(str(lake.lake_root), "bronze", "appended_like")
    delta.append(spark.createDataFrame([(0, f"line {n} " * 40) for n in range(300)], APPENDED_DDL).repartition(1), ref)
    for batch in range(1, batches + 1):
        delta.append(spark.createDataFrame([(batch, f"line of batch {batch}")], APPENDED_DDL).repartition(1), ref)
    return ref


def test_optimize_writes_each_fragmented_bucket_as_one_file_and_leaves_the_others(spark: Any, lake: Any) -> None:
    """Buckets of more than one file or with a deletion vector are written again, a file each and
    no deletion vector, in one commit; the other buckets keep their files; the rows, the table's
    properties and every earlier version (time travel) are as they were; a second run has nothing
    to do, and ``check`` writes nothing."""
    ref = fragmented_buckets(spark, lake)
    before_version = deltalog.snapshot(ref.location).version
    before, layout = rows_of(spark, ref.location), files_by_bucket(ref.location)
    assert len(layout["4"]) == 2 and any(f.deletion_vector for f in layout["4"] + layout["5"])

    assert [(t, files, dvs) for t, files, dvs, _ in lake_status(spark, lake).to_compact] == [
        ("silver.states_like", 5, 2)]  # make status names it
    checked = run_optimize(spark, lake, ["silver.states_like"], check=True)
    assert [(c.how, c.chunks) for c in checked.compacted] == [("buckets", ((4, 5),))]
    assert checked.commits == 0 and deltalog.snapshot(ref.location).version == before_version

    done = run_optimize(spark, lake)
    assert [(c.table, c.how, c.chunks, c.files_after) for c in done.compacted] == [
        ("silver.states_like", "buckets", ((4, 5),), 4)]
    assert done.commits == 1
    after = deltalog.snapshot(ref.location)
    assert after.version == before_version + 1
    assert after.properties.get("delta.enableDeletionVectors") == "true"
    now = files_by_bucket(ref.location)
    assert {b: len(fs) for b, fs in now.items()} == {"4": 1, "5": 1, "6": 1, "7": 1}
    assert not any(f.deletion_vector for fs in now.values() for f in fs)
    assert {b: [f.path for f in now[b]] for b in ("6", "7")} == {b: [f.path for f in layout[b]] for b in ("6", "7")}
    assert rows_of(spark, ref.location) == before
    assert rows_of(spark, ref.location, before_version) == before
    assert sum(before.values()) == 15 and (IDS[0], "v2", 2, 4) in before

    again = run_optimize(spark, lake)
    assert (again.compacted, again.commits) == ([], 0)
    assert lake_status(spark, lake).to_compact == []


def test_optimize_gathers_the_small_files_at_an_appended_tables_end_and_leaves_the_files_before(
        spark: Any, lake: Any, monkeypatch: Any) -> None:
    """The small files at the end of a table appended in batches become one file, in one commit
    whose ``replaceWhere`` leaves the earlier (large) file as it is, so that a read past a batch
    still skips it by its statistics; a small file that holds a batch as old as that file's stays
    too."""
    ref = appended(spark, lake, 6)
    delta.append(spark.createDataFrame([(0, "late line of batch 0")], APPENDED_DDL).repartition(1), ref)
    snap = deltalog.snapshot(ref.location)
    large = max(snap.files, key=lambda f: f.size)
    monkeypatch.setattr(compaction, "SMALL_FILE_BYTES", large.size)
    monkeypatch.setattr(compaction, "MIN_SMALL_FILES", 4)
    before = rows_of(spark, ref.location)

    done = run_optimize(spark, lake, ["bronze.appended_like"])
    assert [(c.how, c.order, c.since, c.files_rewritten) for c in done.compacted] == [("tail", "batch_id", 1, 6)]
    after = deltalog.snapshot(ref.location)
    assert len(after.files) == 3 and large.path in {f.path for f in after.files}
    gathered = [f for f in after.files if f.minima.get("batch_id") == 1]
    assert len(gathered) == 1 and gathered[0].maxima.get("batch_id") == 6 and gathered[0].records == 6
    assert rows_of(spark, ref.location) == before
    assert run_optimize(spark, lake).compacted == []


def test_a_table_with_deletion_vectors_and_no_buckets_is_written_whole(spark: Any, lake: Any) -> None:
    ref = table(str(lake.lake_root), "silver", "marked")
    flat = "key STRING, value STRING"
    delta.overwrite(spark.createDataFrame([(f"k{n}", "v") for n in range(6)], flat).repartition(2), ref,
                    **delta.DELETION_VECTORS)
    delta.replace_rows(spark, ref, flat, spark.createDataFrame([], flat),
                       spark.createDataFrame([("k1",), ("k4",)], "key STRING"), "key")
    assert deltalog.snapshot(ref.location).deleted_share > 0
    before = rows_of(spark, ref.location)

    done = run_optimize(spark, lake, ["silver.marked"])
    assert [c.how for c in done.compacted] == ["whole"]
    after = deltalog.snapshot(ref.location)
    assert len(after.files) == 1 and not after.files[0].deletion_vector and after.rows == 4
    assert after.properties.get("delta.enableDeletionVectors") == "true"
    assert rows_of(spark, ref.location) == before


def test_optimize_names_an_unknown_table_and_a_run_cut_short_after_any_commit_is_finished_by_the_next(
        spark: Any, lake: Any, monkeypatch: Any) -> None:
    """Through the command line: an unknown table is refused with the lake's tables listed (no
    traceback); a run that ends right after its first commit leaves every table's rows as they
    were, and the next run compacts the rest."""
    bucketed = fragmented_buckets(spark, lake)
    tail = appended(spark, lake, 9)
    before = {ref.name: rows_of(spark, ref.location) for ref in (bucketed, tail)}

    unknown = run_cli(lake, "optimize", "--table", "gold.nope")
    assert unknown.returncode != 0 and "Traceback" not in unknown.stderr + unknown.stdout
    assert "gold.nope" in unknown.stderr + unknown.stdout and "silver.states_like" in unknown.stderr + unknown.stdout

    cut = run_cli(lake, "optimize", LAKEHOUSE_FAULT_AFTER="1")
    assert cut.returncode == delta.FAULT_EXIT, cut.stderr
    assert {ref.name: rows_of(spark, ref.location) for ref in (bucketed, tail)} == before
    left = run_optimize(spark, lake, check=True)
    assert len(left.compacted) == 1

    finished = run_cli(lake, "optimize")
    assert finished.returncode == 0, finished.stderr
    assert "appended_like" in finished.stdout or "states_like" in finished.stdout
    assert {ref.name: rows_of(spark, ref.location) for ref in (bucketed, tail)} == before
    assert run_optimize(spark, lake, check=True).compacted == []
    quiet = run_cli(lake, "optimize")
    assert quiet.returncode == 0 and "nothing to compact" in quiet.stdout

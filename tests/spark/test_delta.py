"""The portable Delta helpers of :mod:`lakehouse.spark.delta`."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pyarrow as pa
import pytest

from lakehouse.spark import delta, deltalog
from lakehouse.spark.groups import arrow_schema
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
        files.append(len(deltalog.snapshot(ref.location).files))
        got = {r["key"]: (r["value"], r["note"], r["run_id"]) for r in spark.read.format("delta").load(ref.location).collect()}
        assert got == rows
    grew = [b - a for a, b in pairwise(files)]
    assert all(g > 0 for g in grew[:2]), files  # appended
    assert any(g < 0 for g in grew), files  # gathered by a rewrite
    assert max(files) <= 4 + max(grew), files


@pytest.mark.parametrize("here", [False, True], ids=["engine", "package"])
def test_a_bucketed_upsert_appends_in_buckets_and_writes_again_only_the_buckets_it_touches(
        spark: Any, lake: Any, monkeypatch: Any, here: bool) -> None:
    """An upsert into a table in buckets (``bucketed``) appends new keys with their bucket while
    the buckets they fall in hold fewer than ``COMPACT_FILES_PER_PARTITION`` files; past that, or
    when a key is replaced, it writes those buckets again (a file each, the stamp of an unchanged
    row kept) and leaves the other buckets' files; once the rows outgrow twice what the buckets are
    for, the table is written whole in as many buckets as its rows call for, each row in its bucket.
    The same with ``here_rows`` (a small run's silver.messages on Apache Spark): the appends and the
    buckets written again go by the ``deltalake`` package, to the same rows and files."""
    from lakehouse.spark import buckets

    by_package: list[bool] = []
    package_write = delta._package_write_arrow
    monkeypatch.setattr(delta, "_package_write_arrow",
                        lambda *a, **k: by_package.append(package_write(*a, **k)) or by_package[-1])
    monkeypatch.setattr(buckets, "BUCKET_ROWS", 2)
    monkeypatch.setattr(delta, "COMPACT_FILES_PER_PARTITION", 2)
    monkeypatch.setattr(delta, "APPEND_FILES_LIMIT", 1)
    ref = table(str(lake.lake_root), "silver", "bucketed")
    keys = [f"0000{n:04x}{'ab' * 30}" for n in range(16)]  # hash n: bucket count + n % count
    first = [(k, "v", None, 1) for k in keys[:4]]
    buckets.write(spark.createDataFrame(first, DDL), ref, 2, "key")  # 4 rows: 2 buckets (2: even keys, 3: odd)

    def stored() -> dict[str, tuple[Any, ...]]:
        return {r["key"]: (r["value"], r["run_id"], r[buckets.COLUMN])
                for r in spark.read.format("delta").load(ref.location).collect()}

    def files() -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for f in deltalog.snapshot(ref.location).files:
            found.setdefault(str(f.partition_values[buckets.COLUMN]), []).append(f.path)
        return found

    def upsert(n: int, value: str, run: int, count: int = 2) -> None:
        delta.upsert(spark, ref, DDL, spark.createDataFrame([(keys[n], value, None, run)], DDL).repartition(1),
                     "key", "run_id", (count, "key"), here_rows=100 if here else 0, source_rows=1)
        if buckets.of_snapshot(deltalog.snapshot(ref.location)) == 2:  # not written whole
            assert by_package == ([True] if here else []), by_package
        by_package.clear()

    odd = files()["3"]
    upsert(4, "v", 2)  # appended: bucket 2 then holds two files
    assert {b: len(p) for b, p in files().items()} == {"2": 2, "3": 1} and files()["3"] == odd
    upsert(6, "v", 3)  # bucket 2 is full: written again, with the new row, as one file
    assert {b: len(p) for b, p in files().items()} == {"2": 1, "3": 1} and files()["3"] == odd
    assert stored() == {k: ("v", 1 if n < 4 else n // 2, 2 + n % 2) for n, k in enumerate(keys[:7]) if n != 5}
    even = files()["2"]
    upsert(1, "w", 5)  # a key replaced: its bucket written again, the other's file kept
    upsert(0, "v", 6)  # the same row again: it keeps the run that last changed it
    assert stored()[keys[1]] == ("w", 5, 3) and stored()[keys[0]] == ("v", 1, 2)
    assert files()["3"] != odd and len(files()["3"]) == 1 and len(files()["2"]) == 1 and files()["2"] != even
    even = files()["2"][0]
    upsert(5, "v", 7)  # appended: bucket 3 then holds two files
    # one upsert into a full bucket (3) and another (2): the full one written again, the other appended to
    delta.upsert(spark, ref, DDL, spark.createDataFrame([(keys[7], "v", None, 7), (keys[8], "v", None, 7)], DDL),
                 "key", "run_id", (2, "key"), here_rows=100 if here else 0, source_rows=2)
    assert by_package == ([True, True] if here else [])  # bucket 3 written again, bucket 2 appended to
    by_package.clear()
    assert {b: len(p) for b, p in files().items()} == {"2": 2, "3": 1} and even in files()["2"]
    assert len(stored()) == 9 and buckets.of_snapshot(deltalog.snapshot(ref.location)) == 2
    # more than twice 2 rows a bucket: appended until the table holds 2 files a bucket, then
    # written whole, in as many buckets as its rows call for (8)
    for last in range(9, 16):
        upsert(last, "v", 8)
        if buckets.of_snapshot(deltalog.snapshot(ref.location)) != 2:
            break
    assert last < 12 and buckets.of_snapshot(deltalog.snapshot(ref.location)) == 8
    assert {k: v[2] for k, v in stored().items()} == {k: 8 + n % 8 for n, k in enumerate(keys[:last + 1])}


def test_a_bucketed_upsert_stopped_between_its_two_commits_is_finished_by_the_same_upsert_again(
        spark: Any, lake: Any, monkeypatch: Any) -> None:
    """An upsert that writes a full bucket again and appends to another is two commits; stopped
    after the first (its rows in the full bucket only), the same upsert run again stores every
    row once, each in its bucket (it finds some of its keys stored and writes their buckets again)."""
    from lakehouse.spark import buckets

    monkeypatch.setattr(buckets, "BUCKET_ROWS", 2)
    monkeypatch.setattr(delta, "COMPACT_FILES_PER_PARTITION", 2)
    ref = table(str(lake.lake_root), "silver", "stopped")
    keys = [f"0000{n:04x}{'ab' * 30}" for n in range(8)]  # hash n: bucket 2 + n % 2
    buckets.write(spark.createDataFrame([(k, "v", None, 1) for k in keys[:4]], DDL), ref, 2, "key")
    delta.upsert(spark, ref, DDL, spark.createDataFrame([(keys[4], "v", None, 2)], DDL).repartition(1),
                 "key", "run_id", (2, "key"))  # bucket 2: two files, full
    source = [(keys[6], "v", None, 3), (keys[5], "v", None, 3)]

    class Stopped(BaseException):
        pass

    def stop(_number: int, _table: str) -> None:
        raise Stopped

    monkeypatch.setattr(delta, "on_commit", stop)
    with pytest.raises(Stopped):
        delta.upsert(spark, ref, DDL, spark.createDataFrame(source, DDL), "key", "run_id", (2, "key"))
    monkeypatch.setattr(delta, "on_commit", None)
    halfway = {r["key"] for r in spark.read.format("delta").load(ref.location).collect()}
    assert keys[6] in halfway and keys[5] not in halfway
    delta.upsert(spark, ref, DDL, spark.createDataFrame(source, DDL), "key", "run_id", (2, "key"))
    got = sorted((r["key"], r["run_id"], r[buckets.COLUMN]) for r in spark.read.format("delta").load(ref.location).collect())
    runs = {4: 2, 5: 3, 6: 3}
    assert got == sorted((k, runs.get(n, 1), 2 + n % 2) for n, k in enumerate(keys[:7]))


def test_a_small_table_is_written_again_only_when_its_rows_change(spark: Any, lake: Any) -> None:
    """``overwrite_rows`` leaves no new Delta version when the table holds the same rows (in any
    order), and writes one when a row changes, goes, repeats, or the table's columns differ."""
    from lakehouse.spark.tables import delta_version

    ref = table(str(lake.lake_root), "silver", "small")
    rows = [("a", "1", None, 1), ("b", "2", "x", 1)]
    assert delta.overwrite_rows(spark, rows, DDL, ref)
    assert not delta.overwrite_rows(spark, list(reversed(rows)), DDL, ref)
    assert delta_version(ref.location) == 0
    for changed in ([("a", "1", None, 1), ("b", "2", "y", 1)], rows[:1], [*rows, rows[0]]):
        assert delta.overwrite_rows(spark, changed, DDL, ref)
        assert sorted(map(tuple, spark.read.format("delta").load(ref.location).collect()), key=repr) == \
            sorted(changed, key=repr)
    version = delta_version(ref.location)
    narrower = "key STRING, value STRING, note STRING"
    assert delta.overwrite_rows(spark, [r[:3] for r in rows], narrower, ref)
    assert delta_version(ref.location) == version + 1
    assert spark.read.format("delta").load(ref.location).columns == delta.columns(narrower)


def test_tables_and_their_versions_are_found_through_the_delta_log_also_under_a_uri(spark: Any, tmp_path: Any) -> None:
    """A lake root given as a URI (``file://`` here; ``s3://`` alike) is read the same way as a path:
    the tables found, their versions, their registration. A folder whose log has no commit (a first
    write that crashed) or with parquet files only is not a table."""
    from lakehouse.spark.tables import delta_version, is_delta_table, lake_tables, register_lake

    root = f"file://{tmp_path}/lake"
    written = {("bronze", "entries"): 1, ("silver", "logs"): 3}
    for (layer, name), times in written.items():
        for n in range(times):
            delta.append(spark.createDataFrame([(name, n)], "name STRING, n BIGINT"), table(root, layer, name))
    (tmp_path / "lake" / "silver" / "crashed" / "_delta_log").mkdir(parents=True)
    spark.createDataFrame([("x", 1)], "name STRING, n BIGINT").write.parquet(f"{tmp_path}/lake/silver/plain")
    found = lake_tables(root)
    assert [(ref.layer, ref.name) for ref in found] == list(written)
    assert all(ref.location.startswith("file://") for ref in found)
    assert [delta_version(ref.location) for ref in found] == [times - 1 for times in written.values()]
    for name in ("crashed", "plain", "missing"):
        location = table(root, "silver", name).location
        assert not is_delta_table(location)
        with pytest.raises(FileNotFoundError):
            delta_version(location)
    register_lake(spark, root)
    assert spark.sql("SELECT count(*) AS n FROM silver.logs").collect()[0]["n"] == 3


def test_a_staged_frame_reads_back_the_same_from_uncompressed_parquet(spark: Any, tmp_path: Any) -> None:
    """A staged folder is read back within the run that writes it and dropped: its parquet is not
    compressed (Sail's default, zstd, cost a third of the engine's CPU of a step that stages)."""
    import pyarrow.parquet as pq

    rows = [(f"k{n}", "x" * n, None, n) for n in range(50)]
    staged = delta.stage(spark.createDataFrame(rows, DDL), str(tmp_path / "staged"))
    assert sorted(tuple(r) for r in staged.collect()) == sorted(rows)
    files = sorted((tmp_path / "staged").glob("*.parquet"))
    assert files
    codecs = {pq.ParquetFile(f).metadata.row_group(g).column(c).compression
              for f in files for g in range(pq.ParquetFile(f).metadata.num_row_groups)
              for c in range(pq.ParquetFile(f).metadata.num_columns)}
    assert codecs == {"UNCOMPRESSED"}


def test_a_staged_folder_is_written_in_small_row_groups_on_sail(spark: Any, engine_name: str, tmp_path: Any) -> None:
    """Sail keeps a file's current row group in memory for every file a write has open (a million
    rows unless told): staged folders ask for row groups of at most ``row_group_rows``. Apache Spark
    closes its row groups by bytes and ignores the option: there, the rows come back whole."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    rows = spark.range(20_000).select(F.col("id"), (F.col("id") % 3).alias("part"))
    delta.staged_writer(rows.repartition(1), row_group_rows=4_096).partitionBy("part").parquet(str(tmp_path / "s"))
    back = spark.read.parquet(str(tmp_path / "s"))
    assert sorted(r["id"] for r in back.collect()) == list(range(20_000))
    files = sorted((tmp_path / "s").glob("part=*/*.parquet"))
    sizes = [pq.ParquetFile(f).metadata.row_group(g).num_rows
             for f in files for g in range(pq.ParquetFile(f).metadata.num_row_groups)]
    assert sum(sizes) == 20_000
    if engine_name == "sail":
        assert max(sizes) <= 4_096 and len(sizes) >= 6, sizes


def test_the_rows_of_a_staged_folder_are_counted_per_value_without_the_engine(spark: Any, tmp_path: Any) -> None:
    """As a gold table's change feed counts its rows per kind: a folder of no rows (which Sail does
    not create) counts none, and a URI is read as its path."""
    rows = [(f"k{n}", kind, None, n) for n, kind in enumerate(["insert"] * 5 + ["update"] * 3 + [None] * 2)]
    delta.stage(spark.createDataFrame(rows, DDL), str(tmp_path / "changes"))
    assert delta.staged_counts(str(tmp_path / "changes"), "value") == {"insert": 5, "update": 3, "": 2}
    delta.stage(spark.createDataFrame([], DDL), str(tmp_path / "none"))
    assert delta.staged_counts(str(tmp_path / "none"), "value") == {}
    assert delta.staged_counts(f"file://{tmp_path}/changes", "value") == {"insert": 5, "update": 3, "": 2}


def test_rows_replaced_by_key_leave_the_tables_files_and_mark_deletion_vectors(spark: Any, lake: Any) -> None:
    """replace_rows: the rows of the given keys go, the new rows come, keys not in the table are no
    error; no data file of the table is written again (each stays, with a deletion vector when a
    row of it went), and mergeable turns false once enough rows are deleted, or when the table
    has no more live rows than the caller writes whole."""
    from lakehouse.spark import deltalog

    ref = table(str(lake.lake_root), "silver", "replaced")
    first = [(f"k{n}", str(n), None, 1) for n in range(10)]
    delta.overwrite(spark.createDataFrame(first, DDL).coalesce(1), ref, **delta.DELETION_VECTORS)
    (before,) = deltalog.snapshot(ref.location).files
    assert delta.mergeable(ref)
    # a table of at most whole_rows live rows is written whole (the callers' WHOLE_*_ROWS)
    assert delta.mergeable(ref, whole_rows=9) and not delta.mergeable(ref, whole_rows=10)
    keys = spark.createDataFrame([("k1",), ("k2",), ("k3",), ("gone",)], "key STRING")
    delta.replace_rows(spark, ref, DDL, spark.createDataFrame([("k1", "one", "new", 2)], DDL), keys, "key")
    got = {r["key"]: (r["value"], r["note"], r["run_id"]) for r in spark.read.format("delta").load(ref.location).collect()}
    assert got == {**{k: (v, n, r) for k, v, n, r in first if k not in ("k2", "k3")}, "k1": ("one", "new", 2)}
    after = deltalog.snapshot(ref.location)
    kept = [f for f in after.files if f.path == before.path]
    assert kept and kept[0].deleted == 3 and kept[0].deletion_vector, after.files
    assert after.rows == 8 and after.deleted_share == 3 / 11
    assert not delta.mergeable(ref)  # a fifth of the rows written are deleted: time to write it whole


def test_a_table_without_deletion_vectors_is_not_mergeable(spark: Any, lake: Any) -> None:
    ref = table(str(lake.lake_root), "silver", "plain")
    delta.overwrite(spark.createDataFrame([("k", "v", None, 1)], DDL), ref)
    assert not delta.mergeable(ref)
    assert not delta.mergeable(table(str(lake.lake_root), "silver", "missing"))


@pytest.mark.parametrize("here", [False, True], ids=["engine", "package"])
def test_buckets_written_again_read_only_the_live_files_of_their_buckets(spark: Any, lake: Any, here: bool,
                                                                         monkeypatch: Any) -> None:
    """replace_buckets given the table's snapshot reads the touched buckets' rows from the data files
    its Delta log lists, as parquet: a file an earlier write of the bucket removed, still on disk,
    is not read again, and the rows are those a read through Delta gives; the other buckets' files
    stay as they are. Written by the engine, or with ``here`` by the ``deltalake`` package (Apache
    Spark's gold tables whose touched buckets are small), to the same rows. A table with an array
    column is read through Delta (read_files says None)."""
    from lakehouse.spark import buckets

    by_package: list[bool] = []
    package_write = delta._package_write_arrow
    monkeypatch.setattr(delta, "_package_write_arrow",
                        lambda *a, **k: by_package.append(package_write(*a, **k)) or by_package[-1])

    ddl, count = "instance_id STRING, value STRING", 4
    ref = table(str(lake.lake_root), "gold", "bucketed")
    ids = [f"0020{n:04x}" + "ab" * 30 for n in range(0, 65536, 4099)]  # 16 ids over the 4 buckets
    buckets.write(spark.createDataFrame([(i, "v0") for i in ids], ddl), ref, count)
    expected = dict.fromkeys(ids, "v0")

    def replace(new: dict[str, str], gone: list[str]) -> None:
        snap = deltalog.snapshot(ref.location)
        named = buckets.values_for({buckets.hash_of(i) or 0 for i in [*new, *gone]}, count)
        assert buckets.read_files(spark, ref.location, snap, named, ddl) is not None  # the parquet read
        rows = spark.createDataFrame(list(new.items()), ddl).select("*", buckets.column(count))
        keys = spark.createDataFrame([(i,) for i in [*new, *gone]], "instance_id STRING")
        delta.replace_buckets(spark, ref, ddl, rows, keys, "instance_id", named, snap, here=here)
        assert by_package == ([True] if here else [])
        by_package.clear()
        after = deltalog.snapshot(ref.location)
        assert after.version == snap.version + 1
        assert ({f.path for f in after.files if int(f.partition_values[buckets.COLUMN] or -1) not in named}
                == {f.path for f in snap.files if int(f.partition_values[buckets.COLUMN] or -1) not in named})
        expected.update(new)
        for i in gone:
            expected.pop(i)
        stored = spark.read.format("delta").load(ref.location)
        assert {r["instance_id"]: r["value"] for r in stored.collect()} == expected
        assert {(r["instance_id"], r["_bucket"]) for r in stored.collect()} == {
            (i, count + (buckets.hash_of(i) or 0) % count) for i in expected}

    replace({ids[0]: "v1"}, [ids[4]])  # ids[0] and ids[4] share a bucket
    replace({ids[8]: "v2"}, [])  # the same bucket again: its removed file is still on disk
    replace({ids[1]: "v3", ids[0]: "v4"}, [ids[2]])
    assert deltalog.snapshot(ref.location).version == 3

    listed = table(str(lake.lake_root), "gold", "listed")
    buckets.write(spark.createDataFrame([(ids[0], ["a"])], "instance_id STRING, value ARRAY<STRING>"), listed, count)
    assert buckets.read_files(spark, listed.location, deltalog.snapshot(listed.location), [count],
                              "instance_id STRING, value ARRAY<STRING>") is None


def test_an_upsert_keyed_by_batch_tells_new_keys_from_the_tables_statistics(spark: Any, lake: Any,
                                                                            monkeypatch: Any) -> None:
    """Keyed by (key, batch) as silver.messages is: a source whose batches all come after the table's
    greatest is appended without a join with the table's keys (none of its keys can be there); one
    with a key of a stored batch is merged, its row replaced, not added twice."""
    ddl = "key STRING, batch BIGINT, value STRING, run_id BIGINT"
    ref = table(str(lake.lake_root), "silver", "batched")
    delta.upsert(spark, ref, ddl, spark.createDataFrame([("a", 1, "x", 1), ("b", 2, "x", 1)], ddl), ["key", "batch"],
                 "run_id")
    snap = deltalog.snapshot(ref.location)
    assert delta._keys_past(snap, spark.createDataFrame([("c", 3, "x", 2), ("d", None, "x", 2)], ddl), ["key", "batch"])
    assert not delta._keys_past(snap, spark.createDataFrame([("a", 2, "y", 2), ("c", 3, "x", 2)], ddl), ["key", "batch"])
    assert not delta._keys_past(snap, spark.createDataFrame([("c", 3, "x", 2)], ddl), ["key"])  # no integer key
    joins = []
    real_join = type(spark.createDataFrame([], ddl)).join
    monkeypatch.setattr(type(spark.createDataFrame([], ddl)), "join",
                        lambda self, *a, **k: joins.append(a) or real_join(self, *a, **k))
    delta.upsert(spark, ref, ddl, spark.createDataFrame([("c", 3, "x", 2)], ddl), ["key", "batch"], "run_id", snap=snap)
    assert joins == []  # appended on the statistics' word
    delta.upsert(spark, ref, ddl, spark.createDataFrame([("a", 1, "y", 3), ("e", 4, "x", 3)], ddl), ["key", "batch"],
                 "run_id")
    assert joins  # a stored batch: the keys are looked up
    got = sorted(tuple(r) for r in spark.read.format("delta").load(ref.location).select(*delta.columns(ddl)).collect())
    assert got == [("a", 1, "y", 3), ("b", 2, "x", 1), ("c", 3, "x", 2), ("e", 4, "x", 3)]


def test_the_cascade_set_is_written_as_its_change_in_the_buckets_it_touches(spark: Any, lake: Any,
                                                                            monkeypatch: Any) -> None:
    """silver.cascade_removed (cascades.write_removed): written whole in buckets, then a region
    walk's change marks the ids it takes out and the old schema rows in deletion vectors of their
    buckets' files, adds the new ids and schema rows, and leaves the other buckets' files alone;
    a set from before buckets is written whole in buckets, though its removed ids read itself."""
    from lakehouse.spark import buckets, cascades

    monkeypatch.setattr(buckets, "BUCKET_ROWS", 2)
    ref = table(str(lake.lake_root), "silver", "cascade_set")
    ids = [f"0020{n:04x}" + "ab" * 30 for n in range(16)]  # 16 ids, hashes 0 to 15
    schemas = ["a_1", "b_2"]

    def stored() -> tuple[set[str], dict[str, int]]:
        rows = spark.read.format("delta").load(ref.location).collect()
        assert all(r[buckets.COLUMN] is not None for r in rows)
        return ({r["instance_id"] for r in rows if r["instance_id"] is not None},
                {r["schema"]: r["silver_run"] for r in rows if r["instance_id"] is None})

    cascades.write_removed(spark, ref, cascades.hex_ids_frame(spark, set(ids)), schemas, 3, str(lake.lake_root))
    snap, count = buckets.layout(ref.location)
    assert count == 8 and snap is not None and stored() == (set(ids), {"a_1": 3, "b_2": 3})
    # hashes 0xffff, 1 and 2: buckets 15, 9 and 10 (8 + hash mod 8); the schema rows in bucket 8
    added, dropped = "0020ffff" + "cd" * 30, {ids[1], ids[2]}
    change = cascades.SetChange(frozenset({added}), frozenset(dropped), snap, 2)  # 16 ids and 2 schema rows
    assert (change.held, change.buckets) == (16, count)
    assert change.count == 15
    removed = cascades.hex_ids_frame(spark, (set(ids) - dropped) | {added})
    cascades.write_removed(spark, ref, removed, schemas, 4, str(lake.lake_root), change)
    assert stored() == ((set(ids) - dropped) | {added}, {"a_1": 4, "b_2": 4})
    after = deltalog.snapshot(ref.location)
    assert after.version == snap.version + 1 and after.rows == 15 + 2
    untouched = {f.path for f in snap.files if f.partition_values[buckets.COLUMN] in ("11", "12", "13", "14")}
    assert untouched and untouched <= {f.path for f in after.files if not f.deletion_vector}
    assert any(f.deletion_vector for f in after.files)

    # a set written before it had buckets: written whole, in buckets, from a read of itself
    plain = table(str(lake.lake_root), "silver", "cascade_set_plain")
    delta.overwrite(cascades.removed_rows(spark, cascades.hex_ids_frame(spark, set(ids)), schemas, 3), plain)
    before = delta.read(spark, plain)
    assert before is not None
    itself = (before.where("instance_id IS NOT NULL").select("instance_id")
              .join(cascades.hex_ids_frame(spark, dropped), "instance_id", "left_anti")
              .unionByName(cascades.hex_ids_frame(spark, {added})))
    cascades.write_removed(spark, plain, itself, schemas, 4, str(lake.lake_root),
                           cascades.SetChange(frozenset({added}), frozenset(dropped), deltalog.snapshot(plain.location), 2))
    ref = plain
    assert buckets.layout(plain.location)[1] == 8
    assert stored() == ((set(ids) - dropped) | {added}, {"a_1": 4, "b_2": 4})
    assert delta.mergeable(plain)  # deletion vectors on: the next change is a merge


def test_a_whole_write_sets_its_table_properties_on_a_table_that_exists(spark: Any, lake: Any) -> None:
    """Neither engine sets a writer's table properties when it overwrites a table that exists:
    overwrite sets them after, so that a table from before them (a lake of an earlier release)
    gains them when it is next written whole."""
    ref = table(str(lake.lake_root), "silver", "older")
    delta.overwrite(spark.createDataFrame([("k", "v", None, 1)], DDL), ref)
    assert not delta.mergeable(ref)
    delta.overwrite(spark.createDataFrame([("k", "w", None, 2)], DDL), ref, **delta.DELETION_VECTORS)
    assert deltalog.snapshot(ref.location).properties == delta.DELETION_VECTORS and delta.mergeable(ref)
    assert [tuple(r) for r in spark.read.format("delta").load(ref.location).collect()] == [("k", "w", None, 2)]
    version = deltalog.snapshot(ref.location).version
    delta.overwrite(spark.createDataFrame([("k", "x", None, 3)], DDL), ref, **delta.DELETION_VECTORS)
    assert deltalog.snapshot(ref.location).version == version + 1  # set already: no commit of its own
    assert deltalog.metadata(ref.location)["configuration"] == delta.DELETION_VECTORS


class _Stopped(BaseException):
    """A write stopped right after one of its commits (no handler of the write catches it)."""


def test_a_table_written_in_slices_ends_as_one_commit_would_leave_it_and_says_meanwhile_it_is_not(
        spark: Any, lake: Any, tmp_path: Any, monkeypatch: Any) -> None:
    """buckets.write given a staging folder writes a large table a slice of its buckets at a time
    (here every table of 2 buckets or more, 4 slices, a commit each): the rows, their buckets, a
    file a bucket and the table properties as one commit gives. A write stopped after its second
    commit leaves the first two slices' rows and a marker that names the table; written again,
    the table is as one commit leaves it and the marker gone. An emptied slice gets no commit and
    keeps no row; no rows at all, one commit that empties the table."""
    from lakehouse.spark import buckets

    monkeypatch.setattr(buckets, "SLICED_FROM", 2)
    monkeypatch.setattr(buckets, "STAGED_SLICES", 4)
    monkeypatch.setattr(buckets, "SLICE_BYTES", 1)
    ddl, count = "instance_id STRING, value ARRAY<STRING>", 8
    staging = str(tmp_path / "staging")
    ids = [f"0020{n:04x}" + "ab" * 30 for n in range(0, 65536, 1031)]  # 64 ids over the 8 buckets
    one, sliced = table(str(lake.lake_root), "gold", "one"), table(str(lake.lake_root), "gold", "sliced")
    commits: list[str] = []
    monkeypatch.setattr(delta, "on_commit", lambda _n, name: commits.append(name))

    def stored(ref: Any) -> set[tuple[str, tuple[str, ...], int]]:
        return {(r["instance_id"], tuple(r["value"]), r["_bucket"])
                for r in spark.read.format("delta").load(ref.location).collect()}

    def write(rows: list[tuple[str, list[str]]], ref: Any, **staged: str) -> None:
        buckets.write(spark.createDataFrame(rows, ddl), ref, count, **staged, **{"delta.checkpointInterval": "1000000"})

    first = [(i, ["v0"]) for i in ids]
    write(first, one)
    commits.clear()
    write(first, sliced, staging=staging)
    assert commits == ["sliced"] * 4 and stored(sliced) == stored(one)
    snap = deltalog.snapshot(sliced.location)
    assert len(snap.files) == count and snap.properties == {"delta.checkpointInterval": "1000000"}
    assert buckets.unfinished(staging) == [] and not (tmp_path / "staging" / "slices_sliced").exists()

    # the first slice's buckets (8 and 9) emptied, every other row changed; stopped after 2 commits
    second = [(i, ["v1", i[:8]]) for i in ids if (buckets.hash_of(i) or 0) % count >= 2]

    def stop_after_two(_n: int, name: str) -> None:
        commits.append(name)
        if len(commits) == 2:
            raise _Stopped
    commits.clear()
    monkeypatch.setattr(delta, "on_commit", stop_after_two)
    with pytest.raises(_Stopped):
        write(second, sliced, staging=staging)
    assert buckets.unfinished(staging) == ["sliced"]
    write(second, one)
    assert stored(sliced) == {row for row in stored(one) if row[2] < count + 6}  # slices 1 and 2: buckets 10 to 13
    monkeypatch.setattr(delta, "on_commit", lambda _n, name: commits.append(name))
    commits.clear()
    write(second, sliced, staging=staging)
    assert stored(sliced) == stored(one) and commits == ["sliced"] * 3 and buckets.unfinished(staging) == []

    write([], sliced, staging=staging)
    assert stored(sliced) == set() and commits == ["sliced"] * 4


ROWS_DDL = "key STRING, n BIGINT, flag BOOLEAN, raw BINARY, at TIMESTAMP, tags ARRAY<STRING>"


def test_rows_appended_and_read_by_this_process_are_the_engines_rows(spark: Any, lake: Any) -> None:
    """append_rows and read_rows (the ``deltalake`` package, for small bookkeeping tables) agree
    with the engine: each append is one Delta version (a commit the crash tests can stop after),
    the engine reads back every value as it wrote them (null, a timestamp given with or without a
    zone, binary, arrays), and read_rows gives what the engine's collect gives; a table not
    created yet is created by the engine, and a missing table reads as None."""
    from datetime import datetime, timezone

    ref = table(str(lake.lake_root), "silver", "bookkeeping")
    assert delta.read_rows(spark, ref) is None and delta.read_arrow(spark, ref) is None
    at = datetime(2026, 5, 17, 12, 30, 1, 250000)
    first = [("a", 1, True, b"\x00\xff", at, ["x"]), ("b", None, None, None, None, None)]
    later = [("c", 2**40, False, b"", at.replace(tzinfo=timezone.utc), [])]
    commits: list[str] = []
    old = delta.on_commit
    delta.on_commit = lambda number, name: commits.append(name)
    try:
        delta.append_rows(spark, first, ROWS_DDL, ref)  # no table yet: the engine creates it
        delta.append_rows(spark, later, ROWS_DDL, ref)  # by this process
    finally:
        delta.on_commit = old
    assert commits == ["bookkeeping", "bookkeeping"]
    assert deltalog.snapshot(ref.location).version == 1
    engine = sorted(spark.read.format("delta").load(ref.location).collect(), key=lambda r: r["key"])
    expected = [(k, n, f, None if r is None else bytes(r), t if t is None else t.replace(tzinfo=None), g)
                for k, n, f, r, t, g in [*first, *later]]
    assert [(r["key"], r["n"], r["flag"], None if r["raw"] is None else bytes(r["raw"]), r["at"], r["tags"])
            for r in engine] == expected
    mine = sorted(delta.read_rows(spark, ref) or [], key=lambda r: r["key"])
    assert [tuple(r) for r in mine] == expected
    assert [list(r.asDict()) for r in mine[:1]] == [delta.columns(ROWS_DDL)]


def test_a_table_the_package_refuses_is_appended_to_and_read_by_the_engine(spark: Any, lake: Any,
                                                                          monkeypatch: Any) -> None:
    """When the ``deltalake`` package refuses a table (a feature it lacks, a schema that differs),
    append_rows and read_arrow fall back to the engine: the rows land, once, and read back."""
    import deltalake
    from deltalake.exceptions import DeltaError

    ref = table(str(lake.lake_root), "silver", "refused")
    delta.append_rows(spark, [("k1", "v1", None, 1)], DDL, ref)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise DeltaError("not supported")

    monkeypatch.setattr(deltalake, "write_deltalake", refuse)
    monkeypatch.setattr(deltalake.DeltaTable, "to_pyarrow_table", refuse)
    delta.append_rows(spark, [("k2", "v2", "n", 2)], DDL, ref)
    delta.append_arrow(spark, pa.Table.from_pylist([{"key": "k3", "value": "v3", "note": None, "run_id": 3}],
                                                   arrow_schema(DDL)), DDL, ref)
    assert deltalog.snapshot(ref.location).version == 2
    assert sorted(tuple(r) for r in delta.read_rows(spark, ref) or []) == [
        ("k1", "v1", None, 1), ("k2", "v2", "n", 2), ("k3", "v3", None, 3)]


def test_an_arrow_table_appended_by_this_process_is_one_version_the_engine_reads(spark: Any, lake: Any) -> None:
    """append_arrow (a change feed's rows held here): one Delta version, read back by the engine."""
    ref = table(str(lake.lake_root), "silver", "arrowed")
    delta.append_rows(spark, [("k0", None, None, 0)], DDL, ref)
    rows = [{"key": f"k{n}", "value": str(n), "note": None if n % 2 else "x", "run_id": n} for n in range(1, 4)]
    delta.append_arrow(spark, pa.Table.from_pylist(rows, arrow_schema(DDL)), DDL, ref)
    assert deltalog.snapshot(ref.location).version == 1
    assert sorted(map(tuple, spark.read.format("delta").load(ref.location).collect())) == sorted(
        [("k0", None, None, 0), *(tuple(r.values()) for r in rows)])


def test_a_table_the_package_appends_to_gets_a_checkpoint_as_the_engines_leave_one(spark: Any, lake: Any) -> None:
    """Appends by the package checkpoint the table every ``CHECKPOINT_INTERVAL`` versions, as the
    engines do after their own commits (else its log would grow with every run that appends), and
    the engine and the package read the table from that checkpoint on as before."""
    from pathlib import Path

    ref = table(str(lake.lake_root), "silver", "appended_often")
    delta.append_rows(spark, [("k0", "v", None, 0)], DDL, ref)
    for n in range(1, delta.CHECKPOINT_INTERVAL + 2):
        delta.append_rows(spark, [(f"k{n}", "v", None, n)], DDL, ref)
    log = Path(ref.location, "_delta_log")
    assert sorted(p.name for p in log.glob("*.checkpoint.parquet")) == [f"{delta.CHECKPOINT_INTERVAL:020d}.checkpoint.parquet"]
    expected = sorted((f"k{n}", "v", None, n) for n in range(delta.CHECKPOINT_INTERVAL + 2))
    assert sorted(map(tuple, spark.read.format("delta").load(ref.location).collect())) == expected
    assert sorted(map(tuple, delta.read_rows(spark, ref) or [])) == expected


def test_a_staged_folder_replaces_a_table_by_this_process_when_small_and_by_the_engine_past_that(
        spark: Any, lake: Any, tmp_path: Any, monkeypatch: Any) -> None:
    """replace_with_staged (``silver.logs`` from the log pass's staged folder): the table holds the
    folder's rows after one new Delta version, written from this process up to
    ``PACKAGE_STAGED_ROWS`` rows, by the engine past it, and by the engine when the table's
    columns differ from the rows' (a table of an earlier release)."""
    from lakehouse.spark.tables import delta_version

    ref = table(str(lake.lake_root), "silver", "from_staged")
    delta.append_rows(spark, [("old", "v", None, 0)], DDL, ref)
    for n, limit in enumerate((10, 0), start=1):
        monkeypatch.setattr(delta, "PACKAGE_STAGED_ROWS", limit)
        rows = [(f"k{n}-{i}", str(i), None, n) for i in range(3)]
        path = str(tmp_path / f"staged{n}")
        delta.replace_with_staged(delta.stage(spark.createDataFrame(rows, DDL), path, DDL), path, DDL, ref)
        assert delta_version(ref.location) == n
        assert sorted(map(tuple, spark.read.format("delta").load(ref.location).collect())) == sorted(rows)
    wider = f"{DDL}, extra STRING"
    path = str(tmp_path / "wider")
    monkeypatch.setattr(delta, "PACKAGE_STAGED_ROWS", 10)
    delta.replace_with_staged(delta.stage(spark.createDataFrame([("w", "v", None, 3, "e")], wider), path, wider),
                              path, wider, ref)
    assert spark.read.format("delta").load(ref.location).columns == delta.columns(wider)


def test_a_table_with_deletion_vectors_or_partitions_is_read_by_the_engine(spark: Any, lake: Any) -> None:
    """read_rows reads a table's files itself only when their rows are the table's: with deletion
    vectors (rows a MERGE took out are still in the files) or partitions (values in the log), what
    it gives is the engine's read."""
    from lakehouse.spark import buckets

    ref = table(str(lake.lake_root), "silver", "with_deletions")
    delta.overwrite(spark.createDataFrame([(f"k{n}", str(n), None, 1) for n in range(6)], DDL).coalesce(1), ref,
                    **delta.DELETION_VECTORS)
    keys = spark.createDataFrame([("k1",), ("k2",)], "key STRING")
    delta.replace_rows(spark, ref, DDL, spark.createDataFrame([("k1", "one", None, 2)], DDL), keys, "key")
    engine = sorted(map(tuple, spark.read.format("delta").load(ref.location).collect()))
    assert len(engine) == 5 and sorted(map(tuple, delta.read_rows(spark, ref) or [])) == engine
    parts = table(str(lake.lake_root), "silver", "in_buckets")
    buckets.write(spark.createDataFrame([(f"k{n}", str(n), None, 1) for n in range(4)], DDL), parts, 2, "key")
    rows = delta.read_rows(spark, parts) or []
    assert sorted(map(tuple, rows)) == sorted(map(tuple, spark.read.format("delta").load(parts.location).collect()))
    assert buckets.COLUMN in rows[0].asDict()


def test_a_small_gold_table_is_written_again_by_this_process_as_the_engine_would(spark: Any, lake: Any,
                                                                               monkeypatch: Any) -> None:
    """gold.write_table with ``here_rows`` (Apache Spark's small gold tables written whole): once the
    table exists with its buckets and properties, it is written again as one new Delta version by
    the ``deltalake`` package from the engine's rows, with no engine write: the engine reads back
    every value (a DOUBLE, binary, a timestamp, arrays, nulls), a file per bucket, statistics only
    on the id columns (``STATS_COLUMNS``). Past ``here_rows`` rows, or when the table lacks one of
    its properties (a table of an earlier release), the engine writes it (and sets them)."""
    from datetime import datetime

    from lakehouse.spark import buckets, gold

    ddl = "instance_id STRING, author STRING, n BIGINT, x DOUBLE, raw BINARY, at TIMESTAMP, tags ARRAY<STRING>"
    ref = table(str(lake.lake_root), "gold", "small_v1")

    def rows(run: int) -> list[tuple[Any, ...]]:
        return [(f"i{k}", "a", run * k, 990232.5988427799 + run, bytes([k]), datetime(2026, 1, 1, 12, k),
                 None if k == 3 else [f"t{k}"] * (k % 3)) for k in range(8)]

    def read() -> list[tuple[Any, ...]]:
        frame = spark.read.format("delta").load(ref.location).drop(buckets.COLUMN)
        return sorted((*r[:4], bytes(r[4]), r[5], r[6]) for r in frame.collect())

    engine_writes: list[Any] = []
    engine_overwrite = delta.overwrite
    monkeypatch.setattr(delta, "overwrite", lambda *a, **k: engine_writes.append(a) or engine_overwrite(*a, **k))
    gold.write_table(spark.createDataFrame(rows(1), ddl), ref, 8, here_rows=8)  # a new table: the engine's
    assert len(engine_writes) == 1
    commits: list[str] = []
    monkeypatch.setattr(delta, "on_commit", lambda number, name: commits.append(name))
    gold.write_table(spark.createDataFrame(rows(2), ddl), ref, 8, here_rows=8)
    assert (commits, len(engine_writes)) == (["small_v1"], 1)
    snap = deltalog.snapshot(ref.location)
    assert snap.version == 1 and read() == sorted(rows(2))
    assert sorted(len(files) for files in buckets.files_of(snap).values()) == [1] * len(buckets.files_of(snap))
    assert {name for f in snap.files for name in f.minima} == {"instance_id", "author"}
    gold.write_table(spark.createDataFrame(rows(3), ddl), ref, 8, here_rows=7)
    assert len(engine_writes) == 2 and read() == sorted(rows(3))
    delta.set_properties(spark, ref, {"delta.dataSkippingNumIndexedCols": "3"})
    gold.write_table(spark.createDataFrame(rows(4), ddl), ref, 8, here_rows=8)
    assert len(engine_writes) == 3 and read() == sorted(rows(4))
    assert deltalog.snapshot(ref.location).properties["delta.dataSkippingNumIndexedCols"] == str(gold.STATS_COLUMNS)


def test_a_gold_table_whose_lists_are_all_empty_is_written_by_this_process(spark: Any, lake: Any,
                                                                          monkeypatch: Any) -> None:
    """An array column whose values are all empty lists or nulls: Apache Spark's Arrow then has the
    lists' values array without offsets, which the ``deltalake`` package mishandled when it split
    the rows by bucket (a panic, and the table written by the engine instead); the rows are copied
    afresh before the package writes them, so it writes them, as they are."""
    from lakehouse.spark import gold

    ddl = "instance_id STRING, author STRING, tags ARRAY<STRING>, blob BINARY"
    ref = table(str(lake.lake_root), "gold", "empty_lists_v1")
    rows = [(f"i{k}", "a", None if k % 2 else [], None) for k in range(6)]
    gold.write_table(spark.createDataFrame(rows, ddl), ref, 6, here_rows=6)  # a new table: the engine's
    by_package: list[bool] = []
    package_write = delta._package_write_arrow
    monkeypatch.setattr(delta, "_package_write_arrow",
                        lambda *a, **k: by_package.append(package_write(*a, **k)) or by_package[-1])
    again = [(i, a, None if tags is None else [], b"x") for i, a, tags, _ in rows]
    gold.write_table(spark.createDataFrame(again, ddl), ref, 6, here_rows=6)
    assert by_package == [True]
    stored = spark.read.format("delta").load(ref.location).collect()
    assert sorted((r["instance_id"], r["author"], r["tags"], bytes(r["blob"])) for r in stored) == sorted(again)


@pytest.mark.parametrize("layout", ["whole", "buckets", "regrouped"])
def test_a_merge_held_here_leaves_the_rows_the_engine_leaves(spark: Any, lake: Any, monkeypatch: Any,
                                                             layout: str) -> None:
    """gold.rewrite_rows with the change held here (``HereRows``: a small run's touched ids and
    rows): the table it leaves holds exactly the rows, buckets included, that the engine's rewrite
    of the same change leaves (values of every type, nulls, an update, a delete, a create), in one
    new Delta version, and the engine is asked nothing: no query, no write. Whole (a small table),
    in the touched buckets only (the kept rows keep their stored bucket), or whole in fewer buckets
    than it was written in (every kept row's bucket computed again)."""
    from datetime import datetime, timezone

    from lakehouse.core.gold import InstanceState
    from lakehouse.core.messages import FieldChange, SchemaMeta, SchemaMigration
    from lakehouse.core.projection import plan_projection
    from lakehouse.core.schemas import build_versions
    from lakehouse.spark import buckets, gold

    kinds = (("n", "integer"), ("s", "text"), ("x", "float"), ("b", "boolean"), ("raw", "blob"), ("at", "timestamp"),
             ("tags", "text[]"))
    sv = build_versions([(1, SchemaMeta("things")),
                         (2, SchemaMigration(tuple(FieldChange(name, "create", kind) for name, kind in kinds)))])
    projection = plan_projection(sv)

    def state(k: int, run: int) -> InstanceState:
        values = {"n": run * k, "s": None if k % 5 == 0 else f"s{k}", "x": 990232.5988427799 + run, "b": k % 2 == 0,
                  "raw": bytes([k % 256]), "at": datetime(2026, 1, 1, 12, k % 60, 7, 123_457 + k, tzinfo=timezone.utc),
                  "tags": None if k % 7 == 0 else [f"t{k}"] * (k % 3)}
        return InstanceState(f"{k:04x}{k * 7919 % 65536:04x}" + "0" * 60, "a" * 64,
                             {name: (2, value) for name, value in values.items()}, 2, f"{run:068x}", run)

    def frame(states: list[InstanceState]) -> Any:
        return gold.table_rows(gold.wide_local(spark, gold.wide_table(projection, states), projection), projection, 2)

    stored = [state(k, 1) for k in range(200)]
    live = [state(k, 2) for k in range(0, 200, 50)] + [state(k, 2) for k in (200, 201)]  # updates, creates
    ids = frozenset(s.instance_id for s in live) | {state(k, 1).instance_id for k in (7, 104)}  # and deletes
    touched = spark.createDataFrame([("things", i) for i in sorted(ids)], "schema STRING, instance_id STRING")
    hashes = {h for h in map(buckets.hash_of, ids) if h is not None}
    if layout == "buckets":
        monkeypatch.setattr(gold, "WHOLE_TABLE_ROWS", 0)
        monkeypatch.setattr(gold, "BUCKET_ROWS", 16)
    left = {}
    for way in ("engine", "here"):
        ref = table(str(lake.lake_root), "gold", f"things_{way}_v2")
        if layout == "regrouped":
            monkeypatch.setattr(gold, "BUCKET_ROWS", 16)
        gold.write_table(frame(stored), ref, len(stored))
        if layout == "regrouped":
            assert buckets.of_snapshot(deltalog.snapshot(ref.location)) == 16
            monkeypatch.undo()
        held = None
        if way == "here":
            held = gold.HereRows(ids, gold.table_arrow(gold.wide_table(projection, live), projection, 2))
            for name in ("engine_arrow", "replace_buckets", "overwrite"):
                monkeypatch.setattr(delta, name, lambda *a, name=name, **k: pytest.fail(f"the engine was asked: {name}"))
            monkeypatch.setattr(buckets, "write", lambda *a, **k: pytest.fail("the engine was asked: buckets.write"))
        files_before = {f.path for f in deltalog.snapshot(ref.location).files}
        out = gold.rewrite_rows(spark, sv, 2, ref, frame(live), touched, hashes, here_rows=1_000, here=held)
        monkeypatch.undo()
        after = deltalog.snapshot(ref.location)
        named = set(buckets.values_for(hashes, buckets.of_snapshot(after) or 0)) if layout == "buckets" else set()
        # in buckets: the files of the other buckets stay as they were; whole: none does
        assert not named or {f.path for f in after.files
                             if int(f.partition_values[buckets.COLUMN]) not in named} <= files_before
        assert len(files_before - {f.path for f in after.files}) == (len(named) if named else len(files_before))
        if layout == "buckets":
            monkeypatch.setattr(gold, "WHOLE_TABLE_ROWS", 0)
            monkeypatch.setattr(gold, "BUCKET_ROWS", 16)
        rows = sorted(tuple(bytes(v) if isinstance(v, bytearray) else v for v in r)
                      for r in spark.read.format("delta").load(ref.location).collect())
        left[way] = (out.how, out.rows, out.delta_version, rows)
    assert left["here"] == left["engine"]
    how, count, version, rows = left["here"]
    assert (how, count, version) == ("whole" if layout == "regrouped" else layout, 200 - 2 + 2, 1)
    if layout == "regrouped":
        assert buckets.of_snapshot(deltalog.snapshot(ref.location)) == 1
    assert {r[0] for r in rows} == {s.instance_id for s in stored} - ids | {s.instance_id for s in live}

"""The rules of :func:`lakehouse.spark.compaction.plan`, on snapshots made here (no engine)."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse.spark import compaction
from lakehouse.spark.deltalog import DataFile, Snapshot
from lakehouse.spark.tables import TableRef

REF = TableRef("bronze", "t", "/nowhere/bronze/t")
FLAT = {"fields": [{"name": "batch_id", "type": "long"}, {"name": "line", "type": "string"}]}
BUCKETED = {"fields": [{"name": "instance_id", "type": "string"}, {"name": "_bucket", "type": "integer"}]}
SMALL = 1 << 10


def appended(path: str, low: int | None, high: int | None, size: int = SMALL, records: int | None = 1,
             nulls: int = 0) -> DataFile:
    minima = {} if low is None else {"batch_id": low}
    maxima = {} if high is None else {"batch_id": high}
    return DataFile(path, size, records, 0, None, {}, maxima, {"batch_id": nulls}, minima)


def bucket_file(path: str, bucket: int, size: int = SMALL, deleted: int = 0) -> DataFile:
    dv: dict[str, Any] | None = {"cardinality": deleted} if deleted else None
    return DataFile(path, size, 10, deleted, dv, {"_bucket": str(bucket)})


def flat(*files: DataFile) -> Snapshot:
    return Snapshot(3, files, {}, FLAT, ())


def bucketed(*files: DataFile) -> Snapshot:
    return Snapshot(3, files, {}, BUCKETED, ("_bucket",))


@pytest.fixture(autouse=True)
def _few(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compaction, "MIN_SMALL_FILES", 3)
    monkeypatch.setattr(compaction, "SMALL_FILE_BYTES", 1 << 20)


def test_the_small_files_past_every_other_files_values_are_the_tail() -> None:
    large = appended("large", 0, 10, size=1 << 30)
    tail = [appended(f"s{n}", n, n) for n in range(11, 15)]
    got = compaction.plan(REF, flat(large, *tail))
    assert (got.how, got.order, got.since, got.files_rewritten, got.files_after) == ("tail", "batch_id", 11, 4, 2)


def test_a_small_file_whose_values_reach_back_into_an_earlier_file_stays_out_of_the_tail() -> None:
    large = appended("large", 0, 10, size=1 << 30)
    late = appended("late", 5, 12)  # a batch as old as the large file's: rewriting from 5 would reach into it
    tail = [appended(f"s{n}", n, n) for n in range(13, 16)]
    got = compaction.plan(REF, flat(large, late, *tail))
    assert (got.how, got.since, got.files_rewritten) == ("tail", 13, 3)


def test_too_few_small_files_or_a_tail_too_short_leaves_the_table() -> None:
    large = appended("large", 0, 10, size=1 << 30)
    assert compaction.plan(REF, flat(large, appended("a", 11, 11), appended("b", 12, 12))).how is None
    assert compaction.plan(REF, flat(appended("x", 0, 0, records=0), large)).how is None  # an empty file is no work


def test_without_statistics_or_with_nulls_in_the_column_small_files_are_gathered_whole() -> None:
    large = appended("large", 0, 10, size=1 << 25)
    unknown = [appended(f"s{n}", None, None, records=None) for n in range(3)]
    assert compaction.plan(REF, flat(large, *unknown)).how == "whole"
    nulls = [appended(f"n{n}", 11 + n, 11 + n, nulls=1) for n in range(3)]
    assert compaction.plan(REF, flat(large, *nulls)).how == "whole"


def test_a_deletion_vector_in_a_table_without_buckets_writes_it_whole() -> None:
    marked = DataFile("m", SMALL, 4, 1, {"cardinality": 1}, {})
    got = compaction.plan(REF, flat(marked))
    assert (got.how, got.deletion_vectors, got.files_after) == ("whole", 1, 1)


def test_buckets_of_more_than_one_file_or_a_deletion_vector_are_written_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compaction, "CHUNK_BYTES", 3 * SMALL)
    files = [bucket_file("a1", 8), bucket_file("a2", 8), bucket_file("b", 9, deleted=2), bucket_file("c", 10),
             bucket_file("d1", 11), bucket_file("d2", 11), bucket_file("e1", 12), bucket_file("e2", 12)]
    got = compaction.plan(REF, bucketed(*files))
    assert got.how == "buckets"
    assert got.chunks == ((8, 9), (11,), (12,))  # bucket 10 is one file; a chunk holds about 3 files' bytes
    assert (got.files_rewritten, got.files_after, got.commits) == (7, 5, 3)
    assert compaction.plan(REF, bucketed(bucket_file("x", 8), bucket_file("y", 9))).how is None


def test_a_table_too_large_to_write_whole_is_left_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compaction, "WHOLE_BYTES_LIMIT", 2 * SMALL)
    unknown = [appended(f"s{n}", None, None, records=None) for n in range(3)]
    got = compaction.plan(REF, flat(*unknown))
    assert got.how is None and got.left is not None and "GiB" in got.left and got.commits == 0
    assert compaction.plan(REF, flat(*unknown), whole=True).how == "whole"  # asked for: written whole

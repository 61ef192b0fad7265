"""lakehouse.spark.deltalog without an engine: Z85 as the Delta protocol uses it, and the logs it
refuses to guess about."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakehouse.spark import deltalog


def test_z85_decodes_the_reference_vector() -> None:
    # ZeroMQ RFC 32's test vector
    assert deltalog._z85_decode("HelloWorld") == bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    with pytest.raises(deltalog.DeltaLogError):
        deltalog._z85_decode("Hell")


def _log(tmp_path: Path, *names: str) -> Path:
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    meta = {"metaData": {"id": "x", "format": {"provider": "parquet"}, "partitionColumns": [], "configuration": {},
                         "schemaString": json.dumps({"type": "struct", "fields": []})}}
    (log / f"{0:020d}.json").write_text(json.dumps({"protocol": {"minReaderVersion": 1}}) + "\n" + json.dumps(meta))
    for name in names:
        (log / name).write_text("")
    return log.parent


def test_a_v2_checkpoint_is_refused_not_skipped(tmp_path: Path) -> None:
    # Apache Spark's file system writes a hidden checksum beside each file: not a checkpoint
    table = _log(tmp_path, f".{0:020d}.checkpoint.parquet.crc", f".{0:020d}.json.crc")
    deltalog.snapshot(str(table))
    table = _log(tmp_path / "v2", f"{0:020d}.checkpoint.80a083e8-7026-4e79-81be-64bd76c8a5b2.parquet")
    with pytest.raises(deltalog.DeltaLogError, match="V2 checkpoints"):
        deltalog.snapshot(str(table))


def test_an_empty_table_and_a_missing_commit(tmp_path: Path) -> None:
    table = _log(tmp_path)
    snap = deltalog.snapshot(str(table))
    assert (snap.version, snap.files, snap.rows, snap.deleted_share) == (0, (), 0, 0.0)
    (table / "_delta_log" / f"{2:020d}.json").write_text("")
    with pytest.raises(FileNotFoundError, match="commit 1 is missing"):
        deltalog.snapshot(str(table))


def _file(path: str, stats: dict[str, object] | None, dv: dict[str, object] | None = None) -> deltalog.DataFile:
    add: dict[str, object] = {"path": path, "size": 1, "partitionValues": {}}
    if stats is not None:
        add["stats"] = json.dumps(stats)
    if dv is not None:
        add["deletionVector"] = dv
    return deltalog._data_file(add)


def test_the_greatest_value_is_read_from_statistics_only_when_they_tell() -> None:
    def snap(*files: deltalog.DataFile) -> deltalog.Snapshot:
        return deltalog.Snapshot(1, files, {}, {"type": "struct", "fields": []}, ())

    a = _file("a", {"numRecords": 2, "maxValues": {"n": 7, "b": True}, "nullCount": {"n": 0, "m": 2}})
    b = _file("b", {"numRecords": 1, "maxValues": {"n": 9}, "nullCount": {"n": 0}})
    empty = _file("e", {"numRecords": 0})
    assert snap(a, b, empty).integer_max("n") == 9
    assert snap(a).integer_max("m") is None  # only nulls
    assert snap(empty).integer_max("n") is None and snap().integer_max("n") is None
    unknown = [_file("c", None),  # no statistics
               _file("d", {"numRecords": 3, "maxValues": {}}),  # none for the column
               _file("f", {"numRecords": 3, "maxValues": {"n": 1}},
                     {"storageType": "u", "pathOrInlineDv": "x", "offset": 1, "sizeInBytes": 1, "cardinality": 1})]
    for other in unknown:
        with pytest.raises(LookupError):
            snap(a, other).integer_max("n")
    with pytest.raises(LookupError):  # a boolean is not an integer maximum
        snap(a).integer_max("b")


def test_the_files_past_a_value_are_found_from_statistics_only_when_they_tell() -> None:
    """As an ingest counts its batch's entries and gold finds the runs' changed messages: the files
    whose greatest value is past the given one, those of earlier values and empty ones left out
    whatever else they lack; a file that may hold later rows and whose statistics do not tell (none,
    no integer maximum, deleted rows) raises."""
    def snap(*files: deltalog.DataFile) -> deltalog.Snapshot:
        return deltalog.Snapshot(1, files, {}, {"type": "struct", "fields": []}, ())

    dv = {"storageType": "u", "pathOrInlineDv": "x", "offset": 1, "sizeInBytes": 1, "cardinality": 1}
    early = _file("early", {"numRecords": 2, "maxValues": {"n": 3}}, dv)  # deleted rows, but before
    late = _file("late", {"numRecords": 2, "maxValues": {"n": 5}})
    later = _file("later", {"numRecords": 1, "maxValues": {"n": 9}})
    empty = _file("e", {"numRecords": 0})
    assert [f.path for f in snap(early, late, later, empty).files_past("n", 3)] == ["late", "later"]
    assert [f.path for f in snap(early, late, later).files_past("n", 5)] == ["later"]
    assert snap(early, late).files_past("n", 9) == []
    for other in (_file("c", None), _file("d", {"numRecords": 3, "maxValues": {}}),
                  _file("b", {"numRecords": 3, "maxValues": {"n": True}}),
                  _file("f", {"numRecords": 3, "maxValues": {"n": 4}}, dv)):
        with pytest.raises(LookupError):
            snap(late, other).files_past("n", 3)


def test_a_log_is_read_whatever_json_its_writer_put_in_statistics(tmp_path: Path) -> None:
    # NaN and integers past 64 bits are not JSON that every parser takes (the fast one refuses them);
    # a file added and later removed is left out, its statistics unread
    table = _log(tmp_path)
    stats = '{"numRecords": 3, "maxValues": {"x": NaN, "big": 18446744073709551617, "n": 5}, "nullCount": {"n": 0}}'
    adds = [{"add": {"path": p, "size": 1, "partitionValues": {"_bucket": b}, "dataChange": True, "stats": s}}
            for p, b, s in [("a", "1", stats), ("gone", "2", "not json: never parsed")]]
    (table / "_delta_log" / f"{1:020d}.json").write_text("\n".join(json.dumps(a) for a in adds))
    (table / "_delta_log" / f"{2:020d}.json").write_text(json.dumps({"remove": {"path": "gone", "dataChange": True}}))
    snap = deltalog.snapshot(str(table))
    assert [(f.path, f.records, f.partition_values) for f in snap.files] == [("a", 3, {"_bucket": "1"})]
    assert snap.integer_max("n") == 5 and snap.files[0].maxima["big"] == 2**64 + 1
    assert snap.files[0].maxima["x"] != snap.files[0].maxima["x"]  # NaN


def test_the_schema_is_read_from_the_latest_versions_checksum_else_from_the_log(tmp_path: Path) -> None:
    table = _log(tmp_path)
    log = table / "_delta_log"
    field = {"name": "a", "type": "long", "nullable": False, "metadata": {}}
    with_a = {"type": "struct", "fields": [field]}
    (log / f"{0:020d}.crc").write_text(json.dumps({"numFiles": 0, "metadata": {"schemaString": json.dumps(with_a)}}))
    # the checksum of the latest version is read, not the log (which here says no columns)
    assert deltalog.schema(str(table)) == with_a
    # a checksum of an earlier version tells nothing of the latest: the log is replayed
    meta = {"metaData": {"id": "x", "format": {"provider": "parquet"}, "partitionColumns": [], "configuration": {},
                         "schemaString": json.dumps({"type": "struct", "fields": [{**field, "name": "b"}]})}}
    (log / f"{1:020d}.json").write_text(json.dumps(meta))
    assert [f["name"] for f in deltalog.schema(str(table))["fields"]] == ["b"]
    # a checksum cut short, or one without the metaData, neither
    (log / f"{1:020d}.crc").write_text('{"numFiles": ')
    assert [f["name"] for f in deltalog.schema(str(table))["fields"]] == ["b"]
    (log / f"{1:020d}.crc").write_text('{"numFiles": 0}')
    assert [f["name"] for f in deltalog.schema(str(table))["fields"]] == ["b"]
    with pytest.raises(FileNotFoundError):
        deltalog.schema(str(tmp_path / "none"))


def test_the_tables_a_run_writes_come_due_for_a_checkpoint_in_different_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`lakehouse.spark.delta.checkpoint_due`: each table once in every
    ``LOG_CHECKPOINT_COMMITS`` of its versions, never at version 0, and the gold tables and change
    tables of a schema, which a run writes together, at versions spread over that span (a run pays
    for a few checkpoints at most, not for all of them at once)."""
    from lakehouse.spark import delta

    monkeypatch.setattr(delta, "LOG_CHECKPOINT_COMMITS", 100)
    names = [f"mail_v{v}{kind}" for v in range(2, 9) for kind in ("", "_changes")]
    due = {name: [v for v in range(300) if delta.checkpoint_due(name, v)] for name in names}
    for name, versions in due.items():
        assert 0 not in versions and len(versions) in (2, 3), name
        assert all(b - a == 100 for a, b in zip(versions, versions[1:], strict=False)), name
    first = [versions[0] for versions in due.values()]
    assert max(first.count(v) for v in first) <= 2 and len(set(first)) >= len(names) - 3

"""The snapshot importer (lakehouse.publish.importer, `lakehouse import snapshots`).

Every import is checked by replaying what landed: each landing line is verified and decoded with
the core (entries, messages, schemas), instance messages are folded per instance in log order, and
the live instances' visible fields must equal the last snapshot's rows, read here independently.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from lakehouse.core import lenses as L
from lakehouse.core import schemas as S
from lakehouse.core.entries import verify_entry, yasmf_hash
from lakehouse.core.messages import (
    Create,
    Delete,
    FieldChange,
    SchemaMeta,
    SchemaMigration,
    SchemaRevert,
    Update,
    decode_message,
    is_field_name,
)
from lakehouse.errors import SnapshotError
from lakehouse.publish import importer as I
from lakehouse.publish.keys import KeyStore
from lakehouse.publish.publisher import Publisher
from tests.conftest import project_path

SCHEMA = "things"


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def write(folder: Path, name: str, text: str | bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if path.exists():
        path.chmod(0o644)
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def tsv(*rows: str) -> str:
    return "".join(row.replace("|", "\t") + "\n" for row in rows)


def run(tmp: Path, folder: Path, **options: Any) -> I.ImportSummary:
    options.setdefault("schema", SCHEMA)
    return I.import_snapshots(folder, store=KeyStore(tmp / "keys"), landing=tmp / "landing", **options)


def landing_files(tmp: Path) -> list[Path]:
    return sorted((tmp / "landing").glob("*.jsonl")) if (tmp / "landing").exists() else []


class Replay:
    """Everything that landed, verified, decoded and folded (what a correct lake would show)."""

    def __init__(self, tmp: Path) -> None:
        entries = []
        for path in landing_files(tmp):
            for line in path.read_text(encoding="utf-8").splitlines():
                obj = json.loads(line)
                raw, payload = bytes.fromhex(obj["entry"]), bytes.fromhex(obj["payload"])
                entry = verify_entry(raw, payload)
                entries.append((entry.author, entry.log_id, entry.seq_num, yasmf_hash(raw).hex(),
                                decode_message(payload)))
        entries.sort(key=lambda e: e[:3])
        self.lines = len(entries)
        keys = [e[:3] for e in entries]
        assert len(set(keys)) == len(keys), "an entry landed twice"
        schema_msgs = [(seq, m) for _, _, seq, _, m in entries if isinstance(m, (SchemaMeta, SchemaMigration,
                                                                                   SchemaRevert))]
        assert [seq for seq, _ in schema_msgs] == list(range(1, len(schema_msgs) + 1))
        self.versions = S.build_versions(schema_msgs)
        self.writes: dict[str, dict[str, Any]] = {}
        self.deleted: set[str] = set()
        self.kinds: dict[str, int] = {}
        for _, _, _, entry_hash, msg in entries:
            self.kinds[msg.kind] = self.kinds.get(msg.kind, 0) + 1
            fields: dict[str, Any] = {}
            if isinstance(msg, (Create, Update)):
                lens = self.versions.lens(msg.schema.version)
                L.check_fields(lens, msg.fields)  # fits the lens it names
                fields = {lens.get(name).key: value for name, value in msg.fields.items()}  # type: ignore[union-attr]
            if isinstance(msg, Create):
                self.writes[entry_hash] = fields
            elif isinstance(msg, Update):
                instance = msg.instance.hex()
                assert instance in self.writes and instance not in self.deleted
                self.writes[instance].update(fields)
            elif isinstance(msg, Delete):
                assert msg.instance.hex() in self.writes
                self.deleted.add(msg.instance.hex())

    @property
    def fields(self) -> tuple[str, ...]:
        return self.versions.lens(self.versions.current_version).names

    def rows(self, key: str) -> dict[str, dict[str, str]]:
        """Live instances by their key field: visible fields with a value."""
        out: dict[str, dict[str, str]] = {}
        for instance, values in self.writes.items():
            if instance in self.deleted:
                continue
            lens = self.versions.lens(self.versions.current_version)  # values are kept by field identity
            row = {f.name: values[f.key] for f in lens if values.get(f.key) is not None}
            assert row[key] not in out, f"two live instances of key {row[key]}"
            out[row[key]] = row
        return out


def expected_rows(path: Path, delimiter: str = "\t") -> tuple[str, dict[str, dict[str, str]]]:
    """A register snapshot read naively: last row of a key wins, empty cells and keys dropped."""
    text = path.read_bytes().decode("utf-8").replace("\r\n", "\n")
    lines = [line for line in text.split("\n") if line.strip()]
    header = [h.strip().replace("-", "_").lower() for h in lines[0].split(delimiter)]
    while not header[-1]:
        header.pop()
    rows: dict[str, dict[str, str]] = {}
    for line in lines[1:]:
        cells = line.split(delimiter)[: len(header)]
        row = {h: c for h, c in zip(header, cells, strict=False) if c.strip()}
        key = row.get(header[0], "").strip()
        if key:
            row[header[0]] = key
            rows[key] = row
    return header[0], rows


# --------------------------------------------------------------------------------------------
# pure parts
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("header", "name"), [
    ("country", "country"),
    ("local-authority-eng", "local_authority_eng"),
    ("Start Date (UTC)", "start_date_utc"),
    ("officialName", "official_name"),
    ("  Name  ", "name"),
    ("Café Owner", "cafe_owner"),
    ("2019 total", "f_2019_total"),
    ("__x__", "x"),
    ("%%", "column_4"),
    ("", "column_4"),
    ("a" * 70, "a" * 64),
    ("a" * 63 + "-b", "a" * 63),
])
def test_field_names_follow_the_field_name_rule(header: str, name: str) -> None:
    got = I.normalise_field_name(header, 4)
    assert got == name
    assert is_field_name(got)


def test_header_names_are_made_unique() -> None:
    columns, issues = I.field_names(["Name", "name", "NAME", ""])
    assert [c.field for c in columns] == ["name", "name_2", "name_3", "column_4"]
    assert [c.header for c in columns] == ["Name", "name", "NAME", ""]
    assert sorted(i.code for i in issues) == ["duplicate_column", "duplicate_column", "empty_header"]


def test_parse_handles_the_mess_of_real_files() -> None:
    data = ("\ufeffid\tname\tnote\t\r\n"   # BOM, trailing tab in the header, CR LF
            "a\tAlpha\t\t\r\n"             # trailing tabs
            "\r\n"                          # blank line
            "\t\t\r\n"                      # a line of delimiters only
            "b\tBeta\r\n"                   # short row
            " c \tGamma\tx\tSURPLUS\r\n"    # key with spaces, non-empty extra cell
            "\tNo key\t\r\n"                # empty key
            "a\tAlpha again\t \r\n"         # duplicate key, whitespace-only cell
            ).encode("utf-8")
    table = I.parse_snapshot(data, name="s.tsv")
    assert [c.field for c in table.columns] == ["id", "name", "note"]
    codes = {i.code: i for i in table.issues}
    assert set(codes) == {"byte_order_mark", "windows_line_ends", "header_trailing_delimiters", "blank_lines",
                          "trailing_delimiters", "short_rows", "extra_cells"}
    assert codes["blank_lines"].count == 2 and codes["blank_lines"].lines == (3, 4)
    assert codes["extra_cells"].level == "warning" and codes["extra_cells"].lines == (6,)
    assert [r.line for r in table.records] == [2, 5, 6, 7, 8]
    rows, key_issues = I.key_rows(table, "id")
    assert rows == {"a": {"id": "a", "name": "Alpha again"}, "b": {"id": "b", "name": "Beta"},
                    "c": {"id": "c", "name": "Gamma", "note": "x"}}
    assert list(rows) == ["a", "b", "c"]  # the last row wins, at the first one's place
    by_code = {i.code: i for i in key_issues}
    assert set(by_code) == {"missing_key", "key_whitespace", "duplicate_key"}
    assert by_code["duplicate_key"].lines == (2, 8) and "line 8" in by_code["duplicate_key"].message
    assert "warning" in str(by_code["duplicate_key"])


def test_csv_snapshots_are_read_with_quoting() -> None:
    data = b'id,name,remark\r\n1,"Smith, Jane","says ""hi""\non two lines"\r\n2,Bob,\r\n'
    table = I.parse_snapshot(data, name="s.csv", delimiter=",")
    assert [r.values for r in table.records] == [
        {"id": "1", "name": "Smith, Jane", "remark": 'says "hi"\non two lines'}, {"id": "2", "name": "Bob"}]
    assert [r.line for r in table.records] == [2, 4]


def test_text_that_is_not_utf8_is_read_as_windows_1252() -> None:
    table = I.parse_snapshot("id\tname\n1\tcaf\xe9\n".encode("cp1252"), name="s.tsv")
    assert table.records[0].values["name"] == "café"
    assert [i.code for i in table.issues] == ["not_utf8"]


def test_a_file_without_header_is_refused() -> None:
    with pytest.raises(SnapshotError) as err:
        I.parse_snapshot(b"\n\r\n", name="empty.tsv")
    assert err.value.code == "empty_snapshot" and "empty.tsv" in str(err.value)


@pytest.mark.parametrize(("data", "where"), [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4, "line 3, offset 8"),
    (b"PK\x03\x04\x14\x00\x06\x00" + b"id\tname\n" * 3, "offset 5"),
    (b"id\tname\n" + bytes([1, 2, 3, 4, 5, 6, 7, 8, 14, 15]) * 20, "byte 0x01 at line 2"),
])
def test_a_binary_file_is_refused_not_imported_as_garbage_rows(data: bytes, where: str) -> None:
    """Issue: importing a binary file as a snapshot imported garbage rows and printed control
    characters."""
    with pytest.raises(SnapshotError) as err:
        I.parse_snapshot(data, name="photo.csv", delimiter=",")
    message = str(err.value)
    assert err.value.code == "binary_snapshot" and "photo.csv" in message and where in message
    assert message.isprintable()


def test_text_with_a_stray_control_character_is_still_text() -> None:
    table = I.parse_snapshot(b"id\tname\n1\tbell\x07here\n2\tform\x0cfeed\n", name="s.tsv")
    assert [r.values["name"] for r in table.records] == ["bell\x07here", "form\x0cfeed"]


def test_header_diff_gives_the_migration_and_reports_renames() -> None:
    old = {k: I.Instance(f"id{k}", {"id": k, "name": f"N{k}", "town": f"T{k}"}) for k in "abcde"}
    new = {k: {"id": k, "title": f"N{k}", "zip": f"Z{k}"} for k in "abcde"}
    new["e"]["title"] = "changed"  # 4 of 5 agree: still a rename
    diff = I.diff_header(["id", "name", "town"], ["id", "title", "zip"], old=old, new=new)
    assert diff.removed == ("name", "town") and diff.added == ("title", "zip")
    assert diff.renames == (I.Rename("name", "title", 0.8),)
    assert diff.migration == SchemaMigration((
        FieldChange("name", "rename", to="title"), FieldChange("town", "remove"),
        FieldChange("zip", "create", type="text")))
    assert diff.fields_after == ("id", "title", "zip")
    # a name another field of the schema has had cannot be a rename's: remove + create, as before
    had = I.diff_header(["id", "name", "town"], ["id", "title", "zip"], old=old, new=new,
                        may_rename=lambda name, to: to != "title")
    assert had.renames == (I.Rename("name", "title", 0.8, published=False),)
    assert had.migration == SchemaMigration((
        FieldChange("name", "remove"), FieldChange("town", "remove"),
        FieldChange("title", "create", type="text"), FieldChange("zip", "create", type="text")))
    assert I.diff_header(["id", "a"], ["a", "id"]).migration is None
    assert I.diff_header(["id", "a"], ["a", "id"]).reordered


def test_row_diff_publishes_changed_fields_only() -> None:
    instances = {"a": I.Instance("i1", {"id": "a", "x": "1", "y": "2"}),
                 "b": I.Instance("i2", {"id": "b", "x": "1", "gone": "kept hidden"}),
                 "c": I.Instance("i3", {"id": "c"})}
    rows = {"b": {"id": "b", "x": "1", "y": "new"}, "a": {"id": "a", "x": "9"}, "d": {"id": "d", "y": "4"}}
    diff = I.diff_rows(instances, rows, ("id", "x", "y"))
    assert diff.creates == (("d", {"id": "d", "y": "4"}),)
    assert diff.updates == (("b", {"y": "new"}), ("a", {"x": "9", "y": None}))
    assert diff.deletes == ("c",)


# --------------------------------------------------------------------------------------------
# importing synthetic folders
# --------------------------------------------------------------------------------------------
def test_first_snapshot_publishes_schema_fields_and_creates(tmp_path: Path) -> None:
    folder = tmp_path / "snaps"
    write(folder, "001.tsv", tsv("Code|Full Name|note", "a|Alpha|", "b|Beta|x"))
    write(folder, "README.md", "not a snapshot")
    summary = run(tmp_path, folder)
    assert summary.imported == 1 and summary.skipped == 0 and summary.ignored == ["README.md"]
    report = summary.snapshots[0]
    assert report.first and report.key_field == "code"
    assert [(c.header, c.field) for c in report.columns] == [("Code", "code"), ("Full Name", "full_name"),
                                                             ("note", "note")]
    assert report.record.schema_version == 2 and report.record.messages == 4  # meta, migration, 2 creates
    replay = Replay(tmp_path)
    assert replay.kinds == {"schema-meta": 1, "schema-migration": 1, "create": 2}
    assert replay.versions.meta.name == SCHEMA
    assert [(f.name, str(f.type)) for f in replay.versions.lens(2)] == [
        ("code", "text"), ("full_name", "text"), ("note", "text")]
    assert replay.rows("code") == {"a": {"code": "a", "full_name": "Alpha"},
                                   "b": {"code": "b", "full_name": "Beta", "note": "x"}}
    assert replay.lines == summary.messages == 4  # the schema-meta counts too


def test_header_changes_become_migrations(tmp_path: Path) -> None:
    folder = tmp_path / "snaps"
    write(folder, "001.tsv", tsv("id|name|town|old", "a|Alpha|X|o1", "b|Beta|Y|o2", "c|Gamma|Z|o3"))
    # town renamed to city (same values), old removed, size added, a row changed, one gone, one new
    write(folder, "002.tsv", tsv("id|name|city|size", "a|Alpha|X|1", "b|Beta 2|Y|", "d|Delta|W|4"))
    summary = run(tmp_path, folder)
    second = summary.snapshots[1]
    assert [(c.name, c.action) for c in second.migration] == [
        ("town", "rename"), ("old", "remove"), ("size", "create")]
    assert [(r.old, r.new) for r in second.renames] == [("town", "city")]
    rec = second.record
    assert (rec.schema_version, rec.creates, rec.updates, rec.deletes) == (3, 1, 2, 1)  # a: size; b: name
    replay = Replay(tmp_path)
    assert replay.fields == ("id", "name", "city", "size")
    assert replay.rows("id") == expected_rows(folder / "002.tsv")[1]
    # the removed fields are hidden, not forgotten: their values stay in the instances' writes
    assert {w.get("old") for w in replay.writes.values()} >= {"o1", "o2"}


def test_a_rename_to_a_name_another_field_had_is_a_remove_and_a_create(tmp_path: Path) -> None:
    folder = tmp_path / "snaps"
    write(folder, "001.tsv", tsv("id|a|b", "x|1|p", "y|2|q"))
    write(folder, "002.tsv", tsv("id|c|b", "x|1|p", "y|2|q"))  # a renamed to c: one message
    write(folder, "003.tsv", tsv("id|c|a", "x|1|p", "y|2|q"))  # b to a, a name c had: remove + create
    write(folder, "004.tsv", tsv("id|b|a", "x|1|p", "y|2|q"))  # c to b, a removed field's: b comes back
    write(folder, "005.tsv", tsv("id|c2|a", "x|1|p", "y|2|q"))  # b to c2
    write(folder, "006.tsv", tsv("id|b|a", "x|1|p", "y|2|q"))  # c2 back to b, its own earlier name
    summary = run(tmp_path, folder)
    steps = [(s.file[:3], [(c.action, c.name, c.to) for c in s.migration], [r.published for r in s.renames],
              s.record.messages) for s in summary.snapshots[1:]]
    assert steps == [
        ("002", [("rename", "a", "c")], [True], 1),
        ("003", [("remove", "b", None), ("create", "a", None)], [False], 3),
        ("004", [("remove", "c", None), ("create", "b", None)], [False], 3),
        ("005", [("rename", "b", "c2")], [True], 1),
        ("006", [("rename", "c2", "b")], [True], 1),
    ]
    assert [s.without_renames for s in summary.snapshots[1:]] == [3, None, None, 3, 3]
    replay = Replay(tmp_path)
    assert replay.fields == ("id", "a", "b")  # a rename keeps the field's place
    assert replay.rows("id") == expected_rows(folder / "006.tsv")[1]


def test_key_column_rename_keeps_the_instances(tmp_path: Path) -> None:
    folder = tmp_path / "snaps"
    write(folder, "001.tsv", tsv("local-authority|name", "BNE|Bath", "BBD|Blackburn"))
    write(folder, "002.tsv", tsv("local-authority-eng|name", "BNE|Bath", "BBD|Blackburn with Darwen"))
    summary = run(tmp_path, folder)
    second = summary.snapshots[1]
    assert second.key_field == "local_authority_eng"
    assert [(r.old, r.new, r.similarity) for r in second.renames] == [
        ("local_authority", "local_authority_eng", 1.0)]
    assert "key_column_renamed" in {i.code for i in second.issues}
    # one rename, and an update of the one name that changed: the keys are not written again
    assert (second.record.creates, second.record.updates, second.record.deletes) == (0, 1, 0)
    assert second.record.messages == 2
    replay = Replay(tmp_path)
    assert replay.rows("local_authority_eng") == expected_rows(folder / "002.tsv")[1]
    assert len(replay.writes) == 2  # the same two instances throughout


def test_key_option_follows_a_renamed_key_column_by_its_values(tmp_path: Path) -> None:
    folder = tmp_path / "snaps"
    write(folder, "001.csv", "name,id\nAlpha,a\nBeta,b\n")
    write(folder, "002.csv", "name,code\nAlpha,a\nBeta,b\nGamma,c\n")
    summary = run(tmp_path, folder, key_column="id")
    assert [s.key_field for s in summary.snapshots] == ["id", "code"]
    assert summary.snapshots[1].record.creates == 1
    assert Replay(tmp_path).rows("code") == {"a": {"name": "Alpha", "code": "a"},
                                             "b": {"name": "Beta", "code": "b"},
                                             "c": {"name": "Gamma", "code": "c"}}
    write(folder, "003.csv", "name,code\nAlpha,a\n")
    with pytest.raises(SnapshotError) as err:
        run(tmp_path, folder, key_column="name")
    assert err.value.code == "key_column_changed"
    assert run(tmp_path, folder).imported == 1  # the recorded --key is used when none is given


def test_a_missing_key_column_is_a_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "snaps"
    write(folder, "001.tsv", tsv("a|b", "1|2"))
    with pytest.raises(SnapshotError) as err:
        run(tmp_path, folder, key_column="nope")
    assert err.value.code == "no_key_column" and "001.tsv" in str(err.value)
    assert landing_files(tmp_path) == []


def test_a_recreated_column_shows_its_old_values_again(tmp_path: Path) -> None:
    folder = tmp_path / "snaps"
    write(folder, "001.tsv", tsv("id|web", "a|wa", "b|wb"))
    write(folder, "002.tsv", tsv("id", "a", "b", "c"))
    write(folder, "003.tsv", tsv("id|web", "a|wa", "b|wb2", "c|"))
    summary = run(tmp_path, folder)
    third = summary.snapshots[2]
    assert [(c.name, c.action) for c in third.migration] == [("web", "create")]
    assert third.record.updates == 1  # only b: a's hidden value shows again, c never had one
    assert Replay(tmp_path).rows("id") == expected_rows(folder / "003.tsv")[1]


def test_emptied_cells_become_null_and_an_empty_snapshot_deletes_all(tmp_path: Path) -> None:
    folder = tmp_path / "snaps"
    write(folder, "001.tsv", tsv("id|x", "a|1", "b|2"))
    write(folder, "002.tsv", tsv("id|x", "a|", "b|2"))
    write(folder, "003.tsv", tsv("id|x"))
    summary = run(tmp_path, folder, limit=2)
    assert summary.pending == ["003.tsv"]
    replay = Replay(tmp_path)
    assert replay.kinds["update"] == 1
    assert [w["x"] for w in replay.writes.values() if w["id"] == "a"] == [None]
    assert replay.rows("id") == {"a": {"id": "a"}, "b": {"id": "b", "x": "2"}}
    summary = run(tmp_path, folder)
    assert summary.snapshots[-1].record.deletes == 2
    assert Replay(tmp_path).rows("id") == {}


def test_rerun_publishes_nothing_and_new_snapshots_only_themselves(tmp_path: Path) -> None:
    folder = tmp_path / "snaps"
    write(folder, "2020-01.tsv", tsv("id|x", "a|1", "b|2"))
    write(folder, "2020-02.tsv", tsv("id|x", "a|1", "b|3"))
    first = run(tmp_path, folder)
    assert first.imported == 2 and first.versions == (0, 2)
    files = landing_files(tmp_path)
    assert len(files) == 2  # one landing file per snapshot
    again = run(tmp_path, folder)
    assert (again.imported, again.skipped, again.messages, again.versions) == (0, 2, 0, None)
    assert landing_files(tmp_path) == files
    write(folder, "2020-03.tsv", tsv("id|x|y", "a|1|n", "c|5|"))
    later = run(tmp_path, folder)
    assert (later.imported, later.skipped) == (1, 2)
    assert later.versions == (2, 3)
    assert (later.creates, later.updates, later.deletes) == (1, 1, 1)
    assert len(landing_files(tmp_path)) == 3
    assert Replay(tmp_path).rows("id") == expected_rows(folder / "2020-03.tsv")[1]
    records = I.imported_snapshots(tmp_path / "keys", SCHEMA)
    assert [(r.file, r.schema_version) for r in records] == [("2020-01.tsv", 2), ("2020-02.tsv", 2),
                                                              ("2020-03.tsv", 3)]
    assert sum(r.messages for r in records) == Replay(tmp_path).lines
    assert all(r.landed for r in records)
    assert I.imported_snapshots(tmp_path / "keys", "other") == []


def test_a_changed_or_inserted_old_snapshot_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "snaps"
    write(folder, "002.tsv", tsv("id|x", "a|1"))
    run(tmp_path, folder)
    write(folder, "001.tsv", tsv("id|x", "a|0"))
    with pytest.raises(SnapshotError) as err:
        run(tmp_path, folder)
    assert err.value.code == "snapshot_out_of_order" and "001.tsv" in str(err.value)
    (folder / "001.tsv").unlink()
    write(folder, "002.tsv", tsv("id|x", "a|2"))
    write(folder, "003.tsv", tsv("id|x", "a|3"))
    with pytest.raises(SnapshotError) as err:
        run(tmp_path, folder)
    assert err.value.code == "snapshot_changed" and "002.tsv" in str(err.value)
    assert len(landing_files(tmp_path)) == 1


def test_a_schema_changed_outside_the_importer_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "snaps"
    write(folder, "001.tsv", tsv("id|x", "a|1"))
    write(folder, "002.tsv", tsv("id", "a"))
    summary = run(tmp_path, folder)
    with Publisher(KeyStore(tmp_path / "keys"), "default", tmp_path / "landing") as publisher:
        publisher.schema_message(summary.schema_id, SchemaRevert(2))
    write(folder, "003.tsv", tsv("id", "a", "b"))
    with pytest.raises(SnapshotError) as err:
        run(tmp_path, folder)
    assert err.value.code == "schema_moved"


def test_an_existing_empty_schema_is_adopted_and_a_used_one_refused(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys")
    with Publisher(store, "default", tmp_path / "landing", create_key=True) as publisher:
        sid = publisher.schema_init(SchemaMeta("adopted", description="made by hand"))
        used = publisher.schema_init(SchemaMeta("used"))
        publisher.schema_message(str(used), SchemaMigration((FieldChange("x", "create", type="text"),)))
    folder = tmp_path / "snaps"
    write(folder, "001.tsv", tsv("id", "a"))
    summary = run(tmp_path, folder, schema="adopted")
    assert summary.schema_id == str(sid)
    assert summary.snapshots[0].record.messages == 2  # migration and create; the meta was there
    with pytest.raises(SnapshotError) as err:
        run(tmp_path, folder, schema="used")
    assert err.value.code == "schema_not_imported"


def test_a_run_stopped_after_landing_is_committed_by_the_next(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "snaps"
    write(folder, "001.tsv", tsv("id|x", "a|1"))
    write(folder, "002.tsv", tsv("id|x", "a|2", "b|1"))
    saves = []
    real_save = I._save_state

    def crash_on_fourth(path: Path, data: Mapping[str, Any]) -> None:
        saves.append(1)
        if len(saves) == 4:  # snapshot 2: pending written, landing file landed, commit fails
            raise KeyboardInterrupt
        real_save(path, data)

    monkeypatch.setattr(I, "_save_state", crash_on_fourth)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, folder)
    monkeypatch.setattr(I, "_save_state", real_save)
    assert len(landing_files(tmp_path)) == 2
    summary = run(tmp_path, folder)
    assert summary.settled is not None and "committed" in summary.settled
    assert (summary.imported, summary.skipped) == (0, 2)
    assert Replay(tmp_path).rows("id") == expected_rows(folder / "002.tsv")[1]


def test_a_run_stopped_before_landing_is_dropped_and_redone(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "snaps"
    write(folder, "001.tsv", tsv("id|x", "a|1"))
    write(folder, "002.tsv", tsv("id|x", "a|2", "b|1"))
    real_flush = Publisher.flush
    calls = []

    def crash_on_second(self: Publisher) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_flush(self)

    monkeypatch.setattr(Publisher, "flush", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, folder)
    monkeypatch.setattr(Publisher, "flush", real_flush)
    assert len(landing_files(tmp_path)) == 1
    summary = run(tmp_path, folder)
    assert summary.settled is not None and "dropped" in summary.settled
    assert (summary.imported, summary.skipped) == (1, 1)
    assert Replay(tmp_path).rows("id") == expected_rows(folder / "002.tsv")[1]


def test_a_folder_without_snapshots_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "snaps", "notes.txt", "x")
    with pytest.raises(SnapshotError) as err:
        run(tmp_path, tmp_path / "snaps")
    assert err.value.code == "no_snapshots"
    with pytest.raises(SnapshotError):
        run(tmp_path, tmp_path / "missing")


# --------------------------------------------------------------------------------------------
# real GOV.UK register histories
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("register", ["country", "local-authority-eng"])
def test_real_register_history_replays_to_its_last_snapshot(tmp_path: Path, register: str) -> None:
    folder = project_path("data", "registers", register)
    started = time.perf_counter()
    summary = run(tmp_path, folder, schema=register.replace("-", "_"))
    seconds = time.perf_counter() - started
    files = sorted(p for p in folder.iterdir() if p.suffix == ".tsv")
    assert summary.imported == len(files) and summary.ignored == []
    assert seconds < 30
    replay = Replay(tmp_path)
    key, expected = expected_rows(files[-1])
    assert set(replay.fields) == {c.field for c in I.read_snapshot(files[-1]).columns}
    assert replay.rows(key) == expected
    records = I.imported_snapshots(tmp_path / "keys", register.replace("-", "_"))
    assert [r.file for r in records] == [p.name for p in files]
    assert sum(r.messages for r in records) == replay.lines
    assert records[-1].schema_version == replay.versions.current_version
    assert records[-1].rows == len(expected)
    assert run(tmp_path, folder, schema=register.replace("-", "_")).imported == 0


def test_local_authority_history_has_the_known_header_changes(tmp_path: Path) -> None:
    folder = project_path("data", "registers", "local-authority-eng")
    summary = run(tmp_path, folder, schema="la")
    changes = {s.file[:4]: [(c.action, c.name) for c in s.migration]
               for s in summary.snapshots if s.migration}
    assert changes == {
        "0001": [("create", n) for n in ("local_authority", "uk", "local_authority_type", "name", "name_cy",
                                         "official_name", "website", "start_date", "end_date")],
        "0002": [("rename", "local_authority"), ("remove", "uk"), ("remove", "name_cy")],
        "0012": [("remove", "website")],
    }
    renames = [(r.old, r.new) for r in summary.snapshots[1].renames]
    assert renames == [("local_authority", "local_authority_eng")]
    assert [r.schema_version for r in I.imported_snapshots(tmp_path / "keys", "la")] == \
        [2] + [3] * 10 + [4] * 7


def test_country_history_one_snapshot_at_a_time(tmp_path: Path) -> None:
    folder = project_path("data", "registers", "country")
    steps = []
    while True:
        summary = run(tmp_path, folder, schema="country", limit=1)
        if not summary.imported:
            break
        steps.append(summary.snapshots[-1])
        key, expected = expected_rows(folder / steps[-1].file)
        assert Replay(tmp_path).rows(key) == expected  # the lake after snapshot k is snapshot k
    assert len(steps) == 11
    warnings = {i.code for s in steps for i in s.issues}
    assert {"duplicate_key", "missing_key", "windows_line_ends"} <= warnings


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------
def test_cli_imports_and_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lakehouse.cli import main

    monkeypatch.setenv("LAKEHOUSE_KEYS", str(tmp_path / "keys"))
    monkeypatch.setenv("LAKEHOUSE_LANDING", str(tmp_path / "landing"))
    folder = tmp_path / "snaps"
    write(folder, "001.tsv", tsv("Code|Name", "a|Alpha", "a|Alpha 2"))
    runner = CliRunner()
    result = runner.invoke(main, ["import", "snapshots", str(folder), "--schema", SCHEMA])
    assert result.exit_code == 0, result.output
    assert "Code -> code (key)" in result.output
    assert "key 'a' appears 2 times" in result.output
    assert "snapshots imported" in result.output
    again = runner.invoke(main, ["import", "snapshots", str(folder), "--schema", SCHEMA])
    assert again.exit_code == 0 and "nothing new to import" in again.output
    write(folder, "001.tsv", tsv("Code|Name", "a|changed"))
    refused = runner.invoke(main, ["import", "snapshots", str(folder), "--schema", SCHEMA])
    assert refused.exit_code == 1 and "[snapshot_changed]" in refused.output

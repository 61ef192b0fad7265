"""The reference model (lakehouse.core.reference): one small history per rule of SEMANTICS.md 1-5 and 7.

Each scenario builds signed entries by hand (:class:`Log`), so that what the reference must say is
visible in the test; property tests then check, on generated histories, that the result is a
function of the set of lines and that every line and entry is accounted for exactly once.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from datetime import datetime, timezone
from random import Random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.signing import SigningKey

from lakehouse.core.messages import (
    Create,
    Delete,
    FieldChange,
    SchemaId,
    SchemaMeta,
    SchemaRevert,
    Update,
    VersionedSchema,
)
from lakehouse.core.reference import Reference, reference
from tests.histories import histories, histories_in_batches
from tests.simulate import Line
from tests.stories import (
    ALICE,
    APPLIED,
    BOB,
    OTHER_HASH,
    STORIES,
    Log,
    Story,
    hash_of,
    hash_of_bytes,
    log_row,
    migration,
    status,
    text,
)

UTC = timezone.utc


def same_result(a: Reference, b: Reference) -> bool:
    """Equal tables; the per-line outcomes as multisets (they follow the input order)."""
    return Counter(a.lines) == Counter(b.lines) and dataclasses.replace(a, lines=()) == dataclasses.replace(
        b, lines=()
    )


# --------------------------------------------------------------------------------------------------
# Bronze (FORMAT.md section 2, SEMANTICS.md section 7)


def test_malformed_lines_are_rejected_with_their_reason_and_duplicates_are_one_entry() -> None:
    log = Log(ALICE, 0)
    good = log.add(SchemaMeta("notes"))
    damaged = bytes.fromhex(good["entry"])
    lines: list[Line] = [
        good,
        dict(good),
        '{"entry": "00',
        {"entry": "zz", "payload": "00"},
        {"entry": good["entry"]},
        {"entry": (damaged[:-1] + bytes([damaged[-1] ^ 1])).hex(), "payload": good["payload"]},
        {"entry": good["entry"], "payload": good["payload"] + "00"},
    ]
    ref = reference(lines)
    assert [line.reason_code for line in ref.lines] == [
        None,
        None,
        "not_json",
        "bad_hex",
        "missing_payload",
        "bad_signature",
        "wrong_payload",
    ]
    assert list(ref.entries) == [hash_of(good)]
    assert [m.entry_hash for m in ref.messages] == [hash_of(good)]
    assert len(ref.rejected) == 5


# --------------------------------------------------------------------------------------------------
# Logs (section 1, notes 1-3)


def schema_log(key: SigningKey = ALICE, log_id: int = 0, length: int = 6) -> tuple[Log, list[dict[str, str]]]:
    """A schema log: meta, then ``length - 1`` migrations of one new field each."""
    log = Log(key, log_id)
    lines = [log.add(SchemaMeta("notes"))]
    lines += [log.add(migration(text(f"f{seq}"))) for seq in range(2, length + 1)]
    return log, lines


def test_a_gap_leaves_later_entries_pending_until_it_fills() -> None:
    log, lines = schema_log()
    ref = reference(lines[:2] + lines[3:])
    assert log_row(ref, log).accepted_seq == 2
    assert log_row(ref, log).pending == 3
    for line in lines[3:]:
        assert status(ref, line) == ("pending", "waiting", f"log {log.author}:0 seq 3")
        assert ref.message(hash_of(line)).log_status == "pending"
        assert ref.message(hash_of(line)).kind is None
    filled = reference(lines)
    assert log_row(filled, log).accepted_seq == 6
    assert log_row(filled, log).pending == 0
    assert all(status(filled, line) == APPLIED for line in lines)


def test_a_fork_stops_the_log_before_it_whatever_the_arrival_order() -> None:
    log, lines = schema_log()
    fork = log.entry(3, migration(text("other")))
    forward, backward = reference([*lines, fork]), reference([fork, *reversed(lines)])
    assert same_result(forward, backward)
    row = log_row(forward, log)
    assert (row.accepted_seq, row.fork_seq, row.entries) == (2, 3, 7)
    assert [status(forward, line) for line in lines[:2]] == [APPLIED, APPLIED]
    for line in [fork, *lines[2:]]:
        assert status(forward, line) == ("rejected", "fork", None)


def test_a_bad_link_is_rejected_whatever_arrives_later() -> None:
    log, lines = schema_log()
    bad_back = log.entry(3, migration(text("x")), backlink=OTHER_HASH)
    bad_skip = log.entry(4, migration(text("y")), skiplink=OTHER_HASH)  # lipmaa(4) = 1
    early = reference([lines[0], bad_back, bad_skip])
    assert status(early, bad_back) == ("pending", "waiting", f"log {log.author}:0 seq 2")
    assert status(early, bad_skip) == ("rejected", "wrong_skiplink", None)
    for known in (lines[:2], lines):
        ref = reference([*known, bad_back, bad_skip])
        assert status(ref, bad_back) == ("rejected", "wrong_backlink", None)
        assert status(ref, bad_skip) == ("rejected", "wrong_skiplink", None)
    assert log_row(reference([*lines, bad_back, bad_skip]), log).accepted_seq == 6


def test_entries_after_an_end_of_feed_are_rejected() -> None:
    log = Log(ALICE, 0)
    lines = [log.add(SchemaMeta("notes")), log.add(migration(text("a")), end_of_feed=True)]
    after = [log.add(migration(text("b"))), log.add(migration(text("c")))]
    ref = reference(lines + after)
    assert log_row(ref, log).accepted_seq == 2
    assert [status(ref, line) for line in after] == [("rejected", "after_end_of_feed", None)] * 2


# --------------------------------------------------------------------------------------------------
# Log purpose (section 1, notes 4-6)


def test_the_first_valid_message_fixes_the_purpose() -> None:
    schema, schema_lines = schema_log(length=2)
    log = Log(BOB, 0)
    lines = [
        log.add(Update(schema.at(2), OTHER_HASH, {"f2": "x"})),
        log.add(b"\xff"),
        log.add(Create(schema.at(2), {"f2": "a"})),
        log.add(migration(text("z"))),
        log.add(Create(VersionedSchema(bytes(BOB.verify_key), 9, 1), {})),
        log.add(Create(schema.at(2), {})),
    ]
    ref = reference(schema_lines + lines)
    row = log_row(ref, log)
    assert (row.purpose, row.schema, row.first_seq) == ("instance", str(schema.sid), 3)
    assert [status(ref, line)[:2] for line in lines] == [
        ("rejected", "no_log_purpose"),
        ("rejected", "not_cbor"),
        ("applied", None),
        ("rejected", "wrong_log"),
        ("rejected", "wrong_log"),
        ("applied", None),
    ]
    schema_row = log_row(ref, schema)
    assert (schema_row.purpose, schema_row.schema, schema_row.first_seq) == ("schema", None, 1)


def test_a_log_without_purpose_rejects_every_message() -> None:
    log = Log(BOB, 3)
    lines = [log.add(b"\xff"), log.add(SchemaMeta("late")), log.add(Delete(OTHER_HASH))]
    ref = reference(lines)
    row = log_row(ref, log)
    assert (row.purpose, row.schema, row.first_seq, row.accepted_seq) == (None, None, None, 3)
    assert [status(ref, line)[:2] for line in lines] == [
        ("rejected", "not_cbor"),
        ("rejected", "no_log_purpose"),
        ("rejected", "no_log_purpose"),
    ]
    meta = ref.message(hash_of(lines[1]))
    assert (meta.kind, meta.schema, meta.version) == ("schema-meta", f"{log.author}:3", 2)


# --------------------------------------------------------------------------------------------------
# Schemas (section 2, notes 6-7)


def test_schema_messages_are_applied_ignored_or_rejected() -> None:
    log = Log(ALICE, 0)
    lines = [
        log.add(SchemaMeta("notes")),  # 1
        log.add(migration(text("title"))),  # 2
        log.add(migration(text("title"))),  # 3: invalid, field_exists
        log.add(migration(text("body"))),  # 4: abandoned by 6
        log.add(b"\xa0"),  # 5: a CBOR map without spec: rejected, keeps the lens
        log.add(SchemaRevert(2)),  # 6
        log.add(SchemaRevert(4)),  # 7: target abandoned
        log.add(SchemaRevert(9)),  # 8: bad target
        log.add(SchemaMeta("notes", description="v9")),  # 9
        log.add(Create(log.at(2), {})),  # 10: wrong_log, a rejected version
    ]
    ref = reference(lines)
    assert [status(ref, line)[:2] for line in lines] == [
        ("applied", None),
        ("applied", None),
        ("rejected", "field_exists"),
        ("ignored", "abandoned"),
        ("rejected", "bad_spec"),  # rejected, abandoned or not
        ("applied", None),
        ("rejected", "target_abandoned"),
        ("rejected", "bad_target"),
        ("applied", None),
        ("rejected", "wrong_log"),
    ]


def test_schema_version_and_field_rows() -> None:
    log = Log(ALICE, 0)
    when = datetime(2020, 5, 22, 11, 58, 50, tzinfo=UTC)
    lines = [
        log.add(SchemaMeta("notes")),
        log.add(
            migration(
                text("title", validation="^[a-z]+$", default="x"), text("at", type="timestamp", default=when)
            )
        ),
        log.add(migration(FieldChange("title", "remove"))),
        log.add(SchemaRevert(2)),
    ]
    ref = reference(lines)
    sid = f"{log.author}:0"
    versions = [
        (v.schema, v.version, v.name, v.kind, v.status, v.parent, v.abandoned, v.has_gold_table)
        for v in ref.schema_versions
    ]
    assert versions == [
        (sid, 1, "notes", "schema-meta", "meta", None, False, False),
        (sid, 2, "notes", "schema-migration", "valid", 1, False, True),
        (sid, 3, "notes", "schema-migration", "valid", 2, True, False),
        (sid, 4, "notes", "schema-revert", "revert", 2, False, True),
    ]
    assert json.loads(ref.schema_versions[3].lens) == [
        {
            "name": "title",
            "type": "text",
            "validation": "^[a-z]+$",
            "default": "x",
            "schema": None,
            "cascade": False,
        },
        {
            "name": "at",
            "type": "timestamp",
            "validation": None,
            "default": "2020-05-22T11:58:50Z",
            "schema": None,
            "cascade": False,
        },
    ]
    assert [
        (f.version, f.position, f.name, f.action, f.type, f.default_value) for f in ref.schema_fields
    ] == [
        (2, 0, "title", "create", "text", '"x"'),
        (2, 1, "at", "create", "timestamp", '"2020-05-22T11:58:50Z"'),
        (3, 0, "title", "remove", "text", "null"),
    ]


# --------------------------------------------------------------------------------------------------
# Instance messages (section 3, notes 8-11)


def story_reference(name: str, *, batches: int = 2) -> tuple[Story, Reference]:
    """A story of :data:`tests.stories.STORIES` and the reference of its first ``batches`` batches."""
    story = STORIES[name](0)
    return story, reference([line for batch in story.batches[:batches] for line in batch])


def story_gold(story: Story, ref: Reference) -> dict[str, dict[str, dict[str, Any]]]:
    """Gold table -> the story's line name -> that instance's row (instances of named lines only)."""
    named = {hash_of(line): name for name, line in story.lines.items()}
    return {table: {named[row["instance_id"]]: row for row in rows if row["instance_id"] in named}
            for table, rows in ref.gold(story.names).items()}


def test_a_pending_message_holds_back_only_its_own_instance() -> None:
    story, before = story_reference("pending_per_instance", batches=1)
    lines = story.lines
    sid = next(iter(story.names))
    waits_v3, waits_v9 = f"schema {sid} version 3", f"schema {sid} version 9"
    assert {name: status(before, line) for name, line in lines.items()} == {
        "a": APPLIED,
        "b": ("pending", "waiting", waits_v3),
        "update_a": APPLIED,  # another instance: it goes on
        "update_b": ("pending", "waiting", waits_v3),  # behind B
        "c": ("pending", "waiting", waits_v9),
        "delete_b": ("pending", "waiting", waits_v3),  # behind B, though a delete needs no lens
        "d": APPLIED,
    }
    assert {m.log_status for m in before.messages} == {"accepted"}
    assert log_row(before, Log(BOB, 0)).pending == 0  # waiting on a schema is not a gap in the log
    after = reference(story.all_lines)
    assert {name: status(after, line)[0] for name, line in lines.items()} == {
        "a": "applied", "b": "applied", "update_a": "applied", "update_b": "applied", "c": "pending",
        "delete_b": "applied", "d": "applied"}
    assert sorted(story_gold(story, after)["things0_v3"]) == ["a", "d"]
    nothing = reference(story.batches[0][2:])  # the schema log has not arrived at all
    assert status(nothing, lines["a"]) == ("pending", "waiting", f"schema {sid} version 2")
    assert status(nothing, lines["d"]) == ("pending", "waiting", f"schema {sid} version 2")


def test_a_delete_never_waits_and_a_version_that_can_never_arrive_is_rejected() -> None:
    story, before = story_reference("deletes_never_wait", batches=1)
    lines = story.lines
    notes = next(iter(story.names))
    assert status(before, lines["delete"]) == APPLIED  # names v3, which has not arrived
    assert status(before, lines["create_v3"]) == ("pending", "waiting", f"schema {notes} version 3")
    assert status(before, lines["update_v4"])[:2] == ("pending", "waiting")
    assert status(before, lines["after_end"])[:2] == ("rejected", "unreachable_version")  # ended at v2
    after = reference(story.all_lines)  # the notes log forks at seq 3
    assert status(after, lines["create_v3"])[:2] == ("rejected", "unreachable_version")
    assert status(after, lines["update_v4"])[:2] == ("rejected", "unreachable_version")
    assert status(after, lines["after_log_end"])[:2] == ("rejected", "after_end_of_feed")  # Carol's log ended
    for ref in (before, after):
        assert ref.instances[hash_of(lines["x"])].deleted
        assert sorted(story_gold(story, ref)["notes0_v2"]) == ["y"]  # "secret" is gone
        assert sorted(story_gold(story, ref)["ended0_v2"]) == ["z"]  # as created: the update came after the end


def reverted_schema() -> tuple[Log, list[dict[str, str]]]:
    """v1 meta, v2 title, v3 remove title + create count (abandoned), v4 revert to v2."""
    log = Log(ALICE, 0)
    lines = [
        log.add(SchemaMeta("notes")),
        log.add(migration(text("title"))),
        log.add(migration(FieldChange("title", "remove"), text("count", type="integer"))),
        log.add(SchemaRevert(2)),
    ]
    return log, lines


def test_abandoned_versions_ignore_creates_and_updates_but_never_deletes() -> None:
    schema, schema_lines = reverted_schema()
    log = Log(BOB, 0)
    kept = log.add(Create(schema.at(2), {"title": "kept"}))
    ignored = log.add(Create(schema.at(3), {"count": 1}))
    lines = [
        kept,
        ignored,
        log.add(Update(schema.at(3), hash_of_bytes(kept), {"count": 2})),
        log.add(Update(schema.at(2), hash_of_bytes(ignored), {"title": "x"})),
        log.add(Delete(hash_of_bytes(ignored), schema.at(3))),
        log.add(Delete(hash_of_bytes(kept), schema.at(3))),
        log.add(Delete(hash_of_bytes(kept))),
    ]
    ref = reference(schema_lines + lines)
    assert [status(ref, line)[:2] for line in lines] == [
        ("applied", None),
        ("ignored", "abandoned"),
        ("ignored", "abandoned"),
        ("rejected", "ignored_instance"),  # an ignored create is no instance to update
        ("applied", None),  # ... but a delete of it stands
        ("applied", None),  # a delete at an abandoned version
        ("rejected", "deleted_instance"),
    ]
    assert list(ref.instances) == [hash_of(kept)]
    assert ref.instances[hash_of(kept)].deleted


def test_a_delete_of_an_ignored_create_cascades() -> None:
    story, before = story_reference("ignored_instances", batches=1)
    lines = story.lines
    assert status(before, lines["i"])[:2] == ("ignored", "abandoned")
    assert status(before, lines["update_i"])[:2] == ("rejected", "ignored_instance")
    assert sorted(story_gold(story, before)["files0_v2"]) == ["f", "g"]
    after = reference(story.all_lines)
    assert status(after, lines["delete_i"]) == APPLIED
    assert sorted(story_gold(story, after)["files0_v2"]) == ["g"]
    assert after.instances[hash_of(lines["f"])].cascaded


def test_a_rename_keeps_values_and_cascades_and_a_create_of_the_old_name_is_a_new_field() -> None:
    story, before = story_reference("renames", batches=1)
    assert story_gold(story, before)["rnotes0_v2"]["n1"]["count"] == "3"
    ref = reference(story.all_lines)
    assert {status(ref, line) for line in story.all_lines} == {APPLIED}
    gold = story_gold(story, ref)
    assert sorted(gold["rnotes0_v4"]) == ["n2"]  # N1 and N3 went with P, through post and parent_post
    assert ref.instances[hash_of(story.lines["n3"])].cascaded and ref.instances[hash_of(story.lines["n1"])].cascaded
    q = hash_of(story.lines["q"])
    n2 = {table: {k: v for k, v in gold[table]["n2"].items() if not k.startswith("_") and k not in ("instance_id", "author")}
          for table in ("rnotes0_v2", "rnotes0_v3", "rnotes0_v4")}
    assert n2 == {
        "rnotes0_v2": {"post": q, "count": "7"},  # the value written as total at v3, under its v2 name
        "rnotes0_v3": {"parent_post": q, "total": 7, "post": "a note"},
        "rnotes0_v4": {"parent_post": q, "count": 7, "post": "a note"},
    }


def test_only_the_log_that_created_an_instance_may_change_it() -> None:
    schema, schema_lines = schema_log(length=2)
    alice, bob = Log(ALICE, 5), Log(BOB, 0)
    created = alice.add(Create(schema.at(2), {"f2": "mine"}))
    theirs = [
        bob.add(Create(schema.at(2), {})),
        bob.add(Update(schema.at(2), hash_of_bytes(created), {"f2": "theirs"})),
        bob.add(Delete(hash_of_bytes(created), schema.at(2))),
        bob.add(Delete(hash_of_bytes(created))),
    ]
    ref = reference([*schema_lines, created, *theirs])
    assert [status(ref, line)[:2] for line in theirs[1:]] == [("rejected", "unknown_instance")] * 3
    rows = {
        row["instance_id"]: (row["author"], row["f2"], row["_updates"])
        for row in ref.gold({schema.sid: "notes"})["notes_v2"]
    }
    assert rows == {hash_of(created): (alice.author, "mine", 0), hash_of(theirs[0]): (bob.author, None, 0)}


def test_field_values_are_checked_against_the_lens_of_the_version_named() -> None:
    log = Log(ALICE, 0)
    schema_lines = [
        log.add(SchemaMeta("notes")),
        log.add(
            migration(
                text("title", type="varchar"),
                text("code", validation="^[0-9]{3}$"),
                text("n", type="integer"),
                text("link", type="relation", schema=log.sid),
            )
        ),
        log.add(migration(text("late"))),
    ]
    writer = Log(BOB, 0)
    cases: dict[str, dict[str, Any]] = {
        "unknown_field": {"nope": 1},
        "wrong_type": {"n": "1"},
        "too_long": {"title": "x" * 256},
        "out_of_range": {"n": 2**63},
        "validation_failed": {"code": "12"},
        "bad_value": {"link": b"\x01\x02"},
    }
    lines = [writer.add(Create(log.at(2), {"title": "ok"}))]
    lines += [writer.add(Create(log.at(2), fields)) for fields in cases.values()]
    lines.append(writer.add(Update(log.at(2), hash_of_bytes(lines[0]), {"late": "not yet at v2"})))
    lines.append(writer.add(Update(log.at(3), hash_of_bytes(lines[0]), {"late": "fine at v3"})))
    ref = reference(schema_lines + lines)
    assert [status(ref, line)[1] for line in lines] == [None, *cases, "unknown_field", None]


def test_a_schema_that_is_not_a_schema_log_rejects_its_messages() -> None:
    other = Log(ALICE, 7)
    not_schema = [other.add(Update(other.at(1), OTHER_HASH, {"a": 1}))]
    log = Log(BOB, 0)
    lines = [log.add(Create(other.at(1), {})), log.add(Delete(OTHER_HASH, other.at(1)))]
    ref = reference(not_schema + lines)
    assert [status(ref, line)[:2] for line in lines] == [("rejected", "not_a_schema")] * 2
    assert log_row(ref, log).purpose == "instance"
    row = ref.message(hash_of(lines[1]))
    assert (row.kind, row.schema, row.version, row.instance) == (
        "delete",
        str(other.sid),
        1,
        OTHER_HASH.hex(),
    )


# --------------------------------------------------------------------------------------------------
# Gold (sections 4 and 5, notes 12-16)


def test_gold_rows_show_every_write_through_each_versions_lens() -> None:
    schema = Log(ALICE, 0)
    schema_lines = [
        schema.add(SchemaMeta("notes")),
        schema.add(migration(text("title", type="varchar"), text("count", type="integer", default=0))),
        schema.add(
            migration(
                FieldChange("count", "update", "float", default=0.5, has_default=True),
                text("tags", type="text[]"),
                text("author"),
            )
        ),
        schema.add(migration(FieldChange("title", "remove"))),
        schema.add(migration(text("title", type="varchar"))),  # the same type: old values come back
    ]
    log = Log(BOB, 0)
    one = log.add(Create(schema.at(2), {"title": "hello", "count": 3}))
    two = log.add(Create(schema.at(3), {"title": "x", "tags": ["a"], "author": "me"}))
    three = log.add(Create(schema.at(2), {"count": 7}))
    update = log.add(Update(schema.at(3), hash_of_bytes(one), {"count": 2.5}))
    tables = reference([*schema_lines, one, two, three, update]).gold({schema.sid: "notes"})
    bob = bytes(BOB.verify_key).hex()

    def rows(version: int) -> dict[str, dict[str, Any]]:
        out = {}
        for row in map(dict, tables[f"notes_v{version}"]):
            assert row.pop("author") == bob
            out[row.pop("instance_id")] = row
        return out

    assert list(tables) == ["notes_v2", "notes_v3", "notes_v4", "notes_v5"]
    meta_one = {"_version": 3, "_last_entry": hash_of(update), "_updates": 1}
    meta_two = {"_version": 3, "_last_entry": hash_of(two), "_updates": 0}
    meta_three = {"_version": 2, "_last_entry": hash_of(three), "_updates": 0}
    one_id, two_id, three_id = hash_of(one), hash_of(two), hash_of(three)
    assert rows(2) == {
        one_id: {"title": "hello", "count": 0, **meta_one},  # 2.5 is no integer: the default at v2
        two_id: {"title": "x", "count": None, **meta_two},  # left out of the create: null, not the default
        three_id: {"title": None, "count": 7, **meta_three},
    }
    assert rows(3) == {
        one_id: {"title": "hello", "count": 2.5, "tags": None, "_field_author": None, **meta_one},
        two_id: {"title": "x", "count": None, "tags": ["a"], "_field_author": "me", **meta_two},
        three_id: {"title": None, "count": 7.0, "tags": None, "_field_author": None, **meta_three},
    }
    assert list(rows(4)[one_id]) == ["count", "tags", "_field_author", *meta_one]
    assert list(rows(5)[one_id]) == ["count", "tags", "_field_author", "title", *meta_one]
    assert rows(5)[one_id]["title"] == "hello"
    assert rows(5)[two_id]["title"] == "x"


def test_a_revert_brings_back_the_fields_of_its_target() -> None:
    schema, schema_lines = reverted_schema()
    log = Log(BOB, 0)
    lines = [log.add(Create(schema.at(2), {"title": "kept"})), log.add(Create(schema.at(3), {"count": 5}))]
    ref = reference(schema_lines + lines)
    tables = ref.gold({schema.sid: "notes"})
    assert list(tables) == ["notes_v2", "notes_v4"]  # no table for the abandoned v3
    for version in (2, 4):
        assert [(r["instance_id"], r["title"], r["_version"]) for r in tables[f"notes_v{version}"]] == [
            (hash_of(lines[0]), "kept", 2)
        ]


def cascade_world(*, b_drops_folder: bool = False) -> tuple[Reference, dict[str, str], dict[SchemaId, str]]:
    """folders <- files (folder: cascade, mirror: no cascade) <- comments (files: relation[], cascade)."""
    folders, files, comments = Log(ALICE, 0), Log(ALICE, 1), Log(ALICE, 2)
    lines = [
        folders.add(SchemaMeta("folders")),
        folders.add(migration(text("name"))),
        files.add(SchemaMeta("files")),
        files.add(
            migration(
                text("folder", type="relation", schema=folders.sid, cascade=True),
                text("mirror", type="relation", schema=folders.sid),
            )
        ),
        comments.add(SchemaMeta("comments")),
        comments.add(migration(text("files", type="relation[]", schema=files.sid, cascade=True))),
    ]
    if b_drops_folder:
        lines.append(files.add(migration(FieldChange("folder", "remove"))))
    f_log, file_log, c_log = Log(BOB, 0), Log(BOB, 1), Log(BOB, 2)
    ids: dict[str, str] = {}

    def create(name: str, log: Log, schema: Log, fields: dict[str, Any]) -> bytes:
        line = log.add(Create(schema.at(2), fields))
        lines.append(line)
        ids[name] = hash_of(line)
        return hash_of_bytes(line)

    f1 = create("f1", f_log, folders, {"name": "one"})
    f2 = create("f2", f_log, folders, {"name": "two"})
    file1 = create("file1", file_log, files, {"folder": f1})
    file2 = create("file2", file_log, files, {"folder": f2, "mirror": f1})
    file3 = create("file3", file_log, files, {"mirror": f1})
    create("c1", c_log, comments, {"files": [file1]})
    create("c2", c_log, comments, {"files": [file2, file3]})
    lines.append(f_log.add(Delete(f1, folders.at(2))))
    names = {folders.sid: "folders", files.sid: "files", comments.sid: "comments"}
    return reference(lines), ids, names


def live(ref: Reference, names: dict[SchemaId, str], ids: dict[str, str]) -> dict[str, list[str]]:
    by_id = {v: k for k, v in ids.items()}
    tables = ref.gold(names)
    return {name: [by_id[r["instance_id"]] for r in tables[f"{name}_v2"]] for name in names.values()}


def test_deletes_cascade_recursively_across_schemas() -> None:
    ref, ids, names = cascade_world()
    assert live(ref, names, ids) == {
        "folders": ["f2"],
        "files": sorted_by_id(ids, "file2", "file3"),
        "comments": ["c2"],
    }
    assert {k for k, v in ids.items() if ref.instances[v].cascaded} == {"file1", "c1"}
    assert ref.instances[ids["f1"]].deleted


def sorted_by_id(ids: dict[str, str], *names: str) -> list[str]:
    return sorted(names, key=lambda n: ids[n])


def test_a_migration_neither_brings_back_nor_removes_what_cascades_decided() -> None:
    # files v3 removes the cascading folder field: file1 and c1, removed by the delete of f1, stay removed
    ref, ids, names = cascade_world(b_drops_folder=True)
    assert {k for k, v in ids.items() if ref.instances[v].cascaded} == {"file1", "c1"}
    assert "file1" not in live(ref, names, ids)["files"]
    story, before = story_reference("cascades_by_written_version", batches=1)
    after = reference(story.all_lines)
    for ref_ in (before, after):
        assert ref_.instances[hash_of(story.lines["c"])].cascaded
        assert not ref_.instances[hash_of(story.lines["t"])].cascaded
    gold = story_gold(story, after)
    assert {table: sorted(rows) for table, rows in gold.items()} == {
        "posts0_v2": [], "comments0_v2": [], "comments0_v3": [], "tags0_v2": ["t"], "tags0_v3": ["t"],
        "tags0_v4": ["t"]}
    # the re-created field shows the value written at v2 again
    assert gold["tags0_v4"]["t"]["post"] == hash_of(story.lines["p"])


def test_nulls_stay_null_and_only_fields_added_later_show_their_default() -> None:
    story, ref = story_reference("nulls")
    gold = story_gold(story, ref)
    assert {name: row["priority"] for name, row in gold["tasks0_v2"].items()} == {"a": None, "b": None, "c": None}
    assert {name: (row["priority"], row["label"]) for name, row in gold["tasks0_v3"].items()} == {
        "a": (None, "none"), "b": (None, "none"), "c": (None, "none")}
    first = story_gold(story, reference(story.batches[0]))
    assert first["tasks0_v2"]["a"]["priority"] == 5


def test_translation_compares_the_two_ends_and_integers_convert_to_varchar() -> None:
    story, ref = story_reference("conversions")
    gold = story_gold(story, ref)
    assert {name: (row["count"], row["code"]) for name, row in gold["stock0_v2"].items()} == {
        "one": ("n/a", 42), "two": ("7", 7)}
    assert {name: (row["count"], row["code"]) for name, row in gold["stock0_v3"].items()} == {
        "one": (-1, "42"), "two": (7, "7")}
    # v4 is text again: the text written at v2, not the default of the failed step to v3
    assert {name: row["count"] for name, row in gold["stock0_v4"].items()} == {"one": "n/a", "two": "7"}


def test_an_update_keeps_the_validation_it_does_not_name() -> None:
    story, ref = story_reference("validation_kept")
    lines = story.lines
    assert status(ref, lines["rejected"])[:2] == ("rejected", "validation_failed")
    assert status(ref, lines["kept"]) == APPLIED
    assert status(ref, lines["later"]) == APPLIED  # v4 removed the validation
    gold = story_gold(story, ref)
    assert gold["mails0_v4"]["later"]["subject"] == "two\nlines"
    for version in (2, 3):  # shown where the validation holds: it fails, so the default
        assert gold[f"mails0_v{version}"]["later"]["subject"] == (None if version == 2 else "<Subject>")
        assert gold[f"mails0_v{version}"]["kept"]["subject"] == "one line"


# --------------------------------------------------------------------------------------------------
# Properties: a function of the set; nothing lost (section 7)


@settings(max_examples=25, deadline=None)
@given(history=histories(), seed=st.integers(0, 2**16), copies=st.integers(0, 5))
def test_the_result_does_not_depend_on_order_or_duplicates(history: Any, seed: int, copies: int) -> None:
    rng = Random(seed)
    lines = list(history.lines)
    shuffled = lines + rng.sample(lines, min(copies, len(lines)))
    rng.shuffle(shuffled)
    first, second = reference(lines), reference(shuffled)
    assert dataclasses.replace(first, lines=()) == dataclasses.replace(second, lines=())
    assert set(first.lines) == set(second.lines)


@settings(max_examples=25, deadline=None)
@given(history=histories())
def test_every_line_and_entry_is_accounted_for_once(history: Any) -> None:
    ref = reference(history.lines)
    assert len(ref.lines) == len(history.lines)
    assert len(ref.rejected) == sum(not line.accepted for line in ref.lines)
    assert all(line.reason_code for line in ref.rejected)
    assert {line.entry_hash for line in ref.lines if line.accepted} == set(ref.entries)
    assert sorted(m.entry_hash for m in ref.messages) == sorted(ref.entries)
    for m in ref.messages:
        assert (m.status == "pending") == (m.waits_for is not None)
        assert (m.status == "applied") == (m.reason_code is None)
        assert m.log_status == "accepted" or m.status == m.log_status
    assert sum(log.entries for log in ref.logs) == len(ref.entries)


@settings(max_examples=25, deadline=None)
@given(arrival=histories_in_batches())
def test_an_entry_rejected_by_its_log_stays_rejected_whatever_arrives_later(arrival: Any) -> None:
    _, batches = arrival
    seen: list[Line] = []
    rejected: set[str] = set()
    for batch in batches:
        seen += batch
        ref = reference(seen)
        now = {m.entry_hash for m in ref.messages if m.log_status == "rejected"}
        assert rejected <= now
        rejected = now

"""Unit tests of lakehouse.core.schemas: versions, lenses, reverts, field history, translation."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.core.lenses import ABSENT, NOT_SHOWN, Lens, LensField, check_value, parse_type
from lakehouse.core.messages import (
    Create,
    FieldChange,
    SchemaId,
    SchemaMeta,
    SchemaMigration,
    SchemaRevert,
    VersionedSchema,
)
from lakehouse.core.schemas import (
    FieldHistoryRow,
    SchemaLogError,
    SchemaMessage,
    SchemaVersions,
    build_versions,
    project,
    translate,
)
from lakehouse.errors import MessageError

UTC = timezone.utc
PROFILES = SchemaId(bytes.fromhex("d4a1cb88a66f02f8db635ce26441cc5dac1b08420ceaac230839b755845a9ffb"), 10)
FILES = SchemaId(bytes.fromhex("ac1b08420ceaac230839b755845a9ffbd4a1cb88a66f02f8db635ce26441cc5d"), 78434)
HASH_HEX = "0020" + "ab" * 32
SINGLE_LINE = "^[^#\r\n].*$"


# --------------------------------------------------------------------------------------------------
# Builders of schema messages


def meta(name: str = "slothmail", **kwargs: Any) -> SchemaMeta:
    return SchemaMeta(name, **kwargs)


def migration(*changes: FieldChange) -> SchemaMigration:
    return SchemaMigration(tuple(changes))


def create(name: str, type_text: str | None, **kwargs: Any) -> FieldChange:
    if "default" in kwargs:
        kwargs["has_default"] = True
    return FieldChange(name, "create", type_text, **kwargs)


def update(name: str, **kwargs: Any) -> FieldChange:
    if "default" in kwargs:
        kwargs["has_default"] = True
    return FieldChange(name, "update", **kwargs)


def remove(name: str) -> FieldChange:
    return FieldChange(name, "remove")


def revert(target: int) -> SchemaRevert:
    return SchemaRevert(target)


def build(*log: SchemaMessage | str) -> SchemaVersions:
    """Versions of a log given in seq order; a str stands for a message the caller rejected."""
    messages = [(seq, m) for seq, m in enumerate(log, start=1) if not isinstance(m, str)]
    rejected = {seq: m for seq, m in enumerate(log, start=1) if isinstance(m, str)}
    return build_versions(messages, rejected=rejected)


def field(name: str, type_text: str, **kwargs: Any) -> LensField:
    return LensField(name, parse_type(type_text), **kwargs)


def non_abandoned(sv: SchemaVersions) -> list[int]:
    return [v.version for v in sv if not v.abandoned]


# --------------------------------------------------------------------------------------------------
# The seeds' slothmail story

SLOTHMAIL: tuple[SchemaMessage, ...] = (
    meta(description="Send slothmail to your friends!"),
    migration(
        create("subject", "text"),
        create("body", "text"),
        create("recipient", "relation", schema=PROFILES),
        create("created", "timestamp"),
    ),
    migration(create("attachments", "relation[]", schema=FILES)),
    migration(remove("attachments"), update("subject", validation=SINGLE_LINE, default="<Subject>")),
    revert(2),
)
SUBJECT = field("subject", "text")
BODY = field("body", "text")
RECIPIENT = field("recipient", "relation", schema=PROFILES)
CREATED = field("created", "timestamp")
ATTACHMENTS = field("attachments", "relation[]", schema=FILES)
RESTRICTED_SUBJECT = field("subject", "text", validation=SINGLE_LINE, default="<Subject>")


def test_slothmail_versions() -> None:
    sv = build(*SLOTHMAIL[:4], revert(3))
    assert [v.status for v in sv] == ["meta", "valid", "valid", "valid", "revert"]
    assert [v.kind for v in sv] == [
        "schema-meta",
        "schema-migration",
        "schema-migration",
        "schema-migration",
        "schema-revert",
    ]
    assert sv.lens(1) == Lens()
    assert sv.lens(2) == Lens((SUBJECT, BODY, RECIPIENT, CREATED))
    assert sv.lens(3) == Lens((SUBJECT, BODY, RECIPIENT, CREATED, ATTACHMENTS))
    assert sv.lens(4) == Lens((RESTRICTED_SUBJECT, BODY, RECIPIENT, CREATED))
    assert sv.lens(5) == sv.lens(3)
    assert sv[4].hidden == (ATTACHMENTS,) and sv[5].hidden == ()
    assert sv.abandoned == frozenset({4}) and sv[4].abandoned_by == 5
    assert [v.parent for v in sv] == [None, 1, 2, 3, 3]
    assert sv[5].target == 3
    assert sv.current_version == 5
    assert sv.meta.name == "slothmail" and sv.meta.description == "Send slothmail to your friends!"
    assert sv.gold_versions() == (2, 3, 5)
    assert sv.lineage(5) == (1, 2, 3, 5)


def test_slothmail_field_history() -> None:
    sv = build(*SLOTHMAIL[:4], revert(3))
    rows = [
        (r.version, r.position, r.name, r.action, r.type, r.validation, r.default) for r in sv.field_history
    ]
    assert rows == [
        (2, 0, "subject", "create", "text", None, None),
        (2, 1, "body", "create", "text", None, None),
        (2, 2, "recipient", "create", "relation", None, None),
        (2, 3, "created", "create", "timestamp", None, None),
        (3, 0, "attachments", "create", "relation[]", None, None),
        (4, 0, "attachments", "remove", "relation[]", None, None),  # kept although version 4 is abandoned
        (4, 1, "subject", "update", "text", SINGLE_LINE, "<Subject>"),
    ]
    assert sv.field_history[2] == FieldHistoryRow(
        2, 2, "recipient", "create", "relation", None, None, PROFILES, False
    )
    assert sv.field_history[4].schema == FILES


def test_slothmail_multi_line_subject_through_the_restriction_and_back() -> None:
    created = datetime(2020, 5, 22, 11, 58, 50, tzinfo=UTC)
    writes = {"subject": (2, "Hello!\n...friend"), "body": (2, None), "created": (2, created)}
    before_revert = build(*SLOTHMAIL[:4])
    assert project(before_revert, writes, 2) == {
        "subject": "Hello!\n...friend",
        "body": None,
        "recipient": None,
        "created": created,
    }
    assert project(before_revert, writes, 4)["subject"] == "<Subject>"
    # The seeds' fix: an update at version 4 with a one-line subject, shown to a client pinned to 2.
    fixed = {**writes, "subject": (4, "Hello! ...friend")}
    assert project(before_revert, fixed, 4)["subject"] == "Hello! ...friend"
    assert project(before_revert, fixed, 2)["subject"] == "Hello! ...friend"

    after_revert = build(*SLOTHMAIL[:4], revert(3))
    assert project(after_revert, writes, 5)["subject"] == "Hello!\n...friend"
    with pytest.raises(SchemaLogError) as excinfo:
        project(after_revert, writes, 4)
    assert excinfo.value.code == "abandoned_version"
    with pytest.raises(SchemaLogError):
        project(after_revert, fixed, 5)  # the fix named version 4: its write drops out


def test_slothmail_revert_brings_attachments_back() -> None:
    writes = {"subject": (3, "Hi"), "attachments": (3, [HASH_HEX])}
    before_revert = build(*SLOTHMAIL[:4])
    assert translate(before_revert, "attachments", [HASH_HEX], 3, 4) is NOT_SHOWN
    assert "attachments" not in project(before_revert, writes, 4)
    after_revert = build(*SLOTHMAIL[:4], revert(3))
    assert project(after_revert, writes, 5) == {
        "subject": "Hi",
        "body": None,
        "recipient": None,
        "created": None,
        "attachments": [HASH_HEX],
    }
    assert project(after_revert, writes, 3) == project(after_revert, writes, 5)


def test_slothmail_seed_revert_to_version_two() -> None:
    sv = build(*SLOTHMAIL)
    assert sv.lens(5) == sv.lens(2)
    assert sv.abandoned == frozenset({3, 4})
    assert sv.gold_versions() == (2, 5)


# --------------------------------------------------------------------------------------------------
# Metadata


def test_later_meta_updates_metadata_and_keeps_the_lens() -> None:
    sv = build(meta(), migration(create("a", "text")), meta("slothmail2", homepage="https://example.org"))
    assert sv[3].status == "meta" and sv.lens(3) == sv.lens(2)
    assert sv.meta.name == "slothmail2" and sv.meta.homepage == "https://example.org"
    assert sv[2].meta.name == "slothmail"
    assert sv.gold_versions() == (2,)  # a meta version has no table of its own


def test_metadata_follows_the_lineage_through_a_revert() -> None:
    sv = build(meta(), migration(create("a", "text")), meta("renamed"), revert(2))
    assert sv.meta.name == "slothmail"
    assert sv[3].abandoned


# --------------------------------------------------------------------------------------------------
# Migrations: update semantics, re-creation


BASE_LOG: tuple[SchemaMessage, ...] = (
    meta(),
    migration(
        create("title", "varchar", validation="^[A-Z]", default="Untitled"),
        create("count", "integer", default=0),
        create("owner", "relation", schema=PROFILES, cascade=True),
        create("gone", "text"),
    ),
    migration(remove("gone")),
)


def test_update_changes_only_what_it_names() -> None:
    # issue: an update that named only the default dropped the validation
    sv = build(*BASE_LOG, migration(update("title", default="None")))
    assert sv[4].status == "valid"
    assert sv.lens(4).get("title") == field("title", "varchar", validation="^[A-Z]", default="None")
    sv = build(*BASE_LOG, migration(update("title", default="none")))  # the kept validation checks the default
    assert (sv[4].status, sv[4].reason) == ("invalid", "bad_default")
    sv = build(*BASE_LOG, migration(update("title", default="none", validation="")))  # "" removes it
    assert sv.lens(4).get("title") == field("title", "varchar", default="none")
    sv = build(*BASE_LOG, migration(update("title", type="integer", default=1)))  # kept, on a non-text type
    assert (sv[4].status, sv[4].reason) == ("invalid", "validation_not_allowed")
    sv = build(*BASE_LOG, migration(update("title", type="integer", default=1, validation="")))
    assert sv.lens(4).get("title") == field("title", "integer", default=1)
    sv = build(*BASE_LOG, migration(update("count", type="text", validation="^[0-9]+$", default="0")))
    assert sv.lens(4).get("count") == field("count", "text", validation="^[0-9]+$", default="0")
    assert sv.lens(4).names == ("title", "count", "owner")  # an update keeps the position


def test_update_of_a_relation_keeps_its_target() -> None:
    sv = build(*BASE_LOG, migration(update("owner", type="relation[]", default=None)))
    assert sv.lens(4).get("owner") == field("owner", "relation[]", schema=PROFILES, cascade=True)
    sv = build(*BASE_LOG, migration(update("owner", schema=FILES, default=None)))
    assert sv.lens(4).get("owner") == field("owner", "relation", schema=FILES, cascade=False)
    sv = build(*BASE_LOG, migration(update("owner", type="text", default="")))
    assert sv.lens(4).get("owner") == field("owner", "text", default="")


def test_changes_apply_in_order_within_a_migration() -> None:
    sv = build(
        *BASE_LOG,
        migration(
            create("x", "integer"),
            update("x", type="float", default=1),
            remove("count"),
            create("count", "integer"),
        ),
    )
    assert sv[4].status == "valid"
    assert sv.lens(4).names == ("title", "owner", "x", "count")  # re-created fields go to the end
    assert sv.lens(4).get("x") == field("x", "float", default=1.0)
    assert [
        (r.position, r.name, r.action, r.type, r.default) for r in sv.field_history if r.version == 4
    ] == [
        (0, "x", "create", "integer", None),
        (1, "x", "update", "float", 1.0),
        (2, "count", "remove", "integer", None),
        (3, "count", "create", "integer", None),
    ]


def test_defaults_are_canonical() -> None:
    sv = build(
        meta(),
        migration(
            create("at", "timestamp", default="2020-05-22T11:58:50+0200"),
            create("to", "relation", schema=PROFILES, default=bytes.fromhex(HASH_HEX)),
            create("ratio", "float", default=1),
            create("tags", "text[]", default=["a"]),
        ),
    )
    defaults = [f.default for f in sv.lens(2)]
    assert defaults == [datetime(2020, 5, 22, 9, 58, 50, tzinfo=UTC), HASH_HEX, 1.0, ["a"]]


def test_re_create_with_the_same_type_shows_old_values() -> None:
    sv = build(
        meta(),
        migration(create("note", "text")),
        migration(remove("note")),
        migration(create("note", "text", validation="^o", default="oops")),
    )
    assert sv[4].status == "valid" and sv[4].hidden == ()
    assert translate(sv, "note", "old", 2, 3) is NOT_SHOWN
    assert translate(sv, "note", "old", 2, 4) == "old"
    assert translate(sv, "note", "new", 2, 4) == "oops"  # the validation at re-appearance applies
    assert translate(sv, "note", "old", 4, 2) == "old"  # and down again


def rename(name: str, to: str) -> FieldChange:
    return FieldChange(name, "rename", to=to)


def test_a_rename_keeps_the_field_its_values_and_its_place() -> None:
    sv = build(
        meta(),
        migration(create("subject", "text", validation="^[a-z]+$", default="none"), create("size", "integer")),
        migration(rename("subject", "title")),
    )
    assert sv[3].status == "valid"
    assert sv.lens(3).names == ("title", "size")
    title = sv.lens(3).get("title")
    assert title is not None and title.key == "subject"
    assert (title.type, title.validation, title.default) == (parse_type("text"), "^[a-z]+$", "none")
    # a value written as subject at v2 shows as title at v3, and back
    assert project(sv, {"subject": (2, "hello"), "size": (2, 3)}, 3) == {"title": "hello", "size": 3}
    assert project(sv, {"subject": (3, "again")}, 2) == {"subject": "again", "size": None}
    row = sv.field_history[-1]
    assert (row.action, row.name, row.to, row.type) == ("rename", "subject", "title", "text")


def test_a_rename_then_an_update_of_the_new_name_in_one_migration() -> None:
    sv = build(
        meta(),
        migration(create("count", "text")),
        migration(rename("count", "total"), update("total", type="integer", default=-1)),
    )
    assert sv[3].status == "valid" and sv.lens(3).names == ("total",)
    assert translate(sv, "count", "12", 2, 3) == 12
    assert translate(sv, "count", "many", 2, 3) == -1
    assert translate(sv, "count", 7, 3, 2) == "7"


def test_a_rename_back_is_the_same_field() -> None:
    sv = build(
        meta(),
        migration(create("a", "integer")),
        migration(rename("a", "b")),
        migration(rename("b", "a")),
    )
    assert sv[4].status == "valid" and [(f.name, f.key) for f in sv.lens(4)] == [("a", "a")]
    assert translate(sv, "a", 5, 3, 4) == 5


def test_a_create_of_a_name_a_rename_left_is_a_new_field() -> None:
    sv = build(
        meta(),
        migration(create("a", "integer")),
        migration(rename("a", "b"), create("a", "text")),
        migration(remove("a")),
        migration(create("a", "text")),  # the removed new field comes back, not the renamed one
    )
    assert sv[3].status == "valid"
    assert [(f.name, f.key) for f in sv.lens(3)] == [("b", "a"), ("a", "a@3.1")]
    writes = {"a": (2, 1)}  # written as a at v2: the field now called b
    assert project(sv, writes, 3) == {"b": 1, "a": None}
    assert project(sv, {**writes, "a@3.1": (3, "x")}, 5) == {"b": 1, "a": "x"}
    assert [(f.name, f.key) for f in sv.lens(5)] == [("b", "a"), ("a", "a@3.1")]


def test_a_removed_and_recreated_field_keeps_its_new_name() -> None:
    sv = build(
        meta(),
        migration(create("a", "integer")),
        migration(rename("a", "b")),
        migration(remove("b")),
        migration(create("b", "integer")),
    )
    assert sv[5].status == "valid" and [(f.name, f.key) for f in sv.lens(5)] == [("b", "a")]
    assert project(sv, {"a": (2, 9)}, 5) == {"b": 9}


def test_a_revert_before_a_rename_shows_the_old_name_with_every_value() -> None:
    sv = build(
        meta(),
        migration(create("a", "integer")),
        migration(rename("a", "b")),
        revert(2),
    )
    assert sv.lens(4).names == ("a",)
    assert project(sv, {"a": (2, 4)}, 4) == {"a": 4}
    assert sv[3].abandoned


@pytest.mark.parametrize(("changes", "reason"), [
    ((rename("gone", "back"),), "field_removed"),
    ((rename("nothing", "b"),), "no_such_field"),
    ((rename("kept", "kept"),), "name_taken"),  # its own name
    ((rename("kept", "other"),), "name_taken"),  # a visible field's
    ((rename("kept", "gone"),), "name_taken"),  # a removed field's
    ((rename("other", "was"), rename("kept", "other")), "name_taken"),  # left by another field just before
    ((rename("kept", "Bad"),), "bad_field_name"),
])
def test_invalid_renames(changes: tuple[FieldChange, ...], reason: str) -> None:
    sv = build(
        meta(),
        migration(create("kept", "integer"), create("other", "text"), create("gone", "text")),
        migration(remove("gone")),
        migration(*changes),
    )
    assert (sv[4].status, sv[4].reason) == ("invalid", reason)
    assert sv.lens(4) == sv.lens(3)


def test_a_name_once_another_fields_is_taken_for_good() -> None:
    sv = build(
        meta(),
        migration(create("a", "integer"), create("c", "integer")),
        migration(rename("a", "b")),
        migration(rename("c", "a")),  # a was the field now called b
        revert(2),
        migration(rename("c", "b")),  # b was a's, on the abandoned version 3
    )
    assert (sv[4].status, sv[4].reason) == ("invalid", "name_taken")
    assert (sv[6].status, sv[6].reason) == ("invalid", "name_taken")


def test_a_cascade_follows_a_renamed_relation() -> None:
    sv = build(
        meta(),
        migration(create("parent", "relation", schema=PROFILES, cascade=True)),
        migration(rename("parent", "owner")),
    )
    assert sv.cascading == {(2, "parent"), (3, "parent")}
    assert sv.write_keys[2] == {"owner": "parent"} and sv.write_keys[1] is None


def test_re_create_with_another_type_is_invalid() -> None:
    sv = build(*BASE_LOG, migration(create("gone", "varchar")))
    assert (sv[4].status, sv[4].reason) == ("invalid", "type_changed_on_recreate")
    assert sv[4].message is not None and "fields[0].type" in sv[4].message


INVALID_MIGRATIONS: list[tuple[str, SchemaMigration]] = [
    ("field_exists", migration(create("title", "text"))),
    ("field_exists", migration(create("x", "text"), create("x", "text"))),
    ("no_such_field", migration(update("nothing", default=""))),
    ("no_such_field", migration(remove("nothing"))),
    ("field_removed", migration(update("gone", default=""))),
    ("field_removed", migration(remove("gone"))),
    ("field_removed", migration(remove("count"), remove("count"))),
    ("bad_type", migration(create("x", "string"))),
    ("bad_type", migration(create("x", None))),
    ("bad_type", migration(create("x", "integer[][]"))),
    ("bad_type", migration(update("count", type="int", default=0))),
    ("validation_not_allowed", migration(create("x", "integer", validation="^1$"))),
    ("validation_not_allowed", migration(create("x", "relation[]", schema=FILES, validation="."))),
    ("validation_not_allowed", migration(update("count", validation="^1$", default=0))),
    ("validation_not_allowed", migration(update("title", type="integer", validation="^1$", default=0))),
    ("bad_validation", migration(create("x", "text", validation="("))),
    ("bad_validation", migration(create("x", "text[]", validation="(a)\\1"))),
    ("bad_validation", migration(update("title", validation="(?=x)", default="X"))),
    ("missing_default", migration(update("title"))),
    ("missing_default", migration(update("count", type="float"))),
    ("bad_default", migration(create("x", "integer", default="5"))),
    ("bad_default", migration(create("x", "varchar", default="x" * 256))),
    ("bad_default", migration(create("x", "text", validation="^a+$", default="b"))),
    ("bad_default", migration(create("x", "integer[]", default=[1, "2"]))),
    ("bad_default", migration(create("x", "relation", schema=FILES, default=b"\x00"))),
    ("bad_default", migration(update("count", type="text", default=5))),
    ("missing_schema", migration(create("x", "relation"))),
    ("missing_schema", migration(create("x", "relation[]"))),
    ("missing_schema", migration(update("title", type="relation", default=None))),
    ("schema_not_allowed", migration(create("x", "text", schema=FILES))),
    ("schema_not_allowed", migration(create("x", "integer", cascade=True))),
    ("schema_not_allowed", migration(update("count", schema=FILES, default=0))),
    ("type_changed_on_recreate", migration(create("gone", "integer"))),
    ("bad_field_name", migration(create("Title", "text"))),
    ("bad_action", migration(FieldChange("x", "move"))),  # type: ignore[arg-type]
    ("empty_migration", migration()),
]


@pytest.mark.parametrize(("reason", "bad"), INVALID_MIGRATIONS)
def test_invalid_migrations(reason: str, bad: SchemaMigration) -> None:
    sv = build(*BASE_LOG, bad)
    assert (sv[4].status, sv[4].reason) == ("invalid", reason)
    assert sv[4].message
    assert sv.lens(4) == sv.lens(3)  # the whole migration is dropped
    assert sv[4].hidden == sv[3].hidden
    assert [r for r in sv.field_history if r.version == 4] == []
    assert sv.gold_versions() == (2, 3)
    assert sv.current_version == 4


def test_an_invalid_change_drops_the_valid_changes_before_it() -> None:
    sv = build(
        *BASE_LOG, migration(create("new", "text"), remove("count"), create("x", "integer", validation="."))
    )
    assert (sv[4].status, sv[4].reason) == ("invalid", "validation_not_allowed")
    assert sv[4].message is not None and "fields[2].validation" in sv[4].message
    assert sv.lens(4).names == ("title", "count", "owner")


def test_a_default_must_pass_its_own_validation() -> None:
    sv = build(*BASE_LOG, migration(update("title", validation="^[a-z]+$", default="lowercase")))
    assert sv[4].status == "valid"
    sv = build(*BASE_LOG, migration(update("title", validation="^[A-Z]", default="lowercase")))
    assert (sv[4].status, sv[4].reason) == ("invalid", "bad_default")


def test_explicit_null_default_counts_as_a_default() -> None:
    sv = build(*BASE_LOG, migration(update("count", type="text", default=None)))
    assert sv[4].status == "valid" and sv.lens(4).get("count") == field("count", "text")


# --------------------------------------------------------------------------------------------------
# Reverts


A, B, C, D = (migration(create(name, "text")) for name in "abcd")


@pytest.mark.parametrize("target", [0, 4, 5, -1])
def test_revert_to_a_version_that_is_not_earlier_is_ignored(target: int) -> None:
    sv = build(meta(), A, B, revert(target))
    assert (sv[4].status, sv[4].reason, sv[4].target) == ("ignored_revert", "bad_target", target)
    assert sv.lens(4) == sv.lens(3) and sv[4].parent == 3
    assert sv.abandoned == frozenset()
    assert sv.gold_versions() == (2, 3)  # an ignored revert has no table


def test_revert_to_an_abandoned_version_is_ignored() -> None:
    # The revert at 5 already went back to 2, behind 3: version 3 is abandoned.
    sv = build(meta(), A, B, C, revert(2), revert(3))
    assert (sv[6].status, sv[6].reason) == ("ignored_revert", "target_abandoned")
    assert sv[6].message is not None and "revert at version 5" in sv[6].message
    assert sv.lens(6) == sv.lens(5) == sv.lens(2)
    assert sv[6].parent == 5
    assert sv.abandoned == frozenset({3, 4})


def test_nested_reverts_abandon_the_union() -> None:
    sv = build(meta(), A, B, revert(2), C, revert(1))
    assert [v.status for v in sv] == ["meta", "valid", "valid", "revert", "valid", "revert"]
    assert {v.version: v.abandoned_by for v in sv if v.abandoned} == {2: 6, 3: 4, 4: 6, 5: 6}
    assert sv.lens(6) == Lens()
    assert sv.lineage(6) == (1, 6)
    assert sv.gold_versions() == ()  # version 6 has an empty lens


def test_an_ignored_revert_does_not_block_later_reverts() -> None:
    # 7 targets 3 (abandoned by 5) and is ignored; it must not stop 8 from going back to 6.
    sv = build(meta(), A, B, C, revert(2), D, revert(3), revert(6))
    assert (sv[7].status, sv[8].status) == ("ignored_revert", "revert")
    assert sv.abandoned == frozenset({3, 4, 7})
    assert sv.lens(8) == sv.lens(6) and sv.lens(8).names == ("a", "d")
    assert non_abandoned(sv) == [1, 2, 5, 6, 8]


def test_two_reverts_to_the_same_target() -> None:
    sv = build(meta(), A, B, revert(2), C, revert(2))
    assert sv[6].status == "revert"
    assert {v.version: v.abandoned_by for v in sv if v.abandoned} == {3: 4, 4: 6, 5: 6}
    assert sv.lens(6) == sv.lens(2)
    assert sv.lineage(6) == (1, 2, 6)


def test_revert_to_a_revert() -> None:
    sv = build(meta(), A, B, revert(2), C, revert(4))
    assert sv[6].status == "revert" and sv[6].parent == 4
    assert sv.abandoned == frozenset({3, 5})
    assert sv.lens(6) == sv.lens(4) == sv.lens(2)
    assert sv.lineage(6) == (1, 2, 4, 6)
    assert sv.gold_versions() == (2, 4, 6)


def test_revert_to_the_previous_version_abandons_nothing() -> None:
    sv = build(meta(), A, B, revert(3))
    assert sv[4].status == "revert" and sv.abandoned == frozenset()
    assert sv.lens(4) == sv.lens(3)


def test_revert_to_an_invalid_version_shows_its_lens() -> None:
    sv = build(meta(), A, migration(create("a", "text")), B, revert(3))
    assert sv[3].status == "invalid" and sv[5].status == "revert"
    assert sv.lens(5) == sv.lens(2) and sv.abandoned == frozenset({4})


def test_revert_chain_and_translation_ends() -> None:
    sv = build(meta(), A, B, C, revert(3), D, revert(5))
    assert sv.abandoned == frozenset({4, 6})
    assert non_abandoned(sv) == [1, 2, 3, 5, 7]
    assert sv.lens(7) == sv.lens(5) == sv.lens(3)
    assert sv.lineage(7) == (1, 2, 3, 5, 7)
    with pytest.raises(SchemaLogError) as excinfo:
        translate(sv, "a", 1, 4, 7)
    assert excinfo.value.code == "abandoned_version"
    with pytest.raises(SchemaLogError) as excinfo:
        translate(sv, "a", 1, 1, 8)
    assert excinfo.value.code == "unknown_version"


def test_a_field_created_only_on_an_abandoned_branch_is_forgotten_by_the_lens() -> None:
    sv = build(meta(), A, migration(create("x", "integer")), revert(2), migration(create("x", "text")))
    assert sv[5].status == "valid" and sv.lens(5).get("x") == field("x", "text")
    # but its history stays
    assert [(r.version, r.name, r.type) for r in sv.field_history if r.name == "x"] == [
        (3, "x", "integer"),
        (5, "x", "text"),
    ]


# --------------------------------------------------------------------------------------------------
# Rejected messages and malformed input


def test_rejected_message_keeps_the_previous_lens() -> None:
    sv = build(meta(), A, "not_a_schema_message", B)
    assert (sv[3].status, sv[3].kind, sv[3].reason) == ("rejected", None, "not_a_schema_message")
    assert sv.lens(3) == sv.lens(2) and sv[3].parent == 2
    assert sv.lens(4).names == ("a", "b")
    assert sv.current_version == 4
    assert build(meta(), A, "not_cbor").current_version == 2


def test_revert_to_a_rejected_version() -> None:
    sv = build(meta(), A, "not_cbor", B, revert(3))
    assert sv[5].status == "revert" and sv.lens(5) == sv.lens(2)


@pytest.mark.parametrize(
    ("messages", "rejected", "code"),
    [
        ([], {}, "not_a_schema_log"),
        ([(1, meta()), (3, A)], {}, "bad_seq"),
        ([(1, meta()), (2, A), (2, B)], {}, "bad_seq"),
        ([(1, meta()), (2, A)], {2: "x"}, "bad_seq"),
        ([(0, meta())], {}, "bad_seq"),
        ([(1, A)], {}, "not_a_schema_log"),
        ([(2, A)], {1: "not_cbor"}, "not_a_schema_log"),
        ([(1, meta()), (2, Create(VersionedSchema(bytes(32), 1, 1), {}))], {}, "not_a_schema_message"),
    ],
)
def test_malformed_input(messages: list[tuple[int, Any]], rejected: dict[int, str], code: str) -> None:
    with pytest.raises(SchemaLogError) as excinfo:
        build_versions(messages, rejected=rejected)
    assert excinfo.value.code == code


def test_messages_may_come_in_any_order() -> None:
    in_order = build(*SLOTHMAIL)
    shuffled = build_versions(list(reversed(list(enumerate(SLOTHMAIL, start=1)))))
    assert shuffled == in_order


def test_unknown_versions() -> None:
    sv = build(*SLOTHMAIL)
    for version in (0, 6, -1):
        with pytest.raises(SchemaLogError) as excinfo:
            sv[version]
        assert excinfo.value.code == "unknown_version"


# --------------------------------------------------------------------------------------------------
# Translation between versions

NUMBERS_LOG: tuple[SchemaMessage, ...] = (
    meta(),
    migration(create("n", "integer", default=0)),
    migration(
        update("n", type="text", default="?"),
        create("label", "text", default="none"),
        create("extra", "float"),
    ),
    migration(update("n", type="integer", default=-1)),
)
NUMBERS = build(*NUMBERS_LOG)


def test_translate_up_and_down_with_conversions() -> None:
    sv = NUMBERS
    assert translate(sv, "n", 5, 2, 3) == "5"
    assert translate(sv, "n", 5, 2, 4) == 5
    assert translate(sv, "n", "7", 3, 2) == 7  # down: a client pinned to version 2
    assert translate(sv, "n", "7", 3, 4) == 7


def test_translate_across_a_revert() -> None:
    sv = build(*NUMBERS_LOG, revert(3))
    assert translate(sv, "n", 5, 2, 5) == "5"
    assert translate(sv, "n", "x", 3, 5) == "x"
    assert translate(sv, "n", "x", 5, 2) == 0
    with pytest.raises(SchemaLogError):
        translate(sv, "n", 5, 4, 5)


def test_translate_failures_give_the_destination_default() -> None:
    sv = NUMBERS
    assert translate(sv, "n", "abc", 3, 4) == -1
    assert translate(sv, "n", "abc", 3, 2) == 0
    assert translate(sv, "n", "12", 3, 4) == 12
    assert translate(sv, "n", 12, 4, 2) == 12


def test_fields_without_a_value_get_the_destination_default() -> None:
    sv = NUMBERS
    assert translate(sv, "label", ABSENT, 2, 3) == "none"  # added after the write's version
    assert translate(sv, "label", "x", 2, 3) == "none"  # (a value for it at 2 cannot exist)
    assert translate(sv, "extra", ABSENT, 2, 3) is None  # no default: NULL
    assert translate(sv, "label", None, 3, 3) is None  # a null stays null: a default never replaces it
    assert translate(sv, "label", "x", 3, 2) is NOT_SHOWN
    assert translate(sv, "nothing", "x", 3, 3) is NOT_SHOWN


def test_project_rows() -> None:
    sv = NUMBERS
    writes = {"n": (2, 5), "label": (3, "hello"), "stray": (3, 1)}
    assert project(sv, writes, 3) == {"n": "5", "label": "hello", "extra": None}
    assert list(project(sv, writes, 3)) == ["n", "label", "extra"]  # lens order
    assert project(sv, writes, 2) == {"n": 5}
    assert project(sv, {}, 3) == {"n": "?", "label": "none", "extra": None}
    with pytest.raises(SchemaLogError):
        project(build(*NUMBERS_LOG, revert(2)), {"n": (4, 5)}, 5)  # version 4 was abandoned


def test_the_core_does_not_import_pyspark() -> None:
    code = "import sys, lakehouse.core.lenses, lakehouse.core.schemas; print('pyspark' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


# --------------------------------------------------------------------------------------------------
# Properties of random schema logs

NAMES = ("a", "b", "c")
TYPES = ("text", "varchar", "integer", "float", "boolean", "timestamp", "text[]", "integer[]")
DEFAULTS: dict[str, Any] = {
    "text": "d",
    "varchar": "d",
    "integer": 0,
    "float": 0.5,
    "boolean": False,
    "timestamp": "2020-01-01T00:00:00Z",
    "text[]": ["d"],
    "integer[]": [0],
}
PATTERN = "^[a-z0-9]*$"


@st.composite
def field_changes(draw: st.DrawFn, visible: tuple[str, ...], hidden: dict[str, str]) -> FieldChange:
    """A field change that usually makes sense for the current lens, and sometimes does not."""
    sensible = draw(st.integers(min_value=0, max_value=9)) > 0
    action = draw(st.sampled_from(["create", "create", "update", "remove"]))
    if sensible and visible and action != "create":
        name = draw(st.sampled_from(visible))
    elif sensible:
        action = "create"
        name = draw(st.sampled_from([n for n in NAMES if n not in visible] or list(NAMES)))
    else:
        name = draw(st.sampled_from(NAMES))
    if action == "remove":
        return remove(name)
    type_text = draw(st.sampled_from(TYPES))
    if name in hidden and draw(st.booleans()):
        type_text = hidden[name]  # re-create a removed field with its type
    kwargs: dict[str, Any] = {}
    if type_text.startswith(("text", "varchar")) or not sensible:
        kwargs["validation"] = draw(st.sampled_from([None, PATTERN]))
    if draw(st.booleans()) or action == "update":
        kwargs["default"] = DEFAULTS[type_text] if draw(st.booleans()) else None
    if action == "create":
        return create(name, type_text, **kwargs)
    return update(name, type=draw(st.sampled_from([None, type_text])), **kwargs)


@st.composite
def schema_logs(draw: st.DrawFn) -> list[SchemaMessage]:
    """seq 1 meta, then up to 11 migrations, reverts and metas drawn against the log so far."""
    log: list[SchemaMessage] = [meta()]
    for _ in range(draw(st.integers(min_value=0, max_value=11))):
        current = build(*log)[len(log)]
        kind = draw(st.sampled_from(["migration"] * 5 + ["revert"] * 3 + ["meta"]))
        if kind == "migration":
            hidden = {f.name: str(f.type) for f in current.hidden}
            changes = field_changes(current.lens.names, hidden)
            log.append(migration(*draw(st.lists(changes, min_size=1, max_size=3))))
        elif kind == "revert":
            log.append(revert(draw(st.integers(min_value=0, max_value=len(log) + 1))))
        else:
            log.append(meta("renamed"))
    return log


def values_for(type_text: str) -> st.SearchStrategy[Any]:
    scalar: dict[str, st.SearchStrategy[Any]] = {
        "text": st.text(alphabet="ab1\n", max_size=4),
        "varchar": st.text(alphabet="ab1\n", max_size=4),
        "integer": st.sampled_from([0, 1, 2, -5, 2**53 + 1]),
        "float": st.sampled_from([0.0, 1.0, 1.5, -2.0]),
        "boolean": st.booleans(),
        "timestamp": st.sampled_from(
            [datetime(2020, 1, 1, tzinfo=UTC), datetime(1999, 12, 31, 23, 59, 59, 5, tzinfo=UTC)]
        ),
    }
    base = type_text.removesuffix("[]")
    if type_text.endswith("[]"):
        return st.lists(scalar[base], max_size=2)
    return scalar[base]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema_logs(), st.data())
def test_random_logs(log: list[SchemaMessage], data: st.DataObject) -> None:
    sv = build(*log)
    versions = list(sv)
    assert versions[0].status == "meta" and sv.lens(1) == Lens()
    for v in versions[1:]:
        if v.status in ("meta", "invalid", "ignored_revert"):
            assert v.lens == sv.lens(v.version - 1) and v.parent == v.version - 1
        if v.status == "revert":
            assert v.target is not None and v.lens == sv.lens(v.target) and v.parent == v.target
            assert all(sv[u].abandoned for u in range(v.target + 1, v.version))
    applied = [(v.target, v.version) for v in versions if v.status == "revert"]
    for v in versions:
        covering = [r for t, r in applied if t is not None and t < v.version < r]
        assert v.abandoned == bool(covering)
        assert v.abandoned_by == (min(covering) if covering else None)
    # The non-abandoned versions form one chain; paths run along it.
    chain = non_abandoned(sv)
    assert [sv[v].parent for v in chain] == [None, *chain[:-1]]
    assert sv.current_version == len(sv)
    assert not sv[sv.current_version].abandoned
    assert sv.lineage(chain[-1]) == tuple(chain)
    # Field history: one row per change of every valid migration.
    valid = {
        v.version: len(m.fields)
        for v, m in zip(versions, log, strict=True)
        if isinstance(m, SchemaMigration) and v.status == "valid"
    }
    counted: dict[int, int] = {}
    for row in sv.field_history:
        counted[row.version] = counted.get(row.version, 0) + 1
    assert counted == valid
    # Translation: a value that fits lens(v) shows at n as a value that fits lens(n), or not at all.
    written_at = data.draw(st.sampled_from(chain), label="written at")
    for lens_field in sv.lens(written_at):
        value = data.draw(values_for(str(lens_field.type)), label=lens_field.name)
        try:
            value = check_value(lens_field, value, path="fields." + lens_field.name)
        except MessageError:
            continue
        assert translate(sv, lens_field.name, value, written_at, written_at) == value
        for shown_at in chain:
            result = translate(sv, lens_field.name, value, written_at, shown_at)
            destination = sv.lens(shown_at).get(lens_field.name)
            if destination is None:
                assert result is NOT_SHOWN
            else:
                assert check_value(destination, result, path="fields." + lens_field.name) == result

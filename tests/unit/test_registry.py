"""The registration rules (:mod:`lakehouse.core.registry`) and the schema-log rows (:mod:`lakehouse.core.schemalog`)."""

from __future__ import annotations

import pytest

from lakehouse.core.messages import Create, SchemaId, SchemaMeta, VersionedSchema
from lakehouse.core.registry import (
    changes_table_name,
    gold_table_name,
    registered_as,
    registration,
    resolve_schema,
    waits_of,
)
from lakehouse.core.schemalog import split_schema_log
from lakehouse.core.schemas import build_versions
from lakehouse.errors import RegistrationError

A, B, C = (SchemaId(bytes([n]) * 32, 0) for n in (1, 2, 3))


def test_names_of_a_registrations_tables() -> None:
    assert gold_table_name("notes", 3) == "notes_v3"
    assert changes_table_name(gold_table_name("notes", 3)) == "notes_v3_changes"


@pytest.mark.parametrize(("asked", "code"), [("nothing", "unknown_schema"), ("twin", "ambiguous_name"),
                                             ("zz:1", "bad_schema_id"), (f"{C.author.hex()}:0", "unknown_schema")])
def test_resolve_refuses_what_names_no_single_known_schema(asked: str, code: str) -> None:
    with pytest.raises(RegistrationError) as excinfo:
        resolve_schema(asked, {A: "twin", B: "twin"})
    assert excinfo.value.code == code


def test_resolve_takes_an_id_or_a_name_only_one_schema_has() -> None:
    known = {A: "notes", B: "files"}
    assert resolve_schema("files", known) == B
    assert resolve_schema(str(A), known) == A


@pytest.mark.parametrize(("name", "code"), [("Notes", "bad_name"), ("notes_v2", "bad_name"),
                                            ("notes_v2_changes", "bad_name"), ("files", "name_taken"),
                                            ("other", "registered")])
def test_a_registration_that_would_collide_is_refused(name: str, code: str) -> None:
    current = {A: "notes", B: "files"}
    with pytest.raises(RegistrationError) as excinfo:
        registration(A if code == "registered" else C, name, current)
    assert excinfo.value.code == code
    if code != "registered":  # issue: the command line's errors said only make's form, NAME=<name>
        assert "--name <name> (NAME=<name> with make register)" in str(excinfo.value)


def test_registering_again_under_the_same_name_is_no_change_and_a_drop_finds_name_or_id() -> None:
    current = {A: "notes"}
    assert registration(A, "notes", current) is False
    assert registration(B, "files", current) is True
    assert registered_as("notes", current) == registered_as(str(A), current) == A
    with pytest.raises(RegistrationError) as excinfo:
        registered_as("files", current)
    assert excinfo.value.code == "not_registered" and "notes" in str(excinfo.value)


def test_a_schema_waits_until_silver_saw_it() -> None:
    schemas = {A: build_versions([(1, SchemaMeta("a"))])}
    assert waits_of(schemas, {A: "a"}) == {}
    assert "not a schema in silver" in waits_of(schemas, {A: "a", B: "b"})[B]


def test_a_schema_log_keeps_its_schema_messages_and_rejects_the_others() -> None:
    create = Create(VersionedSchema(A.author, A.log_id, 1), {})
    messages, rejected = split_schema_log([(1, SchemaMeta("a"), None), (2, None, "bad_cbor"), (3, create, None),
                                           (4, None, None)])
    assert messages == [(1, SchemaMeta("a"))]
    assert rejected == {2: "bad_cbor", 3: "wrong_log", 4: "bad_message"}

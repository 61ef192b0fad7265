"""Messages (FORMAT.md section 3): CBOR round trips, shape defects with their codes and paths."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.core.messages import (
    Create,
    Delete,
    FieldChange,
    Message,
    SchemaId,
    SchemaMeta,
    SchemaMigration,
    SchemaRevert,
    Update,
    VersionedSchema,
    decode_message,
    encode_message,
    is_field_name,
    message_to_dict,
)
from lakehouse.errors import MessageError

AUTHOR = bytes(range(32))
HASH = b"\x00\x20" + bytes(range(100, 132))
INT64_MAX = 2**63 - 1

# --------------------------------------------------------------------------------------------
# generated messages of all six kinds
# --------------------------------------------------------------------------------------------
authors = st.binary(min_size=32, max_size=32)
uints = st.integers(0, INT64_MAX)
schema_ids = st.builds(SchemaId, authors, uints)
versioned = st.builds(VersionedSchema, authors, uints, st.integers(1, INT64_MAX))
hashes = st.binary(min_size=32, max_size=32).map(lambda d: b"\x00\x20" + d)
field_names = st.from_regex(r"[a-z][a-z0-9_]{0,63}", fullmatch=True)
offsets = st.integers(-(23 * 60 + 59), 23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20)
    | st.datetimes(timezones=offsets)
)
values = scalars | st.lists(scalars, max_size=4)
optional_text = st.none() | st.text(max_size=20)


@st.composite
def field_changes(draw: st.DrawFn) -> FieldChange:
    action = draw(st.sampled_from(["create", "update", "rename", "remove"]))
    if action == "remove":
        return FieldChange(draw(field_names), "remove")
    if action == "rename":
        return FieldChange(draw(field_names), "rename", to=draw(field_names))
    has_default = draw(st.booleans())
    common: dict[str, Any] = {
        "validation": draw(optional_text),
        "has_default": has_default,
        "default": draw(values) if has_default else None,
    }
    if action == "update":
        return FieldChange(draw(field_names), "update", type=draw(optional_text), **common)
    return FieldChange(
        draw(field_names),
        "create",
        type=draw(st.text(max_size=12)),
        schema=draw(st.none() | schema_ids),
        cascade=draw(st.booleans()),
        **common,
    )


metas = st.builds(
    SchemaMeta,
    name=st.from_regex(r"[\x20-\x7e]{1,64}", fullmatch=True),
    display_name=optional_text,
    description=optional_text,
    homepage=optional_text,
    bugs=optional_text,
    license=optional_text,
    contact=optional_text,
    dependencies=st.lists(schema_ids, max_size=3).map(tuple),
)
migrations = st.builds(SchemaMigration, st.lists(field_changes(), min_size=1, max_size=5).map(tuple))
reverts = st.builds(SchemaRevert, st.integers(1, INT64_MAX))
field_maps = st.dictionaries(field_names, values, max_size=5)
creates = st.builds(Create, versioned, field_maps)
updates = st.builds(Update, versioned, hashes, st.dictionaries(field_names, values, min_size=1, max_size=5))
deletes = st.builds(Delete, hashes, st.none() | versioned)
messages = metas | migrations | reverts | creates | updates | deletes


@settings(max_examples=400)
@given(messages)
def test_every_kind_round_trips(msg: Message) -> None:
    data = encode_message(msg)
    decoded = decode_message(data)
    assert decoded == msg
    assert type(decoded) is type(msg)
    assert encode_message(decoded) == data  # deterministic
    json.dumps(message_to_dict(decoded))  # display form is JSON-ready


@given(st.binary(max_size=64))
def test_arbitrary_bytes_give_a_message_or_a_message_error(data: bytes) -> None:
    try:
        decode_message(data)
    except MessageError as exc:
        assert exc.code != "bad_message"


@given(messages, st.data())
def test_corrupted_payloads_give_a_message_or_a_message_error(msg: Message, data: st.DataObject) -> None:
    payload = bytearray(encode_message(msg))
    pos = data.draw(st.integers(0, len(payload) - 1))
    payload[pos] = data.draw(st.integers(0, 255))
    try:
        decode_message(bytes(payload))
    except MessageError as exc:
        assert exc.code != "bad_message"


# --------------------------------------------------------------------------------------------
# shape defects: each gives its code and a path naming the key
# --------------------------------------------------------------------------------------------
META = {"spec": 1, "kind": "schema-meta", "name": "slothmail"}
MIGRATION = {
    "spec": 1,
    "kind": "schema-migration",
    "fields": [
        {"name": "subject", "action": "create", "type": "text"},
        {"name": "recipient", "action": "create", "type": "relation", "schema": [AUTHOR, 10]},
        {"name": "subject", "action": "update", "default": "<Subject>"},
        {"name": "body", "action": "remove"},
    ],
}
RENAME = {"spec": 1, "kind": "schema-migration", "fields": [{"name": "subject", "action": "rename", "to": "title"}]}
REVERT = {"spec": 1, "kind": "schema-revert", "target": 2}
CREATE = {"spec": 1, "kind": "create", "schema": [AUTHOR, 12, 4], "fields": {"subject": "Hello"}}
UPDATE = {
    "spec": 1,
    "kind": "update",
    "schema": [AUTHOR, 12, 4],
    "instance": HASH,
    "fields": {"subject": "x"},
}
DELETE = {"spec": 1, "kind": "delete", "instance": HASH}
DROP = object()


def changed(base: dict[str, Any], *path: Any, to: Any) -> bytes:
    """Encode ``base`` with the value at ``path`` replaced by ``to`` (or removed with DROP)."""
    obj = copy.deepcopy(base)
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    if to is DROP:
        del parent[path[-1]]
    else:
        parent[path[-1]] = to
    return cbor2.dumps(obj)


DEFECTS: list[tuple[str, bytes, str, str]] = [
    # the payload as a whole
    ("empty", b"", "not_cbor", ""),
    ("not cbor", b"\xff\x00", "not_cbor", ""),
    ("truncated", cbor2.dumps(CREATE)[:-3], "not_cbor", ""),
    ("invalid utf-8", b"\xa1\x62\xff\xfe\x01", "not_cbor", ""),
    ("duplicate key", b"\xa2\x64spec\x01\x64spec\x01", "not_cbor", ""),
    ("trailing bytes", cbor2.dumps(META) + b"\x00", "trailing_bytes", ""),
    ("two items", cbor2.dumps(META) * 2, "trailing_bytes", ""),
    ("array", cbor2.dumps([1, 2]), "not_a_map", ""),
    ("text", cbor2.dumps("schema-meta"), "not_a_map", ""),
    ("tagged map", cbor2.dumps(cbor2.CBORTag(55799, META)), "not_a_map", ""),
    ("spec missing", changed(META, "spec", to=DROP), "bad_spec", "spec"),
    ("spec 2", changed(META, "spec", to=2), "bad_spec", "spec"),
    ("spec text", changed(META, "spec", to="1"), "bad_spec", "spec"),
    ("spec true", changed(META, "spec", to=True), "bad_spec", "spec"),
    ("spec float", changed(META, "spec", to=1.0), "bad_spec", "spec"),
    ("kind missing", changed(META, "kind", to=DROP), "bad_kind", "kind"),
    ("kind unknown", changed(META, "kind", to="comment"), "bad_kind", "kind"),
    ("kind not text", changed(META, "kind", to=3), "bad_kind", "kind"),
    ("unknown key", changed(META, "colour", to="red"), "unknown_key", "colour"),
    ("key of another kind", changed(DELETE, "fields", to={}), "unknown_key", "fields"),
    ("key not text", changed(META, 7, to="x"), "bad_key", "7"),
    # schema-meta
    ("name missing", changed(META, "name", to=DROP), "missing_key", "name"),
    ("name empty", changed(META, "name", to=""), "bad_name", "name"),
    ("name too long", changed(META, "name", to="s" * 65), "bad_name", "name"),
    ("name not ascii", changed(META, "name", to="slöthmail"), "bad_name", "name"),
    ("name control char", changed(META, "name", to="sloth\nmail"), "bad_name", "name"),
    ("name not text", changed(META, "name", to=b"slothmail"), "bad_name", "name"),
    ("meta text not text", changed(META, "display-name", to=5), "bad_value", "display-name"),
    ("meta text null", changed(META, "homepage", to=None), "bad_value", "homepage"),
    ("dependencies not array", changed(META, "dependencies", to=[AUTHOR, 1][0]), "bad_value", "dependencies"),
    (
        "dependency short",
        changed(META, "dependencies", to=[[AUTHOR, 1], [AUTHOR]]),
        "bad_value",
        "dependencies[1]",
    ),
    (
        "dependency author",
        changed(META, "dependencies", to=[[AUTHOR[:31], 1]]),
        "bad_value",
        "dependencies[0][0]",
    ),
    # schema-migration
    ("changes missing", changed(MIGRATION, "fields", to=DROP), "missing_key", "fields"),
    ("changes empty", changed(MIGRATION, "fields", to=[]), "bad_value", "fields"),
    ("changes a map", changed(MIGRATION, "fields", to={"subject": {}}), "bad_value", "fields"),
    ("change not a map", changed(MIGRATION, "fields", 1, to="recipient"), "bad_value", "fields[1]"),
    (
        "change name missing",
        changed(MIGRATION, "fields", 0, "name", to=DROP),
        "missing_key",
        "fields[0].name",
    ),
    (
        "change name upper",
        changed(MIGRATION, "fields", 0, "name", to="Subject"),
        "bad_field_name",
        "fields[0].name",
    ),
    (
        "change name digit",
        changed(MIGRATION, "fields", 0, "name", to="1st"),
        "bad_field_name",
        "fields[0].name",
    ),
    (
        "change name dash",
        changed(MIGRATION, "fields", 0, "name", to="sub-ject"),
        "bad_field_name",
        "fields[0].name",
    ),
    (
        "change name long",
        changed(MIGRATION, "fields", 0, "name", to="s" * 65),
        "bad_field_name",
        "fields[0].name",
    ),
    (
        "change name newline",
        changed(MIGRATION, "fields", 0, "name", to="subject\n"),
        "bad_field_name",
        "fields[0].name",
    ),
    (
        "change name bytes",
        changed(MIGRATION, "fields", 0, "name", to=b"subject"),
        "bad_field_name",
        "fields[0].name",
    ),
    ("action missing", changed(MIGRATION, "fields", 3, "action", to=DROP), "missing_key", "fields[3].action"),
    (
        "action unknown",
        changed(MIGRATION, "fields", 3, "action", to="delete"),
        "bad_action",
        "fields[3].action",
    ),
    (
        "create without type",
        changed(MIGRATION, "fields", 0, "type", to=DROP),
        "missing_key",
        "fields[0].type",
    ),
    ("type not text", changed(MIGRATION, "fields", 0, "type", to=["text"]), "bad_value", "fields[0].type"),
    ("type null", changed(MIGRATION, "fields", 2, "type", to=None), "bad_value", "fields[2].type"),
    (
        "validation not text",
        changed(MIGRATION, "fields", 0, "validation", to=5),
        "bad_value",
        "fields[0].validation",
    ),
    ("cascade not bool", changed(MIGRATION, "fields", 1, "cascade", to=1), "bad_value", "fields[1].cascade"),
    (
        "relation schema short",
        changed(MIGRATION, "fields", 1, "schema", to=[AUTHOR]),
        "bad_value",
        "fields[1].schema",
    ),
    (
        "relation schema text",
        changed(MIGRATION, "fields", 1, "schema", to="profile"),
        "bad_value",
        "fields[1].schema",
    ),
    (
        "relation log negative",
        changed(MIGRATION, "fields", 1, "schema", 1, to=-1),
        "bad_value",
        "fields[1].schema[1]",
    ),
    (
        "relation log > int64",
        changed(MIGRATION, "fields", 1, "schema", 1, to=2**63),
        "bad_value",
        "fields[1].schema[1]",
    ),
    (
        "relation author text",
        changed(MIGRATION, "fields", 1, "schema", 0, to=AUTHOR.hex()),
        "bad_value",
        "fields[1].schema[0]",
    ),
    (
        "unknown change key",
        changed(MIGRATION, "fields", 0, "colour", to="red"),
        "unknown_key",
        "fields[0].colour",
    ),
    ("remove with type", changed(MIGRATION, "fields", 3, "type", to="text"), "unknown_key", "fields[3].type"),
    ("rename without to", changed(MIGRATION, "fields", 3, "action", to="rename"), "missing_key", "fields[3].to"),
    ("rename to a bad name", changed(RENAME, "fields", 0, "to", to="Title"), "bad_field_name", "fields[0].to"),
    ("rename to a number", changed(RENAME, "fields", 0, "to", to=7), "bad_field_name", "fields[0].to"),
    ("rename with a type", changed(RENAME, "fields", 0, "type", to="text"), "unknown_key", "fields[0].type"),
    ("create with to", changed(MIGRATION, "fields", 0, "to", to="title"), "unknown_key", "fields[0].to"),
    (
        "remove with default",
        changed(MIGRATION, "fields", 3, "default", to=None),
        "unknown_key",
        "fields[3].default",
    ),
    (
        "update with schema",
        changed(MIGRATION, "fields", 2, "schema", to=[AUTHOR, 1]),
        "unknown_key",
        "fields[2].schema",
    ),
    (
        "update with cascade",
        changed(MIGRATION, "fields", 2, "cascade", to=True),
        "unknown_key",
        "fields[2].cascade",
    ),
    (
        "default a map",
        changed(MIGRATION, "fields", 2, "default", to={"a": 1}),
        "bad_value",
        "fields[2].default",
    ),
    (
        "default nested",
        changed(MIGRATION, "fields", 2, "default", to=[1, [2]]),
        "bad_value",
        "fields[2].default[1]",
    ),
    # schema-revert
    ("target missing", changed(REVERT, "target", to=DROP), "missing_key", "target"),
    ("target zero", changed(REVERT, "target", to=0), "bad_value", "target"),
    ("target negative", changed(REVERT, "target", to=-2), "bad_value", "target"),
    ("target > int64", changed(REVERT, "target", to=2**63), "bad_value", "target"),
    ("target text", changed(REVERT, "target", to="2"), "bad_value", "target"),
    ("target bool", changed(REVERT, "target", to=True), "bad_value", "target"),
    # create
    ("schema missing", changed(CREATE, "schema", to=DROP), "missing_key", "schema"),
    ("schema unversioned", changed(CREATE, "schema", to=[AUTHOR, 12]), "bad_value", "schema"),
    ("schema author short", changed(CREATE, "schema", 0, to=AUTHOR[:31]), "bad_value", "schema[0]"),
    ("schema log > int64", changed(CREATE, "schema", 1, to=2**64 - 1), "bad_value", "schema[1]"),
    ("schema version zero", changed(CREATE, "schema", 2, to=0), "bad_value", "schema[2]"),
    ("schema version float", changed(CREATE, "schema", 2, to=4.0), "bad_value", "schema[2]"),
    ("fields missing", changed(CREATE, "fields", to=DROP), "missing_key", "fields"),
    ("fields not a map", changed(CREATE, "fields", to=[["subject", "x"]]), "bad_value", "fields"),
    ("field name upper", changed(CREATE, "fields", "Subject", to="x"), "bad_field_name", "fields.Subject"),
    ("field name int", changed(CREATE, "fields", 5, to="x"), "bad_field_name", "fields.5"),
    ("value a map", changed(CREATE, "fields", "subject", to={"a": 1}), "bad_value", "fields.subject"),
    ("value nested array", changed(CREATE, "fields", "tags", to=[["a"]]), "bad_value", "fields.tags[0]"),
    ("value map in array", changed(CREATE, "fields", "tags", to=["a", {}]), "bad_value", "fields.tags[1]"),
    (
        "value undefined",
        changed(CREATE, "fields", "subject", to=cbor2.undefined),
        "bad_value",
        "fields.subject",
    ),
    (
        "value simple",
        changed(CREATE, "fields", "subject", to=cbor2.CBORSimpleValue(99)),
        "bad_value",
        "fields.subject",
    ),
    (
        "value other tag",
        changed(CREATE, "fields", "subject", to=cbor2.CBORTag(32, "x")),
        "bad_value",
        "fields.subject",
    ),
    ("value bignum", changed(CREATE, "fields", "size", to=2**70), "bad_value", "fields.size"),
    (
        "value small bignum",
        changed(CREATE, "fields", "size", to=cbor2.CBORTag(2, b"\x01")),
        "bad_value",
        "fields.size",
    ),
    ("value decimal", changed(CREATE, "fields", "size", to=Decimal("1.5")), "bad_value", "fields.size"),
    ("value set", changed(CREATE, "fields", "tags", to=frozenset({1})), "bad_value", "fields.tags"),
    (
        "value tagged in array",
        changed(CREATE, "fields", "tags", to=[cbor2.CBORTag(37, b"1")]),
        "bad_value",
        "fields.tags[0]",
    ),
    ("value bad date", changed(CREATE, "fields", "created", to=cbor2.CBORTag(0, "May 22")), "not_cbor", ""),
    # update
    ("update fields empty", changed(UPDATE, "fields", to={}), "bad_value", "fields"),
    ("instance missing", changed(UPDATE, "instance", to=DROP), "missing_key", "instance"),
    ("instance 32 bytes", changed(UPDATE, "instance", to=HASH[2:]), "bad_value", "instance"),
    ("instance bad prefix", changed(UPDATE, "instance", to=b"\x01\x20" + HASH[2:]), "bad_value", "instance"),
    ("instance hex", changed(UPDATE, "instance", to=HASH.hex()), "bad_value", "instance"),
    # delete
    ("delete instance missing", changed(DELETE, "instance", to=DROP), "missing_key", "instance"),
    ("delete schema version zero", changed(DELETE, "schema", to=[AUTHOR, 1, 0]), "bad_value", "schema[2]"),
    ("delete schema null", changed(DELETE, "schema", to=None), "bad_value", "schema"),
]


@pytest.mark.parametrize(("payload", "code", "path"), [d[1:] for d in DEFECTS], ids=[d[0] for d in DEFECTS])
def test_shape_defect_gives_code_and_path(payload: bytes, code: str, path: str) -> None:
    with pytest.raises(MessageError) as info:
        decode_message(payload)
    assert (info.value.code, info.value.path) == (code, path)
    if path:
        assert str(info.value).startswith(f"{path}: ")


def _outcome(payload: bytes) -> tuple[Any, ...]:
    try:
        return ("decoded", decode_message(payload))
    except MessageError as exc:
        return ("refused", exc.code, exc.path, str(exc))


def test_a_payload_decodes_alike_whatever_was_decoded_before() -> None:
    """Each thread decodes with one CBOR decoder, payload after payload: what a payload gives
    must not depend on the payloads before it (a failed decode, a deep one, a tag), nor on the thread."""
    at_the_limit = cbor2.dumps({**CREATE, "fields": {"deep": [[[[[[[[[[[[[[1]]]]]]]]]]]]]]}})
    payloads = [d[1] for d in DEFECTS] + [cbor2.dumps(b) for b in (META, MIGRATION, REVERT, CREATE, UPDATE, DELETE)]
    payloads += [at_the_limit, cbor2.dumps(cbor2.CBORTag(28, CREATE)), cbor2.dumps(cbor2.CBORTag(29, 0))]
    alone = [_fresh_outcome(p) for p in payloads]  # each payload alone: its thread's first decode
    # as deep as the decoder goes: well-formed CBOR (a field value it refuses, nested arrays)
    assert alone[-3][:2] == ("refused", "bad_value")
    for before in payloads:
        _outcome(before)
        assert [_outcome(p) for p in payloads] == alone
    with ThreadPoolExecutor(max_workers=4) as pool:  # several threads at once
        assert list(pool.map(_outcome, payloads * 20)) == alone * 20


def _fresh_outcome(payload: bytes) -> tuple[Any, ...]:
    """:func:`_outcome` in a new thread: its first decode."""
    found: list[tuple[Any, ...]] = []
    thread = threading.Thread(target=lambda: found.append(_outcome(payload)))
    thread.start()
    thread.join()
    return found[0]


@pytest.mark.parametrize("base", [META, MIGRATION, REVERT, CREATE, UPDATE, DELETE], ids=lambda b: b["kind"])
def test_defect_table_bases_are_valid(base: dict[str, Any]) -> None:
    assert decode_message(cbor2.dumps(base)).kind == base["kind"]


# --------------------------------------------------------------------------------------------
# what is valid here and judged by the lens instead (SEMANTICS.md section 2)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "change",
    [
        {"name": "subject", "action": "create", "type": "colour"},  # unknown type name
        {"name": "size", "action": "create", "type": "integer", "validation": "^[0-9]+$"},  # on non-text
        {"name": "subject", "action": "create", "type": "text", "validation": "(unclosed"},  # RE2 rejects
        {"name": "subject", "action": "update", "type": "varchar"},  # update without default
        {"name": "owner", "action": "create", "type": "relation"},  # relation without target
        {"name": "subject", "action": "create", "type": "text", "schema": [AUTHOR, 1], "cascade": True},
    ],
)
def test_migration_judgements_are_left_to_the_lens(change: dict[str, Any]) -> None:
    msg = decode_message(cbor2.dumps({"spec": 1, "kind": "schema-migration", "fields": [change]}))
    assert isinstance(msg, SchemaMigration)
    assert msg.fields[0].name == change["name"]


def test_decoded_values() -> None:
    epoch = datetime(2020, 5, 22, 11, 58, 50, tzinfo=timezone.utc)
    payload = cbor2.dumps(
        {
            **CREATE,
            "fields": {
                "tag0": cbor2.CBORTag(0, "2020-05-22T11:58:50Z"),
                "tag1": cbor2.CBORTag(1, int(epoch.timestamp())),
                "text_date": "2020-05-22T11:58:50+0000",
                "half": 1.5,
                "big": 2**64 - 1,
                "small": -(2**64),
                "blob": b"\x00\x01",
                "tags": ["a", None, 1, True],
                "nothing": None,
            },
        }
    )
    msg = decode_message(payload)
    assert isinstance(msg, Create)
    assert msg.fields["tag0"] == epoch and msg.fields["tag1"] == epoch
    assert msg.fields["text_date"] == "2020-05-22T11:58:50+0000"
    assert msg.fields["big"] == 2**64 - 1 and msg.fields["small"] == -(2**64)
    assert msg.fields["tags"] == ["a", None, 1, True]
    assert msg.schema == VersionedSchema(AUTHOR, 12, 4)


def test_optional_and_default_keys() -> None:
    migration = decode_message(
        cbor2.dumps(
            {
                "spec": 1,
                "kind": "schema-migration",
                "fields": [
                    {"name": "a", "action": "update", "default": None},
                    {"name": "b", "action": "update"},
                    {
                        "name": "c",
                        "action": "create",
                        "type": "relation",
                        "schema": [AUTHOR, 3],
                        "cascade": False,
                    },
                ],
            }
        )
    )
    assert isinstance(migration, SchemaMigration)
    a, b, c = migration.fields
    assert (a.has_default, a.default) == (True, None)
    assert (b.has_default, b.default) == (False, None)
    assert (c.schema, c.cascade) == (SchemaId(AUTHOR, 3), False)
    assert decode_message(cbor2.dumps({**CREATE, "fields": {}})) == Create(VersionedSchema(AUTHOR, 12, 4), {})
    assert decode_message(cbor2.dumps(DELETE)) == Delete(HASH)


def test_indefinite_length_and_non_canonical_input_decodes() -> None:
    canonical = encode_message(SchemaRevert(2))
    indefinite = b"\xbf" + b"".join(cbor2.dumps(k) + cbor2.dumps(v) for k, v in REVERT.items()) + b"\xff"
    wide_int = (
        b"\xa3\x64spec\x1b" + (1).to_bytes(8, "big") + cbor2.dumps("kind") + cbor2.dumps("schema-revert")
    )
    wide_int += cbor2.dumps("target") + b"\x02"
    for payload in (indefinite, wide_int):
        assert payload != canonical
        assert decode_message(payload) == SchemaRevert(2)


# --------------------------------------------------------------------------------------------
# encoding
# --------------------------------------------------------------------------------------------
def test_encoding_is_deterministic_and_canonical() -> None:
    one = Create(VersionedSchema(AUTHOR, 12, 4), {"subject": "Hi", "body": None, "size": 1.0})
    two = Create(VersionedSchema(AUTHOR, 12, 4), {"size": 1.0, "body": None, "subject": "Hi"})
    assert encode_message(one) == encode_message(two)
    data = encode_message(one)
    assert data == cbor2.dumps(cbor2.loads(data), canonical=True)
    assert b"\xf9\x3c\x00" in data  # 1.0 as a half-precision float


def test_encoding_writes_dates_as_tag_0_and_bytes_as_byte_strings() -> None:
    when = datetime(2020, 5, 22, 11, 58, 50, tzinfo=timezone.utc)
    data = encode_message(Update(VersionedSchema(AUTHOR, 12, 4), HASH, {"created": when}))
    raw = cbor2.loads(data, semantic_decoders={0: lambda value, immutable: ("tag0", value)})
    assert raw["fields"]["created"] == ("tag0", "2020-05-22T11:58:50Z")
    assert raw["instance"] == HASH
    assert raw["schema"] == [AUTHOR, 12, 4]


@pytest.mark.parametrize(
    ("msg", "code", "path"),
    [
        (
            Create(VersionedSchema(AUTHOR, 1, 1), {"created": datetime(2020, 1, 1)}),
            "bad_value",
            "fields.created",
        ),
        (Create(VersionedSchema(AUTHOR, 1, 1), {"blob": bytearray(b"x")}), "bad_value", "fields.blob"),
        (Create(VersionedSchema(AUTHOR, 1, 1), {"Subject": "x"}), "bad_field_name", "fields.Subject"),
        (Create(VersionedSchema(AUTHOR, 1, 0), {}), "bad_value", "schema[2]"),
        (Update(VersionedSchema(AUTHOR, 1, 1), HASH, {}), "bad_value", "fields"),
        (Delete(HASH[:33]), "bad_value", "instance"),
        (SchemaRevert(0), "bad_value", "target"),
        (SchemaMeta(""), "bad_name", "name"),
        (SchemaMigration(()), "bad_value", "fields"),
        (SchemaMigration((FieldChange("a", "remove", type="text"),)), "unknown_key", "fields[0].type"),
        (SchemaMigration((FieldChange("a", "create"),)), "missing_key", "fields[0].type"),
        (SchemaMigration((FieldChange("a", "update", default="x"),)), "bad_value", "fields[0].default"),
        (
            SchemaMigration((FieldChange("a", "update", default={}, has_default=True),)),
            "bad_value",
            "fields[0].default",
        ),
        (
            SchemaMigration((FieldChange("a", "update", has_default=True, default=2**64),)),
            "bad_value",
            "fields[0].default",
        ),
    ],
)
def test_encoding_refuses_invalid_messages(msg: Message, code: str, path: str) -> None:
    with pytest.raises(MessageError) as info:
        encode_message(msg)
    assert (info.value.code, info.value.path) == (code, path)


def test_encoding_refuses_text_cbor_cannot_carry() -> None:
    with pytest.raises(MessageError) as info:
        encode_message(Create(VersionedSchema(AUTHOR, 1, 1), {"subject": "\ud800"}))
    assert info.value.code == "bad_value"


def test_nan_round_trips() -> None:
    data = encode_message(Create(VersionedSchema(AUTHOR, 1, 1), {"x": float("nan")}))
    msg = decode_message(data)
    assert isinstance(msg, Create) and msg.fields["x"] != msg.fields["x"]
    assert encode_message(msg) == data


# --------------------------------------------------------------------------------------------
# schema ids as text, names, display
# --------------------------------------------------------------------------------------------
def test_schema_id_text_round_trips() -> None:
    sid = SchemaId(AUTHOR, 12)
    assert SchemaId.parse(str(sid)) == sid
    assert SchemaId.parse(AUTHOR.hex().upper() + ":12") == sid
    assert SchemaId.parse(f"{AUTHOR.hex()}:{INT64_MAX}").log_id == INT64_MAX
    vs = VersionedSchema(AUTHOR, 12, 4)
    assert VersionedSchema.parse(str(vs)) == vs
    assert vs.schema_id == sid


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "expected <64 hex>:<log_id>"),
        (AUTHOR.hex(), "expected <64 hex>:<log_id>"),
        (AUTHOR.hex()[:62] + ":1", "64 hex characters (got 62"),
        ("g" + AUTHOR.hex()[1:] + ":1", "not hexadecimal"),
        (AUTHOR.hex() + ":", "decimal unsigned integer"),
        (AUTHOR.hex() + ":-1", "decimal unsigned integer"),
        (AUTHOR.hex() + ": 1", "decimal unsigned integer"),
        (AUTHOR.hex() + ":1_0", "decimal unsigned integer"),
        (AUTHOR.hex() + ":\u0661", "decimal unsigned integer"),  # an Arabic-Indic digit
        (AUTHOR.hex() + f":{2**63}", "larger than 2^63-1"),
    ],
)
def test_schema_id_parse_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(MessageError) as info:
        SchemaId.parse(text)
    assert info.value.code == "bad_schema_id"
    assert says in str(info.value)


@pytest.mark.parametrize("text", [f"{AUTHOR.hex()}:1", f"{AUTHOR.hex()}:1@0", f"{AUTHOR.hex()}:1@x"])
def test_versioned_schema_parse_refuses(text: str) -> None:
    with pytest.raises(MessageError) as info:
        VersionedSchema.parse(text)
    assert info.value.code == "bad_schema_id"


def test_is_field_name() -> None:
    assert is_field_name("subject") and is_field_name("a" + "_1" * 31)
    assert not is_field_name("") and not is_field_name("a" * 65) and not is_field_name("Subject")
    assert not is_field_name(b"subject") and not is_field_name("subject\n")


def test_message_to_dict_uses_wire_keys_and_hex() -> None:
    meta = SchemaMeta("slothmail", display_name="Slothmail", dependencies=(SchemaId(AUTHOR, 10),))
    assert message_to_dict(meta) == {
        "spec": 1,
        "kind": "schema-meta",
        "name": "slothmail",
        "display-name": "Slothmail",
        "dependencies": [f"{AUTHOR.hex()}:10"],
    }
    when = datetime(2020, 5, 22, 11, 58, 50, tzinfo=timezone.utc)
    update = Update(
        VersionedSchema(AUTHOR, 12, 4), HASH, {"blob": b"\x01", "created": when, "tags": [b"\x02"]}
    )
    assert message_to_dict(update) == {
        "spec": 1,
        "kind": "update",
        "schema": f"{AUTHOR.hex()}:12@4",
        "instance": HASH.hex(),
        "fields": {"blob": "01", "created": "2020-05-22T11:58:50+00:00", "tags": ["02"]},
    }
    change = FieldChange(
        "to", "create", type="relation", schema=SchemaId(AUTHOR, 1), cascade=True, has_default=True
    )
    assert message_to_dict(SchemaMigration((change,)))["fields"] == [
        {
            "name": "to",
            "action": "create",
            "type": "relation",
            "schema": f"{AUTHOR.hex()}:1",
            "default": None,
            "cascade": True,
        }
    ]


def test_core_modules_do_not_import_spark() -> None:
    code = "import sys, lakehouse.core.messages, lakehouse.core.lensfile; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_rename_decodes_with_its_new_name_and_encodes_back() -> None:
    msg = decode_message(cbor2.dumps(RENAME))
    assert msg == SchemaMigration((FieldChange("subject", "rename", to="title"),))
    assert decode_message(encode_message(msg)) == msg
    assert message_to_dict(msg)["fields"] == [{"name": "subject", "action": "rename", "to": "title"}]

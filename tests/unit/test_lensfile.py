"""Lens files (FORMAT.md section 4): the repository's lenses, both field-change shapes, line numbers."""

from __future__ import annotations

import hashlib
import textwrap
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from lakehouse.core.lensfile import parse_lens_file
from lakehouse.core.messages import (
    FieldChange,
    SchemaId,
    SchemaMeta,
    SchemaMigration,
    SchemaRevert,
    decode_message,
    encode_message,
)
from lakehouse.errors import LensFileError

LENSES = Path(__file__).resolve().parents[2] / "lenses"
PROFILE_AUTHOR = "d4a1cb88a66f02f8db635ce26441cc5dac1b08420ceaac230839b755845a9ffb"


def resolver(name: str) -> SchemaId:
    """A made-up registry: every name maps to a schema id derived from it."""
    return SchemaId(hashlib.sha256(name.encode()).digest(), len(name))


def parse(
    text: str, resolve_schema: Callable[[str], SchemaId] | None = resolver
) -> SchemaMeta | SchemaMigration | SchemaRevert:
    return parse_lens_file(textwrap.dedent(text), file="lens.yaml", resolve_schema=resolve_schema)


def lens(path: str) -> SchemaMigration:
    msg = parse_lens_file((LENSES / path).read_text(), file=path, resolve_schema=resolver)
    assert isinstance(msg, SchemaMigration)
    return msg


# --------------------------------------------------------------------------------------------
# the repository's lens files
# --------------------------------------------------------------------------------------------
LENS_FILES = sorted(p.relative_to(LENSES).as_posix() for p in LENSES.glob("*/*.yaml"))


def test_the_story_of_the_seeds_is_there() -> None:
    expected = {
        "profile/001.yaml",
        "attachment/001.yaml",
        "slothmail/001.yaml",
        "slothmail/002.yaml",
        "slothmail/003.yaml",
        "slothmail/004.yaml",
    }
    assert expected <= set(LENS_FILES)


@pytest.mark.parametrize("path", LENS_FILES)
def test_every_lens_file_parses_and_says_what_it_does(path: str) -> None:
    text = (LENSES / path).read_text()
    assert text.startswith("# ") and text.count("\n", 0, text.index("\nkind:") + 1) == 1
    msg = parse_lens_file(text, file=path, resolve_schema=resolver)
    assert decode_message(encode_message(msg)) == msg


def test_profile_and_attachment_lenses() -> None:
    profile = lens("profile/001.yaml")
    assert [(c.name, c.action, c.type) for c in profile.fields] == [
        ("name", "create", "varchar"),
        ("email", "create", "varchar"),
    ]
    assert profile.fields[1].validation == r"^[^@\s]+@[^@\s]+\.[^@\s]+$"
    attachment = lens("attachment/001.yaml")
    assert [(c.name, c.type) for c in attachment.fields] == [
        ("filename", "varchar"),
        ("mime", "varchar"),
        ("size", "integer"),
    ]


def test_slothmail_lenses_follow_the_seeds() -> None:
    first = lens("slothmail/001.yaml")
    assert first.fields == (
        FieldChange("subject", "create", type="text"),
        FieldChange("body", "create", type="text"),
        FieldChange("recipient", "create", type="relation", schema=resolver("profile")),
        FieldChange("created", "create", type="timestamp"),
    )
    second = lens("slothmail/002.yaml")
    assert second.fields == (
        FieldChange("attachments", "create", type="relation[]", schema=resolver("attachment")),
    )
    third = lens("slothmail/003.yaml")
    assert third.fields == (
        FieldChange("attachments", "remove"),
        FieldChange("subject", "update", validation=r"^[^#\r\n].*$", default="<Subject>", has_default=True),
    )


# --------------------------------------------------------------------------------------------
# shapes
# --------------------------------------------------------------------------------------------
SEEDS_SHAPE = f"""\
    kind: schema-migration
    fields:
      - subject:
        action: create
        type: text
      - recipient:
        action: create
        type: relation
        schema:
          # author for the schema of the recipient field
          - {PROFILE_AUTHOR}
          # schema's log id
          - 10
          # relation is schema-version agnostic
      - subject:
        action: update
        validation: ^[^#\\r\\n].*$
        default: <Subject>
    """
NAME_SHAPE = f"""\
    spec: 1
    kind: schema-migration
    fields:
      - name: subject
        action: create
        type: text
      - {{name: recipient, action: create, type: relation, schema: "{PROFILE_AUTHOR}:10"}}
      - action: update
        name: subject
        validation: '^[^#\\r\\n].*$'
        default: "<Subject>"
    """


def test_seeds_shape_and_name_shape_give_the_same_message() -> None:
    seeds = parse(SEEDS_SHAPE, resolve_schema=None)
    assert seeds == parse(NAME_SHAPE, resolve_schema=None)
    assert isinstance(seeds, SchemaMigration)
    assert seeds.fields[1].schema == SchemaId(bytes.fromhex(PROFILE_AUTHOR), 10)
    assert seeds.fields[2].validation == "^[^#\\r\\n].*$"


def test_schema_reference_forms() -> None:
    msg = parse(
        f"""\
        kind: schema-migration
        fields:
          - name: a
            action: create
            type: relation
            schema: [{PROFILE_AUTHOR}, 10]
          - name: b
            action: create
            type: relation
            schema: {PROFILE_AUTHOR.upper()}:10
          - name: c
            action: create
            type: relation[]
            schema: profile
            cascade: true
        """
    )
    assert isinstance(msg, SchemaMigration)
    a, b, c = msg.fields
    assert a.schema == b.schema == SchemaId(bytes.fromhex(PROFILE_AUTHOR), 10)
    assert (c.schema, c.cascade) == (resolver("profile"), True)


def test_digit_only_author_is_not_read_as_a_number() -> None:
    author = "1" * 64
    msg = parse(
        f"""\
        kind: schema-migration
        fields:
          - owner:
            action: create
            type: relation
            schema: [{author}, 7]
        """
    )
    assert isinstance(msg, SchemaMigration)
    assert msg.fields[0].schema == SchemaId(bytes.fromhex(author), 7)


def test_a_field_may_be_called_name_or_a_yaml_boolean_word() -> None:
    msg = parse(
        """\
        kind: schema-migration
        fields:
          - name:
            action: create
            type: varchar
          - on:
            action: create
            type: boolean
        """
    )
    assert isinstance(msg, SchemaMigration)
    assert [c.name for c in msg.fields] == ["name", "on"]


def test_a_rename_names_the_field_and_its_new_name_and_a_field_may_be_called_to() -> None:
    msg = parse(
        """\
        kind: schema-migration
        fields:
          - subject:
            action: rename
            to: title
          - name: body
            action: rename
            to: text
          - to:
            action: remove
          - name: to
            action: rename
            to: recipient_2
        """
    )
    assert isinstance(msg, SchemaMigration)
    assert msg.fields == (FieldChange("subject", "rename", to="title"), FieldChange("body", "rename", to="text"),
                          FieldChange("to", "remove"), FieldChange("to", "rename", to="recipient_2"))


def test_defaults_keep_yaml_types_and_timestamps_as_written() -> None:
    msg = parse(
        """\
        kind: schema-migration
        fields:
          - {name: created, action: update, default: 2020-05-22T11:58:50+00:00}
          - {name: day, action: update, default: 2020-05-22}
          - {name: size, action: update, default: 0x10}
          - {name: ratio, action: update, default: 1.5}
          - {name: flag, action: update, default: yes}
          - {name: gone, action: update, default: null}
          - {name: blob, action: update, default: !!binary AAE=}
          - {name: tags, action: update, default: [a, 1, 2020-01-01]}
          - {name: plain, action: update}
        """
    )
    assert isinstance(msg, SchemaMigration)
    defaults = {c.name: (c.has_default, c.default) for c in msg.fields}
    assert defaults == {
        "created": (True, "2020-05-22T11:58:50+00:00"),
        "day": (True, "2020-05-22"),
        "size": (True, 16),
        "ratio": (True, 1.5),
        "flag": (True, True),
        "gone": (True, None),
        "blob": (True, b"\x00\x01"),
        "tags": (True, ["a", 1, "2020-01-01"]),
        "plain": (False, None),
    }
    assert not any(isinstance(d, datetime) for _, d in defaults.values())


def test_text_keys_take_the_scalar_as_written() -> None:
    msg = parse(
        """\
        kind: schema-meta
        name: 2020
        display-name: yes
        """
    )
    assert msg == SchemaMeta("2020", display_name="yes")


def test_schema_meta_file() -> None:
    msg = parse(
        f"""\
        # describe slothmail
        kind: schema-meta
        spec: 1
        name: slothmail
        display-name: Slothmail
        description: Send slothmail to your friends!
        homepage: https://liebechaos.org/activity/slothmail
        bugs: https://liebechaos.org/bugs
        license: CC-BY-SA 2.0 <https://creativecommons.org/licenses/by-sa/2.0/>
        contact: info@liebechaos.org
        dependencies:
          - profile
          - {PROFILE_AUTHOR}:10
          - [{PROFILE_AUTHOR}, 11]
        """
    )
    assert msg == SchemaMeta(
        "slothmail",
        display_name="Slothmail",
        description="Send slothmail to your friends!",
        homepage="https://liebechaos.org/activity/slothmail",
        bugs="https://liebechaos.org/bugs",
        license="CC-BY-SA 2.0 <https://creativecommons.org/licenses/by-sa/2.0/>",
        contact="info@liebechaos.org",
        dependencies=(
            resolver("profile"),
            SchemaId(bytes.fromhex(PROFILE_AUTHOR), 10),
            SchemaId(bytes.fromhex(PROFILE_AUTHOR), 11),
        ),
    )


def test_schema_revert_file() -> None:
    assert parse("kind: schema-revert\ntarget: 2\n") == SchemaRevert(2)
    assert parse(
        "# back to 2\nspec: 1\nkind: schema-revert\ntarget: 2\n", resolve_schema=None
    ) == SchemaRevert(2)


def test_resolver_gets_the_name_as_written() -> None:
    asked: list[str] = []

    def remember(name: str) -> SchemaId:
        asked.append(name)
        return resolver(name)

    parse("kind: schema-meta\nname: x\ndependencies: [my profile, 'attachment']\n", resolve_schema=remember)
    assert asked == ["my profile", "attachment"]


# --------------------------------------------------------------------------------------------
# errors name the file and the line
# --------------------------------------------------------------------------------------------
def unknown(name: str) -> SchemaId:
    raise KeyError(f"no schema named {name!r}")


BAD_FILES: list[tuple[str, str, str, int | None]] = [
    (
        "seeds typo: no colon after the field name",
        """\
        kind: schema-migration
        fields:
          - attachments
            action: remove
        """,
        "yaml_syntax",
        4,
    ),
    ("tab indentation", "kind: schema-revert\ntarget:\n\t2\n", "yaml_syntax", 3),
    ("two documents", "kind: schema-revert\ntarget: 2\n---\nkind: schema-revert\n", "yaml_syntax", 3),
    ("unknown tag", "kind: schema-revert\ntarget: !!python/int 2\n", "yaml_syntax", 2),
    ("empty", "# nothing here\n", "not_a_map", None),
    ("a list", "- kind: schema-revert\n", "not_a_map", 1),
    ("kind missing", "# revert\ntarget: 2\n", "bad_kind", 2),
    ("kind of an instance", "target: 2\nkind: create\n", "bad_kind", 2),
    ("kind unknown", "kind: schema-comment\n", "bad_kind", 1),
    ("spec 2", "kind: schema-revert\nspec: 2\ntarget: 2\n", "bad_spec", 2),
    ("kind a list", "kind: [schema-revert]\ntarget: 2\n", "bad_kind", 1),
    ("spec a list", "kind: schema-revert\nspec: [1]\ntarget: 2\n", "bad_spec", 2),
    ("spec text", "kind: schema-revert\nspec: '1'\ntarget: 2\n", "bad_spec", 2),
    ("unknown top key", "kind: schema-revert\ntarget: 2\nreason: oops\n", "unknown_key", 3),
    ("key of another kind", "kind: schema-revert\ntarget: 2\nfields: []\n", "unknown_key", 3),
    ("duplicate key", "kind: schema-revert\ntarget: 2\ntarget: 3\n", "duplicate_key", 3),
    ("target missing", "# revert\nkind: schema-revert\n", "missing_key", 2),
    ("target zero", "kind: schema-revert\n\ntarget: 0\n", "bad_value", 3),
    ("target text", "kind: schema-revert\ntarget: two\n", "bad_value", 2),
    ("meta name missing", "kind: schema-meta\ndescription: x\n", "missing_key", 1),
    ("meta name too long", f"kind: schema-meta\nname: {'s' * 65}\n", "bad_name", 2),
    ("meta name empty", "kind: schema-meta\nname:\n", "bad_value", 2),
    ("meta text a list", "kind: schema-meta\nname: s\nlicense: [MIT]\n", "bad_value", 3),
    (
        "dependency unknown",
        "kind: schema-meta\nname: s\ndependencies:\n  - profile\n  - nobody\n",
        "unresolved_schema",
        5,
    ),
    ("dependencies a text", "kind: schema-meta\nname: s\ndependencies: profile\n", "bad_value", 3),
    ("fields missing", "kind: schema-migration\n", "missing_key", 1),
    ("fields empty", "kind: schema-migration\nfields: []\n", "bad_value", 2),
    ("fields a mapping", "kind: schema-migration\nfields:\n  subject: {action: remove}\n", "bad_value", 3),
]
CHANGES: list[tuple[str, str, str, int]] = [
    # each a field-change list after "kind: schema-migration\nfields:\n" (the list starts on line 3)
    ("change a scalar", "  - subject\n", "bad_field_change", 3),
    ("change typo key", "  - subject:\n    action: create\n    tpye: text\n", "unknown_key", 5),
    ("change value on name key", "  - subject: text\n    action: create\n", "unknown_key", 3),
    ("change as the value of its name", "  - subject: {action: create, type: text}\n", "unknown_key", 3),
    ("change names two fields", "  - subject:\n    body:\n    action: remove\n", "bad_field_change", 4),
    ("change without name", "  - action: remove\n", "missing_key", 3),
    ("change name shape with extra", "  - name: subject\n    body:\n    action: remove\n", "unknown_key", 4),
    ("change without action", "  - body:\n    type: text\n", "missing_key", 3),
    (
        "change bad field name",
        "  - {name: body, action: remove}\n  - Subject:\n    action: remove\n",
        "bad_field_name",
        4,
    ),
    ("change bad field name after action", "  - action: remove\n    Subject:\n", "bad_field_name", 4),
    ("change bad name: value", "  - action: remove\n    name: Subject\n", "bad_field_name", 4),
    ("change bad action", "  - body:\n    action: delete\n", "bad_action", 4),
    ("change remove with type", "  - body:\n    action: remove\n    type: text\n", "unknown_key", 5),
    (
        "change create without type",
        "  - {name: body, action: remove}\n  - subject:\n    action: create\n",
        "missing_key",
        4,
    ),
    ("change type a list", "  - body:\n    action: create\n    type: [text]\n", "bad_value", 5),
    ("change type null", "  - body:\n    action: create\n    type:\n", "bad_value", 5),
    (
        "change cascade text",
        "  - to:\n    action: create\n    type: relation\n    schema: profile\n    cascade: maybe\n",
        "bad_value",
        7,
    ),
    ("change default nested", "  - body:\n    action: update\n    default: [[a]]\n", "bad_value", 5),
    ("change default a map", "  - body:\n    action: update\n    default: {a: 1}\n", "bad_value", 5),
    (
        "change default too big",
        "  - n:\n    action: update\n    default: 99999999999999999999999\n",
        "bad_value",
        5,
    ),
    (
        "relation unknown name",
        "  - to:\n    action: create\n    type: relation\n    schema: nobody\n",
        "unresolved_schema",
        6,
    ),
    (
        "relation short author",
        "  - to:\n    action: create\n    type: relation\n    schema: abcd:1\n",
        "bad_schema_id",
        6,
    ),
    (
        "relation list of three",
        "  - to:\n    action: create\n    type: relation\n    schema: [a, 1, 2]\n",
        "bad_schema_id",
        6,
    ),
    (
        "relation log too big",
        f"  - to:\n    action: create\n    type: relation\n    schema: [{PROFILE_AUTHOR}, {2**63}]\n",
        "bad_schema_id",
        6,
    ),
]


def names_of(name: str) -> SchemaId:
    if name == "nobody":
        return unknown(name)
    return resolver(name)


@pytest.mark.parametrize(
    ("text", "code", "line"),
    [case[1:] for case in BAD_FILES]
    + [("kind: schema-migration\nfields:\n" + c[1], *c[2:]) for c in CHANGES],
    ids=[case[0] for case in BAD_FILES] + [c[0] for c in CHANGES],
)
def test_error_names_file_and_line(text: str, code: str, line: int | None) -> None:
    with pytest.raises(LensFileError) as info:
        parse_lens_file(textwrap.dedent(text), file="lenses/slothmail/009.yaml", resolve_schema=names_of)
    error = info.value
    assert (error.code, error.line) == (code, line)
    assert error.file == "lenses/slothmail/009.yaml"
    assert str(error).startswith("lenses/slothmail/009.yaml" + ("" if line is None else f":{line}:"))


def test_a_named_schema_needs_a_resolver() -> None:
    text = "kind: schema-migration\nfields:\n  - to:\n    action: create\n    type: relation\n    schema: profile\n"
    with pytest.raises(LensFileError) as info:
        parse_lens_file(text, file="f.yaml")
    assert (info.value.code, info.value.line) == ("unresolved_schema", 6)
    assert "<author hex>:<log_id>" in str(info.value)


def test_resolver_failure_is_reported_with_its_reason() -> None:
    text = "kind: schema-meta\nname: s\ndependencies: [nobody]\n"
    with pytest.raises(LensFileError) as info:
        parse_lens_file(text, file="f.yaml", resolve_schema=unknown)
    assert info.value.line == 3
    assert "no schema named 'nobody'" in str(info.value)


def test_anchors_and_aliases_are_refused_so_a_small_file_cannot_stand_for_a_huge_one() -> None:
    """Issue: YAML aliases repeat a node wherever they are named (the "billion laughs"): a list of
    aliases to a field with a long list default would parse into fields many times the file's size."""
    values = ", ".join(str(i) for i in range(2000))
    text = (f"kind: schema-migration\nfields:\n  - &big {{action: create, name: n, type: 'list<integer>', "
            f"default: [{values}]}}\n" + "".join("  - *big\n" for _ in range(2000)))
    with pytest.raises(LensFileError) as err:
        parse_lens_file(text, file="big.yaml")
    assert err.value.code == "yaml_syntax" and "alias (*big)" in str(err.value) and "big.yaml:4" in str(err.value)


def test_a_lens_file_with_a_nul_character_is_a_lens_file_error() -> None:
    """Found by fuzzing: PyYAML's reader refuses some characters as it is made, before the parser
    turned its errors into lens-file errors, so the error escaped as a YAML ReaderError."""
    with pytest.raises(LensFileError) as err:
        parse_lens_file("kind: schema-revert\ntarget: 2\n\x00", file="nul.yaml")
    assert err.value.code == "yaml_syntax" and "#x0000" in str(err.value)

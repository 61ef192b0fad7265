"""lakehouse.publish.fields: field values as typed on the command line, and as given in JSON."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse.core.lenses import LensField, check_value, parse_type
from lakehouse.errors import LakehouseError, MessageError, PublishError
from lakehouse.publish.fields import field_values, parse_field_text

HASH = bytes.fromhex("0020" + "ab" * 32)
HASH_HEX = HASH.hex()


def lf(type_text: str) -> LensField:
    return LensField("f", parse_type(type_text))


@pytest.mark.parametrize(
    ("text", "type_text", "expected"),
    [
        ("Hello! ...friend", "varchar", "Hello! ...friend"),
        ("", "text", ""),
        ("5", "integer", 5),
        ("-5", "integer", -5),
        ("+5", "integer", 5),
        ("1.5", "float", 1.5),
        ("5", "float", 5.0),
        ("1e3", "float", 1000.0),
        ("true", "boolean", True),
        ("false", "boolean", False),
        ("2020-05-22T11:58:50+0000", "timestamp", "2020-05-22T11:58:50+0000"),
        (HASH_HEX, "relation", HASH),
        (HASH_HEX.upper(), "relation", HASH),
        ("00ff", "blob", b"\x00\xff"),
        ("", "blob", b""),
        ('["a", "b"]', "text[]", ["a", "b"]),
        ("[1, 2]", "integer[]", [1, 2]),
        ('[1, "2"]', "integer[]", [1, 2]),
        ("[1, 2.5]", "float[]", [1.0, 2.5]),
        ('[true, "false"]', "boolean[]", [True, False]),
        (f'["{HASH_HEX}"]', "relation[]", [HASH]),
        ("[]", "timestamp[]", []),
    ],
)
def test_parse_field_text(text: str, type_text: str, expected: Any) -> None:
    value = parse_field_text(text, parse_type(type_text), path="fields.f")
    assert value == expected and type(value) is type(expected)
    # what the command line produces is what check_value accepts
    check_value(lf(type_text), value, path="fields.f")


@pytest.mark.parametrize(
    ("text", "type_text", "code", "path"),
    [
        ("five", "integer", "bad_value", "fields.f"),
        ("1.0", "integer", "bad_value", "fields.f"),
        ("1.5x", "float", "bad_value", "fields.f"),
        (" 1.5", "float", "bad_value", "fields.f"),
        ("yes", "boolean", "bad_value", "fields.f"),
        ("2020-05-22T11:58:50", "timestamp", "bad_value", "fields.f"),
        ("0120" + "ab" * 32, "relation", "bad_value", "fields.f"),
        ("abc", "blob", "bad_value", "fields.f"),
        ("zz", "blob", "bad_value", "fields.f"),
        ("a,b", "text[]", "bad_value", "fields.f"),
        ('{"a": 1}', "text[]", "bad_value", "fields.f"),
        ("[1, true]", "integer[]", "wrong_type", "fields.f[1]"),
        ('[1, "x"]', "integer[]", "bad_value", "fields.f[1]"),
        ("[[1]]", "integer[]", "wrong_type", "fields.f[0]"),
        ("[1]", "text[]", "wrong_type", "fields.f[0]"),
    ],
)
def test_parse_field_text_errors(text: str, type_text: str, code: str, path: str) -> None:
    with pytest.raises(MessageError) as excinfo:
        parse_field_text(text, parse_type(type_text), path="fields.f")
    assert (excinfo.value.code, excinfo.value.path) == (code, path)


TYPES = {"n": parse_type("integer"), "x": parse_type("float"), "ok": parse_type("boolean"),
         "s": parse_type("text"), "at": parse_type("timestamp"), "to": parse_type("relation"),
         "ns": parse_type("integer[]"), "tags": parse_type("text[]")}


def test_json_values_are_taken_as_the_json_types_they_are() -> None:
    given = ('{"n": 7, "x": 2, "ok": true, "s": "7", "at": "2020-05-22T11:58:50Z", "to": "' + HASH_HEX + '", '
             '"ns": [1, 2], "tags": ["a"]}')
    assert field_values(TYPES, (), [("--json", given)], schema_name="t") == {
        "n": 7, "x": 2, "ok": True, "s": "7", "at": "2020-05-22T11:58:50Z", "to": HASH, "ns": [1, 2], "tags": ["a"]}


@pytest.mark.parametrize(("given", "path"), [
    ('{"n": "7"}', "--field n"), ('{"x": "1.5"}', "--field x"), ('{"ok": "true"}', "--field ok"),
    ('{"ns": [1, "2"]}', "--field ns[1]")])
def test_a_json_string_is_not_read_as_a_number_or_boolean(given: str, path: str) -> None:
    with pytest.raises(MessageError) as excinfo:
        field_values(TYPES, (), [("--json", given)], schema_name="t")
    assert (excinfo.value.code, excinfo.value.path) == ("wrong_type", path)


def test_field_text_wins_over_json_and_is_read_in_its_types_form() -> None:
    values = field_values(TYPES, ("n=8", "s=hello"), [("--json", '{"n": 7, "ok": false}')], schema_name="t")
    assert values == {"n": 8, "ok": False, "s": "hello"}


@pytest.mark.parametrize(("pairs", "objects", "code"), [
    ((), [("--json", "[1]")], "bad_json"), ((), [("--json", "{")], "bad_json"),
    (("n",), [], "bad_field"), (("nope=1",), [], "unknown_field")])
def test_field_value_errors_say_what(pairs: tuple[str, ...], objects: list[tuple[str, str]], code: str) -> None:
    with pytest.raises(LakehouseError) as excinfo:
        field_values(TYPES, pairs, objects, schema_name="t")
    assert excinfo.value.code == code
    assert isinstance(excinfo.value, (PublishError, MessageError))


def test_an_unknown_schema_takes_values_as_given() -> None:
    assert field_values(None, ("n=7",), [("--json", '{"m": "8"}')], schema_name="t") == {"m": "8", "n": "7"}

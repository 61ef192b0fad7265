"""Unit tests of lakehouse.core.lenses: types, value checks, conversions, translation steps, CLI values."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

import cbor2
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lakehouse.core.lenses import (
    ABSENT,
    BASE_TYPES,
    BLOB_MAX_BYTES,
    INT64_MAX,
    INT64_MIN,
    NOT_SHOWN,
    ConversionError,
    FieldType,
    Lens,
    LensField,
    check_fields,
    check_value,
    compile_validation,
    convert,
    format_timestamp,
    is_convertible,
    matches,
    parse_type,
    translate_value,
    translator,
)
from lakehouse.errors import LakehouseError, MessageError

HASH = bytes.fromhex("0020" + "ab" * 32)
HASH_HEX = HASH.hex()
UTC = timezone.utc

T = parse_type
TEXT, VARCHAR, INTEGER, FLOAT = T("text"), T("varchar"), T("integer"), T("float")
BOOLEAN, TIMESTAMP, RELATION, BLOB = T("boolean"), T("timestamp"), T("relation"), T("blob")


def lf(type_text: str, *, validation: str | None = None, default: Any = None, name: str = "f") -> LensField:
    return LensField(name, parse_type(type_text), validation=validation, default=default)


def code_of(excinfo: pytest.ExceptionInfo[LakehouseError]) -> str:
    return excinfo.value.code


# --------------------------------------------------------------------------------------------------
# Types


@pytest.mark.parametrize("base", BASE_TYPES)
@pytest.mark.parametrize("is_array", [False, True])
def test_parse_type_round_trips_every_type(base: str, is_array: bool) -> None:
    text = base + ("[]" if is_array else "")
    ft = parse_type(text)
    assert (ft.base, ft.is_array, str(ft)) == (base, is_array, text)
    assert ft.element == FieldType(ft.base)


@pytest.mark.parametrize(
    "text", ["string", "datetime", "Varchar", " text", "integer[][]", "[]", "", "text []", None, 3]
)
def test_parse_type_rejects_unknown_types(text: Any) -> None:
    with pytest.raises(MessageError) as excinfo:
        parse_type(text, path="fields[0].type")
    assert excinfo.value.code == "bad_type"
    assert excinfo.value.path == "fields[0].type"


def test_field_type_refuses_unknown_base() -> None:
    with pytest.raises(MessageError):
        FieldType("string")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "ddl"),
    [
        ("varchar", "STRING"),
        ("text", "STRING"),
        ("integer", "BIGINT"),
        ("float", "DOUBLE"),
        ("boolean", "BOOLEAN"),
        ("timestamp", "TIMESTAMP"),
        ("relation", "STRING"),
        ("blob", "BINARY"),
        ("integer[]", "ARRAY<BIGINT>"),
        ("relation[]", "ARRAY<STRING>"),
        ("blob[]", "ARRAY<BINARY>"),
    ],
)
def test_spark_type_ddl(text: str, ddl: str) -> None:
    from lakehouse.spark.gold import spark_type_ddl

    assert spark_type_ddl(parse_type(text)) == ddl


def test_lens_lookup_order_and_duplicates() -> None:
    lens = Lens((lf("text", name="subject"), lf("timestamp", name="created")))
    assert lens.names == ("subject", "created")
    assert lens.get("created") == lf("timestamp", name="created")
    assert lens.get("body") is None
    assert "subject" in lens and "body" not in lens and len(lens) == 2
    assert [f.name for f in lens] == ["subject", "created"]
    with pytest.raises(LakehouseError):
        Lens((lf("text", name="a"), lf("integer", name="a")))


def test_lens_field_with_list_default_is_hashable() -> None:
    field = lf("text[]", default=["a"])
    assert hash(field) == hash(lf("text[]", default=["b"]))
    assert field != lf("text[]", default=["b"])


# --------------------------------------------------------------------------------------------------
# check_value: one test per type and error code


def check_error(field: LensField, value: Any) -> MessageError:
    with pytest.raises(MessageError) as excinfo:
        check_value(field, value, path="fields.f")
    return excinfo.value


def test_varchar() -> None:
    field = lf("varchar")
    assert check_value(field, "Hello", path="fields.f") == "Hello"
    assert check_value(field, "x" * 255, path="fields.f") == "x" * 255
    assert (
        check_value(field, "\U0001f9a5" * 255, path="fields.f") == "\U0001f9a5" * 255
    )  # characters, not bytes
    error = check_error(field, "x" * 256)
    assert (error.code, error.path) == ("too_long", "fields.f")
    for value in (5, b"x", True, ["x"], 1.5):
        assert check_error(field, value).code == "wrong_type"


def test_text_has_no_length_limit() -> None:
    assert check_value(lf("text"), "y" * 100_000, path="fields.f") == "y" * 100_000
    assert check_error(lf("text"), 5).code == "wrong_type"


def test_integer() -> None:
    field = lf("integer")
    assert check_value(field, 5, path="fields.f") == 5
    assert check_value(field, INT64_MAX, path="fields.f") == INT64_MAX
    assert check_value(field, INT64_MIN, path="fields.f") == INT64_MIN
    assert check_error(field, INT64_MAX + 1).code == "out_of_range"
    assert check_error(field, INT64_MIN - 1).code == "out_of_range"
    for value in (True, False, 5.0, "5", b"\x05"):
        assert check_error(field, value).code == "wrong_type"


def test_float() -> None:
    field = lf("float")
    assert check_value(field, 1.5, path="fields.f") == 1.5
    converted = check_value(field, 3, path="fields.f")
    assert converted == 3.0 and type(converted) is float
    assert check_value(field, 2**53, path="fields.f") == float(2**53)
    assert check_value(field, -(2**63), path="fields.f") == -(2.0**63)
    assert check_error(field, 2**53 + 1).code == "out_of_range"  # a double cannot hold it exactly
    assert check_error(field, 10**400).code == "out_of_range"
    assert math.isnan(check_value(field, math.nan, path="fields.f"))
    for value in (True, "1.5", b"1"):
        assert check_error(field, value).code == "wrong_type"


def test_boolean() -> None:
    assert check_value(lf("boolean"), False, path="fields.f") is False
    for value in (0, 1, "true"):
        assert check_error(lf("boolean"), value).code == "wrong_type"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2020-05-22T11:58:50+0000", datetime(2020, 5, 22, 11, 58, 50, tzinfo=UTC)),
        ("2020-05-22T11:58:50+00:00", datetime(2020, 5, 22, 11, 58, 50, tzinfo=UTC)),
        ("2020-05-22T11:58:50Z", datetime(2020, 5, 22, 11, 58, 50, tzinfo=UTC)),
        ("2020-05-22T13:58:50+02:00", datetime(2020, 5, 22, 11, 58, 50, tzinfo=UTC)),
        ("2020-05-22T06:28:50-0530", datetime(2020, 5, 22, 11, 58, 50, tzinfo=UTC)),
        ("2020-05-22T11:58:50.5Z", datetime(2020, 5, 22, 11, 58, 50, 500000, tzinfo=UTC)),
        ("2020-05-22T11:58:50.1234567Z", datetime(2020, 5, 22, 11, 58, 50, 123456, tzinfo=UTC)),  # truncated
        ("2020-12-31T23:30:00-01:00", datetime(2021, 1, 1, 0, 30, tzinfo=UTC)),
    ],
)
def test_timestamp_text_with_offset(text: str, expected: datetime) -> None:
    value = check_value(lf("timestamp"), text, path="fields.f")
    assert value == expected
    assert value.tzinfo is UTC


@pytest.mark.parametrize(
    "text",
    [
        "2020-05-22T11:58:50",  # no offset
        "2020-05-22",
        "2020-05-22 11:58:50Z",
        "2020-02-30T00:00:00Z",  # no such day
        "2020-05-22T24:00:00Z",
        "2020-05-22T11:58:60Z",  # leap seconds are not representable
        "2020-05-22T11:58:50+2400",
        "2020-05-22T11:58:50+00:60",
        "20200522T115850Z",
        "yesterday",
    ],
)
def test_timestamp_text_rejected(text: str) -> None:
    assert check_error(lf("timestamp"), text).code == "bad_value"


def test_timestamp_out_of_range_after_moving_to_utc() -> None:
    assert check_error(lf("timestamp"), "0001-01-01T00:30:00+01:00").code == "out_of_range"
    assert check_error(lf("timestamp"), "9999-12-31T23:30:00-01:00").code == "out_of_range"


def test_timestamp_from_cbor_tags_and_datetimes() -> None:
    field = lf("timestamp")
    tag0 = cbor2.loads(cbor2.dumps(cbor2.CBORTag(0, "2013-03-21T20:04:00+01:00")))
    tag1 = cbor2.loads(cbor2.dumps(cbor2.CBORTag(1, 1363896240.5)))
    assert check_value(field, tag0, path="fields.f") == datetime(2013, 3, 21, 19, 4, tzinfo=UTC)
    assert check_value(field, tag1, path="fields.f") == datetime(2013, 3, 21, 20, 4, 0, 500000, tzinfo=UTC)
    plus_two = datetime(2020, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=2)))
    converted = check_value(field, plus_two, path="fields.f")
    assert converted == datetime(2020, 1, 1, tzinfo=UTC) and converted.tzinfo is UTC
    assert check_error(field, datetime(2020, 1, 1)).code == "bad_value"  # naive
    for value in (1363896240, 1.5, b"2020", True):
        assert check_error(field, value).code == "wrong_type"


def test_relation() -> None:
    field = lf("relation")
    assert check_value(field, HASH, path="fields.f") == HASH_HEX
    assert check_error(field, b"\x01\x20" + b"\x00" * 32).code == "bad_value"
    assert check_error(field, HASH[:-1]).code == "bad_value"
    assert check_error(field, HASH + b"\x00").code == "bad_value"
    for value in (HASH_HEX, 5, [HASH]):
        assert check_error(field, value).code == "wrong_type"


def test_blob() -> None:
    field = lf("blob")
    assert check_value(field, b"", path="fields.f") == b""
    assert check_value(field, b"\x00" * BLOB_MAX_BYTES, path="fields.f") == b"\x00" * BLOB_MAX_BYTES
    assert check_error(field, b"\x00" * (BLOB_MAX_BYTES + 1)).code == "too_large"
    assert check_error(field, "00").code == "wrong_type"


def test_null_is_allowed_for_every_type() -> None:
    for base in BASE_TYPES:
        assert check_value(lf(base), None, path="fields.f") is None
        assert check_value(lf(base + "[]"), None, path="fields.f") is None


def test_arrays_are_checked_element_by_element() -> None:
    assert check_value(lf("relation[]"), [HASH, HASH], path="fields.f") == [HASH_HEX, HASH_HEX]
    assert check_value(lf("float[]"), (1, 2.5), path="fields.f") == [1.0, 2.5]
    assert check_value(lf("integer[]"), [], path="fields.f") == []
    error = check_error(lf("integer[]"), [1, "2"])
    assert (error.code, error.path) == ("wrong_type", "fields.f[1]")
    assert check_error(lf("integer[]"), [1, None]).code == "wrong_type"  # no null elements
    assert check_error(lf("integer[]"), [[1]]).code == "wrong_type"  # one level only
    assert check_error(lf("integer[]"), 1).code == "wrong_type"
    assert check_error(lf("varchar[]"), ["ok", "x" * 256]).code == "too_long"


def test_validation_is_a_search_checked_per_element() -> None:
    assert check_value(lf("text", validation="b"), "abc", path="fields.f") == "abc"  # a search, not a match
    single_line = "^[^#\r\n].*$"
    assert check_value(lf("varchar", validation=single_line), "Hello! ...friend", path="fields.f")
    error = check_error(lf("varchar", validation=single_line), "Hello!\n...friend")
    assert (error.code, error.path) == ("validation_failed", "fields.f")
    assert check_error(lf("text", validation="^a$"), "a\n").code == "validation_failed"  # $ is the end
    error = check_error(lf("text[]", validation="^[a-z]+$"), ["ok", "NO"])
    assert (error.code, error.path) == ("validation_failed", "fields.f[1]")


def test_pathological_pattern_runs_in_linear_time() -> None:
    field = lf("text", validation="(a+)+$")
    assert check_value(field, "a" * 50_000, path="fields.f") == "a" * 50_000
    # A backtracking engine would try every split of the run of a's before giving up here.
    assert check_error(field, "a" * 50_000 + "b").code == "validation_failed"
    assert check_error(lf("text[]", validation="^(a|aa)+$"), ["a" * 50_000 + "!"]).code == "validation_failed"


@pytest.mark.parametrize("pattern", ["(", "(a)\\1", "(?=a)", "a{2,1}", "[z-a]"])
def test_patterns_re2_rejects(pattern: str) -> None:
    with pytest.raises(MessageError) as excinfo:
        compile_validation(pattern, path="fields[0].validation")
    assert (excinfo.value.code, excinfo.value.path) == ("bad_validation", "fields[0].validation")
    with pytest.raises(MessageError):
        matches(pattern, "a")


def test_check_fields() -> None:
    lens = Lens((lf("text", name="subject"), lf("timestamp", name="created")))
    checked = check_fields(lens, {"created": "2020-05-22T11:58:50+0000", "subject": None})
    assert checked == {"created": datetime(2020, 5, 22, 11, 58, 50, tzinfo=UTC), "subject": None}
    assert check_fields(lens, {}) == {}
    with pytest.raises(MessageError) as excinfo:
        check_fields(lens, {"subject": "hi", "attachments": []})
    assert (excinfo.value.code, excinfo.value.path) == ("unknown_field", "fields.attachments")
    with pytest.raises(MessageError) as excinfo:
        check_fields(lens, {"created": 5})
    assert (excinfo.value.code, excinfo.value.path) == ("wrong_type", "fields.created")
    # the limits of the values checked inline, scalars and array elements alike
    lens = Lens((lf("blob", name="data"), lf("blob[]", name="parts"), lf("varchar[]", name="tags")))
    big = b"x" * (BLOB_MAX_BYTES + 1)
    assert check_fields(lens, {"data": big[1:], "parts": [big[1:]]}) == {"data": big[1:], "parts": [big[1:]]}
    for fields, path in (({"data": big}, "fields.data"), ({"parts": [b"", big]}, "fields.parts[1]")):
        with pytest.raises(MessageError) as excinfo:
            check_fields(lens, fields)
        assert (excinfo.value.code, excinfo.value.path) == ("too_large", path)
    with pytest.raises(MessageError) as excinfo:
        check_fields(lens, {"tags": ["a", "x" * 256]})
    assert (excinfo.value.code, excinfo.value.path) == ("too_long", "fields.tags[1]")


SCALARS = (st.none() | st.booleans() | st.integers(INT64_MIN - 2, INT64_MAX + 2) | st.floats()
           | st.text(max_size=300) | st.binary(max_size=40) | st.sampled_from([HASH, b"\x00\x20" + b"\x01" * 31])
           | st.datetimes(timezones=st.just(UTC)))


def same_checked(a: Any, b: Any) -> bool:
    """Two checked values (or errors) alike: equal and of the same type, element by element for
    arrays, NaN alike NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same_checked(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


@settings(max_examples=500, deadline=None)
@given(type_text=st.sampled_from([f"{b}{a}" for b in BASE_TYPES for a in ("", "[]")]),
       validation=st.none() | st.just("^[a-z]+$"), value=SCALARS | st.lists(SCALARS, max_size=3),
       validate=st.booleans())
@example(type_text="float", validation=None, value=math.nan, validate=True)
@example(type_text="float[]", validation=None, value=[math.nan, 1], validate=True)
def test_check_fields_gives_what_check_value_gives_for_each_value(type_text: str, validation: str | None,
                                                                   value: Any, validate: bool) -> None:
    """check_fields checks the common cases inline, scalars and arrays: the same value (each
    element of the same type), or the same error, as check_value with the field's path, whether
    it validates or not."""
    field_ = lf(type_text, validation=validation if parse_type(type_text).is_text else None)
    try:
        expected: Any = check_value(field_, value, path="fields.f", validate=validate)
    except MessageError as exc:
        expected = (exc.code, exc.path, exc.message)
    try:
        got: Any = check_fields(Lens((field_,)), {"f": value}, validate=validate)["f"]
    except MessageError as exc:
        got = (exc.code, exc.path, exc.message)
    assert same_checked(got, expected), (got, expected)


# --------------------------------------------------------------------------------------------------
# Conversions: every row of SEMANTICS.md section 4, both ways


def ok(value: Any, src: FieldType, dst: FieldType) -> Any:
    return convert(value, src, dst)


def fails(value: Any, src: FieldType, dst: FieldType) -> str:
    with pytest.raises(ConversionError) as excinfo:
        convert(value, src, dst)
    return excinfo.value.code


def test_integer_and_float() -> None:
    assert ok(3, INTEGER, FLOAT) == 3.0 and type(ok(3, INTEGER, FLOAT)) is float
    assert ok(2**53, INTEGER, FLOAT) == 2.0**53
    assert ok(INT64_MIN, INTEGER, FLOAT) == -(2.0**63)
    assert fails(2**53 + 1, INTEGER, FLOAT) == "conversion_failed"
    assert fails(INT64_MAX, INTEGER, FLOAT) == "conversion_failed"  # 2**63 - 1 is not a double
    assert ok(3.0, FLOAT, INTEGER) == 3 and type(ok(3.0, FLOAT, INTEGER)) is int
    assert ok(-0.0, FLOAT, INTEGER) == 0
    assert ok(-(2.0**63), FLOAT, INTEGER) == INT64_MIN
    for value in (3.5, 2.0**63, 1e300, math.inf, -math.inf, math.nan):
        assert fails(value, FLOAT, INTEGER) == "conversion_failed"


@pytest.mark.parametrize(
    ("value", "src", "text"),
    [
        (-42, INTEGER, "-42"),
        (0, INTEGER, "0"),
        (INT64_MIN, INTEGER, "-9223372036854775808"),
        (1.0, FLOAT, "1.0"),
        (0.1, FLOAT, "0.1"),
        (1e16, FLOAT, "1e+16"),
        (-0.0, FLOAT, "-0.0"),
        (5e-324, FLOAT, "5e-324"),
        (math.inf, FLOAT, "inf"),
        (True, BOOLEAN, "true"),
        (False, BOOLEAN, "false"),
        (datetime(2020, 5, 22, 11, 58, 50, tzinfo=UTC), TIMESTAMP, "2020-05-22T11:58:50Z"),
        (datetime(2020, 5, 22, 11, 58, 50, 120000, tzinfo=UTC), TIMESTAMP, "2020-05-22T11:58:50.120000Z"),
        (datetime(1, 1, 1, tzinfo=UTC), TIMESTAMP, "0001-01-01T00:00:00Z"),
        ("x" * 255, VARCHAR, "x" * 255),
        (HASH_HEX, RELATION, HASH_HEX),
    ],
)
def test_canonical_text_and_back(value: Any, src: FieldType, text: str) -> None:
    assert ok(value, src, TEXT) == text
    back = ok(text, TEXT, src)
    assert back == value and type(back) is type(value)
    if src not in (RELATION, VARCHAR):  # varchar reads the same canonical forms as text
        assert convert(text, VARCHAR, src) == value


def test_nan_text_round_trips() -> None:
    assert ok(math.nan, FLOAT, TEXT) == "nan"
    assert math.isnan(ok("nan", TEXT, FLOAT))


def test_text_to_varchar() -> None:
    assert ok("x" * 255, TEXT, VARCHAR) == "x" * 255
    assert fails("x" * 256, TEXT, VARCHAR) == "conversion_failed"


@pytest.mark.parametrize(
    "text", ["1.0", "+1", "01", "-0", " 1", "1 ", "1_000", "0x10", "", "1e3", "\u0661", "9223372036854775808"]
)
def test_text_to_integer_is_strict(text: str) -> None:
    assert fails(text, TEXT, INTEGER) == "conversion_failed"
    assert fails(text, VARCHAR, INTEGER) == "conversion_failed"


def test_text_to_integer_bounds() -> None:
    assert ok("9223372036854775807", TEXT, INTEGER) == INT64_MAX
    assert ok("-9223372036854775808", VARCHAR, INTEGER) == INT64_MIN


@pytest.mark.parametrize(
    "text", ["1", "1.50", "1e16", "1E+16", ".5", "0.10", "+1.0", " 1.0", "1_0.0", "Infinity", "-nan", ""]
)
def test_text_to_float_is_strict(text: str) -> None:
    assert fails(text, TEXT, FLOAT) == "conversion_failed"


@pytest.mark.parametrize("text", ["True", "TRUE", "1", "0", "yes", " true", ""])
def test_text_to_boolean_is_strict(text: str) -> None:
    assert fails(text, TEXT, BOOLEAN) == "conversion_failed"


@pytest.mark.parametrize(
    "text",
    [
        "2020-05-22T11:58:50+00:00",
        "2020-05-22T11:58:50+0000",
        "2020-05-22T11:58:50.000000Z",  # fraction only when non-zero
        "2020-05-22T11:58:50.12Z",  # 6 digits or none
        "2020-05-22T11:58:50.1200000Z",
        "2020-05-22t11:58:50Z",
        "2020-05-22T11:58:50z",
        "2020-05-22T11:58:50",
        "2020-02-30T00:00:00Z",
    ],
)
def test_text_to_timestamp_is_strict(text: str) -> None:
    assert fails(text, TEXT, TIMESTAMP) == "conversion_failed"


def test_boolean_and_integer() -> None:
    assert ok(False, BOOLEAN, INTEGER) == 0 and ok(True, BOOLEAN, INTEGER) == 1
    assert type(ok(True, BOOLEAN, INTEGER)) is int
    assert ok(0, INTEGER, BOOLEAN) is False and ok(1, INTEGER, BOOLEAN) is True
    for value in (2, -1, INT64_MAX):
        assert fails(value, INTEGER, BOOLEAN) == "conversion_failed"


@pytest.mark.parametrize(
    "text",
    [
        HASH_HEX.upper(),
        "0120" + "ab" * 32,  # not a YASMF hash
        HASH_HEX[:-2],
        HASH_HEX + "00",
        "0020" + "zz" * 32,
    ],
)
def test_text_to_relation_must_be_a_yasmf_hash(text: str) -> None:
    assert fails(text, TEXT, RELATION) == "conversion_failed"


def test_scalar_to_array_and_back() -> None:
    assert ok(5, INTEGER, T("integer[]")) == [5]
    assert ok("a", TEXT, T("text[]")) == ["a"]
    assert ok([5], T("integer[]"), INTEGER) == 5
    assert fails([], T("integer[]"), INTEGER) == "conversion_failed"
    assert fails([1, 2], T("integer[]"), INTEGER) == "conversion_failed"


def test_arrays_convert_element_by_element() -> None:
    assert ok(["1", "2"], T("text[]"), T("integer[]")) == [1, 2]
    assert ok([1, 2], T("integer[]"), T("float[]")) == [1.0, 2.0]
    assert ok([True], T("boolean[]"), T("text[]")) == ["true"]
    assert ok([], T("text[]"), T("integer[]")) == []
    assert ok([HASH_HEX], T("relation[]"), T("text[]")) == [HASH_HEX]
    assert fails(["1", "x"], T("text[]"), T("integer[]")) == "conversion_failed"  # one fails all


def test_integer_float_boolean_timestamp_convert_to_varchar_as_to_text_within_255_characters() -> None:
    # issue: integer -> varchar always failed, so a retyped code showed its default instead of "42"
    assert ok(42, INTEGER, VARCHAR) == "42"
    assert ok(-(2**63), INTEGER, VARCHAR) == str(-(2**63))
    assert ok(0.1, FLOAT, VARCHAR) == "0.1"
    assert ok(True, T("boolean"), VARCHAR) == "true"
    moment = datetime(2020, 5, 22, 11, 58, 50, tzinfo=timezone.utc)
    assert ok(moment, T("timestamp"), VARCHAR) == "2020-05-22T11:58:50Z"
    assert ok([1, 2], T("integer[]"), T("varchar[]")) == ["1", "2"]
    for src in ("integer", "float", "boolean", "timestamp"):
        assert is_convertible(T(src), VARCHAR)


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ("blob", "text"),
        ("text", "blob"),
        ("relation", "varchar"),  # only text is listed as a destination of relation hex
        ("varchar", "relation"),
        ("timestamp", "integer"),
        ("integer", "timestamp"),
        ("boolean", "float"),
        ("float", "boolean"),
        ("relation", "blob"),
        ("integer", "float[]"),  # T -> T[] keeps the base type
        ("integer[]", "float"),
        ("blob[]", "text[]"),
    ],
)
def test_conversions_not_listed_fail(src: str, dst: str) -> None:
    assert not is_convertible(T(src), T(dst))
    sample = {
        "blob": b"x",
        "text": "x",
        "integer": 1,
        "relation": HASH_HEX,
        "varchar": "x",
        "timestamp": None,
    }
    value: Any = sample.get(T(src).base, 1)
    if T(src).is_array:
        value = [] if value is None else [value]
    assert fails(value, T(src), T(dst)) == "not_convertible"


def test_same_type_is_identity_and_null_stays_null() -> None:
    for base in BASE_TYPES:
        assert is_convertible(T(base), T(base))
        assert convert(None, T(base), T(base)) is None
    assert convert(None, INTEGER, TEXT) is None
    original = [1, 2]
    copied = convert(original, T("integer[]"), T("integer[]"))
    assert copied == original


# --------------------------------------------------------------------------------------------------
# Property: text is a faithful carrier for integer, float, boolean and timestamp

int64s = st.integers(min_value=INT64_MIN, max_value=INT64_MAX)
timestamps = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999), timezones=st.just(UTC)
)


@settings(max_examples=300)
@given(
    st.one_of(
        int64s.map(lambda v: (v, INTEGER)),
        st.floats(allow_nan=False).map(lambda v: (v, FLOAT)),
        st.booleans().map(lambda v: (v, BOOLEAN)),
        timestamps.map(lambda v: (v, TIMESTAMP)),
    )
)
def test_round_trip_through_text(case: tuple[Any, FieldType]) -> None:
    value, ft = case
    text = convert(value, ft, TEXT)
    back = convert(text, TEXT, ft)
    assert back == value and type(back) is type(value)
    if ft == FLOAT:
        assert math.copysign(1.0, back) == math.copysign(1.0, value)  # -0.0 stays -0.0
    if ft == TIMESTAMP:
        assert back.tzinfo is UTC
        assert format_timestamp(back) == text


@settings(max_examples=200)
@given(st.text(alphabet="0123456789+-.eE:TZ_ ", max_size=12))
def test_parsed_text_is_always_the_canonical_text(text: str) -> None:
    for ft in (INTEGER, FLOAT, BOOLEAN):
        try:
            value = convert(text, TEXT, ft)
        except ConversionError:
            continue
        assert convert(value, ft, TEXT) == text


# --------------------------------------------------------------------------------------------------
# Translation: the two ends compared (SEMANTICS.md section 4)


def test_translate_value_rules() -> None:
    count_int = lf("integer", name="n", default=-1)
    count_text = lf("text", name="n", default="?")
    # unchanged, converted, converted back
    assert translate_value(5, count_int, count_int) == 5
    assert translate_value(5, count_int, count_text) == "5"
    assert translate_value("5", count_text, count_int) == 5
    # a failed conversion gives the destination's default
    assert translate_value("five", count_text, count_int) == -1
    # not in the destination lens: not shown
    assert translate_value(5, count_int, None) is NOT_SHOWN
    # added after the write's version, or never written: the destination's default
    assert translate_value(5, None, count_text) == "?"
    assert translate_value(ABSENT, count_int, count_text) == "?"


def test_a_null_stays_null_at_every_version_whatever_the_default() -> None:
    # issue: update {priority: null} showed the default 3, so nobody could clear such a field
    priority = lf("integer", name="priority", default=3)
    as_text = lf("text", name="priority", default="unknown")
    assert translate_value(None, priority, priority) is None
    assert translate_value(None, priority, as_text) is None
    assert translate_value(None, as_text, priority) is None


def test_translate_value_checks_the_validation_at_the_destination_when_it_differs() -> None:
    free = lf("text", name="s")
    one_line = lf("text", name="s", validation="^[^\r\n]*$", default="<Subject>")
    assert translate_value("a\nb", free, one_line) == "<Subject>"
    assert translate_value("ab", free, one_line) == "ab"
    assert translate_value("ab", one_line, free) == "ab"


def test_translate_value_returns_fresh_lists() -> None:
    tags = lf("text[]", name="t", default=["none"])
    first = translate_value(ABSENT, None, tags)
    first.append("changed")
    assert translate_value(ABSENT, None, tags) == ["none"]
    written = ["a"]
    shown = translate_value(written, tags, tags)
    shown.append("b")
    assert written == ["a"]


ALL_TYPES = [f"{b}{a}" for b in BASE_TYPES for a in ("", "[]")]


def _outcome(call: Any) -> Any:
    try:
        return ("value", call())
    except Exception as exc:  # noqa: BLE001 - the two paths must fail alike, whatever the failure
        return ("raised", type(exc))


@settings(max_examples=600, deadline=None)
@given(written_type=st.sampled_from(ALL_TYPES), shown_type=st.sampled_from(ALL_TYPES),
       validations=st.sampled_from([(None, None), (None, "^[a-z0-9]+$"), ("^[a-z]+$", None)]),
       value=st.none() | SCALARS | st.lists(SCALARS, max_size=3))
def test_a_translator_gives_what_translate_value_gives(written_type: str, shown_type: str,
                                                       validations: tuple[str | None, str | None], value: Any) -> None:
    """The projection's translators (the conversion picked once per pair of definitions) give each
    value translate_value's result, a failure its default, and fail where it fails."""
    text = {"text", "varchar"}
    written = lf(written_type, validation=validations[0] if parse_type(written_type).base in text else None,
                 default=None, name="f")
    shown = lf(shown_type, validation=validations[1] if parse_type(shown_type).base in text else None,
               default=["d"] if parse_type(shown_type).is_array else "d", name="f")
    expected = _outcome(lambda: translate_value(value, written, shown))
    for source in (written, None):
        translate = translator(source, shown)
        got = _outcome(lambda t=translate: value if t is None else t(value))
        want = expected if source is not None else ("value", shown.default)
        assert got == want


# The module's fixed patterns use the standard library's re (whole-string matches); they must
# accept exactly what the same patterns accept as RE2 searches anchored with ^...$, which is what
# they were: no trailing newline, no non-ASCII digits.
_TIMESTAMPISH = st.text(alphabet="0123456789-:.TtZz+ \n\u0663", max_size=32) | st.sampled_from(
    ["2020-05-22T11:58:50Z", "2020-05-22T11:58:50Z\n", "2020-05-22t11:58:50.123456789+0130",
     "\u0662020-05-22T11:58:50Z", "2020-05-22T11:58:50-23:59"])


@given(_TIMESTAMPISH)
def test_fixed_patterns_accept_what_their_re2_forms_accept(text: str) -> None:
    import re2

    from lakehouse.core import lenses
    from lakehouse.publish import fields

    for pattern in (lenses._ISO_TIMESTAMP, lenses._HEX, fields._HEX, fields._INTEGER):
        expected = re2.compile(f"^(?:{pattern.pattern})$").search(text) is not None
        assert (pattern.fullmatch(text) is not None) == expected, (pattern.pattern, text)


@given(st.text(max_size=20), st.sampled_from([r"^[a-z]+$", r"é", r"^.{3}$", r"\d", r"^$", r"x$"]))
def test_a_validation_search_on_utf8_bytes_answers_as_the_search_on_text(text: str, pattern: str) -> None:
    import re2

    assert matches(pattern, text) == (re2.compile(pattern).search(text) is not None)

"""Lenses: field types, value checks, conversions, and translation between versions.

A **lens** is the ordered list of visible fields of one schema version (SEMANTICS.md section 2).
This module holds everything about a lens that does not need the schema log: the field types of
FORMAT.md section 3, the check of an instance message's values against a lens (SEMANTICS.md
section 3), the conversions of SEMANTICS.md section 4, and the translation of one value along a
written value from one lens to another. :mod:`lakehouse.core.schemas` turns a schema log into its
versions; the Spark pipelines call the same functions, so this module is the
reference they are checked against.

Canonical values
    What gold rows hold, and what every function here takes and returns as a field value:
    varchar/text -> ``str``; integer -> ``int`` within int64 (never ``bool``); float -> ``float``;
    boolean -> ``bool``; timestamp -> tz-aware ``datetime`` in UTC (``timezone.utc``, microseconds);
    relation -> ``str`` of 68 lowercase hex characters; blob -> ``bytes``; ``T[]`` -> ``list`` of
    canonical ``T`` values (elements are never ``None``); no value -> ``None``.

Translation (SEMANTICS.md section 4)
    A value written at version v for field f is shown at version n by comparing the two ends:
    f as it was in lens(v), the definition the value was checked against when written, with f in
    lens(n). The versions in between do not matter, up or down: a value is never lost to a detour
    (text at v2, integer at v3, text again at v4 shows the text written at v2).
    :func:`translate_value` is the rule:

    1. f not in lens(n): the result is :data:`NOT_SHOWN`.
    2. f not in lens(v) (added after v), or no write set f (:data:`ABSENT`): f's default at n,
       else ``None``.
    3. ``None`` (an explicit null, or a key absent from the create): ``None``. Conversion and
       validation apply to values only; a default never replaces a null an author wrote.
    4. the same type and validation at both ends: the value unchanged.
    5. otherwise :func:`convert` to the type at n, then the validation at n must match (per
       element for arrays); if either fails, f's default at n (``None`` where it has none).

    Defaults are canonical values that fit their field (type and validation), checked when the
    migration that set them is applied.

Conversions (SEMANTICS.md section 4; anything not listed fails)
    The canonical text of a value is: decimal for integers (``-42``), Python's shortest
    round-trip ``repr`` for floats (``1.0``, ``0.1``, ``1e+16``, ``nan``, ``inf``), ``true`` /
    ``false``, RFC 3339 UTC with ``Z`` for timestamps (``2020-05-22T11:58:50Z``, with a fraction of
    exactly 6 digits only when the microseconds are non-zero: ``...50.120000Z``), the 68 hex
    characters of a relation. Parsing text back accepts exactly those forms (``"1"`` is not a
    float, ``"1.0"`` is not an integer, ``"+00:00"`` is not a canonical timestamp, relation hex
    must be lowercase). Pairs: integer -> float (exact); float -> integer (integral, within
    int64); integer/float/boolean/timestamp/varchar/relation -> text; text -> varchar (at most 255
    characters); integer/float/boolean/timestamp -> varchar (their text, at most 255 characters);
    varchar/text -> integer/float/boolean/timestamp; text -> relation; boolean <->
    integer (back for 0 and 1 only); ``T`` -> ``T[]``; ``T[]`` -> ``T`` (exactly one element);
    ``S[]`` -> ``T[]`` when ``S`` -> ``T`` is listed (element by element; one failure fails the
    whole value). ``T`` and ``T[]`` stand for one and the same base type.

Decisions where the spec is silent
    - Floats may be NaN or infinite (IEEE doubles); their text is ``nan``, ``inf``, ``-inf``.
    - varchar length counts characters (code points), not bytes.
    - Array elements are never null (an array of T holds T values); arrays nest one level.
    - Timestamp text accepts ``T``/``t``, ``Z``/``z``, offsets ``+HH:MM`` and ``+HHMM``, and any
      number of fraction digits (truncated to microseconds); leap seconds are rejected.
    - Only the pairs of the table convert: varchar -> relation, or relation -> varchar, do not.
    - :func:`parse_type` raises rather than returning None for an unknown type.

Validation patterns are RE2 (google-re2): linear-time matching, whatever the author wrote.
Matching is a search; ``^`` and ``$`` anchor to the whole value (no multi-line mode, ``$`` does not
match before a trailing newline). Compiled patterns are cached. This module's own fixed patterns
(timestamps, hex, integers) are the standard library's ``re``: fixed and linear, they need no
protection, and its matching is about 30 times cheaper than the RE2 wrapper's.

Pure: no Spark, no I/O, no environment reads.
"""

from __future__ import annotations

import enum
import functools
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Final, Literal

import re2

from lakehouse.core.entries import is_yasmf_hash
from lakehouse.core.messages import SchemaId
from lakehouse.errors import ConversionError, LakehouseError, MessageError

BaseType = Literal["varchar", "text", "integer", "float", "boolean", "timestamp", "relation", "blob"]
BASE_TYPES: Final[tuple[BaseType, ...]] = (
    "varchar",
    "text",
    "integer",
    "float",
    "boolean",
    "timestamp",
    "relation",
    "blob",
)
TEXT_BASES: Final[frozenset[str]] = frozenset({"varchar", "text"})
_INLINE_BASES: Final[frozenset[str]] = frozenset({"varchar", "text", "integer", "float", "boolean", "relation", "blob"})
"""The base types whose valid values :func:`check_fields` checks inline (all but timestamps)."""

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
VARCHAR_MAX_CHARS: Final = 255
BLOB_MAX_BYTES: Final = 512 * 1024
YASMF_HASH_BYTES: Final = 34
YASMF_PREFIX: Final = b"\x00\x20"


# --------------------------------------------------------------------------------------------------
# Sentinels


class Absent(enum.Enum):
    """Type of :data:`ABSENT`."""

    ABSENT = "absent"


class NotShown(enum.Enum):
    """Type of :data:`NOT_SHOWN`."""

    NOT_SHOWN = "not_shown"


ABSENT: Final = Absent.ABSENT
"""Input of a translation: no write ever set the field (the key was never present)."""

NOT_SHOWN: Final = NotShown.NOT_SHOWN
"""Result of a translation: the field is not in the destination lens, so it has no column."""


# --------------------------------------------------------------------------------------------------
# Types


@dataclass(frozen=True)
class FieldType:
    """A field type of FORMAT.md section 3: a base type, possibly as an array (one level).

    Attributes:
        base: one of :data:`BASE_TYPES`.
        is_array: whether the type is ``base[]``.
    """

    base: BaseType
    is_array: bool = False

    def __post_init__(self) -> None:
        if self.base not in BASE_TYPES:
            raise MessageError(f"unknown base type {self.base!r}", code="bad_type")

    def __str__(self) -> str:
        return f"{self.base}[]" if self.is_array else self.base

    @property
    def element(self) -> FieldType:
        """The type of one element (the type itself when it is not an array)."""
        return FieldType(self.base)

    @property
    def is_text(self) -> bool:
        """Whether the base is varchar or text: the types that may carry a validation."""
        return self.base in TEXT_BASES

    @property
    def is_relation(self) -> bool:
        """Whether the base is relation: the types that need a target ``schema``."""
        return self.base == "relation"


def parse_type(text: Any, *, path: str = "type") -> FieldType:
    """Parse a type as written in a field change: ``varchar``, ``relation[]``, ...

    Exact spelling only: lowercase, no spaces, at most one ``[]``.

    Args:
        text: the type text (anything else than a ``str`` is rejected too).
        path: where the type sits in its message, for the error.

    Returns:
        The field type.

    Raises:
        MessageError: code ``bad_type`` when ``text`` is not a type of FORMAT.md section 3.
    """
    if isinstance(text, str):
        base, is_array = (text[:-2], True) if text.endswith("[]") else (text, False)
        for known in BASE_TYPES:
            if base == known:
                return FieldType(known, is_array)
    raise MessageError(
        f"unknown type {text!r} (expected one of {', '.join(BASE_TYPES)}, optionally followed by [])",
        code="bad_type",
        path=path,
    )


# --------------------------------------------------------------------------------------------------
# Lenses


@dataclass(frozen=True)
class LensField:
    """One visible field of a lens: its definition at one schema version.

    Attributes:
        name: the field name.
        type: its type.
        validation: RE2 pattern (varchar/text and their arrays only), or None.
        default: canonical default value, or None when it has none (or an explicit null).
            Not part of the hash (it may be a list).
        schema: relation target (version-agnostic) for relation types, else None.
        cascade: for relations: deleting the target instance deletes this instance.
        key: the field's identity (SEMANTICS.md section 2), what its values are stored under in an
            instance's writes: the name it was first created with, or, for a create of a name an
            earlier field had before a rename, ``name@version.position`` of that create. A rename
            keeps the key. Empty (the default) means ``name``: a field no rename ever touched.
    """

    name: str
    type: FieldType
    validation: str | None = None
    default: Any = field(default=None, hash=False)
    schema: SchemaId | None = None
    cascade: bool = False
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.name)


@dataclass(frozen=True)
class Lens:
    """The ordered visible fields of one schema version (SEMANTICS.md section 2).

    Attributes:
        fields: the visible fields, in lens order (gold column order).
    """

    fields: tuple[LensField, ...] = ()
    _index: Mapping[str, LensField] = field(init=False, repr=False, compare=False, hash=False)
    _keys: Mapping[str, LensField] = field(init=False, repr=False, compare=False, hash=False)
    # name -> how :func:`check_fields` checks a field's valid values inline, (base type, array,
    # validation), or None: by :func:`check_value` (timestamps)
    _inline: Mapping[str, tuple[str, bool, str | None] | None] = field(init=False, repr=False, compare=False,
                                                                         hash=False)

    def __post_init__(self) -> None:
        index = {f.name: f for f in self.fields}
        if len(index) != len(self.fields):
            raise LakehouseError("a lens cannot hold two fields of the same name", code="duplicate_field")
        object.__setattr__(self, "_index", index)
        keys = {f.key: f for f in self.fields}
        if len(keys) != len(self.fields):
            raise LakehouseError("a lens cannot show one field twice", code="duplicate_field")
        object.__setattr__(self, "_keys", keys)
        object.__setattr__(self, "_inline", {f.name: (f.type.base, f.type.is_array, f.validation)
                                             if f.type.base in _INLINE_BASES else None for f in self.fields})

    def get(self, name: str) -> LensField | None:
        """The visible field called ``name``, or None when the lens does not show it."""
        return self._index.get(name)

    def by_key(self, key: str) -> LensField | None:
        """The visible field whose identity is ``key`` (:attr:`LensField.key`), whatever its name
        here, or None when the lens does not show it."""
        return self._keys.get(key)

    @property
    def names(self) -> tuple[str, ...]:
        """The visible field names, in lens order."""
        return tuple(f.name for f in self.fields)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._index

    def __iter__(self) -> Iterator[LensField]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)


EMPTY_LENS: Final = Lens()


# --------------------------------------------------------------------------------------------------
# Regular expressions (RE2 only)

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str) -> Any:
    return re2.compile(pattern, _RE2_OPTIONS)


def compile_validation(pattern: str, *, path: str = "validation") -> Any:
    """Compile (or fetch from the cache) a validation pattern with RE2.

    Args:
        pattern: the pattern text as the schema author wrote it.
        path: where the pattern sits in its message, for the error.

    Returns:
        The compiled RE2 pattern (its ``search`` runs in linear time).

    Raises:
        MessageError: code ``bad_validation`` when RE2 rejects the pattern (syntax it does not
            support, such as backreferences or look-arounds, or a pattern too large).
    """
    try:
        return _compiled(pattern)
    except (re2.error, TypeError) as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise MessageError(
            f"RE2 rejects the pattern {pattern!r}: {detail}", code="bad_validation", path=path
        ) from None


def matches(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (an RE2 search; anchor with ``^...$``).

    The search runs on the text's UTF-8 bytes, as RE2 does for text: the same answer, without the
    wrapper's mapping of byte offsets back to characters (half its cost), which a yes or no does
    not need.

    Raises:
        MessageError: code ``bad_validation`` when RE2 rejects the pattern.
    """
    return compile_validation(pattern).search(text.encode("utf-8")) is not None


# Fixed patterns of this module (the standard library's, whole-string matches: see the module docstring).
_ISO_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:[Zz]|([+-])([0-9]{2}):?([0-9]{2}))", re.ASCII)
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})*", re.ASCII)


# --------------------------------------------------------------------------------------------------
# Canonical forms


def format_timestamp(value: datetime) -> str:
    """The canonical text of a canonical timestamp: RFC 3339 UTC with ``Z``.

    Args:
        value: a tz-aware UTC datetime.

    Returns:
        ``YYYY-MM-DDTHH:MM:SSZ``, or ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` when the microseconds are not 0.
    """
    text = (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
        f"T{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    )
    if value.microsecond:
        text += f".{value.microsecond:06d}"
    return text + "Z"


def _utc(value: datetime) -> datetime:
    """A tz-aware datetime as a plain ``datetime`` in ``timezone.utc`` (may raise OverflowError)."""
    value = value.astimezone(timezone.utc)
    return datetime(
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
        tzinfo=timezone.utc,
    )


def parse_iso_timestamp(text: str) -> datetime:
    """ISO-8601 text with an offset -> canonical UTC datetime; fractions beyond 6 digits truncated.

    Raises:
        ValueError: not ``YYYY-MM-DDTHH:MM:SS[.f](Z|+HH:MM|+HHMM)``, or not a real date and time.
        OverflowError: the instant is outside years 1..9999 in UTC.
    """
    found = _ISO_TIMESTAMP.fullmatch(text)
    if found is None:
        raise ValueError(f"{text!r} is not ISO-8601 text with an offset (like 2020-05-22T11:58:50+00:00)")
    year, month, day, hour, minute, second, fraction, sign, off_h, off_m = found.groups()
    micro = int((fraction or "")[:6].ljust(6, "0"))
    local = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro)
    offset = timedelta()
    if sign is not None:
        if int(off_h) > 23 or int(off_m) > 59:
            raise ValueError(f"{text!r} has an impossible UTC offset")
        offset = timedelta(hours=int(off_h), minutes=int(off_m))
        if sign == "-":
            offset = -offset
    return (local - offset).replace(tzinfo=timezone.utc)


# --------------------------------------------------------------------------------------------------
# Checking instance values against a lens (SEMANTICS.md section 3, FORMAT.md section 3)


def expected_form(base: str) -> str:
    """How an error names what a value of base type ``base`` must be (e.g. ``"an integer"``)."""
    return {
        "varchar": "a text string",
        "text": "a text string",
        "integer": "an integer",
        "float": "a float or an integer",
        "boolean": "true or false",
        "timestamp": "ISO-8601 text with an offset, or a CBOR tag 0/1 date-time",
        "relation": f"a byte string of {YASMF_HASH_BYTES} bytes (an entry hash)",
        "blob": "a byte string",
    }[base]


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    return type(value).__name__


def check_value(field: LensField, value: Any, *, path: str, validate: bool = True) -> Any:
    """Check one decoded CBOR value against its lens field and return its canonical form.

    Args:
        field: the field of lens(v) the value is written to.
        value: the decoded CBOR value (tags 0 and 1 arrive as ``datetime``).
        path: where the value sits, e.g. ``"fields.subject"``; array elements get ``[i]`` appended.
        validate: whether to match the field's validation; False for a value already checked
            against the same field (an applied message folded again), whose match is known.

    Returns:
        The canonical value (see the module docstring); ``None`` for a CBOR null.

    Raises:
        MessageError: with ``path`` and one of the codes ``wrong_type`` (CBOR type not allowed for
            the field's type, a null array element, a nested array), ``too_long`` (varchar over
            255 characters), ``out_of_range`` (integer outside int64, an integer a float cannot
            hold exactly, a timestamp outside years 1..9999 UTC), ``bad_value`` (text that is
            not a timestamp, a naive datetime, bytes that are not a YASMF hash), ``too_large``
            (blob over 512 KiB), ``validation_failed`` (varchar/text, per element for arrays).
    """
    if value is None:
        return None
    if not field.type.is_array:
        return _check_scalar(field, value, path=path, validate=validate)
    if not isinstance(value, (list, tuple)):
        raise MessageError(
            f"expected an array for {field.type}, got {_describe(value)}", code="wrong_type", path=path
        )
    return [_check_scalar(field, item, path=f"{path}[{i}]", validate=validate) for i, item in enumerate(value)]


def _check_scalar(field: LensField, value: Any, *, path: str, validate: bool = True) -> Any:
    base = field.type.base

    def wrong_type() -> MessageError:
        return MessageError(
            f"expected {expected_form(base)}, got {_describe(value)}", code="wrong_type", path=path
        )

    if base in TEXT_BASES:
        if not isinstance(value, str):
            raise wrong_type()
        if base == "varchar" and len(value) > VARCHAR_MAX_CHARS:
            raise MessageError(
                f"varchar holds at most {VARCHAR_MAX_CHARS} characters, got {len(value)}",
                code="too_long",
                path=path,
            )
        if validate and field.validation is not None and not matches(field.validation, value):
            raise MessageError(
                f"value does not match the validation {field.validation!r}",
                code="validation_failed",
                path=path,
            )
        return str(value)
    if base == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise wrong_type()
        if not INT64_MIN <= value <= INT64_MAX:
            raise MessageError(f"integer {value} is outside signed 64 bits", code="out_of_range", path=path)
        return int(value)
    if base == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise wrong_type()
        if isinstance(value, float):
            return float(value)
        try:
            return _int_to_float(value)
        except ConversionError as exc:
            raise MessageError(exc.message, code="out_of_range", path=path) from None
    if base == "boolean":
        if not isinstance(value, bool):
            raise wrong_type()
        return bool(value)
    if base == "timestamp":
        return _check_timestamp(value, path=path, wrong_type=wrong_type)
    if base == "relation":
        if not isinstance(value, bytes):
            raise wrong_type()
        if not is_yasmf_hash(value):
            raise MessageError(
                f"expected a YASMF hash ({YASMF_HASH_BYTES} bytes starting 0020), got {len(value)} bytes "
                f"starting {value[:2].hex() or '(nothing)'}",
                code="bad_value",
                path=path,
            )
        return value.hex()
    # blob
    if not isinstance(value, bytes):
        raise wrong_type()
    if len(value) > BLOB_MAX_BYTES:
        raise MessageError(
            f"blob holds at most {BLOB_MAX_BYTES} bytes, got {len(value)}", code="too_large", path=path
        )
    return bytes(value)


def _check_timestamp(value: Any, *, path: str, wrong_type: Callable[[], MessageError]) -> datetime:
    if isinstance(value, str):
        try:
            return parse_iso_timestamp(value)
        except ValueError as exc:
            raise MessageError(str(exc), code="bad_value", path=path) from None
        except OverflowError:
            raise MessageError(
                f"{value!r} is outside years 1..9999 in UTC", code="out_of_range", path=path
            ) from None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise MessageError("a date-time without a UTC offset is ambiguous", code="bad_value", path=path)
        try:
            return _utc(value)
        except OverflowError:
            raise MessageError(
                f"{value.isoformat()} is outside years 1..9999 in UTC", code="out_of_range", path=path
            ) from None
    raise wrong_type()


_SLOW: Final = object()


def _inline_scalar(base: str, pattern: str | None, value: Any) -> Any:
    """A valid scalar of a ``base`` field (not a timestamp) whose values match ``pattern`` (None:
    any) in its canonical form, as :func:`check_value` gives it; ``_SLOW`` when the value is not
    one of the plain valid cases, for :func:`check_value` to check (and explain)."""
    kind = type(value)
    if base == "integer":
        return value if kind is int and INT64_MIN <= value <= INT64_MAX else _SLOW
    if base == "float":
        return value if kind is float else _SLOW
    if base == "boolean":
        return value if kind is bool else _SLOW
    if base == "relation":
        return value.hex() if kind is bytes and is_yasmf_hash(value) else _SLOW
    if base == "blob":
        return value if kind is bytes and len(value) <= BLOB_MAX_BYTES else _SLOW
    if kind is str and (base == "text" or len(value) <= VARCHAR_MAX_CHARS) and (pattern is None
                                                                              or matches(pattern, value)):
        return value
    return _SLOW


def check_fields(lens: Lens, fields: Mapping[str, Any], *, validate: bool = True) -> dict[str, Any]:
    """Check the ``fields`` map of a ``create`` or ``update`` against lens(v).

    Args:
        lens: the lens of the version the message names.
        fields: field name -> decoded CBOR value.
        validate: as for :func:`check_value`.

    Returns:
        Field name -> canonical value, for the names present in ``fields`` (in that order).

    Raises:
        MessageError: code ``unknown_field`` for a name lens(v) does not show, else the codes of
            :func:`check_value`; ``path`` is ``fields.<name>``.
    """
    checked: dict[str, Any] = {}
    inline, index = lens._inline, lens._index
    for name, value in fields.items():
        lens_field = index.get(name) if isinstance(name, str) else None
        if lens_field is None:
            raise MessageError(
                f"no field {name!r} in this schema version (fields: {', '.join(lens.names) or 'none'})",
                code="unknown_field",
                path=f"fields.{name}",
            )
        if value is None:
            checked[name] = None
            continue
        # a valid value checked inline (a value a message writes is checked once per message),
        # as check_value would give it; check_value decides the rest, and says what is wrong
        way = inline[name]
        if way is not None:
            base, array, pattern = way
            if not validate:
                pattern = None
            if not array:
                found = _inline_scalar(base, pattern, value)
                if found is not _SLOW:
                    checked[name] = found
                    continue
            elif type(value) is list:
                items = [_inline_scalar(base, pattern, item) for item in value]
                if _SLOW not in items:
                    checked[name] = items
                    continue
        checked[name] = check_value(lens_field, value, path=f"fields.{name}", validate=validate)
    return checked


# --------------------------------------------------------------------------------------------------
# Conversions (SEMANTICS.md section 4)


def _failed(value: Any, what: str) -> ConversionError:
    return ConversionError(f"{value!r} {what}", code="conversion_failed")


def _int_to_float(value: int) -> float:
    try:
        converted = float(value)
    except OverflowError:
        raise _failed(value, "is too large for a float") from None
    if int(converted) != value:
        raise _failed(value, "cannot be held exactly by a float")
    return converted


def _float_to_int(value: float) -> int:
    if not math.isfinite(value) or not value.is_integer():
        raise _failed(value, "is not integral")
    converted = int(value)
    if not INT64_MIN <= converted <= INT64_MAX:
        raise _failed(value, "is outside signed 64 bits")
    return converted


def _bool_to_text(value: bool) -> str:
    return "true" if value else "false"


def _same(value: Any) -> Any:
    return value


def _text_to_varchar(value: str) -> str:
    if len(value) > VARCHAR_MAX_CHARS:
        raise _failed(value[:20] + "...", f"is longer than {VARCHAR_MAX_CHARS} characters")
    return value


def _text_to_integer(value: str) -> int:
    try:
        parsed = int(value)
    except ValueError:
        raise _failed(value, "is not a decimal integer") from None
    if str(parsed) != value:
        raise _failed(value, "is not the canonical decimal form of an integer")
    if not INT64_MIN <= parsed <= INT64_MAX:
        raise _failed(value, "is outside signed 64 bits")
    return parsed


def _text_to_float(value: str) -> float:
    try:
        parsed = float(value)
    except ValueError:
        raise _failed(value, "is not a float") from None
    if repr(parsed) != value:
        raise _failed(value, f"is not the canonical form of a float ({parsed!r})")
    return parsed


def _text_to_boolean(value: str) -> bool:
    if value == "true":
        return True
    if value == "false":
        return False
    raise _failed(value, "is neither 'true' nor 'false'")


def _text_to_timestamp(value: str) -> datetime:
    try:
        parsed = parse_iso_timestamp(value)
    except (ValueError, OverflowError):
        raise _failed(value, "is not a timestamp") from None
    if format_timestamp(parsed) != value:
        raise _failed(value, f"is not the canonical form of a timestamp ({format_timestamp(parsed)})")
    return parsed


def _text_to_relation(value: str) -> str:
    if len(value) != 2 * YASMF_HASH_BYTES or _HEX.fullmatch(value) is None or value.lower() != value:
        raise _failed(value, f"is not {2 * YASMF_HASH_BYTES} lowercase hex characters")
    if not is_yasmf_hash(bytes.fromhex(value)):
        raise _failed(value, "is not a YASMF hash (0020...)")
    return value


def _then_varchar(to_text: Callable[[Any], str]) -> Callable[[Any], str]:
    """A conversion to varchar: ``to_text``, then at most 255 characters (SEMANTICS.md section 4)."""
    return lambda value: _text_to_varchar(to_text(value))


def _integer_to_boolean(value: int) -> bool:
    if value == 0:
        return False
    if value == 1:
        return True
    raise _failed(value, "is neither 0 nor 1")


# One entry per row of the table of SEMANTICS.md section 4 (scalar types; arrays are derived).
_RULES: Final[Mapping[tuple[str, str], Callable[[Any], Any]]] = {
    ("integer", "float"): _int_to_float,
    ("float", "integer"): _float_to_int,
    ("integer", "text"): str,
    ("float", "text"): repr,
    ("boolean", "text"): _bool_to_text,
    ("timestamp", "text"): format_timestamp,
    ("varchar", "text"): _same,
    ("integer", "varchar"): _then_varchar(str),
    ("float", "varchar"): _then_varchar(repr),
    ("boolean", "varchar"): _then_varchar(_bool_to_text),
    ("timestamp", "varchar"): _then_varchar(format_timestamp),
    ("text", "varchar"): _text_to_varchar,
    ("varchar", "integer"): _text_to_integer,
    ("text", "integer"): _text_to_integer,
    ("varchar", "float"): _text_to_float,
    ("text", "float"): _text_to_float,
    ("varchar", "boolean"): _text_to_boolean,
    ("text", "boolean"): _text_to_boolean,
    ("varchar", "timestamp"): _text_to_timestamp,
    ("text", "timestamp"): _text_to_timestamp,
    ("boolean", "integer"): int,
    ("integer", "boolean"): _integer_to_boolean,
    ("relation", "text"): _same,
    ("text", "relation"): _text_to_relation,
}


def is_convertible(src: FieldType, dst: FieldType) -> bool:
    """Whether SEMANTICS.md section 4 lists a conversion from ``src`` to ``dst`` at all.

    Args:
        src: the type the value has.
        dst: the type it should get.

    Returns:
        True for the same type, a listed scalar pair, ``S[] -> T[]`` of a listed (or equal) pair,
        ``T -> T[]`` and ``T[] -> T``. A True answer does not mean every value converts.
    """
    if src == dst:
        return True
    if src.is_array != dst.is_array:
        return src.base == dst.base
    return src.base == dst.base or (src.base, dst.base) in _RULES


def convert(value: Any, src: FieldType, dst: FieldType) -> Any:
    """Convert a canonical value of type ``src`` to type ``dst`` (SEMANTICS.md section 4).

    Args:
        value: a canonical value of ``src`` (``None`` converts to ``None``).
        src: the type the value has.
        dst: the type it should get.

    Returns:
        The canonical value of ``dst`` (a new list for arrays).

    Raises:
        ConversionError: code ``not_convertible`` when the table lists no rule for the pair,
            ``conversion_failed`` when the value does not fit the rule.
    """
    if not is_convertible(src, dst):
        raise ConversionError(f"no conversion from {src} to {dst}", code="not_convertible")
    if value is None:
        return None
    return _converter(src, dst)(value)


def _converter(src: FieldType, dst: FieldType) -> Callable[[Any], Any]:
    """:func:`convert` from ``src`` to ``dst`` (a pair :func:`is_convertible` accepts) as a function
    of a non-null value, the rule picked once."""
    if src.is_array and dst.is_array:
        if src.base == dst.base:
            return list
        rule = _RULES[(src.base, dst.base)]
        return lambda value: [rule(item) for item in value]
    if dst.is_array:
        return lambda value: [value]
    if src.is_array:
        def only_element(value: list[Any]) -> Any:
            if len(value) != 1:
                raise ConversionError(f"an array of {len(value)} elements does not convert to {dst} (exactly one "
                                      "needed)", code="conversion_failed")
            return value[0]
        return only_element
    return _same if src.base == dst.base else _RULES[(src.base, dst.base)]


# --------------------------------------------------------------------------------------------------
# Translation between two lenses (SEMANTICS.md section 4)


def _check_validation(value: Any, lens_field: LensField) -> None:
    pattern = lens_field.validation
    if pattern is None or value is None:
        return
    items = value if lens_field.type.is_array else [value]
    for item in items:
        if not matches(pattern, item):
            raise ConversionError(
                f"{item!r} does not match the validation {pattern!r} of {lens_field.name}",
                code="validation_failed",
            )


def fresh(value: Any) -> Any:
    """A copy of a list value, so callers cannot change a lens default or a write through a result."""
    return list(value) if isinstance(value, list) else value


def translate_value(value: Any, written: LensField | None, shown: LensField | None) -> Any:
    """Show a value written under one definition of a field under another (the rule of the module
    docstring: the two ends are compared, nothing in between).

    Args:
        value: the canonical value as written, ``None`` (null), or :data:`ABSENT` (no write set it).
        written: the field in lens(v), v the version the write named; None when lens(v) lacks it.
        shown: the field in lens(n), n the version the value is shown at; None when lens(n) lacks it.

    Returns:
        :data:`NOT_SHOWN` when ``shown`` is None; else the canonical value at n: ``shown``'s
        default for a field added after v (or never written), ``None`` for a null, the value
        unchanged or converted, or ``shown``'s default when the conversion or validation fails.
    """
    if shown is None:
        return NOT_SHOWN
    # the steps of translation() without its flag: the projection calls this once per converted
    # value, and returning through it cost 70 ns of about 780 (an integer shown as text, best of 9)
    if written is None or value is ABSENT:
        return fresh(shown.default)
    if value is None:
        return None
    if written.type == shown.type and written.validation == shown.validation:
        return fresh(value)
    try:
        converted = convert(value, written.type, shown.type)
        _check_validation(converted, shown)
    except ConversionError:
        return fresh(shown.default)
    return fresh(converted)


def translation(value: Any, written: LensField | None, shown: LensField) -> tuple[Any, bool]:
    """:func:`translate_value` to a field ``shown`` has, and whether the value is ``shown``'s
    default because converting ``value`` or validating it failed (False for a null, a field no
    write set, or the same type and validation: nothing to convert). The schema check's form,
    which converts once where asking translate_value and then whether it failed would convert
    twice."""
    if written is None or value is ABSENT:
        return fresh(shown.default), False
    if value is None:
        return None, False
    if written.type == shown.type and written.validation == shown.validation:
        return fresh(value), False
    try:
        converted = convert(value, written.type, shown.type)
        _check_validation(converted, shown)
    except ConversionError:
        return fresh(shown.default), True
    return fresh(converted), False


def translator(written: LensField | None, shown: LensField) -> Callable[[Any], Any] | None:
    """:func:`translate_value` from ``written`` to ``shown`` as a function of the value (canonical or
    ``None``), the two definitions compared and the conversion picked once: for a projection that
    translates many values between the same two definitions (:meth:`lakehouse.core.projection.Projection.columns_of`).

    Unlike :func:`translate_value` its results are not copies: a default list is the default
    itself, for a caller that hands the values straight on (to Arrow) and never changes them.

    Returns:
        None when the value is shown as it is (same type and validation: nothing to translate);
        else the function.
    """
    default = shown.default
    if written is None:
        return lambda value: default
    if written.type == shown.type and written.validation == shown.validation:
        return None
    if not is_convertible(written.type, shown.type):
        return lambda value: None if value is None else default
    step = _converter(written.type, shown.type)

    def translate(value: Any) -> Any:
        if value is None:
            return None
        try:
            converted = step(value)
            _check_validation(converted, shown)
        except ConversionError:
            return default
        return converted
    return translate

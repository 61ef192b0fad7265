"""Field values as a user types them: ``--field name=value``, ``--json`` and ``--file`` of
``lakehouse publish create|update``, turned into the CBOR values to publish (FORMAT.md section 3).

Text from ``--field`` is read in the form of the field's type (:func:`parse_field_text`). A JSON
value is taken as the JSON type it is: a JSON string is read in the form of its type only for the
types JSON has no value of its own for (text, timestamp, relation, blob), so that ``{"n": "7"}``
for an integer field is the error it looks like, not the integer 7.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from lakehouse.core.entries import is_yasmf_hash
from lakehouse.core.lenses import TEXT_BASES, YASMF_HASH_BYTES, FieldType, expected_form, parse_iso_timestamp
from lakehouse.errors import MessageError, PublishError

_HEX = re.compile(r"(?:[0-9a-fA-F]{2})*", re.ASCII)
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
STRING_BASES = frozenset({*TEXT_BASES, "timestamp", "relation", "blob"})
"""The base types whose JSON form is a string (in the forms of :func:`parse_field_text`)."""


def parse_field_text(text: str, ft: FieldType, *, path: str) -> Any:
    """Turn the text of a command-line ``--field name=value`` into the CBOR value to publish.

    Forms: varchar/text as is; integer as decimal (``-5``, ``+5``); float as Python reads it
    (``1.5``, ``5``, ``1e3``); boolean ``true``/``false``; timestamp as ISO-8601 text with an offset
    (published as that text); relation as 68 hex characters (published as bytes); blob as hex
    (published as bytes); arrays as a JSON array whose elements are JSON values of the element
    type or strings in the forms above. The value is not checked against the lens here (length,
    range, validation): :func:`lakehouse.core.lenses.check_value` does that.

    Args:
        text: what followed ``name=``.
        ft: the field's type in the lens the message will name.
        path: where the value goes, e.g. ``"fields.subject"``, for the error.

    Returns:
        A CBOR-encodable value: str, int, float, bool, bytes, or a list of those.

    Raises:
        MessageError: code ``bad_value`` when the text is not in the form of the type, or
            ``wrong_type`` for a JSON array element of another type.
    """
    if not ft.is_array:
        return _parse_scalar(text, ft.base, path=path)
    try:
        items = json.loads(text)
    except ValueError:
        items = None
    if not isinstance(items, list):
        raise MessageError(f"expected a JSON array for {ft}, got {text!r}", code="bad_value", path=path)
    return [_parse_element(item, ft.base, path=f"{path}[{i}]") for i, item in enumerate(items)]


def parse_json_value(value: Any, ft: FieldType, *, path: str) -> Any:
    """Turn a value of a ``--json`` or ``--file`` object into the CBOR value to publish: a JSON
    number, boolean or null as it is; a string in the form :func:`parse_field_text` reads, for
    the types whose JSON form is a string (:data:`STRING_BASES`) only; an array's elements alike.

    Raises:
        MessageError: code ``wrong_type`` for a string where the type has a JSON value of its own
            (``"7"`` for an integer), ``bad_value`` for a string not in its type's form.
    """
    if not ft.is_array:
        return _parse_json_scalar(value, ft.base, path=path)
    if isinstance(value, list):
        return [_parse_json_scalar(item, ft.base, path=f"{path}[{i}]") for i, item in enumerate(value)]
    return value  # not an array: the lens check says so


def field_values(types: Mapping[str, FieldType] | None, pairs: tuple[str, ...], objects: list[tuple[str, str]],
                 *, schema_name: str) -> dict[str, Any]:
    """The fields of a message from the command line: the JSON objects first (later ones win), then
    each ``name=value`` pair.

    Args:
        types: field name -> type in the lens the message will name (None when the lake does not
            know the schema yet: values are published as given, and the lake judges them).
        pairs: the ``--field`` texts.
        objects: (where it came from, its text) of each ``--json`` text and ``--file`` content.
        schema_name: for the error naming the lens's fields.

    Raises:
        PublishError: ``bad_json`` (not a JSON object), ``bad_field`` (a pair without ``=``),
            ``unknown_field`` (a name not in the lens).
        MessageError: a value not of its field's type (:func:`parse_field_text`, :func:`parse_json_value`).
    """
    values: dict[str, tuple[str, Any]] = {}  # name -> (how it was given, value)
    for source, text in objects:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise PublishError(f"{source}: not JSON: {exc}", code="bad_json") from None
        if not isinstance(data, Mapping):
            raise PublishError(f"{source}: expected a JSON object of field names to values", code="bad_json")
        values.update((name, ("json", value)) for name, value in data.items())
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep:
            raise PublishError(f"--field {pair!r}: expected name=value", code="bad_field")
        values[name] = ("text", text)
    converted: dict[str, Any] = {}
    for name, (given, value) in values.items():
        ft = types.get(name) if types is not None else None
        if types is not None and ft is None:
            raise PublishError(f"field {name!r} is not in the lens of {schema_name} "
                               f"(fields: {', '.join(types) or 'none'})", code="unknown_field")
        if ft is not None:
            parse = parse_field_text if given == "text" else parse_json_value
            value = parse(value, ft, path=f"--field {name}")
        converted[name] = value
    return converted


def _parse_json_scalar(value: Any, base: str, *, path: str) -> Any:
    if isinstance(value, str):
        if base not in STRING_BASES:
            raise MessageError(f"expected {expected_form(base)}, got JSON {json.dumps(value)}",
                               code="wrong_type", path=path)
        return _parse_scalar(value, base, path=path)
    return value  # a number, boolean, null or container: the lens check says whether it fits


def _parse_element(item: Any, base: str, *, path: str) -> Any:
    if isinstance(item, str):
        return _parse_scalar(item, base, path=path)
    if base == "integer" and isinstance(item, int) and not isinstance(item, bool):
        return item
    if base == "float" and isinstance(item, (int, float)) and not isinstance(item, bool):
        return float(item)
    if base == "boolean" and isinstance(item, bool):
        return item
    raise MessageError(f"expected {expected_form(base)}, got JSON {json.dumps(item)}", code="wrong_type", path=path)


def _parse_scalar(text: str, base: str, *, path: str) -> Any:
    def bad(what: str) -> MessageError:
        return MessageError(f"{text!r} is not {what}", code="bad_value", path=path)

    if base in TEXT_BASES:
        return text
    if base == "integer":
        if _INTEGER.fullmatch(text) is None:
            raise bad("a decimal integer")
        return int(text)
    if base == "float":
        if text.strip() != text or "_" in text:
            raise bad("a float")
        try:
            return float(text)
        except ValueError:
            raise bad("a float") from None
    if base == "boolean":
        if text not in ("true", "false"):
            raise bad("true or false")
        return text == "true"
    if base == "timestamp":
        try:
            parse_iso_timestamp(text)
        except (ValueError, OverflowError) as exc:
            raise bad(f"a timestamp ({exc})") from None
        return text
    if _HEX.fullmatch(text) is None:
        raise bad("hex")
    raw = bytes.fromhex(text)
    if base == "relation" and not is_yasmf_hash(raw):
        raise bad(f"an entry hash ({2 * YASMF_HASH_BYTES} hex characters starting 0020)")
    return raw

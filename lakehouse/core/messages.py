"""The six message kinds carried as entry payloads (FORMAT.md section 3).

A payload is one CBOR map with text keys: ``spec`` (must be 1), ``kind`` and the kind's keys.
This module decodes payload bytes into the frozen dataclasses below and encodes them back, and
validates shapes (keys, types of keys, field-change rules that need no lens). Whether a field
*value* fits a schema version, and whether a migration makes sense (known type names, validation
that compiles and suits its type, an update that carries a default), is decided by
:mod:`lakehouse.core.lenses` (SEMANTICS.md section 2).

Every defect raises :class:`~lakehouse.errors.MessageError` with a stable ``code`` and a ``path``
naming the key or field at fault (``"fields[2].type"``, ``"fields.subject"``, ``"schema[0]"``;
``""`` for the whole payload):

==================== ========================================================================
code                 meaning
==================== ========================================================================
``not_cbor``         the bytes are not well-formed CBOR (also: duplicate map keys, nesting
                     deeper than any message needs, a malformed tag 0 / tag 1 date)
``trailing_bytes``   bytes follow the one top-level CBOR item
``not_a_map``        the top-level item is not a map
``bad_spec``         ``spec`` is missing or not the unsigned integer 1
``bad_kind``         ``kind`` is missing or not one of the six kinds
``bad_key``          a map key that is not text
``unknown_key``      a key the kind (or the field change's action) does not have
``missing_key``      a required key is absent
``bad_value``        a value of the wrong CBOR type or shape (schema ids, hashes, integers
                     out of range, empty ``fields``, field values that are not scalars or
                     lists of scalars)
``bad_name``         a schema-meta ``name`` that is not 1-64 printable ASCII characters
``bad_field_name``   a field name not matching ``^[a-z][a-z0-9_]{0,63}$``
``bad_action``       a field change whose ``action`` is not create, update, rename or remove
``bad_schema_id``    text that is not ``<64 hex>:<log_id>`` (:meth:`SchemaId.parse`)
==================== ========================================================================

Field values (in ``create``/``update`` ``fields`` and in a field change's ``default``) are None,
bool, int, float, str, bytes, an aware :class:`~datetime.datetime` (CBOR tag 0 or tag 1), or a
list of those. Other CBOR tags, ``undefined``, simple values, maps and nested arrays are refused.

Pure: no Spark, no I/O.
"""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache, partial
from typing import Any, Final, Literal

import cbor2

from lakehouse.core.entries import AUTHOR_SIZE, HASH_SIZE, INT64_MAX, is_yasmf_hash
from lakehouse.errors import MessageError

__all__ = [
    "FIELD_ACTIONS",
    "INSTANCE_KINDS",
    "MESSAGE_KINDS",
    "SCHEMA_KINDS",
    "SCHEMA_META_TEXT_KEYS",
    "SPEC_VERSION",
    "Create",
    "Delete",
    "FieldChange",
    "Message",
    "MessageKind",
    "SchemaId",
    "SchemaMeta",
    "SchemaMigration",
    "SchemaRevert",
    "Update",
    "VersionedSchema",
    "decode_message",
    "encode_message",
    "is_field_name",
    "message_to_dict",
]

MessageKind = Literal["schema-meta", "schema-migration", "schema-revert", "create", "update", "delete"]
SCHEMA_KINDS: frozenset[str] = frozenset({"schema-meta", "schema-migration", "schema-revert"})
INSTANCE_KINDS: frozenset[str] = frozenset({"create", "update", "delete"})
MESSAGE_KINDS: frozenset[str] = SCHEMA_KINDS | INSTANCE_KINDS
SPEC_VERSION: Final = 1
"""The only ``spec`` value a message may carry."""
FIELD_ACTIONS: frozenset[str] = frozenset({"create", "update", "remove"})
SCHEMA_META_TEXT_KEYS: Final = ("display-name", "description", "homepage", "bugs", "license", "contact")
"""Optional text keys of ``schema-meta``, in wire spelling (attribute = key with ``-`` -> ``_``)."""

_FIELD_NAME: Final = re.compile(r"[a-z][a-z0-9_]{0,63}").fullmatch
_SCHEMA_NAME: Final = re.compile(r"[\x20-\x7e]{1,64}").fullmatch
_DIGITS: Final = re.compile(r"[0-9]+").fullmatch
_HEX_AUTHOR: Final = re.compile(r"[0-9a-fA-F]{64}").fullmatch

# Keys each kind may carry (besides spec and kind), and those it must carry.
_KIND_KEYS: Final[dict[str, frozenset[str]]] = {
    "schema-meta": frozenset({"spec", "kind", "name", "dependencies", *SCHEMA_META_TEXT_KEYS}),
    "schema-migration": frozenset({"spec", "kind", "fields"}),
    "schema-revert": frozenset({"spec", "kind", "target"}),
    "create": frozenset({"spec", "kind", "schema", "fields"}),
    "update": frozenset({"spec", "kind", "schema", "instance", "fields"}),
    "delete": frozenset({"spec", "kind", "instance", "schema"}),
}
_CHANGE_KEYS: Final = frozenset({"name", "action", "type", "validation", "default", "schema", "cascade", "to"})
_ACTION_KEYS: Final[dict[str, frozenset[str]]] = {
    "create": frozenset({"name", "action", "type", "validation", "default", "schema", "cascade"}),
    "update": frozenset({"name", "action", "default", "type", "validation"}),
    "rename": frozenset({"name", "action", "to"}),
    "remove": frozenset({"name", "action"}),
}

# Python types a field value (or a list element) may have after decoding.
_SCALAR_TYPES: Final = frozenset({type(None), bool, int, float, str, bytes, datetime})

# A message is at most 4 containers deep (map > fields array > field change > default list);
# anything much deeper is refused by the CBOR decoder before it builds it.
_MAX_DEPTH: Final = 16
# CBOR tags the decoder library would otherwise turn into Python objects (bignums, decimals,
# sets, shared references, ...). Only tag 0 and tag 1 (dates) are field values; every other tag is
# kept as a raw CBORTag so validation refuses it with a path.
_LIBRARY_TAGS: Final = (2, 3, 4, 5, 25, 28, 29, 30, 35, 36, 37, 52, 54, 100, 256, 258, 260, 261, 1004, 55799)


def _raw_tag(tag: int, value: Any, immutable: bool) -> cbor2.CBORTag:
    return cbor2.CBORTag(tag, value)


_RAW_TAGS: Final[dict[int, Callable[[Any, bool], Any]]] = {t: partial(_raw_tag, t) for t in _LIBRARY_TAGS}
_MISSING: Final = object()


def is_field_name(name: object) -> bool:
    """Tell whether ``name`` is a valid field name, ``^[a-z][a-z0-9_]{0,63}$`` (FORMAT.md section 3).

    Args:
        name: candidate name (any object; only a str can be valid).

    Returns:
        True for a str matching the field-name rule.
    """
    return type(name) is str and _FIELD_NAME(name) is not None


def _parse_uint(text: str, what: str, full: str) -> int:
    if not _DIGITS(text):
        raise MessageError(f"{what} in {full!r} must be a decimal unsigned integer", code="bad_schema_id")
    value = int(text)
    if value > INT64_MAX:
        raise MessageError(f"{what} in {full!r} is larger than 2^63-1", code="bad_schema_id")
    return value


def _parse_author(text: str, full: str) -> bytes:
    if not _HEX_AUTHOR(text):
        raise MessageError(
            f"the author in {full!r} must be 64 hex characters (got {len(text)} characters)"
            if len(text) != 2 * AUTHOR_SIZE
            else f"the author in {full!r} is not hexadecimal",
            code="bad_schema_id",
        )
    return bytes.fromhex(text)


@dataclass(frozen=True, order=True)
class SchemaId:
    """A schema: the log (author, log_id) that holds its schema messages.

    Written ``<author hex>:<log_id>`` in tables and on the command line (see :meth:`parse`).
    """

    author: bytes  # 32 bytes
    log_id: int

    def __str__(self) -> str:
        return f"{self.author.hex()}:{self.log_id}"

    @classmethod
    def parse(cls, text: str) -> SchemaId:
        """Parse ``<64 hex>:<log_id>`` (FORMAT.md section 3, schema id).

        Args:
            text: the author's public key as 64 hex characters (either case), a colon, and the
                log id in decimal (at most 2^63-1). No surrounding spaces.

        Returns:
            The schema id.

        Raises:
            MessageError: ``code="bad_schema_id"``, saying which part is wrong.
        """
        author, colon, log_id = text.rpartition(":")
        if not colon:
            raise MessageError(
                f"{text!r} is not a schema id: expected <64 hex>:<log_id>", code="bad_schema_id"
            )
        return cls(_parse_author(author, text), _parse_uint(log_id, "the log id", text))


@dataclass(frozen=True, order=True)
class VersionedSchema:
    """A schema at one version: the seq_num of an entry of its schema log."""

    author: bytes  # 32 bytes
    log_id: int
    version: int

    @property
    def schema_id(self) -> SchemaId:
        return SchemaId(self.author, self.log_id)

    def __str__(self) -> str:
        return f"{self.author.hex()}:{self.log_id}@{self.version}"

    @classmethod
    def parse(cls, text: str) -> VersionedSchema:
        """Parse ``<64 hex>:<log_id>@<version>``, the form :meth:`__str__` writes (FORMAT.md section 3).

        Args:
            text: a schema id as accepted by :meth:`SchemaId.parse`, ``@``, and a version >= 1.

        Returns:
            The versioned schema.

        Raises:
            MessageError: ``code="bad_schema_id"``, saying which part is wrong.
        """
        schema, at, version = text.rpartition("@")
        if not at:
            raise MessageError(
                f"{text!r} is not a versioned schema: expected <64 hex>:<log_id>@<version>",
                code="bad_schema_id",
            )
        sid = SchemaId.parse(schema)
        number = _parse_uint(version, "the version", text)
        if number < 1:
            raise MessageError(f"the version in {text!r} must be at least 1", code="bad_schema_id")
        return cls(sid.author, sid.log_id, number)


@dataclass(frozen=True)
class FieldChange:
    """One step of a ``schema-migration``: create, update, rename or remove a field (FORMAT.md
    section 3).

    Attributes:
        name: field name, ``^[a-z][a-z0-9_]{0,63}$``.
        action: "create" | "update" | "rename" | "remove".
        type: type text as written (e.g. ``"varchar"``, ``"relation[]"``); None when absent.
        validation: RE2 pattern text or None.
        default: the default value (a CBOR value: str, int, float, bool, bytes, list, None) or
            None when absent. ``has_default`` tells absent from an explicit null.
        has_default: whether the ``default`` key was present.
        schema: relation target (version-agnostic) for relation types, else None.
        cascade: relation cascade flag (False when absent).
        to: for ``rename``, the field's new name (same pattern as ``name``); else None.
    """

    name: str
    action: Literal["create", "update", "rename", "remove"]
    type: str | None = None
    validation: str | None = None
    default: Any = None
    has_default: bool = False
    schema: SchemaId | None = None
    cascade: bool = False
    to: str | None = None


@dataclass(frozen=True)
class SchemaMeta:
    """``schema-meta``: names and describes a schema; seq 1 of a schema log, may repeat later."""

    name: str
    display_name: str | None = None
    description: str | None = None
    homepage: str | None = None
    bugs: str | None = None
    license: str | None = None
    contact: str | None = None
    dependencies: tuple[SchemaId, ...] = ()
    kind: Literal["schema-meta"] = field(default="schema-meta", init=False)


@dataclass(frozen=True)
class SchemaMigration:
    """``schema-migration``: a non-empty, ordered list of field changes."""

    fields: tuple[FieldChange, ...]
    kind: Literal["schema-migration"] = field(default="schema-migration", init=False)


@dataclass(frozen=True)
class SchemaRevert:
    """``schema-revert``: revert the schema to version ``target`` (< this entry's seq_num)."""

    target: int
    kind: Literal["schema-revert"] = field(default="schema-revert", init=False)


@dataclass(frozen=True)
class Create:
    """``create``: insert an instance of ``schema``; ``fields`` maps name -> CBOR value."""

    schema: VersionedSchema
    fields: dict[str, Any]
    kind: Literal["create"] = field(default="create", init=False)


@dataclass(frozen=True)
class Update:
    """``update``: change fields (non-empty) of ``instance`` (34-byte create entry hash)."""

    schema: VersionedSchema
    instance: bytes
    fields: dict[str, Any]
    kind: Literal["update"] = field(default="update", init=False)


@dataclass(frozen=True)
class Delete:
    """``delete``: delete ``instance``; ``schema`` is optional."""

    instance: bytes
    schema: VersionedSchema | None = None
    kind: Literal["delete"] = field(default="delete", init=False)


Message = SchemaMeta | SchemaMigration | SchemaRevert | Create | Update | Delete


# --------------------------------------------------------------------------------------------
# decoding
# --------------------------------------------------------------------------------------------
def _join(path: str, key: object) -> str:
    name = key if type(key) is str else repr(key)
    return f"{path}.{name}" if path else str(name)


def _check_keys(obj: dict[Any, Any], allowed: frozenset[str], path: str, context: str) -> None:
    """Raise for the first key of ``obj`` (in map order) that is not text or not allowed."""
    if allowed.issuperset(obj):
        return
    for key in obj:
        if type(key) is not str:
            raise MessageError(
                f"map keys must be text, not {type(key).__name__}", code="bad_key", path=_join(path, key)
            )
        if key not in allowed:
            raise MessageError(f"unknown key {key!r} {context}", code="unknown_key", path=_join(path, key))


def _required(obj: dict[Any, Any], key: str, path: str) -> Any:
    value = obj.get(key, _MISSING)
    if value is _MISSING:
        raise MessageError(f"the key {key!r} is required", code="missing_key", path=_join(path, key))
    return value


def _uint(value: Any, path: str, minimum: int = 0) -> int:
    if type(value) is not int or not minimum <= value <= INT64_MAX:
        raise MessageError(
            f"must be an unsigned integer from {minimum} to 2^63-1, got {_describe(value)}",
            code="bad_value",
            path=path,
        )
    return value


def _author(value: Any, path: str) -> bytes:
    if type(value) is not bytes or len(value) != AUTHOR_SIZE:
        raise MessageError(
            f"must be a {AUTHOR_SIZE}-byte string (a public key), got {_describe(value)}",
            code="bad_value",
            path=path,
        )
    return value


def _schema_id(value: Any, path: str) -> SchemaId:
    if type(value) is not list or len(value) != 2:
        raise MessageError(
            f"a schema id must be an array [author (32 bytes), log_id], got {_describe(value)}",
            code="bad_value",
            path=path,
        )
    return SchemaId(_author(value[0], f"{path}[0]"), _uint(value[1], f"{path}[1]"))


@lru_cache(maxsize=4096)
def _versioned_schema(author: bytes, log_id: int, version: int) -> VersionedSchema:
    """One object per valid versioned schema: the messages of a log name a few of them, and an
    immutable one is shared for less than it costs to build."""
    return VersionedSchema(author, log_id, version)


def _versioned(value: Any, path: str) -> VersionedSchema:
    if type(value) is not list or len(value) != 3:
        raise MessageError(
            f"a versioned schema must be an array [author (32 bytes), log_id, version], got {_describe(value)}",
            code="bad_value",
            path=path,
        )
    author, log_id, version = value
    if (  # the common, valid case, without building paths
        type(author) is bytes
        and len(author) == AUTHOR_SIZE
        and type(log_id) is int
        and 0 <= log_id <= INT64_MAX
        and type(version) is int
        and 1 <= version <= INT64_MAX
    ):
        return _versioned_schema(author, log_id, version)
    return VersionedSchema(
        _author(author, f"{path}[0]"), _uint(log_id, f"{path}[1]"), _uint(version, f"{path}[2]", minimum=1)
    )


def _instance(value: Any, path: str) -> bytes:
    if type(value) is not bytes or not is_yasmf_hash(value):
        raise MessageError(
            f"must be a {HASH_SIZE}-byte entry hash (starting 00 20), got {_describe(value)}",
            code="bad_value",
            path=path,
        )
    return value


def _text(value: Any, path: str) -> str:
    if type(value) is not str:
        raise MessageError(f"must be text, got {_describe(value)}", code="bad_value", path=path)
    return value


def _describe(value: Any) -> str:
    if isinstance(value, cbor2.CBORTag):
        return f"CBOR tag {value.tag}"
    if value is cbor2.undefined:
        return "undefined"
    if isinstance(value, (bytes, list, dict, str)):
        return f"{type(value).__name__} of length {len(value)}"
    if type(value) is int:
        return f"integer {value}"
    return type(value).__name__


def _check_value(value: Any, parent: str, key: str) -> None:
    """Raise unless ``value`` is a field value: a scalar or a list of scalars (no nesting)."""
    kind = type(value)
    if kind in _SCALAR_TYPES:
        if kind is datetime and value.tzinfo is None:
            raise MessageError("a datetime needs a time zone", code="bad_value", path=_join(parent, key))
        return
    if kind is list:
        for i, item in enumerate(value):
            if type(item) not in _SCALAR_TYPES or (type(item) is datetime and item.tzinfo is None):
                what = "a nested array" if type(item) is list else _describe(item)
                raise MessageError(
                    f"array elements must be null, bool, int, float, text, bytes or a date; got {what}",
                    code="bad_value",
                    path=f"{_join(parent, key)}[{i}]",
                )
        return
    raise MessageError(
        f"a field value must be null, bool, int, float, text, bytes, a date or an array of those; got {_describe(value)}",
        code="bad_value",
        path=_join(parent, key),
    )


_FIELD_NAMES_SEEN: Final[set[str]] = set()
"""Field names found valid, checked again by a set lookup (a schema's few names recur in every
message); at most :data:`_FIELD_NAMES_KEPT` of them."""
_FIELD_NAMES_KEPT: Final = 4096


def _field_name_seen(name: Any) -> bool:
    """Whether ``name`` is a valid field name, kept in :data:`_FIELD_NAMES_SEEN` when it is."""
    if type(name) is not str or not _FIELD_NAME(name):
        return False
    if len(_FIELD_NAMES_SEEN) < _FIELD_NAMES_KEPT:
        _FIELD_NAMES_SEEN.add(name)
    return True


def _fields_map(value: Any, *, non_empty: bool) -> dict[str, Any]:
    if type(value) is not dict:
        raise MessageError(
            f"must be a map of field name to value, got {_describe(value)}", code="bad_value", path="fields"
        )
    if non_empty and not value:
        raise MessageError("must name at least one field", code="bad_value", path="fields")
    for name, item in value.items():
        if name not in _FIELD_NAMES_SEEN and not _field_name_seen(name):
            raise MessageError(
                f"{name!r} is not a field name (^[a-z][a-z0-9_]{{0,63}}$)",
                code="bad_field_name",
                path=_join("fields", name),
            )
        if type(item) not in _SCALAR_TYPES:  # decoded datetimes always carry a time zone
            _check_value(item, "fields", name)
    return value


def _decode_meta(obj: dict[str, Any]) -> SchemaMeta:
    name = _required(obj, "name", "")
    if type(name) is not str or not _SCHEMA_NAME(name):
        raise MessageError(
            f"a schema name is 1 to 64 printable ASCII characters, got {name!r}"
            if type(name) is str
            else f"must be text, got {_describe(name)}",
            code="bad_name",
            path="name",
        )
    texts = {key: _text(obj[key], key) for key in SCHEMA_META_TEXT_KEYS if key in obj}
    dependencies: tuple[SchemaId, ...] = ()
    deps = obj.get("dependencies", _MISSING)
    if deps is not _MISSING:
        if type(deps) is not list:
            raise MessageError(
                f"must be an array of schema ids, got {_describe(deps)}",
                code="bad_value",
                path="dependencies",
            )
        dependencies = tuple(_schema_id(d, f"dependencies[{i}]") for i, d in enumerate(deps))
    return SchemaMeta(
        name,
        display_name=texts.get("display-name"),
        description=texts.get("description"),
        homepage=texts.get("homepage"),
        bugs=texts.get("bugs"),
        license=texts.get("license"),
        contact=texts.get("contact"),
        dependencies=dependencies,
    )


def _decode_change(obj: Any, path: str) -> FieldChange:
    if type(obj) is not dict:
        raise MessageError(f"a field change must be a map, got {_describe(obj)}", code="bad_value", path=path)
    _check_keys(obj, _CHANGE_KEYS, path, "in a field change")
    name = _required(obj, "name", path)
    if type(name) is not str or not _FIELD_NAME(name):
        raise MessageError(
            f"{name!r} is not a field name (^[a-z][a-z0-9_]{{0,63}}$)",
            code="bad_field_name",
            path=f"{path}.name",
        )
    action = _required(obj, "action", path)
    allowed = _ACTION_KEYS.get(action) if type(action) is str else None
    if allowed is None:
        raise MessageError(
            f"must be 'create', 'update', 'rename' or 'remove', got {action!r}",
            code="bad_action",
            path=f"{path}.action",
        )
    _check_keys(obj, allowed, path, f"for action {action!r}")
    type_ = None
    if "type" in obj:
        type_ = _text(obj["type"], f"{path}.type")
    elif action == "create":
        raise MessageError("a created field needs a 'type'", code="missing_key", path=f"{path}.type")
    validation = None
    if "validation" in obj:
        validation = _text(obj["validation"], f"{path}.validation")
    has_default = "default" in obj
    default = obj.get("default")
    if has_default:
        _check_value(default, path, "default")
    schema = None
    if "schema" in obj:
        schema = _schema_id(obj["schema"], f"{path}.schema")
    cascade = obj.get("cascade", False)
    if type(cascade) is not bool:
        raise MessageError(
            f"must be true or false, got {_describe(cascade)}", code="bad_value", path=f"{path}.cascade"
        )
    to = None
    if action == "rename":
        to = _required(obj, "to", path)
        if type(to) is not str or not _FIELD_NAME(to):
            raise MessageError(
                f"{to!r} is not a field name (^[a-z][a-z0-9_]{{0,63}}$)",
                code="bad_field_name",
                path=f"{path}.to",
            )
    return FieldChange(name, action, type_, validation, default, has_default, schema, cascade, to)


def _decode_migration(obj: dict[str, Any]) -> SchemaMigration:
    changes = _required(obj, "fields", "")
    if type(changes) is not list or not changes:
        raise MessageError(
            f"must be a non-empty array of field changes, got {_describe(changes)}",
            code="bad_value",
            path="fields",
        )
    return SchemaMigration(tuple(_decode_change(c, f"fields[{i}]") for i, c in enumerate(changes)))


def _decode_revert(obj: dict[str, Any]) -> SchemaRevert:
    return SchemaRevert(_uint(_required(obj, "target", ""), "target", minimum=1))


def _decode_create(obj: dict[str, Any]) -> Create:
    schema = _versioned(_required(obj, "schema", ""), "schema")
    return Create(schema, _fields_map(_required(obj, "fields", ""), non_empty=False))


def _decode_update(obj: dict[str, Any]) -> Update:
    schema = _versioned(_required(obj, "schema", ""), "schema")
    instance = _instance(_required(obj, "instance", ""), "instance")
    return Update(schema, instance, _fields_map(_required(obj, "fields", ""), non_empty=True))


def _decode_delete(obj: dict[str, Any]) -> Delete:
    instance = _instance(_required(obj, "instance", ""), "instance")
    schema = obj.get("schema", _MISSING)
    return Delete(instance, None if schema is _MISSING else _versioned(schema, "schema"))


_DECODERS: Final[dict[str, Callable[[dict[str, Any]], Message]]] = {
    "schema-meta": _decode_meta,
    "schema-migration": _decode_migration,
    "schema-revert": _decode_revert,
    "create": _decode_create,
    "update": _decode_update,
    "delete": _decode_delete,
}


_CBOR_DECODERS = threading.local()  # each thread's CBOR decoder (:func:`_load`)


def _decoder() -> cbor2.CBORDecoder:
    """This thread's CBOR decoder, set up as :func:`_load` decodes: one per thread, given each
    payload's stream in turn, as building one per payload cost a fifth of the decoding (0.46 µs
    of 2.65 a message of the 1M bench history)."""
    decoder: cbor2.CBORDecoder | None = getattr(_CBOR_DECODERS, "decoder", None)
    if decoder is None:
        decoder = _CBOR_DECODERS.decoder = cbor2.CBORDecoder(
            io.BytesIO(b""), semantic_decoders=_RAW_TAGS, max_depth=_MAX_DEPTH, allow_duplicate_keys=False
        )
    return decoder


def _load(payload: bytes) -> Any:
    stream = io.BytesIO(payload)
    decoder = _decoder()
    decoder.fp = stream
    try:
        obj = decoder.decode()
    except BaseException as exc:
        # the library promises nothing of a decoder after a failed decode: the next payload gets
        # a new one
        _CBOR_DECODERS.decoder = None
        if isinstance(exc, (cbor2.CBORError, ValueError, OverflowError, TypeError)):
            raise MessageError(f"not well-formed CBOR: {exc}", code="not_cbor") from None
        raise
    if stream.tell() != len(payload):
        raise MessageError(
            f"{len(payload) - stream.tell()} bytes follow the CBOR item (a payload is exactly one item)",
            code="trailing_bytes",
        )
    return obj


def decode_message(payload: bytes) -> Message:
    """Decode and validate a payload (FORMAT.md section 3).

    The payload must be exactly one CBOR item: a map with text keys, ``spec`` 1, a known ``kind``
    and exactly the keys that kind allows, each of the right shape. Lens-dependent checks (type
    names, validation patterns, values against field types) are not made here.

    Args:
        payload: the payload bytes of an entry.

    Returns:
        The message as one of :class:`SchemaMeta`, :class:`SchemaMigration`,
        :class:`SchemaRevert`, :class:`Create`, :class:`Update`, :class:`Delete`.

    Raises:
        MessageError: with ``code`` (see the module docstring) and ``path`` (the key or field at
            fault).

    Example:
        >>> decode_message(encode_message(SchemaRevert(2)))
        SchemaRevert(target=2, kind='schema-revert')
    """
    obj = _load(payload)
    if type(obj) is not dict:
        raise MessageError(f"a message must be a CBOR map, got {_describe(obj)}", code="not_a_map")
    spec = obj.get("spec", _MISSING)
    if type(spec) is not int or spec != SPEC_VERSION:
        raise MessageError(
            "the key 'spec' is required"
            if spec is _MISSING
            else f"must be the unsigned integer 1, got {spec!r}",
            code="bad_spec",
            path="spec",
        )
    kind = obj.get("kind", _MISSING)
    decoder = _DECODERS.get(kind) if type(kind) is str else None
    if decoder is None:
        raise MessageError(
            "the key 'kind' is required"
            if kind is _MISSING
            else f"must be one of {', '.join(sorted(MESSAGE_KINDS))}; got {kind!r}",
            code="bad_kind",
            path="kind",
        )
    if not _KIND_KEYS[kind].issuperset(obj):
        _check_keys(obj, _KIND_KEYS[kind], "", f"in a {kind} message")
    return decoder(obj)


# --------------------------------------------------------------------------------------------
# encoding
# --------------------------------------------------------------------------------------------
def _meta_texts(meta: SchemaMeta) -> dict[str, str]:
    """The text keys of a schema-meta that are set, in wire spelling, ``name`` first."""
    texts = {"name": meta.name}
    for key in SCHEMA_META_TEXT_KEYS:
        value = getattr(meta, key.replace("-", "_"))
        if value is not None:
            texts[key] = value
    return texts


def _schema_id_cbor(sid: SchemaId) -> list[Any]:
    return [sid.author, sid.log_id]


def _versioned_cbor(vs: VersionedSchema) -> list[Any]:
    return [vs.author, vs.log_id, vs.version]


def _change_cbor(change: FieldChange, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": change.name, "action": change.action}
    if change.type is not None:
        out["type"] = change.type
    if change.validation is not None:
        out["validation"] = change.validation
    if change.has_default:
        _check_value(change.default, path, "default")
        out["default"] = change.default
    elif change.default is not None:
        raise MessageError(
            "a default is set but has_default is False", code="bad_value", path=f"{path}.default"
        )
    if change.schema is not None:
        out["schema"] = _schema_id_cbor(change.schema)
    if change.cascade is not False:
        out["cascade"] = change.cascade
    if change.to is not None:
        out["to"] = change.to
    return out


def _to_cbor(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"spec": SPEC_VERSION, "kind": msg.kind}
    if isinstance(msg, SchemaMeta):
        out.update(_meta_texts(msg))
        if msg.dependencies:
            out["dependencies"] = [_schema_id_cbor(d) for d in msg.dependencies]
    elif isinstance(msg, SchemaMigration):
        out["fields"] = [_change_cbor(c, f"fields[{i}]") for i, c in enumerate(msg.fields)]
    elif isinstance(msg, SchemaRevert):
        out["target"] = msg.target
    elif isinstance(msg, Delete):
        out["instance"] = msg.instance
        if msg.schema is not None:
            out["schema"] = _versioned_cbor(msg.schema)
    else:
        out["schema"] = _versioned_cbor(msg.schema)
        if isinstance(msg, Update):
            out["instance"] = msg.instance
        for name, value in msg.fields.items():
            _check_value(value, "fields", name)
        out["fields"] = msg.fields
    return out


def encode_message(msg: Message) -> bytes:
    """Encode a message as deterministic CBOR (FORMAT.md section 3).

    Keys are written in canonical order, integers and floats in their shortest form, authors and
    hashes as byte strings, datetimes as tag 0 (RFC 3339 text). The bytes are then decoded again,
    so a message :func:`decode_message` would refuse is never returned.

    Args:
        msg: the message to encode.

    Returns:
        The payload bytes; ``decode_message(encode_message(msg)) == msg`` for every valid message.

    Raises:
        MessageError: when the message is not valid (same codes and paths as
            :func:`decode_message`), or holds a value CBOR cannot carry (``bad_value``).
    """
    try:
        data = cbor2.dumps(_to_cbor(msg), canonical=True)
    except (cbor2.CBORError, ValueError, TypeError, OverflowError) as exc:
        raise MessageError(f"cannot be encoded as CBOR: {exc}", code="bad_value") from None
    decode_message(data)
    return data


# --------------------------------------------------------------------------------------------
# display
# --------------------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (SchemaId, VersionedSchema)):
        return str(value)
    return value


def message_to_dict(msg: Message) -> dict[str, Any]:
    """Turn a message into plain JSON-ready data, for display (FORMAT.md section 3).

    Keys are those of the wire format (``display-name``, ...), absent keys are left out; bytes
    (authors, hashes, blob values) become lower-case hex, datetimes ISO-8601 text, schema ids
    ``<author hex>:<log_id>`` and versioned schemas ``<author hex>:<log_id>@<version>``.

    Args:
        msg: the message.

    Returns:
        A dict of str, int, float, bool, None, lists and dicts only.
    """
    out: dict[str, Any] = {"spec": SPEC_VERSION, "kind": msg.kind}
    if isinstance(msg, SchemaMeta):
        out.update(_meta_texts(msg))
        if msg.dependencies:
            out["dependencies"] = _plain(msg.dependencies)
    elif isinstance(msg, SchemaMigration):
        changes = []
        for change in msg.fields:
            item: dict[str, Any] = {"name": change.name, "action": change.action}
            for key in ("type", "validation", "schema"):
                if (value := getattr(change, key)) is not None:
                    item[key] = _plain(value)
            if change.has_default:
                item["default"] = _plain(change.default)
            if change.cascade:
                item["cascade"] = True
            if change.to is not None:
                item["to"] = change.to
            changes.append(item)
        out["fields"] = changes
    elif isinstance(msg, SchemaRevert):
        out["target"] = msg.target
    else:
        if msg.schema is not None:
            out["schema"] = str(msg.schema)
        if not isinstance(msg, Create):
            out["instance"] = msg.instance.hex()
        if not isinstance(msg, Delete):
            out["fields"] = {name: _plain(value) for name, value in msg.fields.items()}
    return out

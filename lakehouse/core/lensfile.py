"""Lens files: one schema message authored as YAML (FORMAT.md section 4).

A lens file under ``lenses/<schema>/NNN.yaml`` holds one schema message, in the shape of the
seeds' examples::

    # create the slothmail fields
    kind: schema-migration
    fields:
      - subject:            # the seeds' shape: the field's name as a key with no value
        action: create
        type: text
      - name: recipient     # FORMAT.md's shape: a ``name`` key
        action: create
        type: relation
        schema: profile     # a schema name, "<author hex>:<log_id>" or [<author hex>, <log_id>]
      - sent:
        action: rename      # the same field, values and all, under a new name
        to: sent_at

``kind`` is ``schema-meta`` (with ``name`` and the optional meta keys), ``schema-migration``
(with ``fields``) or ``schema-revert`` (with ``target``); ``spec`` may be given and must be 1.

How YAML maps to message values:

- keys are taken as written (``on:`` is the key ``"on"``, not a boolean);
- keys whose wire value is text (``name``, ``type``, ``validation``, ``description``, ...) take
  the scalar as written, so ``name: 2020`` is the text ``"2020"``; an empty value or ``null``
  there is an error;
- ``default``, ``cascade`` and ``target`` take YAML's own types (int, float, bool, null, text,
  ``!!binary`` bytes, lists of those), except that **YAML timestamps are kept as the text the
  author wrote** (``default: 2020-05-22T11:58:50+00:00`` is that text, which a ``timestamp``
  field accepts as ISO-8601), so a file means the same on every machine.

The resulting message is encoded and decoded again (:mod:`lakehouse.core.messages`), so a lens
file never yields a message the decoder refuses. Every defect raises
:class:`~lakehouse.errors.LensFileError` naming the file and the 1-based line of the offending
key or item. Codes: ``yaml_syntax``, ``not_a_map``, ``bad_kind``, ``bad_spec``, ``missing_key``,
``unknown_key``, ``duplicate_key``, ``bad_value``, ``bad_field_change``, ``bad_schema_id``,
``unresolved_schema``, and any :class:`~lakehouse.errors.MessageError` code the round trip
reports (``bad_field_name``, ``bad_action``, ``bad_name``, ...).

Pure: the caller reads the file and supplies the schema-name resolver.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, NoReturn, cast

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from lakehouse.core.messages import (
    SCHEMA_KINDS,
    SCHEMA_META_TEXT_KEYS,
    SPEC_VERSION,
    FieldChange,
    SchemaId,
    SchemaMeta,
    SchemaMigration,
    SchemaRevert,
    decode_message,
    encode_message,
)
from lakehouse.errors import LensFileError, MessageError

__all__ = ["SchemaResolver", "parse_lens_file"]

SchemaResolver = Callable[[str], SchemaId]
"""Maps a schema name written in a lens file to its schema id; raises when it cannot."""

_TAG: Final = "tag:yaml.org,2002:"
_NULL: Final = _TAG + "null"
_MAP: Final = _TAG + "map"
_SEQ: Final = _TAG + "seq"
_TIMESTAMP: Final = _TAG + "timestamp"
# Scalar tags whose written text is taken as-is where the wire wants text.
_TEXT_TAGS: Final = frozenset(_TAG + t for t in ("str", "int", "float", "bool", "timestamp"))

_KIND_KEYS: Final[dict[str, frozenset[str]]] = {
    "schema-meta": frozenset({"spec", "kind", "name", "dependencies", *SCHEMA_META_TEXT_KEYS}),
    "schema-migration": frozenset({"spec", "kind", "fields"}),
    "schema-revert": frozenset({"spec", "kind", "target"}),
}
# Keys of a field change besides its name.
_CHANGE_KEYS: Final = ("action", "type", "validation", "default", "schema", "cascade", "to")
# "<hex>:<digits>" is a schema id; anything else in a relation's ``schema`` is a schema name.
_ID_LIKE: Final = re.compile(r"[0-9a-fA-F]+:[0-9]+").fullmatch
# The last component of a message path: ".key" or "[index]".
_LAST_PART: Final = re.compile(r"(?:\.[^.\[]*|\[[0-9]+\])$")

_Pairs = dict[str, tuple[ScalarNode, Node]]


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader without aliases: a lens file has no use for ``&anchor`` / ``*alias``,
    and an alias repeats a node wherever it is named, so a small file could stand for a list of
    fields or values many times its size (the "billion laughs" of XML)."""

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, f"an alias (*{event.anchor}): anchors and aliases are not used in lens files",
                event.start_mark)
        return super().compose_node(parent, index)


class _LensFileParser:
    """Walks the composed YAML node tree of one lens file, remembering the line of every path."""

    def __init__(self, text: str, file: str, resolve_schema: SchemaResolver | None) -> None:
        self.text = text
        self.file = file
        self.resolve_schema = resolve_schema
        self.loader: yaml.SafeLoader | None = None  # made by compose: its reader refuses some texts at once
        # message path ("fields[1].type") -> 1-based line, for errors found by the round trip
        self.lines: dict[str, int] = {}

    # ---- errors ------------------------------------------------------------------------------
    def fail(self, message: str, where: Node | int | None, code: str) -> NoReturn:
        line = _line(where) if isinstance(where, Node) else where
        raise LensFileError(message, file=self.file, line=line, code=code)

    def line_of(self, path: str) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            trimmed = _LAST_PART.sub("", path)
            path = trimmed if trimmed != path else ""
        return self.lines.get("")

    # ---- YAML shapes -------------------------------------------------------------------------
    def compose(self) -> Node:
        try:
            self.loader = _Loader(self.text)
            node = self.loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            self.yaml_error(exc)
        except yaml.YAMLError as exc:
            position = getattr(exc, "position", None)
            line = self.text.count("\n", 0, position) + 1 if isinstance(position, int) else None
            self.fail(f"invalid YAML: {str(exc).splitlines()[0]}", line, "yaml_syntax")
        finally:
            if self.loader is not None:
                self.loader.dispose()
        if node is None:
            self.fail("the lens file is empty", None, "not_a_map")
        return node

    def yaml_error(self, exc: yaml.MarkedYAMLError) -> NoReturn:
        mark = exc.problem_mark or exc.context_mark
        parts = [p for p in (exc.context, exc.problem) if p]
        message = "; ".join(parts) if parts else str(exc)
        self.fail(f"invalid YAML: {message}", None if mark is None else mark.line + 1, "yaml_syntax")

    def mapping(self, node: Node, path: str, what: str) -> _Pairs:
        if not isinstance(node, MappingNode) or node.tag != _MAP:
            self.fail(f"{what} must be a mapping", node, "not_a_map" if not path else "bad_value")
        pairs: _Pairs = {}
        for key, value in node.value:
            if not isinstance(key, ScalarNode):
                self.fail(f"keys of {what} must be plain text", key, "bad_value")
            if key.value in pairs:
                self.fail(
                    f"duplicate key {key.value!r} (first on line {_line(pairs[key.value][0])})",
                    key,
                    "duplicate_key",
                )
            pairs[key.value] = (key, value)
            self.lines[f"{path}.{key.value}" if path else key.value] = _line(key)
        return pairs

    def text_value(self, node: Node, what: str) -> str:
        if isinstance(node, ScalarNode) and node.tag in _TEXT_TAGS:
            return str(node.value)
        self.fail(f"{what} must be text", node, "bad_value")

    def construct(self, node: Node) -> Any:
        assert self.loader is not None, "construct() follows compose()"
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.MarkedYAMLError as exc:
            self.yaml_error(exc)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
            self.fail(f"invalid YAML value: {exc}", node, "yaml_syntax")

    def scalar(self, node: Node, what: str) -> Any:
        if not isinstance(node, ScalarNode):
            self.fail(f"{what} must be a single value, not a list or mapping", node, "bad_value")
        return node.value if node.tag == _TIMESTAMP else self.construct(node)

    def value(self, node: Node, what: str) -> Any:
        """A field value: a scalar, or a list of scalars (one level)."""
        if isinstance(node, SequenceNode) and node.tag == _SEQ:
            return [self.scalar(item, f"an element of {what}") for item in node.value]
        return self.scalar(node, what)

    # ---- schema references -------------------------------------------------------------------
    def schema_ref(self, node: Node, path: str) -> SchemaId:
        self.lines[path] = _line(node)
        if isinstance(node, SequenceNode):
            items = node.value
            if len(items) != 2 or not all(isinstance(i, ScalarNode) for i in items):
                self.fail("a schema id is written [<author hex>, <log_id>]", node, "bad_schema_id")
            return self.parse_schema_id(f"{items[0].value}:{items[1].value}", node)
        text = self.text_value(node, "a schema reference")
        if _ID_LIKE(text):
            return self.parse_schema_id(text, node)
        if self.resolve_schema is None:
            self.fail(
                f"schema {text!r} is named, but no schema names are known here: "
                "write it as <author hex>:<log_id>",
                node,
                "unresolved_schema",
            )
        try:
            return self.resolve_schema(text)
        except Exception as exc:  # the resolver is the caller's: any failure means "unknown"
            self.fail(f"cannot resolve schema {text!r}: {exc}", node, "unresolved_schema")

    def parse_schema_id(self, text: str, node: Node) -> SchemaId:
        try:
            return SchemaId.parse(text)
        except MessageError as exc:
            self.fail(exc.message, node, exc.code)

    # ---- the three kinds ---------------------------------------------------------------------
    def parse(self) -> SchemaMeta | SchemaMigration | SchemaRevert:
        root = self.compose()
        self.lines[""] = _line(root)
        pairs = self.mapping(root, "", "a lens file")
        if "kind" not in pairs:
            self.fail(
                "the key 'kind' is required (schema-meta, schema-migration or schema-revert)",
                root,
                "bad_kind",
            )
        kind_node = pairs["kind"][1]
        kind = kind_node.value if isinstance(kind_node, ScalarNode) else None
        if kind not in SCHEMA_KINDS:
            self.fail(
                f"kind {kind!r} cannot be written in a lens file: it holds one of "
                "schema-meta, schema-migration, schema-revert",
                kind_node,
                "bad_kind",
            )
        if "spec" in pairs:
            spec_node = pairs["spec"][1]
            spec = self.construct(spec_node) if isinstance(spec_node, ScalarNode) else None
            if type(spec) is not int or spec != SPEC_VERSION:
                self.fail(f"spec must be 1, got {spec!r}", spec_node, "bad_spec")
        allowed = _KIND_KEYS[kind]
        for key, (key_node, _) in pairs.items():
            if key not in allowed:
                self.fail(f"unknown key {key!r} in a {kind} lens file", key_node, "unknown_key")
        if kind == "schema-meta":
            msg: SchemaMeta | SchemaMigration | SchemaRevert = self.meta(root, pairs)
        elif kind == "schema-migration":
            msg = self.migration(root, pairs)
        else:
            msg = SchemaRevert(self.scalar(self.required(root, pairs, "target"), "target"))
        try:
            checked = decode_message(encode_message(msg))
        except MessageError as exc:
            self.fail(exc.message, self.line_of(exc.path), exc.code)
        return cast("SchemaMeta | SchemaMigration | SchemaRevert", checked)

    def required(self, owner: Node, pairs: _Pairs, key: str) -> Node:
        if key not in pairs:
            self.fail(f"the key {key!r} is required", owner, "missing_key")
        return pairs[key][1]

    def meta(self, root: Node, pairs: _Pairs) -> SchemaMeta:
        name = self.text_value(self.required(root, pairs, "name"), "name")
        texts = {
            key.replace("-", "_"): self.text_value(pairs[key][1], key)
            for key in SCHEMA_META_TEXT_KEYS
            if key in pairs
        }
        dependencies: tuple[SchemaId, ...] = ()
        if "dependencies" in pairs:
            node = pairs["dependencies"][1]
            if not isinstance(node, SequenceNode):
                self.fail("dependencies must be a list of schemas", node, "bad_value")
            dependencies = tuple(self.schema_ref(d, f"dependencies[{i}]") for i, d in enumerate(node.value))
        return SchemaMeta(name, dependencies=dependencies, **texts)

    def migration(self, root: Node, pairs: _Pairs) -> SchemaMigration:
        node = self.required(root, pairs, "fields")
        if not isinstance(node, SequenceNode) or not node.value:
            self.fail("fields must be a non-empty list of field changes", node, "bad_value")
        return SchemaMigration(tuple(self.change(item, f"fields[{i}]") for i, item in enumerate(node.value)))

    def change(self, node: Node, path: str) -> FieldChange:
        self.lines[path] = _line(node)
        if not isinstance(node, MappingNode):
            self.fail(
                "a field change is a mapping: '- <field>:' (or '- name: <field>') followed by 'action: ...'",
                node,
                "bad_field_change",
            )
        pairs = self.mapping(node, path, "a field change")
        name = self.change_name(node, pairs, path)
        kwargs: dict[str, Any] = {}
        for key in ("action", "type", "validation", "to"):
            if key in pairs and (key != "to" or not self.names_field(pairs)):
                kwargs[key] = self.text_value(pairs[key][1], key)
        if "action" not in kwargs:
            self.fail(
                f"field change {name!r} needs an 'action' (create, update, rename or remove)", node, "missing_key"
            )
        if "default" in pairs:
            kwargs["default"] = self.value(pairs["default"][1], "default")
            kwargs["has_default"] = True
        if "cascade" in pairs:
            kwargs["cascade"] = self.scalar(pairs["cascade"][1], "cascade")
        if "schema" in pairs:
            kwargs["schema"] = self.schema_ref(pairs["schema"][1], f"{path}.schema")
        return FieldChange(name, **kwargs)

    @staticmethod
    def names_field(pairs: _Pairs) -> bool:
        """Whether ``to`` is the name of the field (``- to:``, no value) rather than a rename's new
        name: a field may be called ``to``."""
        return "to" in pairs and pairs["to"][1].tag == _NULL and not ("name" in pairs and pairs["name"][1].tag != _NULL)

    def change_name(self, node: Node, pairs: _Pairs, path: str) -> str:
        """The field's name: ``name: <field>``, or the one extra key with no value (``- <field>:``)."""
        if "name" in pairs and pairs["name"][1].tag != _NULL:
            for key, (key_node, _) in pairs.items():
                if key != "name" and key not in _CHANGE_KEYS:
                    self.fail(f"unknown key {key!r} in a field change", key_node, "unknown_key")
            return self.text_value(pairs["name"][1], "name")
        keys = [k for k in _CHANGE_KEYS if k != "to" or not self.names_field(pairs)]
        extras = [
            (key, key_node, value_node)
            for key, (key_node, value_node) in pairs.items()
            if key not in keys
        ]
        named = [extra for extra in extras if extra[2].tag == _NULL]
        if len(named) > 1:
            self.fail(
                f"a field change names one field, but both {named[0][0]!r} and {named[1][0]!r} have no value",
                named[1][1],
                "bad_field_change",
            )
        for key, key_node, value_node in extras:
            if value_node.tag != _NULL:
                hint = "" if named else f" (a field named by its key takes no value: '- {key}:')"
                self.fail(f"unknown key {key!r} in a field change{hint}", key_node, "unknown_key")
        if not named:
            self.fail(
                "the field change does not name its field ('- <field>:' or 'name: <field>')",
                node,
                "missing_key",
            )
        key, key_node, _ = named[0]
        self.lines[f"{path}.name"] = _line(key_node)
        return key


def parse_lens_file(
    text: str, *, file: str, resolve_schema: SchemaResolver | None = None
) -> SchemaMeta | SchemaMigration | SchemaRevert:
    """Turn the text of a lens file into the schema message it describes (FORMAT.md section 4).

    Args:
        text: the file's content.
        file: the file's path, as it should appear in errors.
        resolve_schema: maps a schema *name* used as a relation target or dependency to its
            schema id (e.g. through the registry or the local key store). When None, only
            ``<author hex>:<log_id>`` and ``[<author hex>, <log_id>]`` references are accepted.

    Returns:
        The message, exactly as :func:`~lakehouse.core.messages.decode_message` would return it
        for its encoding.

    Raises:
        LensFileError: naming ``file`` and the 1-based line of the offending key or item, with a
            ``code`` (see the module docstring): invalid YAML, a missing or unknown ``kind``, an
            unknown or duplicate key, a malformed field change, a schema reference that does not
            resolve, or anything the message decoder refuses.

    Example:
        >>> parse_lens_file("kind: schema-revert\\ntarget: 2\\n", file="lenses/slothmail/004.yaml")
        SchemaRevert(target=2, kind='schema-revert')
    """
    return _LensFileParser(text, file, resolve_schema).parse()

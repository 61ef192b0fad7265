"""Schema logs as silver stores them: their messages split from what the log rejects, and the
rows of ``silver.schema_versions`` and ``silver.schema_fields`` (SEMANTICS.md section 2, notes 5-7).

One copy, used by the silver pipeline and by the reference model (:mod:`lakehouse.core.reference`):
a schema log's accepted entries become the ``(seq, message)`` pairs and ``seq -> reason`` map that
:func:`lakehouse.core.schemas.build_versions` takes, and its versions become rows whose values
(lenses, defaults) are canonical JSON text.

Pure: no Spark, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lakehouse.core.lenses import Lens
from lakehouse.core.messages import Message, SchemaId, SchemaMeta, SchemaMigration, SchemaRevert
from lakehouse.core.schemas import SchemaMessage, SchemaVersions, build_versions
from lakehouse.core.statuses import decode

SchemaLog = tuple[list[tuple[int, SchemaMessage]], dict[int, str]]
"""A schema log as :func:`build_versions` takes it: ``(seq, message)`` of its schema messages, in
seq order, and ``seq -> reason code`` of its other accepted entries (rejected versions, note 7)."""


@dataclass(frozen=True)
class SchemaVersionRow:
    """One row of ``silver.schema_versions``: one version of one schema (SEMANTICS.md section 2).

    ``lens`` is a JSON array of the visible fields (name, type, validation, default, schema,
    cascade); the other columns are those of :class:`lakehouse.core.schemas.SchemaVersion`.
    """

    schema: str
    version: int
    name: str
    kind: str | None
    status: str
    reason_code: str | None
    reason: str | None
    target: int | None
    parent: int | None
    abandoned: bool
    abandoned_by: int | None
    has_gold_table: bool
    lens: str


@dataclass(frozen=True)
class SchemaFieldRow:
    """One row of ``silver.schema_fields``, the append-only field history (SEMANTICS.md section 2).

    ``default_value`` is the canonical default as JSON text (bytes as hex, timestamps RFC 3339);
    ``renamed_to`` is a ``rename``'s new name (``name`` the old one), else None.
    """

    schema: str
    version: int
    position: int
    name: str
    action: str
    type: str
    validation: str | None
    default_value: str
    relation_schema: str | None
    cascade: bool
    renamed_to: str | None = None


def split_schema_log(entries: Iterable[tuple[int, Message | None, str | None]]) -> SchemaLog:
    """A schema log's accepted entries ``(seq, message or None, reason code when it did not
    decode)``, in seq order, as :data:`SchemaLog`: an undecodable entry is rejected with its code
    (``bad_message`` when it has none), an instance message with ``wrong_log`` (note 5)."""
    messages: list[tuple[int, SchemaMessage]] = []
    rejected: dict[int, str] = {}
    for seq, message, code in entries:
        if isinstance(message, (SchemaMeta, SchemaMigration, SchemaRevert)):
            messages.append((seq, message))
        else:
            rejected[seq] = code or ("wrong_log" if message is not None else "bad_message")
    return messages, rejected


def schema_logs(rows: Iterable[Any]) -> dict[SchemaId, SchemaLog]:
    """Each schema log of the accepted entries ``rows`` (read by column name, as a mapping or a
    Spark row: ``author`` hex, ``log_id``, ``seq_num``, ``payload`` bytes; any order), its payloads
    decoded (:func:`split_schema_log`)."""
    by_log: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    for r in rows:
        by_log.setdefault((r["author"], int(r["log_id"])), []).append((int(r["seq_num"]), bytes(r["payload"])))
    result = {}
    for (author, log_id), entries in by_log.items():
        decoded = ((seq, d.message, d.code) for seq, d in ((seq, decode(payload)) for seq, payload in sorted(entries)))
        result[SchemaId(bytes.fromhex(author), log_id)] = split_schema_log(decoded)
    return result


def build_schemas(rows: Iterable[Any]) -> dict[SchemaId, SchemaVersions]:
    """The versions of every schema log in the accepted entries ``rows`` (:func:`schema_logs`)."""
    return {sid: build_versions(messages, rejected=rejected) for sid, (messages, rejected) in schema_logs(rows).items()}


def jsonable(value: Any) -> Any:
    """A canonical value as JSON data: bytes as hex, timestamps as RFC 3339 text, lists element-wise."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    return value


def lens_json(lens: Lens) -> str:
    """A lens as a JSON array of its fields (name, type, validation, default, schema, cascade, and
    ``key``, the field's identity, where a rename made it differ from the name)."""
    return json.dumps([
        {"name": f.name, "type": str(f.type), "validation": f.validation, "default": jsonable(f.default),
         "schema": str(f.schema) if f.schema else None, "cascade": f.cascade,
         **({"key": f.key} if f.key != f.name else {})}
        for f in lens.fields
    ])


def version_rows(schemas: Mapping[SchemaId, SchemaVersions]) -> list[SchemaVersionRow]:
    """The ``silver.schema_versions`` rows of ``schemas``, by schema then version."""
    return [
        SchemaVersionRow(schema=str(sid), version=v.version, name=v.meta.name, kind=v.kind, status=v.status,
                         reason_code=v.reason, reason=v.message, target=v.target, parent=v.parent,
                         abandoned=v.abandoned, abandoned_by=v.abandoned_by, has_gold_table=v.has_gold_table,
                         lens=lens_json(v.lens))
        for sid, sv in sorted(schemas.items())
        for v in sv
    ]


def field_rows(schemas: Mapping[SchemaId, SchemaVersions]) -> list[SchemaFieldRow]:
    """The ``silver.schema_fields`` rows of ``schemas``, by schema, then version and position."""
    return [
        SchemaFieldRow(schema=str(sid), version=f.version, position=f.position, name=f.name, action=f.action,
                       type=f.type, validation=f.validation, default_value=json.dumps(jsonable(f.default)),
                       relation_schema=str(f.schema) if f.schema else None, cascade=f.cascade, renamed_to=f.to)
        for sid, sv in sorted(schemas.items())
        for f in sv.field_history
    ]


def schema_message_status(sv: SchemaVersions, version: int) -> tuple[str, str | None, str | None]:
    """Status, reason code and reason of the schema message at ``version`` (note 6)."""
    v = sv[version]
    if v.status in ("invalid", "ignored_revert", "rejected"):
        return "rejected", v.reason, v.message
    if v.abandoned:
        return "ignored", "abandoned", f"abandoned by the revert at version {v.abandoned_by}"
    return "applied", None, None

"""Publishing signed entries to the landing folder (the seeds' ``panda`` tool).

A :class:`Publisher` signs messages with one key of the :class:`~lakehouse.publish.keys.KeyStore`
and appends ``{"entry", "payload"}`` lines (FORMAT.md section 2) to a new landing file. It keeps,
beside the key, the key's log state (``NAME.state.json``): every log's entry hashes (for
backlinks and skiplinks), which log holds which schema or which schema's instances, the schema
messages it published (to know each schema's lens), and the instances it created.

Everything published in one ``with Publisher(...)`` block lands together or not at all:
messages are checked first (unknown schema, field not in the lens, invalid migration: nothing is
published), and on exit the landing file is staged, the state committed, then the landing file
renamed into place. A crash between the two renames is finished by the next publisher of that key.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from lakehouse.core import entries as E
from lakehouse.core import lenses as L
from lakehouse.core import schemas as S
from lakehouse.core.messages import (
    Create,
    Delete,
    Message,
    SchemaId,
    SchemaMeta,
    SchemaMigration,
    SchemaRevert,
    Update,
    VersionedSchema,
    decode_message,
    encode_message,
)
from lakehouse.errors import LakehouseError, MessageError, PublishError
from lakehouse.publish.keys import Key, KeyStore

STATE_VERSION = 1


@dataclass
class _Log:
    """One log of the key: its purpose and the hashes of its entries (seq 1..n)."""

    log_id: int
    purpose: str  # "schema" | "instance"
    hashes: list[str]
    schema: str | None = None  # instance logs: the schema id they write
    name: str | None = None  # schema logs: the schema's name
    messages: list[str] | None = None  # schema logs: payload hex of every schema message
    instances: set[str] | None = None  # instance logs: instance ids created here

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"purpose": self.purpose, "hashes": self.hashes}
        if self.schema is not None:
            data["schema"] = self.schema
        if self.name is not None:
            data["name"] = self.name
        if self.messages is not None:
            data["messages"] = self.messages
        if self.instances is not None:
            data["instances"] = sorted(self.instances)
        return data

    @classmethod
    def from_json(cls, log_id: int, data: Mapping[str, Any]) -> _Log:
        return cls(
            log_id=log_id,
            purpose=str(data["purpose"]),
            hashes=list(data["hashes"]),
            schema=data.get("schema"),
            name=data.get("name"),
            messages=list(data["messages"]) if "messages" in data else None,
            instances=set(data["instances"]) if "instances" in data else None,
        )


class KeyState:
    """The publishing state of one key, loaded from and saved to ``NAME.state.json``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.logs: dict[int, _Log] = {}
        self.landing_committed: list[str] = []
        if path.exists():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                self.logs = {int(k): _Log.from_json(int(k), v) for k, v in data["logs"].items()}
                self.landing_committed = list(data.get("landing_committed", []))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise PublishError(f"{path}: damaged publisher state: {exc}", code="bad_state") from None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "logs": {str(k): v.to_json() for k, v in sorted(self.logs.items())},
            "landing_committed": self.landing_committed[-20:],
        }

    def schema_logs(self) -> dict[str, _Log]:
        """Schema name -> its schema log (the latest log wins where a name repeats)."""
        return {log.name: log for log in self.logs.values() if log.purpose == "schema" and log.name}

    def instance_log(self, schema: SchemaId) -> _Log | None:
        for log in self.logs.values():
            if log.purpose == "instance" and log.schema == str(schema):
                return log
        return None

    def next_log_id(self) -> int:
        return max(self.logs, default=-1) + 1


def _schema_versions(messages_hex: list[str]) -> S.SchemaVersions:
    decoded: list[tuple[int, Any]] = []
    for seq, payload in enumerate(messages_hex, start=1):
        decoded.append((seq, decode_message(bytes.fromhex(payload))))
    return S.build_versions(decoded)


class Publisher:
    """Signs and lands messages for one key.

    Args:
        store: the key store.
        key: the key's name.
        landing: the landing folder (created if missing).
        create_key: create the key when it does not exist (else PublishError).

    Use as a context manager: what was published inside lands on a clean exit; on an exception
    nothing lands and the state is unchanged.
    """

    def __init__(self, store: KeyStore, key: str, landing: str | os.PathLike[str], *,
                 create_key: bool = False) -> None:
        self.store = store
        if create_key:
            self.key, self.key_created = store.get_or_create(key)
        else:
            self.key, self.key_created = store.get(key), False
        self.landing = Path(landing)
        self.state = KeyState(store.folder / f"{self.key.name}.state.json")
        self._lines: list[str] = []
        self.last_landed: Path | None = None
        self._recover()

    # -- landing ---------------------------------------------------------------------------
    def _recover(self) -> None:
        """Finish or drop landing files staged by a run that stopped before renaming them."""
        if not self.landing.is_dir():
            return
        prefix = f".{self.key.author[:16]}-"
        for staged in self.landing.glob(prefix + "*.jsonl.staged"):
            final = staged.name[1: -len(".staged")]
            if final in self.state.landing_committed:
                os.replace(staged, self.landing / final)
            else:
                staged.unlink()

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.flush()
        else:
            self.discard()

    def discard(self) -> None:
        """Forget what was published since the last flush (nothing of it lands)."""
        self._lines.clear()
        self.state = KeyState(self.state.path)

    def flush(self) -> Path | None:
        """Land what was published since the last flush, atomically.

        Returns:
            The landing file written, or None when there was nothing to land.
        """
        if not self._lines:
            return None
        self.landing.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        final = f"{self.key.author[:16]}-{stamp}-{uuid.uuid4().hex[:8]}.jsonl"
        staged = self.landing / f".{final}.staged"
        with open(staged, "w", encoding="utf-8") as handle:
            handle.write("".join(self._lines))
            handle.flush()
            os.fsync(handle.fileno())
        self.state.landing_committed.append(final)
        tmp_state = self.state.path.with_suffix(".tmp")
        with open(tmp_state, "w", encoding="utf-8") as handle:
            json.dump(self.state.to_json(), handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_state, self.state.path)
        os.replace(staged, self.landing / final)
        self._lines.clear()
        self.last_landed = self.landing / final
        return self.last_landed

    # -- signing ---------------------------------------------------------------------------
    def _append(self, log: _Log, message: Message) -> tuple[int, str]:
        payload = encode_message(message)
        seq = len(log.hashes) + 1
        backlink = bytes.fromhex(log.hashes[-1]) if seq > 1 else None
        skiplink = bytes.fromhex(log.hashes[E.lipmaa(seq) - 1]) if E.skiplink_required(seq) else None
        entry = E.sign_entry(self.key.signing_key, log_id=log.log_id, seq_num=seq, payload=payload,
                             backlink=backlink, skiplink=skiplink)
        entry_hash = E.yasmf_hash(entry).hex()
        log.hashes.append(entry_hash)
        if log.messages is not None:
            log.messages.append(payload.hex())
        self._lines.append(json.dumps({"entry": entry.hex(), "payload": payload.hex()}) + "\n")
        return seq, entry_hash

    # -- schemas ---------------------------------------------------------------------------
    def resolve_schema(self, schema: str) -> SchemaId:
        """A schema id from ``<author hex>:<log_id>`` or the name of a schema of any stored key.

        Raises:
            PublishError: unknown name (lists the known ones), or the same name on two keys.
        """
        if ":" in schema:
            try:
                return SchemaId.parse(schema)
            except MessageError as exc:
                raise PublishError(str(exc), code="bad_schema_id") from None
        found = []
        for key in self.store.keys():
            state = self.state if key.name == self.key.name else KeyState(
                self.store.folder / f"{key.name}.state.json")
            log = state.schema_logs().get(schema)
            if log is not None:
                found.append(SchemaId(key.public_key, log.log_id))
        if not found:
            known = sorted({n for k in self.store.keys() for n in self._state_of(k).schema_logs()})
            hint = f" (known: {', '.join(known)})" if known else ""
            raise PublishError(f"unknown schema {schema!r}{hint}; give a schema id <author hex>:<log_id> "
                               "or publish it first with `lakehouse schema init`", code="unknown_schema")
        if len(found) > 1:
            raise PublishError(f"schema name {schema!r} is used by several keys: "
                               f"{', '.join(map(str, found))}; give the schema id", code="ambiguous_schema")
        return found[0]

    def _state_of(self, key: Key) -> KeyState:
        if key.name == self.key.name:
            return self.state
        return KeyState(self.store.folder / f"{key.name}.state.json")

    def schema_versions(self, schema: SchemaId) -> S.SchemaVersions | None:
        """The versions of a schema published from this key store, or None if it is foreign."""
        key = self.store.find_author(schema.author)
        if key is None:
            return None
        log = self._state_of(key).logs.get(schema.log_id)
        if log is None or log.purpose != "schema" or not log.messages:
            return None
        return _schema_versions(log.messages)

    def _own_schema_log(self, schema: str) -> _Log:
        schema_id = self.resolve_schema(schema)
        if schema_id.author != self.key.public_key:
            raise PublishError(f"schema {schema} belongs to author {schema_id.author.hex()}, not to key "
                               f"{self.key.name!r}; only a schema's author may change it", code="not_author")
        log = self.state.logs.get(schema_id.log_id)
        if log is None or log.purpose != "schema":
            raise PublishError(f"{schema_id} is not a schema log of key {self.key.name!r}", code="unknown_schema")
        return log

    def schema_init(self, meta: SchemaMeta) -> SchemaId:
        """Publish ``meta`` as seq 1 of a new schema log.

        Raises:
            PublishError: this key already has a schema of that name.
        """
        if meta.name in self.state.schema_logs():
            raise PublishError(f"key {self.key.name!r} already has a schema named {meta.name!r}",
                               code="schema_exists")
        log = _Log(self.state.next_log_id(), "schema", [], name=meta.name, messages=[])
        self.state.logs[log.log_id] = log
        self._append(log, meta)
        return SchemaId(self.key.public_key, log.log_id)

    def schema_message(self, schema: str, message: SchemaMeta | SchemaMigration | SchemaRevert) -> int:
        """Publish the next schema message on one of this key's schema logs.

        Returns:
            The new version (the entry's seq_num).

        Raises:
            PublishError: not this key's schema, or the message would be an invalid migration or
                an ignored revert (the reason is given); nothing is published.
        """
        log = self._own_schema_log(schema)
        assert log.messages is not None
        candidate = _schema_versions([*log.messages, encode_message(message).hex()])
        version = len(log.messages) + 1
        info = candidate[version]
        if info.status in ("invalid", "ignored_revert", "rejected"):
            raise PublishError(f"{schema} version {version} would be {info.status.replace('_', ' ')}: "
                               f"{info.message}", code=info.reason or info.status)
        self._append(log, message)
        return version

    # -- instances -------------------------------------------------------------------------
    def _current(self, schema_id: SchemaId, version: int | None) -> tuple[int, L.Lens | None]:
        versions = self.schema_versions(schema_id)
        if versions is None:
            if version is None:
                raise PublishError(f"schema {schema_id} was not published from this key store, so its "
                                   "lens is unknown: give --version", code="unknown_lens")
            return version, None
        version = versions.current_version if version is None else version
        try:
            info = versions[version]
        except S.SchemaLogError:
            raise PublishError(f"schema {schema_id} has no version {version} "
                               f"(current: {versions.current_version})", code="unknown_version") from None
        if info.abandoned:
            raise PublishError(f"schema {schema_id} version {version} is abandoned by a revert",
                               code="abandoned_version")
        return version, info.lens

    @staticmethod
    def _check(lens: L.Lens | None, fields: Mapping[str, Any]) -> None:
        if lens is None:
            return
        try:
            L.check_fields(lens, fields)
        except LakehouseError as exc:
            raise PublishError(str(exc), code=exc.code) from None

    def _instance_log(self, schema_id: SchemaId, *, create: bool) -> _Log:
        log = self.state.instance_log(schema_id)
        if log is None:
            if not create:
                raise PublishError(f"key {self.key.name!r} has no instances of schema {schema_id}",
                                   code="not_author")
            log = _Log(self.state.next_log_id(), "instance", [], schema=str(schema_id), instances=set())
            self.state.logs[log.log_id] = log
        return log

    def _own_instance(self, schema_id: SchemaId, instance: str) -> _Log:
        log = self._instance_log(schema_id, create=False)
        assert log.instances is not None
        if instance not in log.instances:
            raise PublishError(f"instance {instance} is not a {schema_id} instance created by key "
                               f"{self.key.name!r}; only an instance's author may change it", code="not_author")
        return log

    def create(self, schema: str, fields: Mapping[str, Any], *, version: int | None = None) -> str:
        """Publish a ``create``; returns the instance id (68 hex). Raises PublishError."""
        schema_id = self.resolve_schema(schema)
        version, lens = self._current(schema_id, version)
        self._check(lens, fields)
        log = self._instance_log(schema_id, create=True)
        vs = VersionedSchema(schema_id.author, schema_id.log_id, version)
        _, instance = self._append(log, Create(vs, dict(fields)))
        assert log.instances is not None
        log.instances.add(instance)
        return instance

    def update(self, schema: str, instance: str, fields: Mapping[str, Any], *,
               version: int | None = None) -> str:
        """Publish an ``update`` of one of this key's instances; returns the entry hash."""
        schema_id = self.resolve_schema(schema)
        if not fields:
            raise PublishError("an update needs at least one field", code="no_fields")
        version, lens = self._current(schema_id, version)
        self._check(lens, fields)
        log = self._own_instance(schema_id, instance)
        vs = VersionedSchema(schema_id.author, schema_id.log_id, version)
        return self._append(log, Update(vs, bytes.fromhex(instance), dict(fields)))[1]

    def delete(self, schema: str, instance: str, *, version: int | None = None) -> str:
        """Publish a ``delete`` of one of this key's instances; returns the entry hash."""
        schema_id = self.resolve_schema(schema)
        version, _ = self._current(schema_id, version)
        log = self._own_instance(schema_id, instance)
        vs = VersionedSchema(schema_id.author, schema_id.log_id, version)
        return self._append(log, Delete(bytes.fromhex(instance), vs))[1]

    def field_types(self, schema: str, version: int | None = None) -> dict[str, L.FieldType] | None:
        """Field name -> type in the lens a publish would use, or None where the lens is unknown."""
        schema_id = self.resolve_schema(schema)
        _, lens = self._current(schema_id, version) if version is not None or \
            self.schema_versions(schema_id) is not None else (0, None)
        if lens is None:
            return None
        return {f.name: f.type for f in lens.fields}

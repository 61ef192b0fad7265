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

Several publishers of one key (two processes, or two objects) take turns: reading the state with
recovery, and each flush, hold the key's lock (``NAME.lock``, an ``fcntl.flock``), and a flush
that finds the state changed since its publisher read it lands nothing (``concurrent_publish``)
rather than fork a log.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from nacl.signing import SigningKey

from lakehouse.config import landing_folder
from lakehouse.core import entries as E
from lakehouse.core import lenses as L
from lakehouse.core import schemas as S
from lakehouse.core.landing import check_line
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
from lakehouse.errors import LakehouseError, MessageError, PublishError, SchemaLogError
from lakehouse.lock import flocked
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
    # instance logs: instance id created here -> the version its create named (None: not recorded)
    instances: dict[str, int | None] | None = None
    deleted: set[str] | None = None  # instance logs: instance ids deleted here

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"purpose": self.purpose, "hashes": self.hashes}
        if self.schema is not None:
            data["schema"] = self.schema
        if self.name is not None:
            data["name"] = self.name
        if self.messages is not None:
            data["messages"] = self.messages
        if self.instances is not None:
            data["instances"] = dict(sorted(self.instances.items()))
        if self.deleted:
            data["deleted"] = sorted(self.deleted)
        return data

    @classmethod
    def from_json(cls, log_id: int, data: Mapping[str, Any]) -> _Log:
        instances = data.get("instances")
        if isinstance(instances, list):  # written before create versions were recorded
            instances = dict.fromkeys(instances)
        return cls(
            log_id=log_id,
            purpose=str(data["purpose"]),
            hashes=list(data["hashes"]),
            schema=data.get("schema"),
            name=data.get("name"),
            messages=list(data["messages"]) if "messages" in data else None,
            instances=dict(instances) if instances is not None else None,
            deleted=set(data.get("deleted", ())) if data.get("purpose") == "instance" else None,
        )


class KeyState:
    """The publishing state of one key, loaded from and saved to ``NAME.state.json``."""

    def __init__(self, path: Path, author: str | None = None) -> None:
        self.path = path
        self.author = author
        self.logs: dict[int, _Log] = {}
        self.landing_committed: list[str] = []
        self.loaded: bytes | None = None  # the file's bytes as read: None when there was none
        if path.exists():
            try:
                self.loaded = path.read_bytes()
                data = json.loads(self.loaded.decode("utf-8"))
                self.logs = {int(k): _Log.from_json(int(k), v) for k, v in data["logs"].items()}
                self.landing_committed = list(data.get("landing_committed", []))
                written_by = data.get("author")
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise PublishError(f"{path}: damaged publisher state: {exc}", code="bad_state") from None
            if author is not None and written_by not in (None, author):
                raise PublishError(f"{path}: holds the log tips of author {written_by}, not of this key's "
                                   f"author {author}", code="bad_state")

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            **({"author": self.author} if self.author is not None else {}),
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


def _encode(message: Message) -> bytes:
    """The payload of ``message``; a value the encoder refuses is a PublishError (same code)."""
    try:
        return encode_message(message)
    except MessageError as exc:
        raise PublishError(str(exc), code=exc.code) from None


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
        create_key: create the key when it does not exist (else PublishError). A new key is
            stored by the first :meth:`flush` (a clean exit), so a failed publish leaves no key.
        max_payload: the largest payload ingest accepts, in bytes (the setting ``max_payload``):
            a larger message is refused before it is signed.

    Attributes:
        key_created: the key is new: generated by this publisher (stored once it flushes).

    Use as a context manager: what was published inside lands on a clean exit; on an exception
    nothing lands and the state is unchanged.
    """

    def __init__(self, store: KeyStore, key: str, landing: str | os.PathLike[str], *,
                 create_key: bool = False, max_payload: int = E.DEFAULT_MAX_PAYLOAD) -> None:
        self.store = store
        self.max_payload = max_payload
        if create_key and not store.has(key):
            self.key, self.key_created = Key(key, SigningKey.generate()), True
        else:
            self.key, self.key_created = store.get(key), False
        self._key_pending = self.key_created  # generated, not stored yet
        self.landing = landing_folder(landing)
        self._lines: list[str] = []
        self.last_landed: Path | None = None
        with self._locked():
            self.state = KeyState(store.folder / f"{self.key.name}.state.json", self.key.author)
            self._recover()
        if self._key_pending and self.state.loaded is not None:
            raise PublishError(f"{self.state.path} exists but key {self.key.name!r} does not: it holds the "
                               "log tips of a key that was removed; move it away to create a new key of that "
                               "name",
                               code="bad_state")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the key's lock (waits for another publisher of the key to finish its turn)."""
        if self._key_pending or not self.store.folder.is_dir():  # a new key: no state, nothing staged
            yield
            return
        with flocked(self.store.folder / f"{self.key.name}.lock", mode=0o600):
            yield

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
        self.state = KeyState(self.state.path, self.key.author)

    def flush(self) -> Path | None:
        """Land what was published since the last flush, atomically.

        Returns:
            The landing file written, or None when there was nothing to land.
        """
        if self._key_pending:  # first the key, so that nothing lands that no stored key signed
            self.store.create(self.key.name, seed=bytes(self.key.signing_key))
            self._key_pending = False
        if not self._lines:
            return None
        with self._locked():
            return self._land()

    def _land(self) -> Path:
        path = self.state.path
        current = path.read_bytes() if path.exists() else None
        if current != self.state.loaded:
            raise PublishError(f"another publisher of key {self.key.name!r} landed entries since this one "
                               f"read its log tips ({path}); nothing was landed: publish again",
                               code="concurrent_publish")
        self.landing.mkdir(parents=True, exist_ok=True)
        now = time.time_ns()  # to the microsecond, so that one key's files sort in publish order
        seconds, micros = divmod(now // 1000, 1_000_000)
        stamp = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(seconds))}.{micros:06d}"
        final = f"{self.key.author[:16]}-{stamp}-{uuid.uuid4().hex[:8]}.jsonl"
        staged = self.landing / f".{final}.staged"
        with open(staged, "w", encoding="utf-8") as handle:
            handle.write("".join(self._lines))
            handle.flush()
            os.fsync(handle.fileno())
        self.state.landing_committed.append(final)
        data = json.dumps(self.state.to_json()).encode("utf-8")
        tmp_state = path.with_suffix(".tmp")
        with open(tmp_state, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_state, path)
        self.state.loaded = data
        os.replace(staged, self.landing / final)
        self._lines.clear()
        self.last_landed = self.landing / final
        return self.last_landed

    # -- signing ---------------------------------------------------------------------------
    def _append(self, log: _Log, message: Message) -> tuple[int, str]:
        """Sign ``message`` as the next entry of ``log`` and keep its landing line.

        Nothing that ingest would reject is signed: a line ingest rejects stays in the log as a
        gap that every later entry of the log waits behind for good. The payload's size is checked
        before signing, and the line itself by ingest's own check (:func:`check_line`).

        Raises:
            PublishError: ``payload_too_large``, or the code ingest's check gives the line.
        """
        payload = _encode(message)
        seq = len(log.hashes) + 1
        if len(payload) > self.max_payload:
            raise PublishError(f"the {message.kind} message would be a payload of {len(payload):,} bytes, over the "
                               f"{self.max_payload:,} bytes ingest accepts (setting max_payload): ingest would reject "
                               f"it, and every later entry of log {log.log_id} would wait behind it for good; nothing "
                               "published", code="payload_too_large")
        backlink = bytes.fromhex(log.hashes[-1]) if seq > 1 else None
        skiplink = bytes.fromhex(log.hashes[E.lipmaa(seq) - 1]) if E.skiplink_required(seq) else None
        entry = E.sign_entry(self.key.signing_key, log_id=log.log_id, seq_num=seq, payload=payload,
                             backlink=backlink, skiplink=skiplink)
        line = json.dumps({"entry": entry.hex(), "payload": payload.hex()})
        checked = check_line(line, max_payload=self.max_payload)
        if checked.code is not None:  # a defect of this publisher: never land it
            raise PublishError(f"the signed {message.kind} message would be rejected by ingest ({checked.code}: "
                               f"{checked.reason}); nothing published", code=checked.code)
        entry_hash = E.yasmf_hash(entry).hex()
        log.hashes.append(entry_hash)
        if log.messages is not None:
            log.messages.append(payload.hex())
        self._lines.append(line + "\n")
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
        names: set[str] = set()
        for key in self._keys():
            logs = self._state_of(key).schema_logs()
            names.update(logs)
            log = logs.get(schema)
            if log is not None:
                found.append(SchemaId(key.public_key, log.log_id))
        if not found:
            known = sorted(names)
            hint = f" (known: {', '.join(known)})" if known else ""
            raise PublishError(f"unknown schema {schema!r}{hint}; give a schema id <author hex>:<log_id> "
                               "or publish it first with `lakehouse schema init`", code="unknown_schema")
        if len(found) > 1:
            raise PublishError(f"schema name {schema!r} is used by several keys: "
                               f"{', '.join(map(str, found))}; give the schema id", code="ambiguous_schema")
        return found[0]

    def _keys(self) -> list[Key]:
        """The stored keys, and this publisher's own key while it waits to be stored."""
        stored = self.store.keys()
        if self._key_pending:
            stored.append(self.key)
        return stored

    def _state_of(self, key: Key) -> KeyState:
        if key.name == self.key.name:
            return self.state
        return KeyState(self.store.folder / f"{key.name}.state.json", key.author)

    def schema_versions(self, schema: SchemaId) -> S.SchemaVersions | None:
        """The versions of a schema published from this key store, or None if it is foreign."""
        key = self.key if schema.author == self.key.public_key else self.store.find_author(schema.author)
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
            PublishError: not this key's schema, or the message would be an invalid migration, an
                ignored revert (the reason is given) or a revert to the current version
                (``revert_to_current``); nothing is published.
        """
        log = self._own_schema_log(schema)
        assert log.messages is not None
        if isinstance(message, SchemaRevert) and message.target == len(log.messages):
            raise PublishError(f"{schema} is at version {message.target} already: a revert to it would abandon "
                               f"nothing and only add version {message.target + 1}, with the same lens and a new "
                               "gold table; nothing published", code="revert_to_current")
        candidate = _schema_versions([*log.messages, _encode(message).hex()])
        version = len(log.messages) + 1
        info = candidate[version]
        if info.status in ("invalid", "ignored_revert", "rejected"):
            what = {"invalid": "an invalid migration", "ignored_revert": "a revert silver ignores",
                    "rejected": "a rejected message"}[info.status]
            raise PublishError(f"{schema} version {version} would be {what} ({info.message}); nothing published",
                               code=info.reason or info.status)
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
        except SchemaLogError:
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

    def _own_instance(self, schema_id: SchemaId, instance: str, *, updating: bool) -> tuple[_Log, str]:
        """The instance log holding ``instance`` (a create of this key), and the id in lower case.

        Refuses what the pipeline would reject (docs/semantics-notes.md, instance checks): an
        instance that is not a create of this key's log for the schema, an instance already
        deleted, and an update of an instance whose create names a version a revert abandoned.
        """
        instance = instance.lower()
        log = self.state.instance_log(schema_id)
        if log is None or log.instances is None or instance not in log.instances:
            raise PublishError(f"instance {instance} is not an instance of schema {schema_id} created by key "
                               f"{self.key.name!r}: only the key that created an instance may update or "
                               "delete it", code="unknown_instance")
        if log.deleted and instance in log.deleted:
            raise PublishError(f"instance {instance} of schema {schema_id} is deleted already",
                               code="deleted_instance")
        created_at = log.instances[instance]
        if updating and created_at is not None:
            versions = self.schema_versions(schema_id)
            if versions is not None and created_at <= len(versions) and versions[created_at].abandoned:
                raise PublishError(f"instance {instance} was created at version {created_at} of schema "
                                   f"{schema_id}, which a revert abandoned: the create is ignored, so "
                                   "there is nothing to update", code="unknown_instance")
        return log, instance

    def create(self, schema: str, fields: Mapping[str, Any], *, version: int | None = None) -> str:
        """Publish a ``create``; returns the instance id (68 hex). Raises PublishError."""
        schema_id = self.resolve_schema(schema)
        version, lens = self._current(schema_id, version)
        self._check(lens, fields)
        log = self.state.instance_log(schema_id)
        if log is None:  # registered only once its first entry is signed
            log = _Log(self.state.next_log_id(), "instance", [], schema=str(schema_id), instances={},
                       deleted=set())
        vs = VersionedSchema(schema_id.author, schema_id.log_id, version)
        _, instance = self._append(log, Create(vs, dict(fields)))
        self.state.logs[log.log_id] = log
        assert log.instances is not None
        log.instances[instance] = version
        return instance

    def update(self, schema: str, instance: str, fields: Mapping[str, Any], *,
               version: int | None = None) -> str:
        """Publish an ``update`` of one of this key's instances; returns the entry hash."""
        schema_id = self.resolve_schema(schema)
        if not fields:
            raise PublishError("an update needs at least one field", code="no_fields")
        version, lens = self._current(schema_id, version)
        self._check(lens, fields)
        log, instance = self._own_instance(schema_id, instance, updating=True)
        vs = VersionedSchema(schema_id.author, schema_id.log_id, version)
        return self._append(log, Update(vs, bytes.fromhex(instance), dict(fields)))[1]

    def delete(self, schema: str, instance: str, *, version: int | None = None) -> str:
        """Publish a ``delete`` of one of this key's instances; returns the entry hash."""
        schema_id = self.resolve_schema(schema)
        version, _ = self._current(schema_id, version)
        log, instance = self._own_instance(schema_id, instance, updating=False)
        vs = VersionedSchema(schema_id.author, schema_id.log_id, version)
        entry_hash = self._append(log, Delete(bytes.fromhex(instance), vs))[1]
        if log.deleted is None:
            log.deleted = set()
        log.deleted.add(instance)
        return entry_hash

    def field_types(self, schema: str, version: int | None = None) -> dict[str, L.FieldType] | None:
        """Field name -> type in the lens a publish would use, or None where the lens is unknown."""
        schema_id = self.resolve_schema(schema)
        _, lens = self._current(schema_id, version) if version is not None or \
            self.schema_versions(schema_id) is not None else (0, None)
        if lens is None:
            return None
        return {f.name: f.type for f in lens.fields}

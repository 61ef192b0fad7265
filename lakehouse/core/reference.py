"""The reference model of SEMANTICS.md: every table's contents as a function of the landing lines.

The pipelines compute the lake incrementally, in the engine, batch by batch. This module computes
the same tables at once, in plain Python, from the whole set of landing lines ingested so far,
so that both can be compared on generated histories (``tests/histories.py``):

- ``bronze``: which lines are accepted (entry hash) and which rejected, with which reason
  (FORMAT.md section 2; :func:`lakehouse.core.landing.check_line` is the codec);
- ``silver.logs``: per log its purpose, accepted prefix, fork and pending entries (SEMANTICS.md
  section 1, notes 1-5 of ``docs/semantics-notes.md``);
- ``silver.messages``: per bronze entry its standing in its log and its message status
  (sections 1-3, notes 4-11);
- ``silver.schema_versions`` and ``silver.schema_fields`` (section 2);
- the gold tables of registered schemas (section 5, notes 14-16).

It is an oracle: the judgement of logs, log purposes, message statuses, instance states and
cascades are written here again, as directly as the notes state them, and do not use
:mod:`lakehouse.core.statuses` or :mod:`lakehouse.core.gold` (what the pipelines run). It shares
only the separately tested codecs: entries, messages, lenses and schema versions
(:func:`lakehouse.core.schemas.build_versions`, :func:`~lakehouse.core.schemas.project`).
Nothing depends on the order of the lines: the result is a function of their multiset (and, apart
from the per-line outcomes, of their set).

Reason codes (``silver.messages.reason_code``), besides the codecs' own:

======================= ====================================================================
code                    status and meaning
======================= ====================================================================
``waiting``             pending: an earlier seq of the log, the schema version named, or an
                        earlier message of the same instance waits (``waits_for`` says what for)
``fork``                rejected: the log forks at or before this seq (note 2)
``wrong_backlink``      rejected: the backlink differs from the accepted entry it points to
``wrong_skiplink``      rejected: the skiplink differs from the accepted entry it points to
``after_end_of_feed``   rejected: an accepted entry before it ended the log (note 3)
``no_log_purpose``      rejected: the log has no purpose yet at this message (notes 5-6)
``wrong_log``           rejected: the message does not fit the log's purpose (note 5)
``not_a_schema``        rejected: the schema named is a log that is not a schema log (note 9)
``unreachable_version`` rejected: the version named is past a fork or the end of feed of the
                        schema log: it can never arrive (note 9)
``abandoned``           ignored: a revert abandoned the version (notes 6 and 9)
``unknown_instance``    rejected: not a create earlier in this log (note 8)
``ignored_instance``    rejected: an update of an instance whose create was ignored (note 8)
``deleted_instance``    rejected: the instance was deleted (note 8)
======================= ====================================================================

Pure: no Spark, no I/O, no environment reads. Slow on purpose: obvious beats fast here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from lakehouse.core.entries import DEFAULT_MAX_PAYLOAD, Entry, lipmaa, skiplink_required
from lakehouse.core.landing import check_line
from lakehouse.core.lenses import Lens, check_fields
from lakehouse.core.messages import (
    Create,
    Delete,
    Message,
    SchemaId,
    SchemaMeta,
    SchemaMigration,
    SchemaRevert,
    Update,
    decode_message,
)
from lakehouse.core.registry import gold_table_name
from lakehouse.core.schemalog import (
    SchemaFieldRow,
    SchemaVersionRow,
    field_rows,
    split_schema_log,
    version_rows,
)
from lakehouse.core.schemas import SchemaVersions, build_versions, project
from lakehouse.errors import MessageError

__all__ = [
    "BronzeEntry",
    "BronzeLine",
    "Instance",
    "Line",
    "LogRow",
    "MessageRow",
    "Reference",
    "SchemaFieldRow",
    "SchemaVersionRow",
    "reference",
]

Line: TypeAlias = str | Mapping[str, Any]
"""A landing line: its raw text, or a JSON object (written as ``json.dumps`` would)."""
LogStatus = Literal["accepted", "pending", "rejected"]
Status = Literal["applied", "pending", "ignored", "rejected"]
LogKey: TypeAlias = tuple[str, int]
"""A log: (author hex, log_id)."""


# --------------------------------------------------------------------------------------------------
# Rows


@dataclass(frozen=True)
class BronzeLine:
    """What became of one landing line (``bronze.entries`` or ``bronze.rejected``).

    Attributes:
        raw: the line's text.
        entry_hash: hex hash of the entry bytes when the line held valid hex, else None.
        reason_code: None when accepted, else the rejection code (``not_json``, ``bad_hex``,
            ``bad_signature``, ...).
    """

    raw: str
    entry_hash: str | None
    reason_code: str | None

    @property
    def accepted(self) -> bool:
        """Whether the line's entry is in ``bronze.entries``."""
        return self.reason_code is None


@dataclass(frozen=True)
class BronzeEntry:
    """One row of ``bronze.entries``: an entry valid on its own, with its payload."""

    entry: Entry
    payload: bytes


@dataclass(frozen=True)
class LogRow:
    """One row of ``silver.logs`` (SEMANTICS.md section 1, notes 1-5).

    Attributes:
        author: 64 hex characters.
        log_id: the log's id.
        purpose: ``"schema"``, ``"instance"``, or None while no message fixed it.
        schema: for an instance log, the schema it writes (``<author hex>:<log_id>``), else None.
        first_seq: the seq of the message that fixed the purpose, else None.
        accepted_seq: length of the accepted prefix (0 when nothing is accepted).
        fork_seq: the seq where the log forks, else None.
        entries: distinct bronze entries of the log.
        pending: entries waiting for an earlier seq.
    """

    author: str
    log_id: int
    purpose: str | None
    schema: str | None
    first_seq: int | None
    accepted_seq: int
    fork_seq: int | None
    entries: int
    pending: int


@dataclass(frozen=True)
class MessageRow:
    """One row of ``silver.messages`` (without ``reason``, ``batch_id`` and ``run_id``).

    Attributes:
        entry_hash: 68 hex characters.
        author: 64 hex characters.
        log_id: the entry's log.
        seq_num: the entry's seq.
        log_status: the entry's standing in its log: accepted, pending or rejected (notes 1-3).
        status: applied, pending, ignored or rejected (section 7).
        reason_code: why it is not applied (see the module docstring), else None.
        waits_for: for pending entries: ``log <author>:<log_id> seq <n>`` or
            ``schema <author>:<log_id> version <v>``; else None.
        kind: the message kind, for accepted entries whose payload decodes; else None.
        schema: the schema named (``<author hex>:<log_id>``): a schema message's own log, an
            instance message's schema; else None.
        version: a schema message's seq, an instance message's version; else None.
        instance: the instance id (a create's own hash, else the one named); else None.
    """

    entry_hash: str
    author: str
    log_id: int
    seq_num: int
    log_status: LogStatus
    status: Status
    reason_code: str | None
    waits_for: str | None
    kind: str | None
    schema: str | None
    version: int | None
    instance: str | None


@dataclass(frozen=True)
class Instance:
    """An applied create and what its applied messages made of it (SEMANTICS.md section 5, note 14).

    Attributes:
        instance_id: the create's entry hash, 68 hex characters.
        author: the instance's author, 64 hex characters.
        schema: the schema of its log.
        writes: field identity (:attr:`lakehouse.core.lenses.LensField.key`) -> (version named by the
            latest applied write that set it, canonical value).
        version: the version named by the latest applied create or update.
        last_entry: that message's entry hash (hex).
        updates: applied updates.
        deleted: whether an applied delete names it.
        cascaded: whether a cascade removed it (note 15).
    """

    instance_id: str
    author: str
    schema: SchemaId
    writes: Mapping[str, tuple[int, Any]]
    version: int
    last_entry: str
    updates: int
    deleted: bool
    cascaded: bool

    @property
    def live(self) -> bool:
        """Whether the instance has rows in its schema's gold tables."""
        return not self.deleted and not self.cascaded


@dataclass(frozen=True)
class Reference:
    """Every table's expected contents for one set of landing lines (see :func:`reference`).

    Attributes:
        lines: one outcome per input line, in input order (the only order-dependent attribute).
        entries: ``bronze.entries``: entry hash (hex) -> entry.
        logs: ``silver.logs``, sorted by (author, log_id).
        messages: ``silver.messages``, one per bronze entry, sorted by (author, log_id, seq_num,
            entry_hash).
        schemas: the versions of every schema log.
        schema_versions: ``silver.schema_versions``, sorted by (schema, version).
        schema_fields: ``silver.schema_fields``, sorted by (schema, version, position).
        instances: every applied create, by instance id.
    """

    lines: tuple[BronzeLine, ...]
    entries: Mapping[str, BronzeEntry]
    logs: tuple[LogRow, ...]
    messages: tuple[MessageRow, ...]
    schemas: Mapping[SchemaId, SchemaVersions]
    schema_versions: tuple[SchemaVersionRow, ...]
    schema_fields: tuple[SchemaFieldRow, ...]
    instances: Mapping[str, Instance]
    _by_hash: Mapping[str, MessageRow] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_hash", {m.entry_hash: m for m in self.messages})

    @property
    def rejected(self) -> tuple[BronzeLine, ...]:
        """``bronze.rejected``: the lines that were not accepted, in input order."""
        return tuple(line for line in self.lines if not line.accepted)

    def message(self, entry_hash: str) -> MessageRow:
        """The ``silver.messages`` row of one bronze entry (raises KeyError for another hash)."""
        return self._by_hash[entry_hash]

    def gold(self, names: Mapping[SchemaId, str]) -> dict[str, list[dict[str, Any]]]:
        """The gold tables of the registered schemas (SEMANTICS.md section 5, notes 14-16).

        Args:
            names: registered schema -> its gold name. Schemas not seen as schema logs have no
                tables yet.

        Returns:
            ``"<name>_v<n>"`` -> rows, for every version n with a table
            (:attr:`lakehouse.core.schemas.SchemaVersion.has_gold_table`). A row is a dict:
            ``instance_id``, ``author``, one key per field of lens(n) in lens order (a field
            called ``instance_id`` or ``author`` as ``_field_<name>``) holding the canonical value
            translated to n, then ``_version``, ``_last_entry``, ``_updates``. Rows are those of
            the live instances of the schema, sorted by ``instance_id``.

        Cascades are decided over every schema, registered or not (note 15). The pipeline holds
        back a registered schema whose relations point at unregistered ones: register every
        schema to compare.
        """
        tables: dict[str, list[dict[str, Any]]] = {}
        for sid, name in sorted(names.items()):
            sv = self.schemas.get(sid)
            if sv is None:
                continue
            live = sorted(
                (i for i in self.instances.values() if i.schema == sid and i.live),
                key=lambda i: i.instance_id,
            )
            for version in sv.gold_versions():
                tables[gold_table_name(name, version)] = [_gold_row(sv, instance, version) for instance in live]
        return tables


def _gold_row(sv: SchemaVersions, instance: Instance, version: int) -> dict[str, Any]:
    row: dict[str, Any] = {"instance_id": instance.instance_id, "author": instance.author}
    for name, value in project(sv, instance.writes, version).items():
        row[f"_field_{name}" if name in ("instance_id", "author") else name] = value
    row.update(_version=instance.version, _last_entry=instance.last_entry, _updates=instance.updates)
    return row


# --------------------------------------------------------------------------------------------------
# The model


def reference(lines: Iterable[Line], *, max_payload: int = DEFAULT_MAX_PAYLOAD) -> Reference:
    """Compute every table from the landing lines ingested so far (SEMANTICS.md sections 1-5, 7).

    Args:
        lines: the landing lines, in any order, duplicates allowed.
        max_payload: the largest accepted payload, in bytes.

    Returns:
        The expected tables.
    """
    outcomes: list[BronzeLine] = []
    entries: dict[str, BronzeEntry] = {}
    for line in lines:
        raw = line if isinstance(line, str) else json.dumps(dict(line))
        outcome = check_line(raw, max_payload=max_payload)
        entry_hash = outcome.entry_hash.hex() if outcome.entry_hash is not None else None
        outcomes.append(BronzeLine(raw, entry_hash, outcome.code))
        if outcome.entry is not None and outcome.payload is not None and entry_hash is not None:
            entries[entry_hash] = BronzeEntry(outcome.entry, outcome.payload)

    by_log: dict[LogKey, list[BronzeEntry]] = {}
    for item in entries.values():
        by_log.setdefault((item.entry.author.hex(), item.entry.log_id), []).append(item)
    logs = {key: _Log.judge(key, members) for key, members in sorted(by_log.items())}

    schemas = {log.schema_id: _schema_versions(log) for log in logs.values() if log.purpose == "schema"}
    statuses: dict[str, _Status] = {}
    for log in logs.values():
        statuses.update(_statuses(log, logs, schemas))

    decoded = {accepted.hash_hex: accepted.message for log in logs.values() for accepted in log.prefix}
    messages = sorted(
        (
            _message_row(log, item, statuses[item.entry.hash_hex], decoded.get(item.entry.hash_hex))
            for log in logs.values()
            for item in log.members
        ),
        key=lambda m: (m.author, m.log_id, m.seq_num, m.entry_hash),
    )
    return Reference(
        lines=tuple(outcomes),
        entries=entries,
        logs=tuple(log.row(statuses) for log in logs.values()),
        messages=tuple(messages),
        schemas=schemas,
        schema_versions=tuple(version_rows(schemas)),
        schema_fields=tuple(field_rows(schemas)),
        instances=_instances(logs, schemas, statuses),
    )


# --------------------------------------------------------------------------------------------------
# Logs: accepted prefix, forks, end of feed, purpose (section 1, notes 1-5)


@dataclass(frozen=True)
class _Status:
    """An entry's standing in its log and its message status, with the reason and what it waits for."""

    log_status: LogStatus
    status: Status
    code: str | None = None
    waits_for: str | None = None


@dataclass(frozen=True)
class _Accepted:
    """An entry of a log's accepted prefix with its decoded message, or the decoder's code (note 4)."""

    item: BronzeEntry
    message: Message | None
    error: str | None

    @property
    def seq(self) -> int:
        return self.item.entry.seq_num

    @property
    def hash_hex(self) -> str:
        return self.item.entry.hash_hex


def _accept(item: BronzeEntry) -> _Accepted:
    try:
        return _Accepted(item, decode_message(item.payload), None)
    except MessageError as exc:
        return _Accepted(item, None, exc.code)


def _broken_link(entry: Entry, prefix: list[_Accepted]) -> str | None:
    """The first link of ``entry`` (backlink, then skiplink) that points into ``prefix`` at another hash."""
    links: list[tuple[str, int, bytes | None]] = []
    if entry.seq_num > 1:
        links.append(("backlink", entry.seq_num - 1, entry.backlink))
    if skiplink_required(entry.seq_num):
        links.append(("skiplink", lipmaa(entry.seq_num), entry.skiplink))
    for name, seq, link in links:
        if seq <= len(prefix) and prefix[seq - 1].item.entry.hash != link:
            return name
    return None


@dataclass
class _Log:
    """One log judged as a whole: its accepted prefix, fork and purpose."""

    key: LogKey
    members: list[BronzeEntry]
    prefix: list[_Accepted]
    fork_seq: int | None
    purpose: Literal["schema", "instance"] | None = None
    schema: SchemaId | None = None  # the schema an instance log writes
    first_seq: int | None = None

    @classmethod
    def judge(cls, key: LogKey, members: list[BronzeEntry]) -> _Log:
        """Walk seq 1, 2, ...: one fitting entry is accepted, two or more are a fork, none ends the walk.

        An entry fits when its links equal the hashes of the accepted entries they point to (note 1);
        an accepted entry with the end-of-feed tag ends the walk (note 3).
        """
        at_seq: dict[int, list[BronzeEntry]] = {}
        for member in members:
            at_seq.setdefault(member.entry.seq_num, []).append(member)
        prefix: list[_Accepted] = []
        fork_seq: int | None = None
        while not (prefix and prefix[-1].item.entry.end_of_feed):
            seq = len(prefix) + 1
            fitting = [m for m in at_seq.get(seq, []) if _broken_link(m.entry, prefix) is None]
            if len(fitting) > 1:
                fork_seq = seq
            if len(fitting) != 1:
                break
            prefix.append(_accept(fitting[0]))
        log = cls(key, members, prefix, fork_seq)
        log._fix_purpose()
        return log

    def _fix_purpose(self) -> None:
        """The first message that decodes and is a seq-1 schema-meta or a create fixes the purpose (note 5)."""
        for accepted in self.prefix:
            if isinstance(accepted.message, SchemaMeta) and accepted.seq == 1:
                self.purpose, self.first_seq = "schema", 1
                return
            if isinstance(accepted.message, Create):
                self.purpose, self.first_seq = "instance", accepted.seq
                self.schema = accepted.message.schema.schema_id
                return

    @property
    def schema_id(self) -> SchemaId:
        """This log as a schema id."""
        return SchemaId(bytes.fromhex(self.key[0]), self.key[1])

    @property
    def accepted_seq(self) -> int:
        """The length of the accepted prefix."""
        return len(self.prefix)

    @property
    def final_seq(self) -> int | None:
        """The last seq this log can ever accept: before its fork, or its end-of-feed entry; else None."""
        if self.fork_seq is not None:
            return self.fork_seq - 1
        if self.prefix and self.prefix[-1].item.entry.end_of_feed:
            return self.accepted_seq
        return None

    def standing(self, entry: Entry) -> _Status:
        """The status of an entry of this log that is not in the accepted prefix (notes 2-3)."""
        k = self.accepted_seq
        if self.fork_seq is not None and entry.seq_num >= self.fork_seq:
            return _Status("rejected", "rejected", "fork")
        if k and self.prefix[-1].item.entry.end_of_feed and entry.seq_num > k:
            return _Status("rejected", "rejected", "after_end_of_feed")
        broken = _broken_link(entry, self.prefix)
        if broken is not None:
            return _Status("rejected", "rejected", f"wrong_{broken}")
        return _Status("pending", "pending", "waiting", f"log {self.key[0]}:{self.key[1]} seq {k + 1}")

    def row(self, statuses: Mapping[str, _Status]) -> LogRow:
        """This log's ``silver.logs`` row."""
        return LogRow(
            author=self.key[0],
            log_id=self.key[1],
            purpose=self.purpose,
            schema=str(self.schema) if self.schema is not None else None,
            first_seq=self.first_seq,
            accepted_seq=self.accepted_seq,
            fork_seq=self.fork_seq,
            entries=len(self.members),
            pending=sum(statuses[m.entry.hash_hex].log_status == "pending" for m in self.members),
        )


# --------------------------------------------------------------------------------------------------
# Schema logs (section 2, notes 6-7)


def _schema_versions(log: _Log) -> SchemaVersions:
    """The versions of a schema log: undecodable and instance messages are rejected versions (note 7)."""
    messages, rejected = split_schema_log((a.seq, a.message, a.error) for a in log.prefix)
    return build_versions(messages, rejected=rejected)


def _schema_status(sv: SchemaVersions, version: int) -> _Status:
    """Note 6: invalid migrations, ignored reverts and rejected messages are rejected, abandoned or not."""
    v = sv[version]
    if v.status in ("invalid", "ignored_revert", "rejected"):
        return _Status("accepted", "rejected", v.reason)
    if v.abandoned:
        return _Status("accepted", "ignored", "abandoned")
    return _Status("accepted", "applied")


# --------------------------------------------------------------------------------------------------
# Message statuses (sections 1 and 3, notes 5-11)


def _statuses(
    log: _Log, logs: Mapping[LogKey, _Log], schemas: Mapping[SchemaId, SchemaVersions]
) -> dict[str, _Status]:
    """The status of every entry of one log, by entry hash."""
    in_prefix = {accepted.hash_hex for accepted in log.prefix}
    out = {m.entry.hash_hex: log.standing(m.entry) for m in log.members if m.entry.hash_hex not in in_prefix}
    if log.purpose == "schema":
        sv = schemas[log.schema_id]
        out.update((accepted.hash_hex, _schema_status(sv, accepted.seq)) for accepted in log.prefix)
        return out
    judged = _instance_statuses(log, logs, schemas)
    for accepted in log.prefix:  # what the instance walk did not judge comes before any purpose
        out[accepted.hash_hex] = judged.get(accepted.hash_hex) or _Status(
            "accepted", "rejected", accepted.error or "no_log_purpose"
        )
    return out


def _instance_statuses(
    log: _Log, logs: Mapping[LogKey, _Log], schemas: Mapping[SchemaId, SchemaVersions]
) -> dict[str, _Status]:
    """Statuses of an instance log's messages from the create that fixed its purpose on (notes 8-11).

    The messages are walked in seq order; the checks of note 9 are made in its order.
    """
    schema, first_seq = log.schema, log.first_seq
    if schema is None or first_seq is None:
        return {}
    schema_log = logs.get((schema.author.hex(), schema.log_id))
    known_not_schema = (
        schema_log is not None and schema_log.accepted_seq >= 1 and schema_log.purpose != "schema"
    )
    final_seq = schema_log.final_seq if schema_log is not None else None
    versions = schemas.get(schema)
    creates: dict[bytes, bool] = {}  # instance -> its create was applied (True) or ignored (False)
    deletes: set[bytes] = set()
    waiting: dict[bytes, str] = {}  # instance -> what its first pending message waits for

    def judge(entry_hash: bytes, message: Message | None, error: str | None) -> _Status:
        # the payload does not decode
        if message is None:
            return _Status("accepted", "rejected", error)
        # not an instance message of the log's schema
        if not isinstance(message, (Create, Update, Delete)):
            return _Status("accepted", "rejected", "wrong_log")
        named = message.schema
        if named is not None and named.schema_id != schema:
            return _Status("accepted", "rejected", "wrong_log")
        # an earlier message of the same instance is pending
        instance = entry_hash if isinstance(message, Create) else message.instance
        if instance in waiting:
            return _Status("accepted", "pending", "waiting", waiting[instance])
        lens: Lens | None = None
        if named is not None:
            # the schema's log is known not to be a schema log
            if known_not_schema:
                return _Status("accepted", "rejected", "not_a_schema")
            if not isinstance(message, Delete):  # a delete needs no lens and never waits
                # a version the schema log can never reach (past a fork or its end of feed)
                if final_seq is not None and named.version > final_seq:
                    return _Status("accepted", "rejected", "unreachable_version")
                # the version is beyond the schema log's accepted prefix
                if versions is None or named.version > len(versions):
                    waiting[instance] = f"schema {schema} version {named.version}"
                    return _Status("accepted", "pending", "waiting", waiting[instance])
                # a create or update at an abandoned version
                if versions[named.version].abandoned:
                    return _Status("accepted", "ignored", "abandoned")
                lens = versions.lens(named.version)
        # the instance of an update or delete: a create earlier in this log, not deleted
        if isinstance(message, (Update, Delete)):
            if instance not in creates:
                return _Status("accepted", "rejected", "unknown_instance")
            if isinstance(message, Update) and not creates[instance]:
                return _Status("accepted", "rejected", "ignored_instance")
            if instance in deletes:
                return _Status("accepted", "rejected", "deleted_instance")
        # the field values of a create or update against lens(v)
        if isinstance(message, (Create, Update)):
            assert lens is not None  # creates and updates always name a version
            try:
                check_fields(lens, message.fields)
            except MessageError as exc:
                return _Status("accepted", "rejected", exc.code)
        return _Status("accepted", "applied")

    out: dict[str, _Status] = {}
    for accepted in log.prefix:
        if accepted.seq < first_seq:
            continue
        message = accepted.message
        status = out[accepted.hash_hex] = judge(accepted.item.entry.hash, message, accepted.error)
        if isinstance(message, Create) and status.status in ("applied", "ignored"):
            creates[accepted.item.entry.hash] = status.status == "applied"
        if isinstance(message, Delete) and status.status == "applied":
            deletes.add(message.instance)
    return out


def _message_row(log: _Log, item: BronzeEntry, status: _Status, message: Message | None) -> MessageRow:
    """The ``silver.messages`` row of one entry; ``message`` is None unless accepted and decoded."""
    entry = item.entry
    schema = version = instance = None
    if isinstance(message, (SchemaMeta, SchemaMigration, SchemaRevert)):  # wherever it is: its own log
        schema, version = f"{log.key[0]}:{log.key[1]}", entry.seq_num
    elif message is not None:
        if message.schema is not None:
            schema, version = str(message.schema.schema_id), message.schema.version
        instance = entry.hash_hex if isinstance(message, Create) else message.instance.hex()
    return MessageRow(
        entry_hash=entry.hash_hex,
        author=log.key[0],
        log_id=log.key[1],
        seq_num=entry.seq_num,
        log_status=status.log_status,
        status=status.status,
        reason_code=status.code,
        waits_for=status.waits_for,
        kind=message.kind if message is not None else None,
        schema=schema,
        version=version,
        instance=instance,
    )


# --------------------------------------------------------------------------------------------------
# silver.schema_versions and silver.schema_fields


# --------------------------------------------------------------------------------------------------
# Instances and cascades (section 5, notes 14-15)


@dataclass
class _Fold:
    """An instance while its applied messages are folded in, in log order (note 14)."""

    author: str
    schema: SchemaId
    versions: SchemaVersions
    writes: dict[str, tuple[int, Any]] = field(default_factory=dict)
    version: int = 0
    last_entry: str = ""
    updates: int = 0
    deleted: bool = False


def _instances(
    logs: Mapping[LogKey, _Log], schemas: Mapping[SchemaId, SchemaVersions], statuses: Mapping[str, _Status]
) -> dict[str, Instance]:
    """Every applied create with its state, whether it was deleted, and whether a cascade removed it."""
    folds: dict[str, _Fold] = {}
    deleted_ignored: set[str] = set()
    for log in logs.values():
        sv = schemas.get(log.schema) if log.schema is not None else None
        if log.purpose != "instance" or log.schema is None or sv is None:
            continue
        for accepted in log.prefix:
            message = accepted.message
            if statuses[accepted.hash_hex].status != "applied":
                continue
            if isinstance(message, Create):
                folds[accepted.hash_hex] = _Fold(log.key[0], log.schema, sv)
            if isinstance(message, Delete):
                if message.instance.hex() in folds:
                    folds[message.instance.hex()].deleted = True
                else:  # the delete of an ignored create: nothing to show, but a cascade starts from it
                    deleted_ignored.add(message.instance.hex())
            if isinstance(message, (Create, Update)):
                state = folds[accepted.hash_hex if isinstance(message, Create) else message.instance.hex()]
                version = message.schema.version
                lens = sv.lens(version)
                if isinstance(message, Create):  # every field of the create's lens; a key it lacks is null
                    state.writes.update((f.key, (version, None)) for f in lens)
                for name, value in check_fields(lens, message.fields).items():  # by identity (section 2)
                    written = lens.get(name)
                    assert written is not None
                    state.writes[written.key] = (version, value)
                state.version, state.last_entry = version, accepted.hash_hex
                state.updates += isinstance(message, Update)

    gone = {instance for instance, state in folds.items() if state.deleted} | deleted_ignored
    cascaded: set[str] = set()
    changed = True
    while changed:  # a fixed point: remove what points, through a cascading relation, at something gone
        changed = False
        for instance, state in folds.items():
            if instance not in gone and _cascade_targets(state) & gone:
                gone.add(instance)
                cascaded.add(instance)
                changed = True
    return {
        instance: Instance(
            instance_id=instance,
            author=state.author,
            schema=state.schema,
            writes=state.writes,
            version=state.version,
            last_entry=state.last_entry,
            updates=state.updates,
            deleted=state.deleted,
            cascaded=instance in cascaded,
        )
        for instance, state in sorted(folds.items())
    }


def _cascade_targets(state: _Fold) -> set[str]:
    """The ids the instance's relation values point at where they were written under ``cascade: true``
    (SEMANTICS.md section 5: the lens of the version each value was written at decides)."""
    targets: set[str] = set()
    for key, (version, value) in state.writes.items():
        lens_field = state.versions.lens(version).by_key(key)
        if lens_field is not None and lens_field.cascade and lens_field.type.is_relation and value is not None:
            targets.update(value if isinstance(value, list) else [value])
    return targets

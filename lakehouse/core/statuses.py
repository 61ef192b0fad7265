"""Judging whole logs: which entries a log accepts, what the log is for, each message's status.

The silver pipeline runs these functions once per log (one group of a grouped DataFrame);
they implement SEMANTICS.md sections 1 and 3 with the decisions of ``docs/semantics-notes.md``
(notes 1-11). :mod:`lakehouse.core.reference` computes the same from the whole set of entries
in its own, simpler way; the tests check the two against each other.

Pure: no Spark, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

from lakehouse.core.entries import lipmaa, skiplink_required
from lakehouse.core.lenses import check_fields
from lakehouse.core.messages import (
    INSTANCE_KINDS,
    Create,
    Delete,
    Message,
    SchemaId,
    SchemaMeta,
    Update,
    decode_message,
)
from lakehouse.core.schemas import SchemaVersions
from lakehouse.errors import MessageError

LogStatus = Literal["accepted", "pending", "rejected"]
Status = Literal["applied", "pending", "ignored", "rejected"]
Purpose = Literal["schema", "instance"]


@dataclass(frozen=True)
class EntryHeader:
    """What log validity needs of an entry (hashes as bytes)."""

    entry_hash: bytes
    seq_num: int
    backlink: bytes | None
    skiplink: bytes | None
    end_of_feed: bool = False


@dataclass(frozen=True)
class LogVerdict:
    """One entry's standing in its log (notes 1-3)."""

    status: LogStatus
    code: str | None = None
    reason: str = ""
    waits_for_seq: int | None = None


@dataclass(frozen=True)
class LogJudgement:
    """A log's accepted prefix ``1..accepted_seq``, its fork, and a verdict per entry hash."""

    accepted_seq: int
    fork_seq: int | None
    verdicts: dict[bytes, LogVerdict]


@dataclass(frozen=True)
class LogPrefix:
    """A log's accepted prefix ``1..accepted_seq``, as judged before, for judging what follows it.

    Attributes:
        accepted_seq: the prefix's length (>= 1).
        hashes: seq -> accepted entry hash, for ``accepted_seq`` and for every seq that the links
            of the entries judged after it may name (:func:`prefix_seqs`).
        ended: whether the entry at ``accepted_seq`` ends the log (``end_of_feed``).
    """

    accepted_seq: int
    hashes: Mapping[int, bytes]
    ended: bool = False


def prefix_seqs(accepted_seq: int, last_seq: int) -> set[int]:
    """The seqs of an accepted prefix ``1..accepted_seq`` whose hashes the links of entries at
    ``accepted_seq + 1 .. last_seq`` can name: the last one (a backlink), and lipmaa targets."""
    seqs = {accepted_seq}
    for n in range(accepted_seq + 1, last_seq + 1):
        if skiplink_required(n) and lipmaa(n) <= accepted_seq:
            seqs.add(lipmaa(n))
    return seqs


def judge_log(entries: Iterable[EntryHeader], after: LogPrefix | None = None) -> LogJudgement:
    """Judge every entry of one log, as a function of the set (SEMANTICS.md section 1, notes 1-3).

    Args:
        entries: the log's entries (any order; the same hash twice counts once).
        after: an accepted prefix judged before, when the log only grew past it: ``entries`` are
            then only those past it, and the result is the judgement of the whole log (verdicts
            of ``entries`` only) as long as the prefix holds no fork.

    Returns:
        The accepted prefix, the fork seq (if any) and a verdict for every entry.

    Raises:
        ValueError: an entry at or below ``after.accepted_seq``, or a hash ``after`` lacks (its
            last entry's, or one that a link names).
    """
    by_seq: dict[int, dict[bytes, EntryHeader]] = {}
    for e in entries:
        by_seq.setdefault(e.seq_num, {})[e.entry_hash] = e
    accepted: dict[int, bytes] = dict(after.hashes) if after else {}
    k = after.accepted_seq if after else 0
    ended = after.ended if after else False
    if by_seq and min(by_seq) <= k:
        raise ValueError(f"entry at seq {min(by_seq)} is inside the accepted prefix 1..{k} judged before")
    if after and k not in accepted:
        raise ValueError(f"the accepted prefix 1..{k} judged before lacks the hash of its last entry")

    def at(seq: int) -> bytes:
        if seq not in accepted:
            raise ValueError(f"the accepted prefix 1..{k} judged before lacks the hash of seq {seq}")
        return accepted[seq]

    def links_match(e: EntryHeader) -> bool:
        if e.seq_num == 1:
            return True
        if e.backlink != at(e.seq_num - 1):
            return False
        return not skiplink_required(e.seq_num) or e.skiplink == at(lipmaa(e.seq_num))

    fork_seq: int | None = None
    while not ended:
        candidates = [e for e in by_seq.get(k + 1, {}).values() if links_match(e)]
        if not candidates:
            break
        if len(candidates) > 1:
            fork_seq = k + 1
            break
        k += 1
        accepted[k] = candidates[0].entry_hash
        ended = candidates[0].end_of_feed
    verdicts: dict[bytes, LogVerdict] = {}
    for seq, group in by_seq.items():
        for h, e in group.items():
            if seq <= k and accepted[seq] == h:
                verdicts[h] = LogVerdict("accepted")
            elif fork_seq is not None and seq >= fork_seq:
                verdicts[h] = LogVerdict("rejected", "fork", f"the log forks at seq {fork_seq}")
            elif ended and seq > k:
                verdicts[h] = LogVerdict("rejected", "after_end_of_feed", f"the log ended at seq {k}")
            else:
                verdicts[h] = _link_verdict(e, at, k)
    return LogJudgement(k, fork_seq, verdicts)


def _link_verdict(e: EntryHeader, at: Callable[[int], bytes], k: int) -> LogVerdict:
    back = e.seq_num - 1
    if e.seq_num > 1 and back <= k and e.backlink != at(back):
        return LogVerdict("rejected", "wrong_backlink", f"backlink is not the hash of seq {back}")
    if skiplink_required(e.seq_num):
        skip = lipmaa(e.seq_num)
        if skip <= k and e.skiplink != at(skip):
            return LogVerdict("rejected", "wrong_skiplink", f"skiplink is not the hash of seq {skip}")
    if e.seq_num <= k + 1:  # pragma: no cover - links match, so the walk would have taken it
        raise AssertionError("an entry with matching links was not accepted")
    return LogVerdict("pending", "waiting", f"waits for seq {k + 1}", k + 1)


# -- messages ------------------------------------------------------------------------------------
class Decoded(NamedTuple):
    """A payload decoded, or the reason it does not decode. A named tuple, not a frozen
    dataclass: one is built per message, in half the time (0.24 µs against 0.49)."""

    message: Message | None
    code: str | None = None
    reason: str = ""


def decode(payload: bytes) -> Decoded:
    """Decode a payload into a message, keeping the decoder's error instead of raising."""
    try:
        return Decoded(decode_message(payload))
    except MessageError as exc:
        return Decoded(None, exc.code, exc.message)


@dataclass(frozen=True)
class MessageStatus:
    """A message's status (notes 6 and 9): applied, pending, ignored or rejected, with why."""

    status: Status
    code: str | None = None
    reason: str = ""
    waits_for: str | None = None


APPLIED = MessageStatus("applied")


def log_purpose(messages: Iterable[tuple[int, Decoded]]) -> tuple[Purpose | None, SchemaId | None, int | None]:
    """What a log is for (note 5), from its accepted messages in seq order (read up to the one
    that fixes it).

    Returns:
        ``(purpose, schema, seq)``: ``("schema", None, 1)`` for a schema log,
        ``("instance", S, s)`` for an instance log whose first valid message (at seq s) creates
        an instance of S, or ``(None, None, None)``.
    """
    for seq, d in messages:
        if d.message is None:
            continue
        if seq == 1 and isinstance(d.message, SchemaMeta):
            return "schema", None, 1
        if isinstance(d.message, Create):
            return "instance", d.message.schema.schema_id, seq
        # the first valid message fits no purpose: it is rejected and the search goes on
    return None, None, None


@dataclass(frozen=True)
class SchemaState:
    """What instance messages need to know of their schema's log.

    Attributes:
        accepted_seq: length of the schema log's accepted prefix (0 when nothing accepted).
        is_schema: True for a schema log, False when the log is known to be something else, None
            while its seq 1 has not been accepted.
        versions: the schema's versions (schema logs only).
        final_seq: the last seq the log can ever accept, when that is known: the seq before a
            fork, or the seq of an accepted end-of-feed entry; None while the log may grow.
    """

    accepted_seq: int = 0
    is_schema: bool | None = None
    versions: SchemaVersions | None = None
    final_seq: int | None = None


@dataclass
class InstanceLogResult:
    """Statuses of an instance log's messages, by seq, and the log's state after them.

    Attributes:
        statuses: each judged message's status, by seq.
        created: instance (its create's entry hash) -> True when the create was applied, False
            when it was ignored (abandoned version); creates that were rejected or are pending
            are not here.
        deleted: instances an applied delete removed.
        waiting: instance -> ``waits_for`` of its first pending message; the later messages of
            that instance wait too (SEMANTICS.md section 3).
        values: the checked field values (:func:`lakehouse.core.lenses.check_fields`, canonical) of
            each applied create and update, by seq: what the instance fold writes.
    """

    statuses: dict[int, MessageStatus] = field(default_factory=dict)
    created: dict[bytes, bool] = field(default_factory=dict)
    deleted: set[bytes] = field(default_factory=set)
    waiting: dict[bytes, str] = field(default_factory=dict)
    values: dict[int, dict[str, Any]] = field(default_factory=dict)


def judge_instance_log(
    messages: Sequence[tuple[int, bytes, Decoded]],
    log_schema: SchemaId,
    schemas: Mapping[SchemaId, SchemaState],
    first_seq: int,
    after: InstanceLogResult | None = None,
) -> InstanceLogResult:
    """Statuses of the messages of one instance log (SEMANTICS.md section 3, notes 8-11).

    Args:
        messages: ``(seq, entry_hash, decoded)`` for the log's accepted entries, in seq order.
        log_schema: the schema the log writes (from its first valid message).
        schemas: what is known of each schema log, by schema id.
        first_seq: seq of the message that fixed the purpose; earlier messages are rejected
            ``no_log_purpose`` (or keep their decode error).
        after: the log's state after the messages before ``messages`` (their statuses are not
            needed, and ``after`` is updated in place); ``None`` when ``messages`` starts the log.
            An incremental run judges only the messages a log gained, from the state its earlier
            messages left, when neither the log's prefix nor its schema changed.

    Returns:
        The statuses of ``messages`` and the state after them.
    """
    result = after if after is not None else InstanceLogResult()
    state = schemas.get(log_schema, _UNKNOWN_SCHEMA)  # once per log, not per message
    for seq, entry_hash, d in messages:
        result.statuses[seq] = _judge_one(seq, entry_hash, d, log_schema, state, first_seq, result)
    return result


def resume_instance_log(earlier: Iterable[tuple[str | None, str | None, str, str | None]]) -> InstanceLogResult:
    """An instance log's state after its earlier messages, from their stored statuses.

    Args:
        earlier: ``(kind, instance, status, waits_for)`` of earlier messages, as
            ``silver.messages`` holds them (``instance`` in hex: a create's own entry hash, the
            instance an update or delete names). Messages of instances that later messages do
            not name may be left out.

    Returns:
        The state :func:`judge_instance_log` continues from (``after``), with no statuses.
    """
    state = InstanceLogResult()
    for kind, instance, status, waits_for in earlier:
        if instance is None:
            continue
        key = bytes.fromhex(instance)
        if status == "pending":
            state.waiting.setdefault(key, waits_for or "")
        elif kind == "create" and status in ("applied", "ignored"):
            state.created[key] = status == "applied"
        elif kind == "delete" and status == "applied":
            state.deleted.add(key)
    return state


_UNKNOWN_SCHEMA: Final = SchemaState()


def _judge_one(seq: int, entry_hash: bytes, d: Decoded, log_schema: SchemaId, state: SchemaState, first_seq: int,
               result: InstanceLogResult) -> MessageStatus:
    """The status of one message (note 9's checks, in order), updating ``result``'s state;
    ``state`` is what is known of ``log_schema``'s log."""
    m = d.message
    if m is None:
        return MessageStatus("rejected", d.code, d.reason)
    if seq < first_seq:
        return MessageStatus("rejected", "no_log_purpose",
                             "a log starts with schema-meta at seq 1 or with a create")
    if m.kind not in INSTANCE_KINDS:
        return MessageStatus("rejected", "wrong_log", f"a {m.kind} message in an instance log")
    assert isinstance(m, (Create, Update, Delete))
    vs = m.schema
    if vs is not None and (vs.log_id != log_schema.log_id or vs.author != log_schema.author):
        return MessageStatus("rejected", "wrong_log", f"this log writes schema {log_schema}, not {vs.schema_id}")
    instance = entry_hash if isinstance(m, Create) else m.instance
    waits = result.waiting.get(instance)
    if waits is not None:
        return MessageStatus("pending", "waiting", "an earlier message of this instance is pending", waits)
    lens_version = None
    if vs is not None:
        if state.is_schema is False:
            return MessageStatus("rejected", "not_a_schema", f"log {log_schema} is not a schema log")
        if not isinstance(m, Delete):  # a delete needs no lens: it never waits for its version
            if state.final_seq is not None and vs.version > state.final_seq:
                return MessageStatus("rejected", "unreachable_version",
                                     f"schema {log_schema} can never have version {vs.version}: its log ends "
                                     f"at seq {state.final_seq} (a fork or an end-of-feed entry)")
            if state.versions is None or vs.version > state.accepted_seq:
                waits = f"schema {log_schema} version {vs.version}"
                result.waiting[instance] = waits
                return MessageStatus("pending", "waiting", f"waits for {waits}", waits)
            lens_version = state.versions[vs.version]
            if lens_version.abandoned:
                if isinstance(m, Create):
                    result.created.setdefault(entry_hash, False)
                return MessageStatus("ignored", "abandoned", f"version {vs.version} was abandoned by a revert")
    if isinstance(m, (Update, Delete)):
        created = result.created.get(instance)
        if created is None:
            return MessageStatus("rejected", "unknown_instance",
                                 "not a create earlier in this log: only an instance's author, from the log "
                                 "that created it, may change it")
        if isinstance(m, Update) and not created:
            return MessageStatus("rejected", "ignored_instance",
                                 "the instance's create was ignored (its version was abandoned by a revert)")
        if instance in result.deleted:
            return MessageStatus("rejected", "deleted_instance", "the instance was deleted")
    if isinstance(m, (Create, Update)):
        assert lens_version is not None
        try:
            result.values[seq] = check_fields(lens_version.lens, m.fields)
        except MessageError as exc:
            return MessageStatus("rejected", exc.code, exc.message)
    if isinstance(m, Create):
        result.created[entry_hash] = True
    elif isinstance(m, Delete):
        result.deleted.add(instance)
    return APPLIED

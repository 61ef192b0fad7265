"""The silver layer's tables, its transforms, and the per-log functions the engine runs on
grouped entries.

LAKEHOUSE.md (Layers), SEMANTICS.md sections 1-3, ``docs/semantics-notes.md``. The per-log
functions are thin adapters between groups of rows and :mod:`lakehouse.core.statuses`; the
transforms (:func:`with_payloads`) are ``DataFrame -> DataFrame`` steps the silver pipeline
composes.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.core.entries import lipmaa
from lakehouse.core.gold import InstanceState, cascade_targets, decode_writes, encode_writes, fold_log
from lakehouse.core.messages import Create, Delete, SchemaId, Update
from lakehouse.core.schemas import SchemaVersions
from lakehouse.core.statuses import (
    Decoded,
    EntryHeader,
    LogPrefix,
    SchemaState,
    decode,
    judge_instance_log,
    judge_log,
    log_purpose,
    prefix_seqs,
    resume_instance_log,
)
from lakehouse.errors import LakehouseError
from lakehouse.spark import delta
from lakehouse.spark.catalog import STATES_DDL
from lakehouse.spark.delta import columns as delta_columns
from lakehouse.spark.groups import Columns, Row, apply_to_groups, arrow_schema, batch_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

LOG_PASS_DDL = (
    "entry_hash STRING, author STRING, log_id BIGINT, seq_num BIGINT, batch_id BIGINT, log_status STRING, "
    "log_code STRING, log_reason STRING, waits_seq BIGINT, kind STRING, schema STRING, version BIGINT, "
    "instance STRING, decode_code STRING, decode_reason STRING, purpose STRING, purpose_schema STRING, "
    "purpose_seq BIGINT, accepted_seq BIGINT, fork_seq BIGINT, entries BIGINT, pending BIGINT, whole_log BOOLEAN, "
    "ended BOOLEAN"
)
# the instance pass gives a row per judged message: its status (entry_hash set, with its
# entry_columns prefixed m_), and on the row of the message that last wrote an instance, the
# instance's state (instance_id set, as in STATES_DDL); and a row per stored state it folded onto,
# as it was (replaced true: silver.replaced_states lists it)
INSTANCE_STATUS_DDL = (
    "entry_hash STRING, status STRING, reason_code STRING, reason STRING, waits_for STRING, "
    "m_kind STRING, m_schema STRING, m_version BIGINT, m_instance STRING"
)
INSTANCE_PASS_DDL = f"{INSTANCE_STATUS_DDL}, {STATES_DDL}, replaced BOOLEAN"


def with_payloads(entries: DataFrame, bronze: DataFrame, *more: str) -> DataFrame:
    """``entries`` (``entry_hash`` and ``batch_id``, as ``silver.messages`` and the log pass give
    them, and any other columns) with the ``payload`` (and ``more`` columns) of each in bronze.

    Joined on both columns (an entry is in one batch): on Sail the join's filter of the batch ids
    ``entries`` holds skips the files of the others, so the new messages of an incremental run
    are looked up in the files of their batches, not in every payload of bronze (at 1,000,000
    messages, the 10,000 of the last 1 %: 0.02 s against 0.16-0.26 s joined on the hash alone).
    """
    return entries.join(bronze.select("entry_hash", "batch_id", "payload", *more), ["entry_hash", "batch_id"])


@lru_cache(maxsize=4096)
def _schema_text(author: bytes, log_id: int) -> str:
    """``str(SchemaId(author, log_id))``, once per schema rather than once per message."""
    return str(SchemaId(author, log_id))


def entry_columns(author: str, log_id: int, seq: int, entry_hash: bytes, d: Decoded | None) -> dict[str, Any]:
    """``kind``, ``schema``, ``version`` and ``instance`` of an entry's message in
    ``silver.messages`` (None when it is not decoded); a schema message's version is its own seq."""
    return dict(zip(("kind", "schema", "version", "instance"), _entry_values(author, log_id, seq, entry_hash, d),
                    strict=True))


def _entry_values(author: str, log_id: int, seq: int, entry_hash: bytes, d: Decoded | None
                  ) -> tuple[str | None, str | None, int | None, str | None]:
    """:func:`entry_columns` as a tuple, without a dict per message."""
    m = d.message if d else None
    if m is None:
        return None, None, None, None
    if isinstance(m, (Create, Update, Delete)):
        schema = version = None
        if m.schema is not None:
            schema, version = _schema_text(m.schema.author, m.schema.log_id), m.schema.version
        return m.kind, schema, version, entry_hash.hex() if isinstance(m, Create) else m.instance.hex()
    return m.kind, f"{author}:{log_id}", seq, None  # a schema message


def _hex_or_none(value: str | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value)


_LOG_COLUMNS = ("purpose", "purpose_schema", "purpose_seq", "accepted_seq", "fork_seq", "entries", "pending", "whole_log",
                "ended")
_ENTRY_COLUMNS = tuple(c for c in delta_columns(LOG_PASS_DDL) if c not in _LOG_COLUMNS)  # a value per entry


def log_pass(group: list[Row]) -> Columns:
    """One log's entries -> their log-level standing and decoded message (``LOG_PASS_DDL``), for
    every log :func:`log_pass_batch` does not judge a column at a time. The messages of an
    instance log judged whole are decoded only up to the one that fixes its purpose: the
    instance pass decodes the rest, and its columns (``kind`` ...) are null here.

    Notes 1-5: the accepted prefix and fork as a function of the log's set of entries, and the
    log's purpose from its accepted messages.

    Every row has the bronze columns ``entry_hash, author, log_id, seq_num, backlink, skiplink,
    end_of_feed, payload, batch_id``, a ``role`` and what silver held of the log before:
    ``old_accepted_seq, old_purpose, old_schema, old_first_seq, log_entries, old_ended``. These are null when
    the whole log is judged: its rows are then all its entries (``role = 'entry'``). A log that only
    grew is judged past its old accepted prefix (:class:`lakehouse.core.statuses.LogPrefix`): its
    ``entry`` rows are its entries past the prefix, its ``prefix`` rows give the hashes of the
    prefix entries their links can name, and ``old_ended`` whether the prefix ends the log (when
    null, the ``end_of_feed`` of the prefix row of its last entry). Only ``entry`` rows are in the
    result.

    Raises:
        LakehouseError: a prefix hash the rows lack (``silver.messages`` disagrees with bronze).
    """
    first = group[0]
    author, log_id, old_seq = str(first["author"]), int(first["log_id"]), first["old_accepted_seq"]
    shown = [r for r in group if r["role"] == "entry"]
    headers = [EntryHeader(bytes.fromhex(r["entry_hash"]), int(r["seq_num"]), _hex_or_none(r["backlink"]),
                           _hex_or_none(r["skiplink"]), bool(r["end_of_feed"])) for r in shown]
    after = None
    if old_seq is not None:
        known = {int(r["seq_num"]): r for r in group if r["role"] == "prefix"}
        last = known.get(int(old_seq))
        # whether the prefix's last entry ends the log: as silver.logs recorded it, else as its row says
        ended = first["old_ended"] if first["old_ended"] is not None else last is not None and last["end_of_feed"]
        after = LogPrefix(int(old_seq), {seq: bytes.fromhex(r["entry_hash"]) for seq, r in known.items()},
                          bool(ended))
    try:
        judgement = judge_log(headers, after)
    except ValueError as exc:
        raise LakehouseError(f"log {author}:{log_id}: {exc}; silver.messages disagrees with bronze, "
                             "run `make rebuild`") from exc
    verdicts = judgement.verdicts
    accepted_rows = sorted(((int(r["seq_num"]), r) for r in shown
                            if verdicts[bytes.fromhex(r["entry_hash"])].status == "accepted"), key=lambda pair: pair[0])
    decoded: dict[str, Decoded] = {}

    def decoding() -> Generator[tuple[int, Decoded], None, None]:
        for seq, r in accepted_rows:
            d = decoded[r["entry_hash"]] = decode(bytes(r["payload"]))
            yield seq, d

    messages = decoding()
    if old_seq is None:
        # decoded up to the message that fixes the purpose; the rest of an instance log judged
        # whole is decoded by the instance pass, which judges all of it and gives their columns
        purpose, schema, purpose_seq = log_purpose(messages)
        purpose_schema = str(schema) if schema else None
        if purpose == "instance":
            messages.close()
    else:
        purpose, purpose_schema, purpose_seq = first["old_purpose"], first["old_schema"], first["old_first_seq"]
    for _ in messages:  # the rest
        pass
    # whether the entry at the accepted seq ends the log: a new one, or the prefix's last
    last_shown = [h for h in headers if h.seq_num == judgement.accepted_seq
                  and verdicts[h.entry_hash].status == "accepted"]
    ended = last_shown[0].end_of_feed if last_shown else after is not None and after.ended
    log_columns = dict(zip(_LOG_COLUMNS, (
        purpose, purpose_schema, purpose_seq, judgement.accepted_seq, judgement.fork_seq,
        len(shown) if old_seq is None else int(first["log_entries"]),
        sum(1 for v in verdicts.values() if v.status == "pending"), old_seq is None, ended), strict=True))
    # a column at a time (lakehouse.spark.groups.Columns); the log's own columns repeat on each row
    out: Columns = {name: [] for name in _ENTRY_COLUMNS}
    entry = [out[name] for name in _ENTRY_COLUMNS]
    for row in shown:
        entry_hash = bytes.fromhex(row["entry_hash"])
        verdict = verdicts[entry_hash]
        d = decoded.get(row["entry_hash"])
        seq = int(row["seq_num"])
        cols = entry_columns(author, log_id, seq, entry_hash, d)
        for column, value in zip(entry, (
                row["entry_hash"], author, log_id, seq, int(row["batch_id"]), verdict.status, verdict.code,
                verdict.reason or None, verdict.waits_for_seq, cols["kind"], cols["schema"], cols["version"],
                cols["instance"], d.code if d else None, (d.reason or None) if d else None), strict=True):
            column.append(value)
    out.update({name: [value] * len(shown) for name, value in log_columns.items()})
    return out


_LOG_KEYS = ("author", "log_id")
_LOG_PASS_SCHEMA = arrow_schema(LOG_PASS_DDL)


def log_pass_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The log pass of a batch of whole logs (:func:`lakehouse.spark.groups.map_group_batches`):
    :func:`log_pass`'s rows for each log (``LOG_PASS_DDL``), the regular instance logs judged a
    column at a time and only the others, one by one, by :func:`log_pass`.

    A log is regular when it is judged whole (every row an ``entry`` of it, no old prefix) and its
    entries are seq 1..n, one each, each with the backlink and, where FORMAT.md section 1 requires
    one, the skiplink of the entries before it, and none but the last ends the log: notes 1-3 then
    accept every entry, with no fork and nothing pending (:func:`lakehouse.core.statuses.judge_log`).
    Its messages are decoded in seq order up to the one that fixes its purpose
    (:func:`lakehouse.core.statuses.log_purpose`), as :func:`log_pass` does; a regular log whose
    purpose is not ``instance`` (a schema log, whose messages are all decoded) goes to
    :func:`log_pass`. Over the 1M bench history the regular logs are nearly all of them.
    """
    n = batch.num_rows
    if n == 0:
        return apply_to_groups(log_pass, _LOG_KEYS, _LOG_PASS_SCHEMA, batch)
    b = batch.take(pc.sort_indices(batch, [("author", "ascending"), ("log_id", "ascending"),
                                           ("seq_num", "ascending")]))
    regular, starts, ends = _regular_logs(b)
    payload, entry_hash, seq_col = b.column("payload"), b.column("entry_hash"), b.column("seq_num")
    end_of_feed = b.column("end_of_feed")
    fast: list[tuple[int, int, str, int]] = []  # (first row, end row, purpose schema, purpose seq) of each log judged here
    decoded: dict[int, Decoded] = {}  # row -> its message, for the rows decoded to find a purpose
    for log in np.flatnonzero(regular):
        first, end = int(starts[log]), int(ends[log])
        tried: dict[int, Decoded] = {}
        purpose, schema, purpose_seq = log_purpose(_decoded_rows(payload, first, end, tried))
        if purpose == "instance":
            assert purpose_seq is not None
            fast.append((first, end, str(schema), purpose_seq))
            decoded.update(tried)
    if not fast:
        return apply_to_groups(log_pass, _LOG_KEYS, _LOG_PASS_SCHEMA, b)
    lengths = np.array([end - first for first, end, _, _ in fast], dtype=np.int64)
    rows = np.concatenate([np.arange(first, end, dtype=np.int64) for first, end, _, _ in fast])
    taken = pa.array(rows)
    m = len(rows)
    author, log_id = b.column("author").take(taken), b.column("log_id").take(taken)
    message_cols: dict[str, list[Any]] = {name: [None] * m for name in
                                          ("kind", "schema", "version", "instance", "decode_code", "decode_reason")}
    at = {int(row): i for i, row in enumerate(rows)} if decoded else {}
    for row, d in decoded.items():
        i = at[row]
        cols = entry_columns(author[i].as_py(), log_id[i].as_py(), seq_col[row].as_py(),
                             bytes.fromhex(entry_hash[row].as_py()), d)
        cols.update(decode_code=d.code, decode_reason=d.reason or None)
        for name, values in message_cols.items():
            values[i] = cols[name]
    columns = {
        "entry_hash": entry_hash.take(taken), "author": author, "log_id": log_id, "seq_num": seq_col.take(taken),
        "batch_id": b.column("batch_id").take(taken), "log_status": pa.array(["accepted"] * m, pa.string()),
        **message_cols,
        "purpose": pa.array(["instance"] * m, pa.string()),
        "purpose_schema": pa.array(np.repeat(np.array([f[2] for f in fast], dtype=object), lengths), pa.string()),
        "purpose_seq": np.repeat(np.array([f[3] for f in fast], dtype=np.int64), lengths),
        "accepted_seq": np.repeat(lengths, lengths), "entries": np.repeat(lengths, lengths),
        "pending": np.zeros(m, dtype=np.int64), "whole_log": np.ones(m, dtype=bool),
        # only a regular log's last entry may end it
        "ended": np.repeat(np.array([bool(end_of_feed[end - 1].as_py()) for _, end, _, _ in fast], dtype=bool), lengths),
    }
    judged_here = pa.RecordBatch.from_arrays(
        [pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(m, f.type) for f in _LOG_PASS_SCHEMA],
        schema=_LOG_PASS_SCHEMA)
    others = np.ones(n, dtype=bool)
    others[rows] = False
    if not others.any():
        return judged_here
    return pa.concat_batches([judged_here, apply_to_groups(log_pass, _LOG_KEYS, _LOG_PASS_SCHEMA,
                                                           b.filter(pa.array(others)))])


def _regular_logs(b: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of a batch of whole logs sorted by (author, log_id, seq_num): whether each log is regular
    (:func:`log_pass_batch`), and each log's first row and end row (exclusive)."""
    n = b.num_rows
    entry_hash = b.column("entry_hash")
    seq = b.column("seq_num").to_numpy(zero_copy_only=False)
    starts, ends = _log_bounds(b)
    first = np.zeros(n, dtype=bool)  # the first row of its log
    first[starts] = True
    start = starts[np.cumsum(first) - 1]  # each row's log's first row
    last = np.zeros(n, dtype=bool)
    last[ends - 1] = True
    ok = (np.arange(n) - start + 1 == seq) & _true(pc.equal(b.column("role"), "entry"))
    ok &= b.column("old_accepted_seq").is_null().to_numpy(zero_copy_only=False)
    ok &= last | ~_true(b.column("end_of_feed"))
    backlink_ok = np.ones(n, dtype=bool)
    if n > 1:
        backlink_ok[1:] = _true(pc.equal(b.column("backlink").slice(1), entry_hash.slice(0, n - 1)))
    ok &= first | backlink_ok
    seqs, inverse = np.unique(np.maximum(seq, 1), return_inverse=True)
    skip_to = np.array([lipmaa(int(s)) for s in seqs], dtype=np.int64)[inverse]
    required = (seq > 1) & (skip_to != seq - 1)
    target = np.clip(start + skip_to - 1, 0, n - 1)  # the row of seq lipmaa(seq), where ok holds
    ok &= ~required | _true(pc.equal(b.column("skiplink"), entry_hash.take(pa.array(target))))
    return np.logical_and.reduceat(ok, starts), starts, ends


def _log_bounds(b: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
    """The first row and the end row (exclusive) of each log of a non-empty batch sorted by
    (author, log_id)."""
    n = b.num_rows
    author, log_id = b.column("author"), b.column("log_id").to_numpy(zero_copy_only=False)
    first = np.ones(n, dtype=bool)
    if n > 1:
        first[1:] = ~(_true(pc.equal(author.slice(1), author.slice(0, n - 1))) & (log_id[1:] == log_id[:-1]))
    starts = np.flatnonzero(first)
    return starts, np.append(starts[1:], n)


def _true(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow array as numpy, null as False."""
    out: np.ndarray = pc.fill_null(values, False).to_numpy(zero_copy_only=False)
    return out


def _decoded_rows(payload: pa.Array, first: int, end: int, tried: dict[int, Decoded]) -> Iterator[tuple[int, Decoded]]:
    """(seq, decoded) of a regular log's rows ``first..end`` in seq order, decoded as they are
    asked for, each noted in ``tried`` (row -> decoded)."""
    for row in range(first, end):
        d = tried[row] = decode(bytes(payload[row].as_py()))
        yield row - first + 1, d


def state_of(row: Row) -> InstanceState:
    """The instance state of a ``STATES_DDL`` row (its ``schema``, ``log_id`` and ``targets`` are not needed)."""
    return InstanceState(row["instance_id"], row["author"], decode_writes(bytes(row["writes"])), int(row["version"]),
                         row["last_entry"], int(row["updates"]), bool(row["deleted"]))


def state_row(schema: SchemaId, log_id: int, sv: SchemaVersions | None, state: InstanceState) -> Row:
    """The ``STATES_DDL`` row of a state, with the ids its cascading relation values point at."""
    return dict(zip(_STATES_NAMES, _state_values(str(schema), log_id, sv, state), strict=True))


def _state_values(schema: str, log_id: int, sv: SchemaVersions | None, state: InstanceState) -> tuple[Any, ...]:
    """:func:`state_row`'s values, in ``STATES_DDL`` order (``schema`` as text)."""
    return (schema, state.instance_id, state.author, log_id, encode_writes(state.writes), state.version,
            state.last_entry, state.updates, state.deleted, cascade_targets(sv, state.writes) if sv is not None else [])


def instance_pass(schemas: Mapping[SchemaId, SchemaState]) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """A batch function for :func:`lakehouse.spark.groups.map_group_batches` (whole instance logs):
    each instance log's accepted messages -> their statuses and columns (:func:`entry_columns`),
    and the states of the instances they change, each on the row of the message that last wrote
    it, and the stored states they were folded onto, as they were (``replaced``;
    ``INSTANCE_PASS_DDL``): one pass decodes and checks each message once, and folds the applied
    ones with the values the check returned (:func:`lakehouse.core.gold.fold_log`).

    Every row has ``author, log_id, purpose_schema, purpose_seq`` and a ``role``:

    - ``message``: a message to judge (``seq_num, entry_hash, payload``);
    - ``earlier``: a message judged before (``kind, instance, status, waits_for``), from which the
      state the new messages start from is resumed (:func:`lakehouse.core.statuses.resume_instance_log`).
      Every earlier message precedes every message to judge;
    - ``state``: the stored state (``STATES_DDL`` columns, ``instance`` its id, ``version`` as
      ``state_version``) of an instance created before the messages to judge that they name.

    A log of messages only (every log of a first run or a rebuild) is read from the batch a column
    at a time; a log with earlier messages or states, as rows (:func:`_judge_instance_group`).

    Args:
        schemas: what is known of every schema log (bound to the function, which pickles with it).
    """
    return partial(_judge_instance_batch, schemas)


_STATUS_COLUMNS = tuple(delta_columns(INSTANCE_STATUS_DDL))
_STATES_NAMES = tuple(delta_columns(STATES_DDL))
_STATE_COLUMNS = (*_STATES_NAMES, "replaced")
_INSTANCE_PASS_SCHEMA = arrow_schema(INSTANCE_PASS_DDL)


def _judge_instance_batch(schemas: Mapping[SchemaId, SchemaState], batch: pa.RecordBatch) -> pa.RecordBatch:
    out: Columns = {name: [] for name in _INSTANCE_PASS_SCHEMA.names}
    if batch.num_rows == 0:
        return batch_of(list(out.values()), _INSTANCE_PASS_SCHEMA)
    b = batch.take(pc.sort_indices(batch, [("author", "ascending"), ("log_id", "ascending"),
                                           ("seq_num", "ascending")]))
    starts, ends = _log_bounds(b)
    plain = np.logical_and.reduceat(_true(pc.equal(b.column("role"), "message")), starts)
    if plain.any():
        c = {name: b.column(name).to_pylist()
             for name in ("author", "log_id", "purpose_schema", "purpose_seq", "seq_num", "entry_hash", "payload")}
        for log in np.flatnonzero(plain):
            first, end = int(starts[log]), int(ends[log])
            messages = [(seq, bytes.fromhex(h), decode(payload)) for seq, h, payload in
                        zip(c["seq_num"][first:end], c["entry_hash"][first:end], c["payload"][first:end], strict=True)]
            _judge_messages(schemas, out, c["author"][first], c["log_id"][first],
                            SchemaId.parse(c["purpose_schema"][first]), c["purpose_seq"][first], messages)
    judged = batch_of(list(out.values()), _INSTANCE_PASS_SCHEMA)
    if plain.all():
        return judged
    others = b.filter(pa.array(np.repeat(~plain, ends - starts)))
    return pa.concat_batches([judged, apply_to_groups(partial(_judge_instance_group, schemas), _LOG_KEYS,
                                                      _INSTANCE_PASS_SCHEMA, others)])


def _judge_instance_group(schemas: Mapping[SchemaId, SchemaState], group: list[Row]) -> Columns:
    """The instance pass (:func:`instance_pass`) of one instance log's rows, of any role: every
    column of ``INSTANCE_PASS_DDL``."""
    out: Columns = {name: [] for name in _INSTANCE_PASS_SCHEMA.names}
    first = group[0]
    earlier = [(r["kind"], r["instance"], str(r["status"]), r["waits_for"])
               for r in group if r["role"] == "earlier"]
    stored = [r for r in group if r["role"] == "state"]
    rows = sorted((r for r in group if r["role"] == "message"), key=lambda r: int(r["seq_num"]))
    messages = [(int(r["seq_num"]), bytes.fromhex(r["entry_hash"]), decode(bytes(r["payload"]))) for r in rows]
    _judge_messages(schemas, out, str(first["author"]), int(first["log_id"]), SchemaId.parse(str(first["purpose_schema"])),
                    int(first["purpose_seq"]), messages, earlier, stored)
    return out


def _judge_messages(schemas: Mapping[SchemaId, SchemaState], out: Columns, author: str, log_id: int,
                    log_schema: SchemaId, first_seq: int, messages: list[tuple[int, bytes, Decoded]],
                    earlier: list[tuple[Any, Any, str, Any]] | None = None, stored: list[Row] | None = None) -> None:
    """One instance log's messages (``(seq, entry hash, decoded)`` in seq order) judged from where
    its ``earlier`` messages left it and folded onto its ``stored`` states (rows of role ``earlier``
    and ``state``, :func:`instance_pass`), added to ``out`` a column at a time: a row per message
    with its status, the state of each instance on the row of the message that last wrote it, a
    row per stored state folded onto."""
    before = {str(r["instance"]): state_of({**r, "instance_id": r["instance"], "version": r["state_version"]})
              for r in stored or ()}
    result = judge_instance_log(messages, log_schema, schemas, first_seq,
                                resume_instance_log(earlier) if earlier else None)
    statuses = [out[name] for name in _STATUS_COLUMNS]
    offset = len(statuses[0])
    last_write: dict[str, int] = {}  # instance -> the row of the last applied message that names it
    rows: list[tuple[Any, ...]] = []  # each message's status columns, added to ``out`` a column at a time
    for seq, entry_hash, d in messages:
        s = result.statuses[seq]
        kind, schema, version, instance = _entry_values(author, log_id, seq, entry_hash, d)
        if s.status == "applied" and instance is not None:
            last_write[instance] = offset + len(rows)
        rows.append((entry_hash.hex(), s.status, s.code, s.reason or None, s.waits_for, kind, schema, version, instance))
    for column, values in zip(statuses, zip(*rows, strict=True), strict=True) if rows else ():
        column.extend(values)
    for name in _STATE_COLUMNS:
        out[name].extend([None] * len(rows))
    sv = schemas[log_schema].versions if log_schema in schemas else None

    def add(values: Mapping[str, Any]) -> None:  # a row with no message
        for name in _STATUS_COLUMNS:
            out[name].append(None)
        for name in _STATE_COLUMNS:
            out[name].append(values.get(name))

    # the stored states the messages fold onto, as they were (their columns passed on as stored):
    # the states this run replaces
    for r in stored or ():
        add({**r, "schema": str(log_schema), "instance_id": r["instance"], "version": r["state_version"],
             "replaced": True})
    state_columns = [out[name] for name in _STATES_NAMES]
    schema_text = str(log_schema)
    for state in fold_log(sv, author, messages, result, before).values():
        # on the row of the message that last wrote it: a third fewer rows
        values = _state_values(schema_text, log_id, sv, state)
        at = last_write.get(state.instance_id)
        if at is None:
            add(dict(zip(_STATES_NAMES, values, strict=True)))
        else:
            for column, value in zip(state_columns, values, strict=True):
                column[at] = value


# -- the rows the passes judge: transforms of the silver job ------------------------------------------
ACCEPTED_COLUMNS = ["author", "log_id", "seq_num", "entry_hash", "batch_id"]  # an accepted entry's columns in silver.messages


INSTANCE_PASS_INPUT = ["author", "log_id", "purpose_schema", "purpose_seq", "role", "seq_num", "entry_hash",
                        "payload", "kind", "instance", "status", "waits_for", "writes", "state_version", "last_entry",
                        "updates", "deleted", "targets"]


STATE_INPUT = {"writes": "binary", "state_version": "bigint", "last_entry": "string", "updates": "bigint",
                "deleted": "boolean", "targets": "array<string>"}


def log_pass_input(bronze: DataFrame, watermark: int, touched: DataFrame | None, old_logs: DataFrame | None,
                    old_messages: DataFrame | None, staging: str, *, recount: bool = True) -> DataFrame:
    """The rows :func:`log_pass` judges the touched logs (``touched``:
    ``author, log_id``; None for every log) from.

    A log is judged whole from all its bronze entries, unless it is an instance log that only
    grew: no fork, and every new entry past the accepted prefix that silver holds. Such a log is
    judged from its entries past that prefix, the prefix's hashes that their links can name
    (:func:`lakehouse.core.statuses.prefix_seqs`, from ``silver.messages``) and whether the prefix
    ends the log (``old_logs``' ``ended``, never null there): no stored entry of bronze is read
    for it. Schema logs are small,
    and a revert changes the status of their earlier messages: they are always judged whole.

    The touched logs and the prefix hashes (a few per log) join bronze as broadcasts: Apache Spark
    plans them from sizes it cannot know before the run and otherwise shuffles every bronze entry,
    payload and all (292 MB at 1,000,000 messages), to keep the few of a small run.

    A grown log's entries are those ``silver.logs`` counted and its new ones, unless ``recount``:
    then they are counted in bronze (a scan of every entry's author and log: 1.4 s of a trickle's
    log pass at 10,000,000 messages, 0.05 s at 1,000,000), which a run needs when a touched log's
    row in ``silver.logs`` may come from a run that died after writing it (the same run id, run
    again from the same watermark: that row counts some of the entries this run calls new).

    Args:
        watermark: the last run's: the entries of later batches are new.
        staging: a folder for the touched logs' staged rows.
        recount: count the grown logs' entries in bronze (above).
    """
    from pyspark.sql import functions as F

    key = ["author", "log_id"]
    new = bronze.where(F.col("batch_id") > watermark)
    olds = {"old_accepted_seq": "bigint", "old_purpose": "string", "old_schema": "string", "old_first_seq": "bigint",
            "log_entries": "bigint", "old_ended": "boolean"}
    entry_cols = ["entry_hash", "author", "log_id", "seq_num", "backlink", "skiplink", "end_of_feed", "payload",
                  "batch_id", *olds]
    if touched is None or old_logs is None or old_messages is None:  # every touched log judged whole
        logs = bronze if touched is None else bronze.join(F.broadcast(touched), key)
        return select_as(logs, [*entry_cols, "role"], olds, role="entry")
    arrived = new.groupBy(*key).agg(F.min("seq_num").alias("lowest_new"), F.count("*").alias("_new"))
    grown = (old_logs.where(F.col("fork_seq").isNull() & (F.col("purpose") == "instance"))
             .join(arrived, key).where(F.col("lowest_new") > F.col("accepted_seq"))
             .select(*key, F.col("accepted_seq").alias("old_accepted_seq"), F.col("purpose").alias("old_purpose"),
                     F.col("schema").alias("old_schema"), F.col("first_seq").alias("old_first_seq"),
                     F.col("ended").alias("old_ended"), (F.col("entries") > F.col("accepted_seq")).alias("_unaccepted"),
                     (F.col("entries") + F.col("_new")).alias("log_entries")))
    if recount:
        # silver.logs may already count some of the new entries (a run that died after its
        # silver.logs commit, and before its silver.runs row, is done again from the same
        # watermark): counted in bronze instead
        counted = (bronze.join(F.broadcast(grown.select(*key)), key, "left_semi").groupBy(*key)
                   .agg(F.count("*").alias("log_entries")))
        grown = grown.drop("log_entries").join(counted, key)
    # staged: read by the joins below, and asked whether any log needs earlier batches
    info = delta.stage(touched.join(grown, key, "left").join(old_logs.select(*key, F.lit(True).alias("_known")),
                                                             key, "left"), staging)
    past = F.col("old_accepted_seq").isNull() | (F.col("seq_num") > F.col("old_accepted_seq"))
    entries = new.join(F.broadcast(info), key)
    # the entries of earlier batches that the judgment needs: those of a log silver held and now
    # judges whole, and those past the accepted prefix of a grown log that had any (silver.logs
    # counted more entries than it accepted). Usually none: every touched log grew, and only the
    # new batches are read (at 1,000,000 messages the log pass read 0.3-0.45 s of bronze for its
    # last 1 % on Sail, and Apache Spark's data skipping reads the new batches' files only)
    earlier = info.where(F.col("_known").isNotNull() & (F.col("old_accepted_seq").isNull() | F.col("_unaccepted")))
    if not earlier.isEmpty():
        entries = entries.unionByName(bronze.where(F.col("batch_id") <= watermark).join(F.broadcast(earlier), key))
    entries = entries.where(past).select(*entry_cols, F.lit("entry").alias("role"))
    # the prefix hashes each grown log needs, worked out on the driver (a few per log)
    spans = (entries.where(F.col("old_accepted_seq").isNotNull())
             .groupBy(*key, "old_accepted_seq").agg(F.max("seq_num").alias("last_seq")).collect())
    needed = [(r["author"], int(r["log_id"]), seq) for r in spans
              for seq in sorted(prefix_seqs(int(r["old_accepted_seq"]), int(r["last_seq"])))]
    wanted = bronze.sparkSession.createDataFrame(needed, "author STRING, log_id BIGINT, seq_num BIGINT")
    hashes = (old_messages.where(F.col("log_status") == "accepted").select(*key, "seq_num", "entry_hash")
              .join(F.broadcast(wanted), [*key, "seq_num"]))
    # the prefix's hashes are silver's, and whether its last entry ends the log is silver.logs'
    # (``ended``): no stored entry of bronze is read (a join of every bronze entry's hash cost
    # 1.0-1.2 s at 10,000,000 messages, 0.12 s at 1,000,000)
    prefix = select_as(hashes.join(F.broadcast(info), key), [*entry_cols, "role"],
                       {"backlink": "string", "skiplink": "string", "end_of_feed": "boolean", "payload": "binary",
                        "batch_id": "bigint"}, role="prefix")
    return entries.unionByName(prefix)


def select_as(df: DataFrame, columns: list[str], nulls: dict[str, str], **values: Any) -> DataFrame:
    """``columns`` of ``df``, with typed nulls (``nulls``: name -> type) and literals (``values``)
    in place of the columns it lacks."""
    from pyspark.sql import functions as F

    def column(name: str) -> Any:
        if name in values:
            return F.lit(values[name]).alias(name)
        if name in nulls:
            return F.lit(None).cast(nulls[name]).alias(name)
        return F.col(name)

    return df.select(*(column(c) for c in columns))


def messages_to_judge(messages: DataFrame) -> DataFrame:
    """Instance pass rows (``role = 'message'``) of ``messages`` with their payloads."""
    nulls = {**dict.fromkeys(("kind", "instance", "status", "waits_for"), "string"), **STATE_INPUT}
    return select_as(messages, INSTANCE_PASS_INPUT, nulls, role="message")


def resume_rows(named: DataFrame, earlier: DataFrame, logs: DataFrame) -> DataFrame:
    """What the instance pass resumes an extended log from (``role = 'earlier'``): the earlier
    creates, deletes and pending messages of the instances its new messages name (``named``:
    ``author, log_id, instance``; a pending one holds back the later messages of its instance)."""
    from pyspark.sql import functions as F

    key = ["author", "log_id"]
    mine = earlier.where(F.col("log_status") == "accepted").join(logs, key)
    wanted = ((F.col("kind").isin("create", "delete") & F.col("status").isin("applied", "ignored"))
              | (F.col("status") == "pending"))
    changes = mine.where(wanted).join(named, [*key, "instance"], "left_semi")
    nulls = {"seq_num": "bigint", "entry_hash": "string", "payload": "binary", **STATE_INPUT}
    return select_as(changes, INSTANCE_PASS_INPUT, nulls, role="earlier")


def state_rows(named: DataFrame, states: DataFrame, logs: DataFrame) -> DataFrame:
    """The stored states the instance pass folds an extended log's new messages onto
    (``role = 'state'``): those of the instances its new updates and deletes name (``named``:
    ``author, log_id, instance``)."""
    key = ["author", "log_id"]
    stored = (states.join(named.withColumnRenamed("instance", "instance_id"), [*key, "instance_id"], "left_semi")
              .join(logs, key)
              .withColumnRenamed("instance_id", "instance").withColumnRenamed("version", "state_version"))
    nulls = {"seq_num": "bigint", "entry_hash": "string", "payload": "binary", "kind": "string", "status": "string",
             "waits_for": "string"}
    return select_as(stored, INSTANCE_PASS_INPUT, nulls, role="state")


def schema_states(referenced: set[SchemaId], schemas: dict[SchemaId, SchemaVersions], ended: dict[SchemaId, int],
                   all_logs: DataFrame) -> dict[SchemaId, SchemaState]:
    """What the instance pass knows of each schema log its logs name (:class:`SchemaState`).

    Args:
        referenced: the schemas named by the instance logs to judge.
        schemas: the versions of every schema log.
        ended: schema log -> the seq of its accepted end-of-feed entry.
        all_logs: ``silver.logs`` as this run leaves it (accepted prefix, fork).
    """
    from pyspark.sql import functions as F

    states: dict[SchemaId, SchemaState] = {}
    if not referenced:
        return states
    authors = sorted({s.author.hex() for s in referenced})
    rows = (all_logs.where(F.col("author").isin(authors))
            .select("author", "log_id", "purpose", "accepted_seq", "fork_seq").collect())
    known = {(r["author"], int(r["log_id"])): r for r in rows}
    for sid in referenced:
        r = known.get((sid.author.hex(), sid.log_id))
        # the last seq the log can ever accept: before a fork, or its end of feed (SEMANTICS.md section 3)
        final = int(r["fork_seq"]) - 1 if r is not None and r["fork_seq"] is not None else ended.get(sid)
        if sid in schemas:
            states[sid] = SchemaState(int(r["accepted_seq"]) if r else len(schemas[sid]), True, schemas[sid], final)
        elif r is not None and int(r["accepted_seq"] or 0) >= 1:
            states[sid] = SchemaState(int(r["accepted_seq"]), False, None, final)
        else:
            states[sid] = SchemaState(final_seq=final)
    return states


def final_statuses(p1: DataFrame, p2: DataFrame, schema_status: DataFrame, run_id: int) -> DataFrame:
    """Every judged message's ``silver.messages`` row (``MESSAGES_DDL``): the log pass's rows
    (``p1``, ``LOG_PASS_DDL``) with the instance pass's statuses (``p2``, ``INSTANCE_STATUS_DDL``)
    and the schema messages' (``schema_status``: entry_hash, s_status, s_code, s_reason), by entry
    hash; a pending or rejected entry keeps the log pass's verdict, an entry of a log with no
    purpose is rejected (SEMANTICS.md sections 1-3)."""
    from pyspark.sql import functions as F

    joined = p1.join(p2, "entry_hash", "left").join(schema_status, "entry_hash", "left")
    ls, purpose = F.col("log_status"), F.col("purpose")
    status = (F.when(ls == "pending", "pending").when(ls == "rejected", "rejected")
              .when(purpose == "schema", F.col("s_status")).when(purpose == "instance", F.col("status"))
              .otherwise("rejected"))
    no_purpose = F.coalesce(F.col("decode_code"), F.lit("no_log_purpose"))
    code = (F.when(ls == "pending", F.lit("waiting")).when(ls == "rejected", F.col("log_code"))
            .when(purpose == "schema", F.col("s_code")).when(purpose == "instance", F.col("reason_code"))
            .otherwise(no_purpose))
    no_purpose_reason = F.coalesce(F.col("decode_reason"),
                                   F.lit("a log starts with schema-meta at seq 1 or with a create"))
    reason = (F.when(ls != "accepted", F.col("log_reason")).when(purpose == "schema", F.col("s_reason"))
              .when(purpose == "instance", F.col("reason")).otherwise(no_purpose_reason))
    waits = (F.when(ls == "pending", F.concat(F.lit("log "), F.col("author"), F.lit(":"),
                                              F.col("log_id").cast("string"), F.lit(" seq "),
                                              F.col("waits_seq").cast("string")))
             .when((ls == "accepted") & (purpose == "instance"), F.col("waits_for")))
    return joined.select(
        "entry_hash", "author", "log_id", "seq_num", "batch_id", "log_status",
        status.alias("status"), code.alias("reason_code"), reason.alias("reason"), waits.alias("waits_for"),
        # the log pass leaves the columns of an instance log judged whole to the instance pass
        *(F.coalesce(c, f"m_{c}").alias(c) for c in ("kind", "schema", "version", "instance")),
        F.lit(run_id).cast("bigint").alias("run_id"))

"""Judging a log from where its earlier entries left it (lakehouse.core.statuses).

An incremental silver run judges only what a log gained: its entries past the accepted prefix
judged before (:class:`LogPrefix`), and an instance log's new messages from the state resumed out of
the stored statuses of the earlier ones (:func:`resume_instance_log`). Wherever a log is cut, that
must give what judging the whole log gives (and, for messages, what the reference model gives).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.core.entries import lipmaa, skiplink_required
from lakehouse.core.gold import fold_log
from lakehouse.core.messages import SchemaId
from lakehouse.core.reference import MessageRow, Reference, reference
from lakehouse.core.statuses import (
    EntryHeader,
    LogPrefix,
    SchemaState,
    decode,
    judge_instance_log,
    judge_log,
    prefix_seqs,
    resume_instance_log,
)
from lakehouse.spark.silver import state_of, state_row
from tests.histories import histories, knobs
from tests.simulate import History


def schema_state(ref: Reference, sid: SchemaId) -> SchemaState:
    """What the instance messages of ``sid`` see of its log, as the reference holds it."""
    log = next((r for r in ref.logs if r.author == sid.author.hex() and r.log_id == sid.log_id), None)
    final = None
    if log is not None and log.fork_seq is not None:
        final = log.fork_seq - 1
    elif log is not None and log.accepted_seq:
        last = next(m for m in ref.messages if (m.author, m.log_id, m.seq_num, m.log_status)
                    == (log.author, log.log_id, log.accepted_seq, "accepted"))
        final = log.accepted_seq if ref.entries[last.entry_hash].entry.end_of_feed else None
    if sid in ref.schemas:
        return SchemaState(log.accepted_seq if log else len(ref.schemas[sid]), True, ref.schemas[sid], final)
    if log is not None and log.accepted_seq >= 1:
        return SchemaState(log.accepted_seq, False, None, final)
    return SchemaState(final_seq=final)


def instance_logs(ref: Reference) -> list[tuple[SchemaId, int, list[MessageRow]]]:
    """Every instance log: its schema, first seq and accepted messages in seq order."""
    out = []
    for log in ref.logs:
        if log.purpose != "instance" or log.schema is None or log.first_seq is None:
            continue
        rows = [m for m in ref.messages
                if m.author == log.author and m.log_id == log.log_id and m.log_status == "accepted"]
        out.append((SchemaId.parse(log.schema), log.first_seq, sorted(rows, key=lambda m: m.seq_num)))
    return out


@settings(max_examples=60, deadline=None)
@given(history=histories(knobs(max_messages=60)), cut=st.floats(0, 1))
def test_a_log_resumed_from_its_earlier_statuses_judges_the_rest_as_the_reference_does(
        history: History, cut: float) -> None:
    ref = reference(history.lines)
    for sid, first_seq, rows in instance_logs(ref):
        k = round(cut * len(rows))
        earlier, later = rows[:k], rows[k:]
        state = resume_instance_log((m.kind, m.instance, m.status, m.waits_for) for m in earlier)
        messages = [(m.seq_num, bytes.fromhex(m.entry_hash), decode(ref.entries[m.entry_hash].payload))
                    for m in later]
        result = judge_instance_log(messages, sid, {sid: schema_state(ref, sid)}, first_seq, state)
        judged = [result.statuses[m.seq_num] for m in later]
        got = [(status.status, status.code, status.waits_for) for status in judged]
        assert got == [(m.status, m.reason_code, m.waits_for) for m in later]


def test_resuming_keeps_only_what_later_messages_can_depend_on() -> None:
    created, ignored, gone = "aa" * 34, "bb" * 34, "cc" * 34
    state = resume_instance_log([
        ("create", created, "applied", None), ("create", ignored, "ignored", None),
        ("create", "dd" * 34, "rejected", None), ("create", gone, "applied", None),
        ("delete", gone, "applied", None), ("delete", created, "rejected", None),
        ("update", created, "pending", "schema s version 3"), ("delete", created, "pending", "schema s version 3"),
        ("create", "ee" * 34, "pending", "schema s version 4"), (None, None, "rejected", None),
    ])
    assert state.created == {bytes.fromhex(created): True, bytes.fromhex(ignored): False, bytes.fromhex(gone): True}
    assert state.deleted == {bytes.fromhex(gone)}
    assert state.waiting == {bytes.fromhex(created): "schema s version 3", bytes.fromhex("ee" * 34): "schema s version 4"}
    assert state.statuses == {}


# --------------------------------------------------------------------------------------------------
# Judging a log past an accepted prefix judged before


def chain(n: int, *, end_at: int | None) -> list[EntryHeader]:
    """A valid log of ``n`` entries (synthetic hashes), ending at ``end_at`` if given."""
    def h(seq: int, variant: int = 0) -> bytes:
        return bytes([variant]) + seq.to_bytes(4, "big")

    out = []
    for seq in range(1, n + 1):
        back = h(seq - 1) if seq > 1 else None
        skip = h(lipmaa(seq)) if skiplink_required(seq) else None
        out.append(EntryHeader(h(seq), seq, back, skip, seq == end_at))
    return out


@st.composite
def logs_in_two_parts(draw: st.DrawFn) -> tuple[list[EntryHeader], list[EntryHeader]]:
    """A log (forks, bad links, an end of feed) whose entries arrive in two parts."""
    n = draw(st.integers(1, 60))
    entries = chain(n, end_at=draw(st.none() | st.integers(1, n)))
    for seq in draw(st.lists(st.integers(1, n), max_size=3)):  # a second entry with the same links
        e = entries[seq - 1]
        entries.append(EntryHeader(b"\xf0" + e.entry_hash, seq, e.backlink, e.skiplink))
    for seq in draw(st.lists(st.integers(2, max(2, n)), max_size=3 if n >= 2 else 0)):  # a wrong backlink
        e = entries[seq - 1]
        entries.append(EntryHeader(b"\xf1" + e.entry_hash, seq, b"nope", e.skiplink))
    first = draw(st.sets(st.sampled_from(range(len(entries)))))
    return [e for i, e in enumerate(entries) if i in first], [e for i, e in enumerate(entries) if i not in first]


@settings(max_examples=300, deadline=None)
@given(parts=logs_in_two_parts())
def test_judging_past_a_prefix_judged_before_equals_judging_the_whole_log(
        parts: tuple[list[EntryHeader], list[EntryHeader]]) -> None:
    before, later = parts
    earlier = judge_log(before)
    k = earlier.accepted_seq
    if earlier.fork_seq is not None or k == 0 or any(e.seq_num <= k for e in later):
        return  # the pipeline judges such a log whole
    accepted = {e.seq_num: e for e in before if earlier.verdicts[e.entry_hash].status == "accepted"}
    past = [e for e in before + later if e.seq_num > k]
    last = max((e.seq_num for e in past), default=k)
    prefix = LogPrefix(k, {s: accepted[s].entry_hash for s in prefix_seqs(k, last)}, accepted[k].end_of_feed)
    resumed, whole = judge_log(past, prefix), judge_log(before + later)
    assert (resumed.accepted_seq, resumed.fork_seq) == (whole.accepted_seq, whole.fork_seq)
    assert resumed.verdicts == {e.entry_hash: whole.verdicts[e.entry_hash] for e in past}


def test_judging_past_a_prefix_needs_the_hashes_its_links_name() -> None:
    log = chain(13, end_at=None)
    assert prefix_seqs(9, 13) == {9, 8, 4}  # seq 10 links back to 9, seq 12 skips to 8, seq 13 to 4
    with pytest.raises(ValueError, match="lacks the hash of seq 8"):
        judge_log(log[9:], LogPrefix(9, {9: log[8].entry_hash}))
    with pytest.raises(ValueError, match="lacks the hash of its last entry"):
        judge_log(log[9:], LogPrefix(9, {s: log[s - 1].entry_hash for s in (8, 4)}))
    with pytest.raises(ValueError, match="inside the accepted prefix"):
        judge_log(log[8:], LogPrefix(9, {s: log[s - 1].entry_hash for s in (9, 8, 4)}))
    resumed = judge_log(log[9:], LogPrefix(9, {s: log[s - 1].entry_hash for s in (9, 8, 4)}))
    assert resumed.accepted_seq == 13 and {v.status for v in resumed.verdicts.values()} == {"accepted"}


@settings(max_examples=60, deadline=None)
@given(history=histories(knobs(max_messages=60)), cut=st.floats(0, 1))
def test_a_log_folded_onto_its_stored_states_gives_the_states_of_the_whole_log(history: History, cut: float) -> None:
    """An incremental silver run folds an extended log's new messages onto the stored states of
    the instances they name (written and read back as ``silver.instance_states`` holds them):
    wherever the log is cut, every state is the one folding the whole log gives."""
    ref = reference(history.lines)
    for sid, first_seq, rows in instance_logs(ref):
        schemas = {sid: schema_state(ref, sid)}
        sv, author = schemas[sid].versions, rows[0].author
        messages = [(m.seq_num, bytes.fromhex(m.entry_hash), decode(ref.entries[m.entry_hash].payload)) for m in rows]

        whole = fold_log(sv, author, messages, judge_instance_log(messages, sid, schemas, first_seq), {})
        k = round(cut * len(messages))
        first = judge_instance_log(messages[:k], sid, schemas, first_seq)
        stored = {i: state_of(state_row(sid, 1, sv, state))
                  for i, state in fold_log(sv, author, messages[:k], first, {}).items()}
        earlier = [(m.kind, m.instance, first.statuses[m.seq_num].status, first.statuses[m.seq_num].waits_for)
                   for m in rows[:k]]
        later = judge_instance_log(messages[k:], sid, schemas, first_seq, resume_instance_log(earlier))
        assert {**stored, **fold_log(sv, author, messages[k:], later, stored)} == whole


@settings(max_examples=60, deadline=None)
@given(history=histories(knobs(max_messages=60)), cut=st.floats(0, 1), order=st.randoms(use_true_random=False))
def test_the_instance_pass_of_a_batch_gives_the_rows_of_each_log_judged_alone(history: History, cut: float,
                                                                             order: Any) -> None:
    """The instance pass reads a log of messages only from its batch a column at a time, and a log
    with earlier messages and stored states as rows: either way, in any mix and row order, the
    rows are those of judging each log on its own."""
    import itertools

    import pyarrow as pa

    from lakehouse.spark import silver
    from lakehouse.spark.groups import arrow_schema

    ref = reference(history.lines)
    logs = instance_logs(ref)
    schemas = {sid: schema_state(ref, sid) for sid, _, _ in logs}
    input_schema = arrow_schema(
        "author STRING, log_id BIGINT, purpose_schema STRING, purpose_seq BIGINT, role STRING, seq_num BIGINT, "
        "entry_hash STRING, payload BINARY, kind STRING, instance STRING, status STRING, waits_for STRING, "
        "writes BINARY, state_version BIGINT, last_entry STRING, updates BIGINT, deleted BOOLEAN, targets ARRAY<STRING>")
    rows: list[dict[str, Any]] = []
    for n, (sid, first_seq, messages) in enumerate(logs):
        base = {**dict.fromkeys(input_schema.names), "author": messages[0].author, "log_id": messages[0].log_id,
                "purpose_schema": str(sid), "purpose_seq": first_seq}
        k = round(cut * len(messages)) if n % 2 else 0  # every other log resumed from its earlier messages
        for m in messages[k:]:
            rows.append({**base, "role": "message", "seq_num": m.seq_num, "entry_hash": m.entry_hash,
                         "payload": ref.entries[m.entry_hash].payload})
        rows.extend({**base, "role": "earlier", "kind": m.kind, "instance": m.instance, "status": m.status,
                     "waits_for": m.waits_for} for m in messages[:k])
        if k:  # and the states its earlier messages left, as silver.instance_states holds them
            decoded = [(m.seq_num, bytes.fromhex(m.entry_hash), decode(ref.entries[m.entry_hash].payload))
                       for m in messages[:k]]
            sv = schemas[sid].versions
            folded = fold_log(sv, messages[0].author, decoded, judge_instance_log(decoded, sid, schemas, first_seq), {})
            for state in folded.values():
                stored = state_row(sid, messages[0].log_id, sv, state)
                rows.append({**base, **{c: stored[c] for c in ("writes", "last_entry", "updates", "deleted", "targets")},
                             "role": "state", "instance": state.instance_id, "state_version": state.version})
    order.shuffle(rows)
    rows.sort(key=lambda r: (r["author"], r["log_id"]))  # each log's rows next to each other, in any order
    batch = pa.RecordBatch.from_pylist(rows, schema=input_schema)
    got = silver.instance_pass(schemas)(batch).to_pylist()
    expected: dict[str, list[Any]] = {name: [] for name in silver._INSTANCE_PASS_SCHEMA.names}
    for _, group in itertools.groupby(rows, key=lambda r: (r["author"], r["log_id"])):
        for name, values in silver._judge_instance_group(schemas, list(group)).items():
            expected[name].extend(values)
    want = [dict(zip(expected, values, strict=True)) for values in zip(*expected.values(), strict=True)]

    def key(r: dict[str, Any]) -> tuple[str, str]:
        return r["entry_hash"] or "", r["instance_id"] or ""

    assert sorted(got, key=key) == sorted(want, key=key)
    assert sum(r["entry_hash"] is not None for r in got) == sum(r["role"] == "message" for r in rows)

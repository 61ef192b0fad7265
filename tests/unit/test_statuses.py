"""Judging an instance log from where its earlier messages left it (lakehouse.core.statuses).

An incremental silver run judges only the messages an instance log gained, from the state it
resumes out of the stored statuses of the earlier ones (:func:`resume_instance_log`). On generated
histories, that must give every later message the status the reference model gives it, wherever
the log is cut.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.core.messages import SchemaId
from lakehouse.core.reference import MessageRow, Reference, reference
from lakehouse.core.statuses import SchemaState, decode, judge_instance_log, resume_instance_log
from lakehouse.publish.simulate import History
from tests.histories import histories, knobs


def schema_state(ref: Reference, sid: SchemaId) -> SchemaState:
    """What the instance messages of ``sid`` see of its log, as the reference holds it."""
    log = next((r for r in ref.logs if r.author == sid.author.hex() and r.log_id == sid.log_id), None)
    if sid in ref.schemas:
        return SchemaState(log.accepted_seq if log else len(ref.schemas[sid]), True, ref.schemas[sid])
    if log is not None and log.accepted_seq >= 1:
        return SchemaState(log.accepted_seq, False, None)
    return SchemaState()


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
        got = [(result.statuses[m.seq_num].status, result.statuses[m.seq_num].code, result.statuses[m.seq_num].waits_for)
               for m in later]
        assert got == [(m.status, m.reason_code, m.waits_for) for m in later]


def test_resuming_keeps_only_what_later_messages_can_depend_on() -> None:
    created, ignored, gone = "aa" * 34, "bb" * 34, "cc" * 34
    state = resume_instance_log([
        ("create", created, "applied", None), ("create", ignored, "ignored", None),
        ("create", "dd" * 34, "rejected", None), ("create", gone, "applied", None),
        ("delete", gone, "applied", None), ("delete", created, "rejected", None),
        ("update", created, "pending", "schema s version 3"), ("update", created, "pending", "schema s version 3"),
    ])
    assert state.created == {bytes.fromhex(created): True, bytes.fromhex(ignored): False, bytes.fromhex(gone): True}
    assert state.deleted == {bytes.fromhex(gone)}
    assert state.blocked == "schema s version 3"
    assert state.statuses == {}

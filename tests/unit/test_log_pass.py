"""lakehouse.spark.silver.log_pass_batch: the regular instance logs judged a column at a time give
the rows that judging each log on its own (log_pass) gives, for any mix of logs in a batch."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.core.entries import lipmaa, skiplink_required
from lakehouse.core.messages import Create, Delete, SchemaMeta, Update, VersionedSchema, encode_message
from lakehouse.spark import silver
from lakehouse.spark.groups import apply_to_groups

SCHEMA = VersionedSchema(b"\x01" * 32, 0, 1)
PAYLOADS = {
    "create": encode_message(Create(SCHEMA, {"title": "a"})),
    "update": encode_message(Update(SCHEMA, b"\x00\x20" + b"\x02" * 32, {"title": "b"})),
    "delete": encode_message(Delete(b"\x00\x20" + b"\x02" * 32)),
    "meta": encode_message(SchemaMeta("notes")),
    "garbage": b"\xff\x00",
}
INPUT = pa.schema([
    ("entry_hash", pa.string()), ("author", pa.string()), ("log_id", pa.int64()), ("seq_num", pa.int64()),
    ("backlink", pa.string()), ("skiplink", pa.string()), ("end_of_feed", pa.bool_()), ("payload", pa.binary()),
    ("batch_id", pa.int64()), ("old_accepted_seq", pa.int64()), ("old_purpose", pa.string()),
    ("old_schema", pa.string()), ("old_first_seq", pa.int64()), ("log_entries", pa.int64()), ("old_ended", pa.bool_()),
    ("role", pa.string()),
])


def entry_hash(author: int, log_id: int, seq: int, variant: int = 0) -> str:
    return f"0020{author:02x}{log_id:02x}{variant:02x}{seq:06x}".ljust(68, "0")


@st.composite
def log_rows(draw: st.DrawFn, author: int, log_id: int) -> list[dict[str, Any]]:
    """One log's rows: mostly a valid chain of creates, updates and deletes; sometimes a schema
    log, a first message that fixes no purpose, a fork, a wrong link, a gap, an end of feed, or a
    log that grew past a prefix judged before."""
    n = draw(st.integers(1, 40))
    kinds = draw(st.lists(st.sampled_from(["create", "update", "delete", "garbage"]), min_size=n, max_size=n))
    if draw(st.booleans()):
        kinds[0] = draw(st.sampled_from(["create", "meta", "garbage", "update"]))
    end_at = draw(st.none() | st.integers(1, n)) if draw(st.integers(0, 4)) == 0 else None

    def row(seq: int, variant: int = 0, **changes: Any) -> dict[str, Any]:
        back = entry_hash(author, log_id, seq - 1) if seq > 1 else None
        skip = entry_hash(author, log_id, lipmaa(seq)) if skiplink_required(seq) else None
        values = {"entry_hash": entry_hash(author, log_id, seq, variant), "author": f"{author:064x}",
                  "log_id": log_id, "seq_num": seq, "backlink": back, "skiplink": skip, "end_of_feed": seq == end_at,
                  "payload": PAYLOADS[kinds[seq - 1]], "batch_id": seq % 3, "role": "entry"}
        return {**{name: None for name in INPUT.names}, **values, **changes}

    rows = [row(seq) for seq in range(1, n + 1)]
    trouble = draw(st.sampled_from(["none"] * 6 + ["fork", "backlink", "skiplink", "gap", "grown"]))
    if trouble == "fork":
        rows.append(row(draw(st.integers(1, n)), variant=1))
    elif trouble == "backlink" and n > 1:
        seq = draw(st.integers(2, n))
        rows[seq - 1]["backlink"] = entry_hash(author, log_id, seq - 1, variant=9)
    elif trouble == "skiplink":
        required = [seq for seq in range(1, n + 1) if skiplink_required(seq)]
        if required:
            seq = draw(st.sampled_from(required))
            rows[seq - 1]["skiplink"] = None
    elif trouble == "gap" and n > 1:
        del rows[draw(st.integers(0, n - 1))]
    elif trouble == "grown" and n > 1:
        old = draw(st.integers(1, n - 1))
        if draw(st.booleans()):  # a prefix that ends the log: what grew past it is rejected
            rows[old - 1]["end_of_feed"] = True
        # whether the prefix ends the log: as silver.logs recorded it, or not recorded (looked up)
        prior = {"old_accepted_seq": old, "old_purpose": "instance", "old_schema": str(SCHEMA.schema_id),
                 "old_first_seq": 1, "log_entries": n, "old_ended": draw(st.sampled_from([None, rows[old - 1]["end_of_feed"]]))}
        named = {old} | {lipmaa(seq) for seq in range(old + 1, n + 1) if skiplink_required(seq) and lipmaa(seq) <= old}
        rows = ([{**r, **prior, "role": "prefix"} for r in rows[:old] if r["seq_num"] in named]
                + [{**r, **prior} for r in rows[old:]])
    return rows


@st.composite
def batches(draw: st.DrawFn) -> pa.RecordBatch:
    """A batch of whole logs, each log's rows next to each other in any order within it."""
    rows: list[dict[str, Any]] = []
    for n in range(draw(st.integers(0, 6))):
        log = draw(log_rows(author=n % 3, log_id=n))
        rows.extend(draw(st.permutations(log)))
    return pa.RecordBatch.from_pylist(rows, schema=INPUT)


@settings(max_examples=300, deadline=None)
@given(batch=batches())
def test_the_batch_log_pass_gives_the_rows_of_judging_each_log_alone(batch: pa.RecordBatch) -> None:
    expected = apply_to_groups(silver.log_pass, ("author", "log_id"), silver._LOG_PASS_SCHEMA, batch)
    got = silver.log_pass_batch(batch)
    assert got.schema == expected.schema
    key = "entry_hash"
    assert sorted(got.to_pylist(), key=lambda r: r[key]) == sorted(expected.to_pylist(), key=lambda r: r[key])
    # each log's `ended` says whether its accepted entry at its accepted seq ends it (silver.logs keeps it)
    given = batch.to_pylist()
    ends = {r["entry_hash"]: r["end_of_feed"] for r in given}
    accepted_at = {(r["author"], r["log_id"], r["seq_num"]): r["entry_hash"] for r in given if r["role"] == "prefix"}
    accepted_at.update({(r["author"], r["log_id"], r["seq_num"]): r["entry_hash"] for r in got.to_pylist()
                        if r["log_status"] == "accepted"})
    for r in got.to_pylist():
        last = accepted_at.get((r["author"], r["log_id"], r["accepted_seq"]))
        assert r["ended"] == (last is not None and ends[last]), r


def test_regular_instance_logs_are_judged_without_the_per_log_function(monkeypatch: Any) -> None:
    """A batch of valid instance logs never reaches log_pass (the point of the batch path); a
    schema log in it does."""
    calls: list[int] = []
    original = silver.log_pass

    def counting(group: list[dict[str, Any]]) -> Any:
        calls.append(len(group))
        return original(group)

    monkeypatch.setattr(silver, "log_pass", counting)

    def chain(author: int, log_id: int, n: int, first: str) -> list[dict[str, Any]]:
        return [{**{name: None for name in INPUT.names},
                 "entry_hash": entry_hash(author, log_id, seq), "author": f"{author:064x}", "log_id": log_id,
                 "seq_num": seq, "backlink": entry_hash(author, log_id, seq - 1) if seq > 1 else None,
                 "skiplink": entry_hash(author, log_id, lipmaa(seq)) if skiplink_required(seq) else None,
                 "end_of_feed": False, "payload": PAYLOADS[first if seq == 1 else "update"], "batch_id": 0,
                 "role": "entry"} for seq in range(1, n + 1)]

    instance_logs = chain(1, 0, 30, "create") + chain(2, 5, 7, "create")
    out = silver.log_pass_batch(pa.RecordBatch.from_pylist(instance_logs, schema=INPUT))
    assert calls == [] and out.num_rows == 37
    assert set(out.column("log_status").to_pylist()) == {"accepted"}
    assert out.column("accepted_seq").to_pylist() == [30] * 30 + [7] * 7
    silver.log_pass_batch(pa.RecordBatch.from_pylist(instance_logs + chain(3, 1, 4, "meta"), schema=INPUT))
    assert calls == [4]


def test_a_log_grown_past_a_prefix_that_ends_it_rejects_what_follows() -> None:
    """Whether a grown log's accepted prefix ends it comes from silver.logs (``old_ended``) when it
    recorded it, else from the prefix row's ``end_of_feed``: either way the entry past it is
    rejected and the log stays ended; a prefix that does not end the log accepts it."""

    def rows(old_ended: bool | None, ends: bool) -> list[dict[str, Any]]:
        prior = {"old_accepted_seq": 2, "old_purpose": "instance", "old_schema": str(SCHEMA.schema_id),
                 "old_first_seq": 1, "log_entries": 3, "old_ended": old_ended}
        base = {**{name: None for name in INPUT.names}, "author": f"{7:064x}", "log_id": 1, "batch_id": 0, **prior}
        return [{**base, "entry_hash": entry_hash(7, 1, 2), "seq_num": 2, "end_of_feed": ends, "role": "prefix"},
                {**base, "entry_hash": entry_hash(7, 1, 1), "seq_num": 1, "end_of_feed": False, "role": "prefix"},
                {**base, "entry_hash": entry_hash(7, 1, 3), "seq_num": 3, "backlink": entry_hash(7, 1, 2),
                 "end_of_feed": False, "payload": PAYLOADS["update"], "role": "entry"}]

    for old_ended, ends, rejected in ((True, False, True), (None, True, True), (False, True, False), (None, False, False)):
        got = silver.log_pass_batch(pa.RecordBatch.from_pylist(rows(old_ended, ends), schema=INPUT)).to_pylist()
        assert [r["seq_num"] for r in got] == [3]
        assert (got[0]["log_status"] == "rejected") is rejected, (old_ended, ends, got[0])
        assert (got[0]["accepted_seq"], got[0]["ended"]) == ((2, True) if rejected else (3, False))

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
    ("old_schema", pa.string()), ("old_first_seq", pa.int64()), ("log_entries", pa.int64()), ("role", pa.string()),
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
        prior = {"old_accepted_seq": old, "old_purpose": "instance", "old_schema": str(SCHEMA.schema_id),
                 "old_first_seq": 1, "log_entries": n}
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

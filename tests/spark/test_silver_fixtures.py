"""Silver on entries signed by the real p2panda client: log state and message statuses.

SEMANTICS.md sections 1 and 3 on ``fixtures/p2panda``: the corpus is 360 valid entries in
six logs whose payloads are not messages of this project (rejected at the message level, kept);
each broken record, judged as a new entry arriving at a lake that holds the corpus, ends rejected,
pending or forked for its stated reason.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from pipelines.ingest import run_ingest
from pipelines.silver import run_silver
from tests.conftest import project_path
from tests.lakes import rows, write_landing

pytestmark = pytest.mark.parity

ON_THEIR_OWN = {"bad_signature", "wrong_payload", "trailing_bytes", "truncated"}


def records(name: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in project_path("fixtures", "p2panda", name).read_text().splitlines()]


def landing(record: dict[str, Any]) -> dict[str, str]:
    return {"entry": record["entry"], "payload": record["payload"]}


@pytest.mark.slow_on_spark(why="the p2panda corpus is judged by the same Python on both engines; the crash tests ingest it on both")
def test_corpus_is_accepted_in_full_and_rejected_as_messages(spark: Any, lake: Any) -> None:
    corpus = records("corpus.jsonl")
    write_landing(lake, "corpus.jsonl", map(landing, corpus))
    run_ingest(spark, lake)
    summary = run_silver(spark, lake)

    logs = rows(spark, lake, "silver", "logs")
    sizes: dict[tuple[str, int], int] = defaultdict(int)
    for r in corpus:
        sizes[(r["author"], r["log_id"])] += 1
    assert {(r["author"], r["log_id"]): (r["accepted_seq"], r["entries"], r["fork_seq"], r["pending"], r["purpose"])
            for r in logs} == {key: (n, n, None, 0, None) for key, n in sizes.items()}
    messages = rows(spark, lake, "silver", "messages")
    assert len(messages) == 360 == summary.new_entries
    assert {r["log_status"] for r in messages} == {"accepted"}
    assert {r["status"] for r in messages} == {"rejected"}
    assert all(r["reason_code"] and r["reason"] for r in messages)


def rounds(broken: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Split the broken records so that no two records of a round touch the same log."""
    out: list[list[dict[str, Any]]] = []
    for record in broken:
        log = (record["author"], record["log_id"])
        for group in out:
            if all((r["author"], r["log_id"]) != log for r in group):
                group.append(record)
                break
        else:
            out.append([record])
    return out


@pytest.mark.slow_on_spark(why="a lake per round of broken records; the corpus test runs on every engine")
def test_each_broken_record_ends_as_its_reason_says(spark: Any, lake: Any, tmp_path: Path) -> None:
    corpus = records("corpus.jsonl")
    for n, group in enumerate(rounds(records("corpus_broken.jsonl"))):
        settings = lake.with_overrides(lake_root=str(tmp_path / f"lake{n}"), landing=str(tmp_path / f"landing{n}"))
        write_landing(settings, "a_corpus.jsonl", map(landing, corpus))
        write_landing(settings, "b_broken.jsonl", map(landing, group))
        run_ingest(spark, settings)
        run_silver(spark, settings)
        rejected = {r["entry"].hex(): r for r in rows(spark, settings, "bronze", "rejected")}
        messages = {r["entry_hash"]: r for r in rows(spark, settings, "silver", "messages")}
        entries = {r["entry"].hex(): r["entry_hash"] for r in rows(spark, settings, "bronze", "entries")}
        logs = {(r["author"], r["log_id"]): r for r in rows(spark, settings, "silver", "logs")}
        for record in group:
            why, note = record["broken"], record["note"]
            if why in ON_THEIR_OWN:
                assert rejected[record["entry"]]["reason_code"] == why, note
                continue
            message = messages[entries[record["entry"]]]
            log = logs[(record["author"], record["log_id"])]
            if why in ("wrong_backlink", "wrong_skiplink"):
                assert (message["log_status"], message["status"], message["reason_code"]) == (
                    "rejected", "rejected", why), note
            elif why == "seq_gap":
                assert (message["status"], message["reason_code"]) == ("pending", "waiting"), note
                assert message["waits_for"] == f"log {record['author']}:{record['log_id']} seq {log['accepted_seq'] + 1}"
                assert log["pending"] == 1, note
            elif why == "fork":
                assert log["fork_seq"] == record["seq_num"] and log["accepted_seq"] == record["seq_num"] - 1, note
                assert (message["status"], message["reason_code"]) == ("rejected", "fork"), note
            else:
                raise AssertionError(f"unknown broken kind {why}")
        assert len(messages) == len(entries), "every bronze entry has exactly one status"

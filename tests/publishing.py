"""Helpers for tests of publishing: read a landing folder back and check it as ingest would.

Every line must decode and verify on its own (FORMAT.md sections 1-3), and every log, replayed in
seq order, must be accepted in full by the log judgement (SEMANTICS.md section 1): right
backlinks and skiplinks, no gap, no fork, no duplicate.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from lakehouse.core.entries import Entry, lipmaa, skiplink_required, verify_entry
from lakehouse.core.logs import Verdict, judge_append
from lakehouse.core.messages import Message, decode_message


@dataclass(frozen=True)
class Landed:
    """One landing line, decoded and verified."""

    file: str
    line: int
    entry: Entry
    message: Message

    @property
    def log(self) -> tuple[str, int]:
        return self.entry.author.hex(), self.entry.log_id


def landing_files(folder: str | Path) -> list[Path]:
    """The landing files (``*.jsonl``) in ``folder``; staged or hidden files are not landing files."""
    path = Path(folder)
    return sorted(path.glob("[!.]*.jsonl")) if path.is_dir() else []


def read_landing(folder: str | Path) -> list[Landed]:
    """Every line of every landing file, decoded and verified (raises on the first bad line)."""
    out: list[Landed] = []
    for file in landing_files(folder):
        for number, raw in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
            record = json.loads(raw)
            assert set(record) == {"entry", "payload"}, f"{file}:{number}: keys {sorted(record)}"
            payload = bytes.fromhex(record["payload"])
            entry = verify_entry(bytes.fromhex(record["entry"]), payload)
            out.append(Landed(file.name, number, entry, decode_message(payload)))
    return out


def logs_of(landed: list[Landed]) -> dict[tuple[str, int], list[Landed]]:
    """The landed entries by log, in seq order."""
    logs: dict[tuple[str, int], list[Landed]] = defaultdict(list)
    for item in landed:
        logs[item.log].append(item)
    return {log: sorted(items, key=lambda i: i.entry.seq_num) for log, items in logs.items()}


def assert_logs_accepted(folder: str | Path) -> dict[tuple[str, int], list[Landed]]:
    """Check that every log in ``folder`` is accepted in full; returns the logs (seq order)."""
    logs = logs_of(read_landing(folder))
    for log, items in logs.items():
        accepted: list[bytes] = []
        for item in items:
            entry = item.entry
            assert entry.seq_num == len(accepted) + 1, f"log {log}: seq {entry.seq_num} after {len(accepted)}"
            judgement = judge_append(entry, entry.hash, accepted)
            assert judgement.verdict is Verdict.ACCEPTED, f"log {log} seq {entry.seq_num}: {judgement}"
            # the judgement only compares links it needs; say explicitly which entries they name
            if entry.seq_num > 1:
                assert entry.backlink == accepted[-1]
            if skiplink_required(entry.seq_num):
                assert entry.skiplink == accepted[lipmaa(entry.seq_num) - 1]
            else:
                assert entry.skiplink is None
            accepted.append(entry.hash)
    return logs

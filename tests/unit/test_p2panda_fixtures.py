"""Entries signed by the real p2panda client (fixtures/p2panda, FORMAT.md section 1, SEMANTICS.md section 1).

Every entry of ``corpus.jsonl`` decodes to the fields the client recorded and verifies with its
payload; the corpus forms complete logs; every record of ``corpus_broken.jsonl``, arriving at logs
that hold the whole corpus, fails for the reason its ``broken`` field names.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from lakehouse.core.entries import decode_entry, verify_entry
from lakehouse.core.logs import Verdict, judge_append
from lakehouse.errors import EntryError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "p2panda"
CORPUS = FIXTURES / "corpus.jsonl"
BROKEN = FIXTURES / "corpus_broken.jsonl"
CORPUS_SIZE = 360
BROKEN_SIZE = 24

Record = dict[str, Any]
LogKey = tuple[str, int]


def _read(path: Path) -> list[Record]:
    if not path.is_file():
        pytest.fail(f"p2panda fixture {path} is missing; it belongs in the repository's fixtures/p2panda")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _params(path: Path, broken: bool) -> list[Any]:
    """One pytest param per record; a single failing param when the file is missing."""
    if not path.is_file():
        return [pytest.param(None, id=f"{path.name}-missing")]
    params = []
    for i, rec in enumerate(json.loads(line) for line in path.read_text().splitlines() if line.strip()):
        where = f"{rec['author'][:8]}-log{rec['log_id']}-seq{rec['seq_num']}"
        params.append(pytest.param(rec, id=f"{i:02d}-{rec['broken']}-{where}" if broken else where))
    return params


def _need(record: Record | None, path: Path) -> Record:
    if record is None:
        pytest.fail(f"p2panda fixture {path} is missing; it belongs in the repository's fixtures/p2panda")
    return record


def _hex_or_none(b: bytes | None) -> str | None:
    return None if b is None else b.hex()


@pytest.fixture(scope="module")
def corpus_logs() -> dict[LogKey, list[bytes]]:
    """The corpus as logs: (author hex, log_id) -> entry hashes in seq order."""
    by_log: dict[LogKey, dict[int, bytes]] = defaultdict(dict)
    for rec in _read(CORPUS):
        seqs = by_log[(rec["author"], rec["log_id"])]
        assert rec["seq_num"] not in seqs, f"duplicate seq {rec['seq_num']} in the corpus"
        seqs[rec["seq_num"]] = bytes.fromhex(rec["entry_hash"])
    return {key: [seqs[s] for s in sorted(seqs)] for key, seqs in by_log.items()}


def test_fixture_files_are_present_and_complete() -> None:
    corpus = _read(CORPUS)
    broken = _read(BROKEN)
    assert len(corpus) == CORPUS_SIZE, f"{CORPUS} has {len(corpus)} records, expected {CORPUS_SIZE}"
    assert len(broken) == BROKEN_SIZE, f"{BROKEN} has {len(broken)} records, expected {BROKEN_SIZE}"
    assert {r["broken"] for r in broken} == {
        "bad_signature",
        "wrong_payload",
        "wrong_backlink",
        "wrong_skiplink",
        "seq_gap",
        "fork",
        "trailing_bytes",
        "truncated",
    }


def test_corpus_covers_multi_byte_varu64_and_long_skiplinks() -> None:
    corpus = _read(CORPUS)
    assert any(r["log_id"] >= 248 for r in corpus)
    assert any(r["seq_num"] >= 248 for r in corpus)
    assert any(r["payload_size"] >= 248 for r in corpus)
    assert any(r["skiplink"] is not None and r["seq_num"] > 200 for r in corpus)


@pytest.mark.parametrize("record", _params(CORPUS, broken=False))
def test_corpus_entry_decodes_to_recorded_fields_and_verifies(record: Record | None) -> None:
    rec = _need(record, CORPUS)
    data = bytes.fromhex(rec["entry"])
    entry = decode_entry(data)
    assert entry.author.hex() == rec["author"]
    assert entry.log_id == rec["log_id"]
    assert entry.seq_num == rec["seq_num"]
    assert _hex_or_none(entry.backlink) == rec["backlink"]
    assert _hex_or_none(entry.skiplink) == rec["skiplink"]
    assert entry.payload_hash.hex() == rec["payload_hash"]
    assert entry.payload_size == rec["payload_size"]
    assert entry.signature.hex() == rec["signature"]
    assert entry.hash.hex() == rec["entry_hash"]
    assert entry.end_of_feed is False
    assert entry.to_bytes() == data
    assert verify_entry(data, bytes.fromhex(rec["payload"])) == entry


def test_corpus_forms_complete_logs_accepted_in_seq_order(corpus_logs: dict[LogKey, list[bytes]]) -> None:
    entries: dict[LogKey, dict[int, tuple[bytes, bytes]]] = defaultdict(dict)
    for rec in _read(CORPUS):
        entries[(rec["author"], rec["log_id"])][rec["seq_num"]] = (
            bytes.fromhex(rec["entry"]),
            bytes.fromhex(rec["payload"]),
        )
    assert sorted(len(v) for v in entries.values()) == [20, 20, 20, 20, 20, 260]
    for key, by_seq in entries.items():
        assert sorted(by_seq) == list(range(1, len(by_seq) + 1)), f"log {key} has gaps"
        accepted: list[bytes] = []
        for seq in sorted(by_seq):
            entry = verify_entry(*by_seq[seq])
            judgement = judge_append(entry, entry.hash, accepted)
            assert judgement.verdict is Verdict.ACCEPTED, f"log {key} seq {seq}: {judgement}"
            accepted.append(entry.hash)
        assert accepted == corpus_logs[key]
        # Arriving again, every entry is a duplicate.
        for seq in sorted(by_seq):
            entry = verify_entry(*by_seq[seq])
            assert judge_append(entry, entry.hash, accepted).verdict is Verdict.DUPLICATE


ENTRY_LEVEL = {"bad_signature", "trailing_bytes", "truncated", "wrong_payload"}
LINK_LEVEL = {
    "wrong_backlink": (Verdict.REJECTED, "wrong_backlink"),
    "wrong_skiplink": (Verdict.REJECTED, "wrong_skiplink"),
    "seq_gap": (Verdict.PENDING, "waiting"),
    "fork": (Verdict.FORK, "fork"),
}


@pytest.mark.parametrize("record", _params(BROKEN, broken=True))
def test_broken_record_fails_for_its_stated_reason(
    record: Record | None, corpus_logs: dict[LogKey, list[bytes]]
) -> None:
    rec = _need(record, BROKEN)
    reason = rec["broken"]
    data = bytes.fromhex(rec["entry"])
    payload = bytes.fromhex(rec["payload"])
    assert reason in ENTRY_LEVEL or reason in LINK_LEVEL, f"unknown broken reason {reason!r}"

    if reason in ENTRY_LEVEL:
        with pytest.raises(EntryError) as info:
            verify_entry(data, payload)
        assert info.value.code == reason, f"{rec['note']}: got {info.value.code}: {info.value}"
        assert info.value.entry_hash == rec["entry_hash"]
        return

    entry = verify_entry(data, payload)
    assert entry.hash.hex() == rec["entry_hash"]
    accepted = corpus_logs.get((rec["author"], rec["log_id"]), [])
    judgement = judge_append(entry, entry.hash, accepted)
    verdict, code = LINK_LEVEL[reason]
    assert (judgement.verdict, judgement.code) == (verdict, code), f"{rec['note']}: {judgement}"
    if verdict is Verdict.PENDING:
        assert judgement.waits_for == len(accepted) + 1
    else:
        assert judgement.waits_for is None

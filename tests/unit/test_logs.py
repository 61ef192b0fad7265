"""Judging an entry against a log's accepted prefix (SEMANTICS.md section 1)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.signing import SigningKey

from lakehouse.core.entries import Entry, lipmaa, sign_entry, skiplink_required, verify_entry, yasmf_hash
from lakehouse.core.logs import Judgement, Verdict, judge_append

KEY = SigningKey(b"\x07" * 32)
LOG_LENGTH = 40


def signed(
    seq: int,
    hashes: list[bytes],
    payload: bytes,
    *,
    backlink: bytes | None = None,
    skiplink: bytes | None = None,
) -> Entry:
    """The entry at ``seq`` whose links point into ``hashes`` (hash of seq i at index i - 1),
    unless ``backlink`` / ``skiplink`` override them."""
    if seq > 1 and backlink is None:
        backlink = hashes[seq - 2]
    if skiplink_required(seq) and skiplink is None:
        skiplink = hashes[lipmaa(seq) - 1]
    data = sign_entry(KEY, log_id=3, seq_num=seq, payload=payload, backlink=backlink, skiplink=skiplink)
    return verify_entry(data, payload)


def build_log(n: int) -> list[Entry]:
    entries: list[Entry] = []
    hashes: list[bytes] = []
    for seq in range(1, n + 1):
        entry = signed(seq, hashes, f"entry {seq}".encode())
        entries.append(entry)
        hashes.append(entry.hash)
    return entries


LOG = build_log(LOG_LENGTH)
HASHES = [e.hash for e in LOG]


def judge(entry: Entry, k: int) -> Judgement:
    """Judge ``entry`` against the first ``k`` entries of LOG."""
    return judge_append(entry, entry.hash, HASHES[:k])


def fork_at(seq: int) -> Entry:
    return signed(seq, HASHES, b"another payload")


def test_verdicts_are_strings() -> None:
    assert isinstance(Verdict.ACCEPTED, str)
    assert Verdict("accepted") is Verdict.ACCEPTED
    assert {v.value for v in Verdict} == {"accepted", "duplicate", "pending", "rejected", "fork"}


# ACCEPTED ---------------------------------------------------------------------------------------


def test_first_entry_of_an_empty_log_is_accepted() -> None:
    assert judge(LOG[0], 0) == Judgement(Verdict.ACCEPTED, None, "seq 1 extends the log", None)


def test_a_whole_log_is_accepted_in_order() -> None:
    for k, entry in enumerate(LOG):
        judgement = judge(entry, k)
        assert (judgement.verdict, judgement.code, judgement.waits_for) == (Verdict.ACCEPTED, None, None)


# DUPLICATE --------------------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [1, 4, 13, 20])
def test_an_accepted_entry_arriving_again_is_a_duplicate(seq: int) -> None:
    judgement = judge(LOG[seq - 1], 20)
    assert (judgement.verdict, judgement.code) == (Verdict.DUPLICATE, "duplicate")


# FORK -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [1, 2, 4, 13, 20])
def test_another_entry_with_matching_links_is_a_fork(seq: int) -> None:
    judgement = judge(fork_at(seq), 20)
    assert (judgement.verdict, judgement.code, judgement.waits_for) == (Verdict.FORK, "fork", None)
    assert HASHES[seq - 1].hex() in judgement.detail


def test_a_fork_of_the_next_seq_is_simply_accepted() -> None:
    # Nothing is accepted at seq 21 yet: the first to arrive extends the log.
    assert judge(fork_at(21), 20).verdict is Verdict.ACCEPTED


# REJECTED ---------------------------------------------------------------------------------------


def test_next_entry_with_a_wrong_backlink_is_rejected() -> None:
    entry = signed(21, HASHES, b"x", backlink=HASHES[18])
    judgement = judge(entry, 20)
    assert (judgement.verdict, judgement.code) == (Verdict.REJECTED, "wrong_backlink")
    assert "seq 20" in judgement.detail and HASHES[19].hex() in judgement.detail


def test_next_entry_with_a_wrong_skiplink_is_rejected() -> None:
    assert lipmaa(13) == 4
    entry = signed(13, HASHES, b"x", skiplink=HASHES[4])
    judgement = judge(entry, 12)
    assert (judgement.verdict, judgement.code) == (Verdict.REJECTED, "wrong_skiplink")
    assert "seq 4" in judgement.detail and HASHES[3].hex() in judgement.detail


def test_backlink_is_checked_before_skiplink() -> None:
    entry = signed(13, HASHES, b"x", backlink=HASHES[3], skiplink=HASHES[4])
    assert judge(entry, 12).code == "wrong_backlink"


@pytest.mark.parametrize("link", ["backlink", "skiplink"])
def test_an_entry_within_the_prefix_with_a_wrong_link_is_rejected_not_a_fork(link: str) -> None:
    entry = signed(13, HASHES, b"x", **{link: yasmf_hash(b"unrelated")})
    judgement = judge(entry, 20)
    assert (judgement.verdict, judgement.code) == (Verdict.REJECTED, f"wrong_{link}")


def test_a_later_entry_contradicting_the_prefix_is_rejected_at_once() -> None:
    # seq 13 links to seq 4 (accepted) with the wrong hash: no later arrival can fix that.
    entry = signed(13, HASHES, b"x", skiplink=HASHES[4])
    judgement = judge(entry, 10)
    assert (judgement.verdict, judgement.code, judgement.waits_for) == (
        Verdict.REJECTED,
        "wrong_skiplink",
        None,
    )


def test_a_missing_link_on_a_hand_built_entry_is_rejected() -> None:
    entry = dataclasses.replace(LOG[12], skiplink=None)
    assert judge_append(entry, entry.hash, HASHES[:12]).code == "wrong_skiplink"


# PENDING ----------------------------------------------------------------------------------------


def test_an_entry_beyond_the_next_seq_is_pending() -> None:
    judgement = judge(LOG[6], 5)
    assert judgement == Judgement(Verdict.PENDING, "waiting", judgement.detail, 6)


def test_an_entry_on_an_empty_log_waits_for_seq_1() -> None:
    judgement = judge(LOG[1], 0)
    assert (judgement.verdict, judgement.code, judgement.waits_for) == (Verdict.PENDING, "waiting", 1)


def test_a_pending_entry_whose_skiplink_matches_the_prefix_stays_pending() -> None:
    judgement = judge(LOG[12], 10)  # seq 13 -> skiplink to seq 4 (accepted, matches)
    assert (judgement.verdict, judgement.waits_for) == (Verdict.PENDING, 11)


def test_a_pending_entry_with_links_beyond_the_prefix_is_not_judged_on_them() -> None:
    # Its links point to seqs 21 and 24, not accepted yet: nothing to compare against.
    entry = signed(25, HASHES, b"x", backlink=yasmf_hash(b"a"), skiplink=yasmf_hash(b"b"))
    assert lipmaa(25) == 21
    assert judge(entry, 20).verdict is Verdict.PENDING


# Properties -------------------------------------------------------------------------------------


@given(st.integers(0, LOG_LENGTH), st.integers(1, LOG_LENGTH))
def test_entries_of_a_valid_log_get_the_verdict_their_position_implies(k: int, seq: int) -> None:
    judgement = judge(LOG[seq - 1], k)
    if seq <= k:
        assert judgement.verdict is Verdict.DUPLICATE
    elif seq == k + 1:
        assert judgement.verdict is Verdict.ACCEPTED
    else:
        assert (judgement.verdict, judgement.waits_for) == (Verdict.PENDING, k + 1)


@settings(max_examples=100, deadline=None)
@given(st.permutations(LOG[:30]))
def test_arrival_order_does_not_change_the_accepted_log(arrivals: list[Entry]) -> None:
    # Accept what fits, keep the pending, re-check them after every acceptance.
    accepted: list[bytes] = []
    pending: list[Entry] = []
    for entry in arrivals:
        pending.append(entry)
        progress = True
        while progress:
            progress = False
            for waiting in list(pending):
                judgement = judge_append(waiting, waiting.hash, accepted)
                assert judgement.verdict in (Verdict.ACCEPTED, Verdict.PENDING)
                if judgement.verdict is Verdict.ACCEPTED:
                    accepted.append(waiting.hash)
                    pending.remove(waiting)
                    progress = True
    assert accepted == HASHES[:30]
    assert pending == []


def test_blocked_logs_are_the_waiting_logs_whose_awaited_entry_was_rejected() -> None:
    from nacl.signing import SigningKey

    from lakehouse.core.entries import sign_entry, yasmf_hash
    from lakehouse.core.logs import BlockedLog, blocked_logs

    key = SigningKey(b"\x01" * 32)
    author = key.verify_key.encode().hex()
    first = sign_entry(key, log_id=3, seq_num=1, payload=b"a", backlink=None, skiplink=None)
    second = sign_entry(key, log_id=3, seq_num=2, payload=b"b", backlink=yasmf_hash(first), skiplink=None)
    rejected = [(None, "not_json", "f.jsonl", 1), (b"\x00junk", "bad_entry", "f.jsonl", 2),
                (first, "bad_signature", "f.jsonl", 3), (second, "payload_too_large", "g.jsonl", 7),
                (second, "payload_too_large", "h.jsonl", 1)]
    assert blocked_logs([(author, 3, 2), (author, 4, 2)], rejected) == [
        BlockedLog(author, 3, 2, "payload_too_large", "g.jsonl:7")]
    assert blocked_logs([(author, 3, 5)], rejected) == []  # seq 5 waits, and seq 5 was never rejected

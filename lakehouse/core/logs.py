"""Judging one new entry against a log's accepted prefix (SEMANTICS.md section 1).

A log is (author, log_id). Its accepted prefix is the run of entries seq 1..k whose backlinks (and
skiplinks, where required) equal the hashes of the accepted entries they point to. An entry that
arrives is judged against that prefix alone:

=========== =================================================================================
verdict     when
=========== =================================================================================
ACCEPTED    seq == k + 1 and its links match the prefix: it extends the log
DUPLICATE   seq <= k and it is the accepted entry at that seq
FORK        seq <= k, a different entry whose links match the prefix: the log forks there
REJECTED    a link that points into the prefix differs from the hash there (final)
PENDING     seq > k + 1 and nothing in the prefix contradicts it: it waits for seq k + 1
=========== =================================================================================

The entry is assumed valid on its own (:func:`lakehouse.core.entries.verify_entry`) and to belong
to the log whose prefix is given. What a fork does to the log (nothing at or after it is applied)
is the caller's business.

Pure: no Spark, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from lakehouse.core.entries import Entry, decode_entry, lipmaa, skiplink_required
from lakehouse.errors import EntryError

__all__ = ["BlockedLog", "Judgement", "Verdict", "blocked_logs", "judge_append"]


class Verdict(str, Enum):
    """What becomes of an entry arriving at a log (SEMANTICS.md section 1)."""

    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    PENDING = "pending"
    REJECTED = "rejected"
    FORK = "fork"


@dataclass(frozen=True)
class Judgement:
    """The verdict on one entry, with its reason.

    Attributes:
        verdict: what becomes of the entry.
        code: the reason code: None for ACCEPTED, ``"duplicate"``, ``"fork"``, ``"waiting"``
            (PENDING), ``"wrong_backlink"`` or ``"wrong_skiplink"`` (REJECTED).
        detail: a human-readable explanation.
        waits_for: for PENDING, the seq_num that must be accepted next (k + 1); else None.
    """

    verdict: Verdict
    code: str | None
    detail: str
    waits_for: int | None = None


def _short(h: bytes | None) -> str:
    return "nothing" if h is None else h.hex()


def judge_append(entry: Entry, entry_hash: bytes, accepted: Sequence[bytes]) -> Judgement:
    """Judge ``entry`` as it arrives at a log whose accepted prefix is ``accepted`` (SEMANTICS.md section 1).

    Args:
        entry: the new entry, already valid on its own, of the log ``accepted`` belongs to.
        entry_hash: its entry hash (34 bytes).
        accepted: the hashes of the accepted prefix: ``accepted[i]`` is the hash of seq i + 1.

    Returns:
        The judgement. Links are checked backlink first, then skiplink; a link is compared only
        where it points into the prefix (seq <= k).
    """
    k = len(accepted)
    seq = entry.seq_num
    if seq <= k and accepted[seq - 1] == entry_hash:
        return Judgement(Verdict.DUPLICATE, "duplicate", f"seq {seq} is already accepted with this hash")

    if seq > 1:
        links = [("backlink", seq - 1, entry.backlink)]
        if skiplink_required(seq):
            links.append(("skiplink", lipmaa(seq), entry.skiplink))
        for name, target, link in links:
            if target <= k and link != accepted[target - 1]:
                return Judgement(
                    Verdict.REJECTED,
                    f"wrong_{name}",
                    f"the {name} of seq {seq} must be the hash of seq {target} "
                    f"({accepted[target - 1].hex()}), found {_short(link)}",
                )

    if seq <= k:
        return Judgement(
            Verdict.FORK,
            "fork",
            f"seq {seq} differs from the accepted entry {accepted[seq - 1].hex()} "
            "while its links match the entries before it",
        )
    if seq == k + 1:
        return Judgement(Verdict.ACCEPTED, None, f"seq {seq} extends the log")
    return Judgement(
        Verdict.PENDING,
        "waiting",
        f"seq {seq} arrived while the log is accepted up to seq {k}; waiting for seq {k + 1}",
        waits_for=k + 1,
    )


@dataclass(frozen=True)
class BlockedLog:
    """A log whose next entry was rejected at ingest, so that its later entries wait for good.

    Attributes:
        author: 64 hex characters.
        log_id: the log.
        seq_num: the seq the log waits for, whose entry was rejected.
        reason_code: why the line was rejected (``bronze.rejected``'s ``reason_code``).
        where: ``<landing file>:<line>`` of the rejected line.
    """

    author: str
    log_id: int
    seq_num: int
    reason_code: str
    where: str


def blocked_logs(waiting: Iterable[tuple[str, int, int]],
                 rejected: Iterable[tuple[bytes | None, str, str, int]]) -> list[BlockedLog]:
    """The logs that wait behind a rejected entry: a line rejected at ingest never becomes an
    entry of its log, so every later entry of that log waits for its seq for good (SEMANTICS.md
    section 1: an entry extends a log only through an accepted backlink).

    Args:
        waiting: ``(author hex, log_id, seq waited for)`` of the logs with pending entries.
        rejected: ``(entry bytes, reason_code, source_file, source_line)`` of rejected lines
            (entry None where the line held none); lines whose entry does not decode name no log.

    Returns:
        One :class:`BlockedLog` per waiting log whose awaited seq was rejected (its first rejected
        line), by author and log.
    """
    wanted = {(author, log_id): seq for author, log_id, seq in waiting}
    found: dict[tuple[str, int], BlockedLog] = {}
    for entry_bytes, code, source_file, source_line in rejected:
        if entry_bytes is None:
            continue
        try:
            entry = decode_entry(entry_bytes)
        except EntryError:
            continue
        key = (entry.author.hex(), entry.log_id)
        if wanted.get(key) == entry.seq_num and key not in found:
            found[key] = BlockedLog(key[0], key[1], entry.seq_num, code, f"{source_file}:{source_line}")
    return [found[k] for k in sorted(found)]

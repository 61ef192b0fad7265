"""Landing lines (FORMAT.md section 2): one JSON object per line with ``entry`` and ``payload``.

:func:`check_line` decides, for one raw line, whether its entry is accepted on its own (format,
payload hash and size, signature; FORMAT.md section 1) or rejected, and why. Pure: no I/O.

Every landing line goes through it, so it is built for speed: a line is first tried on a fast
path (``orjson``, no diagnosis), and only a line that fails there is parsed again by
:func:`diagnose_line`, the standard library ``json`` path that says what is wrong. Both decide
alike: ``orjson`` accepts no line that ``json`` rejects, and where they differ (``NaN``,
``Infinity``, escaped lone surrogates) the line takes the diagnosing path.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import orjson

from lakehouse.core.entries import DEFAULT_MAX_PAYLOAD, Entry, verify_entry, yasmf_hash
from lakehouse.errors import EntryError

PAYLOAD_KEYS: tuple[str, ...] = ("payload", "operation")


class LineOutcome(NamedTuple):
    """What became of one landing line.

    Attributes:
        entry: the decoded entry when accepted, else None.
        entry_bytes / payload: the decoded bytes when the line held valid hex, else None.
        entry_hash: 34-byte hash of ``entry_bytes`` when known.
        code: None when accepted, else the reason code (``not_json``, ``not_an_object``,
            ``missing_entry``, ``missing_payload``, ``bad_hex``, ``blank_line``, or an
            :class:`~lakehouse.errors.EntryError` code).
        reason: a human-readable reason ("" when accepted).
    """

    entry: Entry | None
    entry_bytes: bytes | None
    payload: bytes | None
    entry_hash: bytes | None
    code: str | None
    reason: str

    @property
    def accepted(self) -> bool:
        """Whether the line's entry is accepted on its own."""
        return self.code is None


def _rejected(code: str, reason: str, entry_bytes: bytes | None = None, payload: bytes | None = None) -> LineOutcome:
    entry_hash = yasmf_hash(entry_bytes) if entry_bytes is not None else None
    return LineOutcome(None, entry_bytes, payload, entry_hash, code, reason)


def parse_line(raw: str) -> tuple[bytes, bytes] | LineOutcome:
    """Parse the JSON and hex of a line: ``(entry_bytes, payload)`` or a rejected outcome."""
    if not raw.strip():
        return _rejected("blank_line", "blank line")
    try:
        record = json.loads(raw)
    except ValueError as exc:
        return _rejected("not_json", f"not JSON: {exc}")
    except RecursionError:  # arrays or objects nested thousands deep: no landing line is
        return _rejected("not_json", "not JSON a landing line can be: nested too deeply")
    if not isinstance(record, dict):
        return _rejected("not_an_object", f"expected a JSON object, got {type(record).__name__}")
    entry_hex = record.get("entry")
    if not isinstance(entry_hex, str):
        return _rejected("missing_entry", "no `entry` text (hex of the entry bytes)")
    payload_hex = next((record[k] for k in PAYLOAD_KEYS if isinstance(record.get(k), str)), None)
    if payload_hex is None:
        return _rejected("missing_payload", "no `payload` (or `operation`) text (hex of the payload bytes)")
    try:
        entry_bytes = bytes.fromhex(entry_hex)
    except ValueError:
        return _rejected("bad_hex", "`entry` is not hexadecimal")
    try:
        payload = bytes.fromhex(payload_hex)
    except ValueError:
        return _rejected("bad_hex", "`payload` is not hexadecimal", entry_bytes)
    return entry_bytes, payload


def _accept(raw: str, max_payload: int) -> LineOutcome | None:
    """The outcome of a line :func:`diagnose_line` accepts, or None: the line needs the diagnosis."""
    try:
        record = orjson.loads(raw)
        entry_hex = record["entry"]
        payload_hex = record.get("payload")  # PAYLOAD_KEYS in order, unrolled: this runs per line
        if type(payload_hex) is not str:
            payload_hex = record["operation"]
        if type(entry_hex) is not str or type(payload_hex) is not str:
            return None
        entry_bytes = bytes.fromhex(entry_hex)
        payload = bytes.fromhex(payload_hex)
        entry = verify_entry(entry_bytes, payload, max_payload=max_payload)
    except (orjson.JSONDecodeError, LookupError, TypeError, AttributeError, ValueError, EntryError):
        return None
    return LineOutcome(entry, entry_bytes, payload, entry.hash, None, "")


def check_line(raw: str, *, max_payload: int = DEFAULT_MAX_PAYLOAD) -> LineOutcome:
    """Decide whether one landing line's entry is accepted on its own.

    Args:
        raw: the line without its line end.
        max_payload: the largest accepted payload, in bytes.

    Returns:
        The outcome; never raises for bad input. The same as :func:`diagnose_line`'s, sooner.
    """
    return _accept(raw, max_payload) or diagnose_line(raw, max_payload=max_payload)


def diagnose_line(raw: str, *, max_payload: int = DEFAULT_MAX_PAYLOAD) -> LineOutcome:
    """Decide like :func:`check_line`, step by step, saying for a rejected line what is wrong.

    Args:
        raw: the line without its line end.
        max_payload: the largest accepted payload, in bytes.

    Returns:
        The outcome; never raises for bad input.
    """
    parsed = parse_line(raw)
    if isinstance(parsed, LineOutcome):
        return parsed
    entry_bytes, payload = parsed
    try:
        entry = verify_entry(entry_bytes, payload, max_payload=max_payload)
    except EntryError as exc:
        return _rejected(exc.code, exc.message, entry_bytes, payload)
    return LineOutcome(entry, entry_bytes, payload, entry.hash, None, "")

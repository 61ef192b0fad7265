"""The fuzz targets: the decoders that face untrusted bytes, each with its seed corpus.

A target takes any bytes and calls one decoder. The decoder may refuse the input with the
project's own error for it; anything else is a defect (:class:`Defect`, or the exception itself):

- ``entry``: :func:`lakehouse.core.entries.decode_entry` (FORMAT.md section 1), raising only
  :class:`~lakehouse.errors.EntryError`; a decoded entry encodes back to the same bytes, and its
  signature check raises only ``EntryError`` too.
- ``message``: :func:`lakehouse.core.messages.decode_message` (FORMAT.md section 3), raising only
  :class:`~lakehouse.errors.MessageError`; a decoded message encodes to a payload that decodes and
  encodes to the same bytes (bytes, not messages, are compared: a float value may be NaN).
- ``landing``: :func:`lakehouse.core.landing.check_line` (FORMAT.md section 2), which never raises,
  and agrees with :func:`~lakehouse.core.landing.diagnose_line` on the outcome.
- ``lensfile``: :func:`lakehouse.core.lensfile.parse_lens_file` (FORMAT.md section 4), raising only
  :class:`~lakehouse.errors.LensFileError`.

Every call must also take under :data:`SLOW_SECONDS` of CPU time (:func:`checked`). Memory is
bounded by the fuzzer (``-rss_limit_mb``). Seeds come from the project's fixtures and lens files
(:func:`seeds`); inputs that once were defects are kept in ``tests/fuzz/found/<target>/`` and
replayed by the tests.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from lakehouse.core.messages import SchemaId

REPO: Final = Path(__file__).resolve().parents[2]
FOUND: Final = Path(__file__).resolve().parent / "found"
SLOW_SECONDS: Final = 0.1
"""The most CPU time one input may take (issue: any input slower than 100 ms is a defect)."""
MAX_LEN: Final = 65536
"""The longest input the fuzzer makes, in bytes."""


class Defect(AssertionError):
    """A decoder broke a promise on one input: a wrong round trip, a disagreement, or slowness."""


def entry(data: bytes) -> None:
    """``decode_entry`` refuses with ``EntryError`` or gives an entry that encodes back to ``data``."""
    from lakehouse.core.entries import decode_entry, verify_signature
    from lakehouse.errors import EntryError

    try:
        decoded = decode_entry(data)
    except EntryError:
        return
    if decoded.to_bytes() != data:
        raise Defect("a decoded entry does not encode back to its bytes")
    with contextlib.suppress(EntryError):
        verify_signature(decoded)


def message(data: bytes) -> None:
    """``decode_message`` refuses with ``MessageError`` or gives a message whose encoding is
    stable: decoded and encoded again, the same bytes."""
    from lakehouse.core.messages import decode_message, encode_message
    from lakehouse.errors import MessageError

    try:
        decoded = decode_message(data)
    except MessageError:
        return
    encoded = encode_message(decoded)  # compared as bytes: a float value may be NaN, unequal to itself
    if encode_message(decode_message(encoded)) != encoded:
        raise Defect("a decoded message does not survive its own encoding")


def landing(data: bytes) -> None:
    """``check_line`` never raises and agrees with ``diagnose_line`` (the line as the ingest
    workers read it: UTF-8, other bytes kept as lone surrogates, without its line end)."""
    from lakehouse.core.landing import check_line, diagnose_line

    raw = data.decode("utf-8", "surrogateescape").split("\n", 1)[0]
    fast, slow = check_line(raw, max_payload=4096), diagnose_line(raw, max_payload=4096)
    if (fast.code, fast.entry_hash) != (slow.code, slow.entry_hash):
        raise Defect(f"check_line says {fast.code}, diagnose_line {slow.code}")


def lensfile(data: bytes) -> None:
    """``parse_lens_file`` refuses with ``LensFileError`` or gives a schema message."""
    from lakehouse.core.lensfile import parse_lens_file
    from lakehouse.errors import LensFileError

    try:
        parse_lens_file(data.decode("utf-8", "replace"), file="fuzz.yaml", resolve_schema=_resolve)
    except LensFileError:
        return


def _resolve(name: str) -> SchemaId:
    """Schema names in fuzzed lens files: ``profile`` is known, anything else is not."""
    from lakehouse.core.messages import SchemaId

    if name == "profile":
        return SchemaId(bytes(32), 1)
    raise KeyError(name)


TARGETS: Final[dict[str, Callable[[bytes], None]]] = {
    "entry": entry, "message": message, "landing": landing, "lensfile": lensfile}


def checked(target: Callable[[bytes], None]) -> Callable[[bytes], None]:
    """``target`` that also fails with :class:`Defect` when one input takes over
    :data:`SLOW_SECONDS` of CPU time."""

    def run(data: bytes) -> None:
        started = time.process_time()
        target(data)
        spent = time.process_time() - started
        if spent > SLOW_SECONDS:
            raise Defect(f"{spent * 1000:.0f} ms of CPU for one input of {len(data)} bytes")

    return run


def _fixture_lines() -> Iterator[dict[str, str]]:
    for name in ("corpus.jsonl", "corpus_broken.jsonl"):
        for line in (REPO / "fixtures" / "p2panda" / name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield json.loads(line)


def _generated_lines() -> list[dict[str, str] | str]:
    """A small generated history's landing lines (:func:`tests.simulate.simulate`): the project's
    own messages, log defects and malformed lines among them (six seeds, about 400 lines)."""
    from tests.simulate import simulate

    return [line for seed in range(1, 7) for line in simulate(seed=seed).lines]


def seeds(target: str) -> list[bytes]:
    """The seed inputs of ``target``: entries, payloads and landing lines of the p2panda fixtures
    and of a small generated history, and the project's lens files."""
    records = [*_fixture_lines(), *(r for r in _generated_lines() if isinstance(r, dict))]
    if target == "entry":
        return [bytes.fromhex(r["entry"]) for r in records if _is_hex(r.get("entry"))]
    if target == "message":
        return [bytes.fromhex(r["payload"]) for r in records if _is_hex(r.get("payload"))]
    if target == "landing":
        return [(r if isinstance(r, str) else json.dumps(r)).encode("utf-8", "surrogateescape")
                for r in [*_fixture_lines(), *_generated_lines()]]
    if target == "lensfile":
        return [path.read_bytes() for path in sorted((REPO / "lenses").rglob("*.yaml"))]
    raise KeyError(target)


def found(target: str) -> list[Path]:
    """Inputs that were defects of ``target`` once, kept so that they stay fixed."""
    folder = FOUND / target
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []


def _is_hex(text: object) -> bool:
    if not isinstance(text, str):
        return False
    try:
        bytes.fromhex(text)
    except ValueError:
        return False
    return True

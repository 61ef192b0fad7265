"""Reading lens files from disk (FORMAT.md section 4); the parsing itself is pure, in the core."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lakehouse.core.entries import DEFAULT_MAX_PAYLOAD
from lakehouse.core.lensfile import parse_lens_file
from lakehouse.core.messages import SchemaId, SchemaMeta, SchemaMigration, SchemaRevert
from lakehouse.errors import LensFileError

LENS_FILE_FACTOR = 2
"""A lens file is read only up to this many times the largest accepted payload, in bytes: YAML
takes more bytes than the CBOR message it gives, so a larger file cannot give a message ingest
accepts, and reading YAML of that size takes minutes (a 9 MB list of fields took 50 s)."""


def load_lens_file(
    path: str | Path, *, resolve_schema: Callable[[str], SchemaId] | None = None,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
) -> SchemaMeta | SchemaMigration | SchemaRevert:
    """Read and parse ``lenses/<schema>/NNN.yaml``.

    Args:
        path: the lens file.
        resolve_schema: turns a relation's schema name into a schema id.
        max_payload: the largest payload ingest accepts, in bytes; a file over
            :data:`LENS_FILE_FACTOR` times that is refused unread.

    Raises:
        LensFileError: unreadable file, a file too large (``too_large``), or a defect (with its line).
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > LENS_FILE_FACTOR * max_payload:
            raise LensFileError(f"a lens file of {size:,} bytes: its message could not be accepted by ingest "
                                f"(payloads of at most {max_payload:,} bytes, setting max_payload), so it is not "
                                "read", file=str(path), code="too_large")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LensFileError(f"cannot read lens file: {exc}", file=str(path), code="unreadable") from None
    return parse_lens_file(text, file=str(path), resolve_schema=resolve_schema)

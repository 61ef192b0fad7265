"""Reading lens files from disk (FORMAT.md section 4); the parsing itself is pure, in the core."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lakehouse.core.lensfile import parse_lens_file
from lakehouse.core.messages import SchemaId, SchemaMeta, SchemaMigration, SchemaRevert
from lakehouse.errors import LensFileError


def load_lens_file(
    path: str | Path, *, resolve_schema: Callable[[str], SchemaId] | None = None
) -> SchemaMeta | SchemaMigration | SchemaRevert:
    """Read and parse ``lenses/<schema>/NNN.yaml``.

    Args:
        path: the lens file.
        resolve_schema: turns a relation's schema name into a schema id.

    Raises:
        LensFileError: unreadable file, or a defect (with its line).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LensFileError(f"cannot read lens file: {exc}", file=str(path), code="unreadable") from None
    return parse_lens_file(text, file=str(path), resolve_schema=resolve_schema)

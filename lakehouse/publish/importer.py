"""The snapshot importer: a folder of table snapshots -> signed messages (``lakehouse import snapshots``).

A folder holds TSV or CSV snapshots of one table; their file names sort oldest first. Each
snapshot is turned into the messages its author would have published, through a
:class:`~lakehouse.publish.publisher.Publisher` (landing files, then ``make ingest``):

- the first snapshot: a ``schema-meta`` (the schema's name is ``--schema``) and a
  ``schema-migration`` creating one ``text`` field per column, then a ``create`` per row;
- every later snapshot: a ``schema-migration`` for the header change, if any (fields of removed
  columns removed, fields of new columns created), then ``create`` (new keys), ``update`` (changed
  fields only) and ``delete`` (keys gone) messages from the row diff by key.

Every snapshot lands in a landing file of its own, so ingesting after each import step makes each
snapshot one batch. The module has two layers: pure functions (:func:`parse_snapshot`,
:func:`field_names`, :func:`key_rows`, :func:`diff_header`, :func:`diff_rows`,
:func:`plan_snapshot`, :func:`advance_model`) that read a snapshot's bytes and compute the
messages, and :func:`import_snapshots`, which lists the folder, keeps the import state and
publishes. :func:`imported_snapshots` reads what was imported (which schema version each snapshot
ended at, how many messages it produced).

Decisions
    - **Files**: ``*.tsv`` and ``*.tab`` are tab-separated without quoting (as GOV.UK registers
      write them); ``*.csv`` is comma-separated with ``"`` quoting (RFC 4180). Other files and
      hidden files are ignored (and listed). Files are taken in plain sorted order of their names.
    - **Encoding**: UTF-8, a byte-order mark dropped; a file that is not UTF-8 is read as
      Windows-1252 (Latin-1 where that fails) and reported. A file with a NUL byte, or with
      control characters in over a tenth of its first 64 KiB, is binary (an image, an archive, a
      workbook saved as ``.csv``) and refused, not imported as rows of garbage.
    - **Mess**: Windows (and old Mac) line ends are read as line ends; blank lines (and lines of
      only delimiters and spaces) are skipped; a row with more cells than the header loses the
      extra cells (empty ones, e.g. trailing tabs, silently but counted; others reported); a row
      with fewer cells has the missing ones empty; header cells are stripped of spaces and empty
      trailing header cells (a trailing tab) are dropped. All of this is reported per snapshot,
      counted, with the first few line numbers; none of it stops the import.
    - **Field names** (FORMAT.md's ``^[a-z][a-z0-9_]{0,63}$``), see :func:`normalise_field_name`:
      camelCase split, accents dropped, lower case, every run of other characters one ``_``,
      ``_`` trimmed at both ends, ``f_`` put before a leading digit, ``column_<n>`` for a header
      with no letter or digit, cut to 64 characters; a name met twice in one header gets ``_2``,
      ``_3``, ... Columns are the same field across snapshots when their names normalise alike.
    - **Values**: every field is ``text``; a cell is kept verbatim (no trimming: a fix of a
      trailing space is an update like any other), except that an empty or all-whitespace cell is
      **no value**: the key is left out of a ``create`` and set to null in an ``update``.
    - **Key**: the first column, or ``--key COLUMN`` (a header as written or its field name).
      The key cell is stripped of surrounding spaces (reported); a row whose key is empty is
      skipped (reported). A key seen twice in one snapshot: **the last row wins** (reported, with
      both lines); the instance keeps the position of the first. Without ``--key``, the key is
      whatever column comes first in each snapshot (a change is reported); with ``--key``, the key
      follows its field, and when that column disappears, the new column holding the old keys
      (sharing at least 80 % of the smaller of its values and the old keys) becomes the key.
    - **Renames**: a removed and an added column whose values agree on at least 80 % of the rows
      that have a value in either (rows matched by key) are a rename (:func:`detect_renames`),
      published as one ``rename`` field change (FORMAT.md section 3): the field keeps its values
      under the new name, no instance is written again, and a revert brings the old name back
      with them. When another field of the schema has had the new name (a removed column that
      comes back, or a name a rename left), a rename to it would be invalid (SEMANTICS.md section
      2): the pair is reported as a rename but published as what it then is, the old field
      removed, the new one created (or re-created), and an ``update`` per row whose value
      differs. A column renamed back to a name only it had is a rename again.
    - **Removed columns**: only the field is removed; instances keep their old values hidden
      (SEMANTICS.md: fields are never forgotten). When a column of that name comes back, its
      re-created field shows those old values again, so the row diff compares against them.
    - **Column order**: the lens keeps creation order; a reordered header changes nothing.
    - **Empty snapshot** (a header and no rows): every instance is deleted. A file without even a
      header is refused.

Import state
    ``<key store>/<signer>.imports.json`` (beside the publisher state of the signing key): per
    schema name the schema id, the key column, the fields, the model of the instances (key ->
    instance id and every value written, hidden ones included) and, per imported snapshot, its
    file name, sha256, the schema version it ended at, its message counts and its landing file.
    Re-running publishes nothing; new files (sorting after the last imported one) are imported;
    an imported file whose bytes changed, or a new file sorting before an imported one, is
    refused. Each snapshot is committed in two steps (the new state is written as *pending*, then
    the landing file lands, then the pending state is committed), so a run stopped at any point
    is settled by the next one by comparing the publisher's log lengths with the pending state.
    A schema changed outside the importer since its last import (a revert, a migration, instances
    published by hand) is refused: the row diff would be computed against a wrong picture.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import time
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final, Literal

from lakehouse.core.entries import DEFAULT_MAX_PAYLOAD
from lakehouse.core.messages import FieldChange, SchemaId, SchemaMeta, SchemaMigration
from lakehouse.core.schemas import SchemaVersions
from lakehouse.errors import SnapshotError
from lakehouse.lock import LockBusy, flocked
from lakehouse.publish.keys import DEFAULT_KEY, KeyStore
from lakehouse.publish.publisher import Publisher

__all__ = [
    "DELIMITERS",
    "RENAME_THRESHOLD",
    "Column",
    "HeaderDiff",
    "ImportSummary",
    "ImportedSnapshot",
    "Instance",
    "Issue",
    "Record",
    "Rename",
    "RowDiff",
    "SnapshotPlan",
    "SnapshotReport",
    "SnapshotTable",
    "TableModel",
    "advance_model",
    "choose_key_field",
    "detect_renames",
    "diff_header",
    "diff_rows",
    "field_names",
    "import_snapshots",
    "import_state_path",
    "imported_snapshots",
    "key_rows",
    "list_snapshots",
    "normalise_field_name",
    "parse_snapshot",
    "plan_snapshot",
    "read_snapshot",
]

DELIMITERS: Final[dict[str, str]] = {".tsv": "\t", ".tab": "\t", ".csv": ","}
"""File suffix (lower case) -> delimiter. Only these files of a folder are snapshots."""
RENAME_THRESHOLD: Final = 0.8
"""Share of agreeing values (or of old keys, for the key column) that makes a rename."""
STATE_VERSION: Final = 1
_EXAMPLE_LINES: Final = 5
_FIELD_TYPE: Final = "text"


# --------------------------------------------------------------------------------------------
# reading a snapshot (pure)
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Issue:
    """Something a snapshot needed fixing or deciding, reported and not fatal.

    Attributes:
        code: ``windows_line_ends``, ``not_utf8``, ``byte_order_mark``, ``blank_lines``,
            ``trailing_delimiters``, ``extra_cells``, ``short_rows``, ``header_trailing_delimiters``,
            ``empty_header``, ``duplicate_column``, ``missing_key``, ``key_whitespace``,
            ``duplicate_key``, ``key_column_changed``, ``key_column_renamed``, ``column_order``.
        level: ``note`` (handled, nothing lost) or ``warning`` (a decision that drops or
            chooses data: duplicate keys, extra cells, rows without key).
        message: what happened and what was done.
        count: how many rows (or cells, columns) it concerns.
        lines: the first few 1-based line numbers concerned (empty when not about lines).
    """

    code: str
    level: Literal["note", "warning"]
    message: str
    count: int = 1
    lines: tuple[int, ...] = ()

    def __str__(self) -> str:
        where = ""
        if self.lines:
            more = ", ..." if self.count > len(self.lines) else ""
            where = f" (line{'s' if len(self.lines) > 1 else ''} {', '.join(map(str, self.lines))}{more})"
        return f"{self.level}: {self.message}{where}"


class _Issues:
    """Collects issues of one code into one :class:`Issue` with a count and example lines."""

    def __init__(self) -> None:
        self._found: dict[str, tuple[str, Literal["note", "warning"], int, list[int]]] = {}
        self._single: list[Issue] = []

    def count(self, code: str, level: Literal["note", "warning"], message: str, line: int | None) -> None:
        _, _, n, lines = self._found.get(code, (message, level, 0, []))
        if line is not None and len(lines) < _EXAMPLE_LINES:
            lines.append(line)
        self._found[code] = (message, level, n + 1, lines)

    def add(self, issue: Issue) -> None:
        self._single.append(issue)

    def issues(self) -> tuple[Issue, ...]:
        grouped = [Issue(code, level, message.format(n=n, s="" if n == 1 else "s"), n, tuple(lines))
                   for code, (message, level, n, lines) in self._found.items()]
        return (*grouped, *self._single)


@dataclass(frozen=True)
class Column:
    """One column of a snapshot's header.

    Attributes:
        header: the header cell as written (stripped of surrounding spaces).
        field: its field name (:func:`field_names`).
    """

    header: str
    field: str


@dataclass(frozen=True)
class Record:
    """One data row of a snapshot.

    Attributes:
        line: 1-based line number where the row starts.
        values: field name -> cell, for the non-empty cells only (in column order).
    """

    line: int
    values: dict[str, str]


@dataclass(frozen=True)
class SnapshotTable:
    """A snapshot file read and normalised by :func:`parse_snapshot`.

    Attributes:
        name: the file name.
        sha256: hex digest of the file's bytes.
        columns: the header, in file order.
        records: the data rows, in file order (blank lines skipped).
        issues: what was fixed while reading.
    """

    name: str
    sha256: str
    columns: tuple[Column, ...]
    records: tuple[Record, ...]
    issues: tuple[Issue, ...] = ()

    @property
    def fields(self) -> tuple[str, ...]:
        """The field names of the columns, in file order."""
        return tuple(c.field for c in self.columns)


_CAMEL: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_NAME: Final = re.compile(r"[^a-z0-9]+")


def normalise_field_name(header: str, position: int) -> str:
    """The field name of one header cell (FORMAT.md section 3's ``^[a-z][a-z0-9_]{0,63}$``).

    camelCase is split (``officialName`` -> ``official_name``), accents are dropped, letters are
    lower-cased, every run of other characters becomes one ``_``, and ``_`` is trimmed from both
    ends; a name starting with a digit gets ``f_`` in front, a header with no letter or digit
    becomes ``column_<position>``; the result is cut to 64 characters.

    Args:
        header: the header cell as written.
        position: the column's 1-based position (names headers that have no letter or digit).

    Returns:
        A valid field name, e.g. ``"local-authority-eng"`` -> ``"local_authority_eng"``.

    Example:
        >>> normalise_field_name("Start Date (UTC)", 3)
        'start_date_utc'
    """
    text = unicodedata.normalize("NFKD", _CAMEL.sub("_", header.strip()))
    text = text.encode("ascii", "ignore").decode("ascii").lower()
    name = _NOT_NAME.sub("_", text).strip("_")
    if not name:
        name = f"column_{position}"
    elif not name[0].isalpha():
        name = f"f_{name}"
    return name[:64].rstrip("_")


def field_names(header: Sequence[str]) -> tuple[tuple[Column, ...], tuple[Issue, ...]]:
    """Name the columns of a header: :func:`normalise_field_name`, made unique.

    A name met a second time in the same header gets ``_2`` (then ``_3``, ...), cut so that the
    whole stays within 64 characters.

    Args:
        header: the header cells as written (already without empty trailing cells).

    Returns:
        The columns, in header order, and issues: ``empty_header`` and ``duplicate_column``
        (warnings).
    """
    issues = _Issues()
    columns: list[Column] = []
    taken: set[str] = set()
    for position, cell in enumerate(header, start=1):
        text = cell.strip()
        name = normalise_field_name(text, position)
        if not text:
            issues.add(Issue("empty_header", "warning", f"column {position} has no header: named {name}"))
        base, n = name, 1
        while name in taken:
            n += 1
            suffix = f"_{n}"
            name = base[: 64 - len(suffix)] + suffix
        if name != base:
            issues.add(Issue("duplicate_column", "warning",
                             f"column {position} ({text!r}) names field {base} again: named {name}"))
        taken.add(name)
        columns.append(Column(text, name))
    return tuple(columns), issues.issues()


_CONTROL_BYTES: Final = bytes(b for b in range(32) if b not in b"\t\n\r\f") + b"\x7f"
_BINARY_SAMPLE: Final = 65536
_BINARY_SHARE: Final = 0.1


def _refuse_binary(data: bytes, name: str) -> None:
    """Refuse bytes that are not a text table: a NUL byte anywhere (no text encoding a snapshot
    may have writes one), or control characters (but tab, line ends and form feed) in more than a
    tenth of the first 64 KiB, as in an image, an archive or a spreadsheet workbook.

    Raises:
        SnapshotError: ``binary_snapshot``, with the line and byte where the first such byte is.
    """
    sample = data[:_BINARY_SAMPLE]
    at = data.find(b"\0")
    if at < 0:
        controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
        if not sample or controls <= _BINARY_SHARE * len(sample):
            return
        at = min(i for i in (sample.find(bytes([b])) for b in _CONTROL_BYTES) if i >= 0)
    line = data[:at].count(b"\n") + 1
    raise SnapshotError(f"not a text table: a binary file (byte {data[at]:#04x} at line {line}, offset {at}); "
                        f"snapshots are UTF-8 or Windows-1252 text ({', '.join(DELIMITERS)})",
                        code="binary_snapshot", file=name)


def _decode(data: bytes, issues: _Issues) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        issues.count("byte_order_mark", "note", "a UTF-8 byte-order mark was dropped", None)
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        try:
            text = data.decode("cp1252")
            issues.count("not_utf8", "warning", "not UTF-8: read as Windows-1252", line)
        except UnicodeDecodeError:
            text = data.decode("latin-1")
            issues.count("not_utf8", "warning", "not UTF-8: read as Latin-1", line)
        return text


def _blank(cells: Sequence[str]) -> bool:
    return all(not c.strip() for c in cells)


def parse_snapshot(data: bytes, *, name: str, delimiter: str = "\t") -> SnapshotTable:
    """Read one snapshot file's bytes into a normalised table.

    The first non-blank line is the header. Tab-separated files are read without quoting (a
    ``"`` is an ordinary character); comma-separated ones with RFC 4180 quoting, so a quoted cell
    may span lines. See the module docstring for how mess is handled.

    Args:
        data: the file's bytes.
        name: the file name (for the table and for errors).
        delimiter: ``"\\t"`` or ``","`` (:data:`DELIMITERS` by suffix).

    Returns:
        The table: columns (header cells and their field names), records (line number and
        non-empty cells by field name), and the issues met.

    Raises:
        SnapshotError: ``empty_snapshot`` when the file has no header line, ``binary_snapshot``
            when it is not text (:func:`_refuse_binary`), ``bad_snapshot`` when the CSV reader
            fails (the line is named).
    """
    _refuse_binary(data, name)
    issues = _Issues()
    sha256 = hashlib.sha256(data).hexdigest()
    text = _decode(data, issues)
    crlf = text.count("\r\n")
    if crlf:
        issues.count("windows_line_ends", "note", f"Windows line ends (CR LF) on {crlf} lines", None)
    source = io.StringIO(text, newline="")
    if delimiter == "\t":
        reader = csv.reader(source, delimiter=delimiter, quoting=csv.QUOTE_NONE, strict=False)
    else:
        reader = csv.reader(source, delimiter=delimiter, quoting=csv.QUOTE_MINIMAL, strict=False)
    header: list[str] | None = None
    columns: tuple[Column, ...] = ()
    records: list[Record] = []
    start = 1
    try:
        for cells in reader:
            line, start = start, reader.line_num + 1
            if _blank(cells):
                if header is not None or cells:
                    issues.count("blank_lines", "note", "{n} blank line{s} skipped", line)
                continue
            if header is None:
                header = [c.strip() for c in cells]
                while header and not header[-1]:
                    header.pop()
                    issues.count("header_trailing_delimiters", "note",
                                 "an empty header cell at the end of the header (a trailing delimiter) "
                                 "was dropped", line)
                columns, named = field_names(header)
                for issue in named:
                    issues.add(issue)
                continue
            width = len(columns)
            if len(cells) > width:
                extra = cells[width:]
                if _blank(extra):
                    issues.count("trailing_delimiters", "note",
                                 "{n} row{s} with empty cells beyond the header (trailing delimiters) "
                                 "dropped", line)
                else:
                    issues.count("extra_cells", "warning",
                                 "{n} row{s} with non-empty cells beyond the header: those cells dropped",
                                 line)
                cells = cells[:width]
            elif len(cells) < width:
                issues.count("short_rows", "note",
                             "{n} row{s} with fewer cells than the header: the missing cells read as empty",
                             line)
            values = {col.field: cell for col, cell in zip(columns, cells, strict=False) if cell.strip()}
            records.append(Record(line, values))
    except csv.Error as exc:
        raise SnapshotError(f"line {reader.line_num}: {exc}", code="bad_snapshot", file=name) from None
    if header is None:
        raise SnapshotError("the file has no header line", code="empty_snapshot", file=name)
    return SnapshotTable(name, sha256, columns, tuple(records), issues.issues())


def read_snapshot(path: str | os.PathLike[str]) -> SnapshotTable:
    """Read one snapshot file (:func:`parse_snapshot`, delimiter chosen by suffix).

    Raises:
        SnapshotError: ``bad_snapshot`` for an unknown suffix or an unreadable file, and the
            errors of :func:`parse_snapshot`.
    """
    path = Path(path)
    delimiter = DELIMITERS.get(path.suffix.lower())
    if delimiter is None:
        raise SnapshotError(f"not a snapshot file (expected {', '.join(DELIMITERS)})", file=str(path))
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SnapshotError(f"cannot read: {exc.strerror}", file=str(path)) from None
    return parse_snapshot(data, name=path.name, delimiter=delimiter)


def list_snapshots(folder: str | os.PathLike[str]) -> tuple[list[Path], list[str]]:
    """The snapshot files of a folder, oldest first, and the names of the files ignored.

    Args:
        folder: the folder (not searched recursively).

    Returns:
        ``(snapshots, ignored)``: files whose suffix is in :data:`DELIMITERS`, sorted by name;
        the names of the other non-hidden entries.

    Raises:
        SnapshotError: ``no_snapshots`` when the folder does not exist or holds no snapshot.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise SnapshotError("not a folder", code="no_snapshots", file=str(folder))
    snapshots, ignored = [], []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.startswith("."):
            continue
        if entry.is_file() and entry.suffix.lower() in DELIMITERS:
            snapshots.append(entry)
        else:
            ignored.append(entry.name)
    if not snapshots:
        raise SnapshotError(f"no snapshot files ({', '.join('*' + s for s in DELIMITERS)}) in the folder",
                            code="no_snapshots", file=str(folder))
    return snapshots, ignored


# --------------------------------------------------------------------------------------------
# keys, header and row diffs (pure)
# --------------------------------------------------------------------------------------------
@dataclass
class Instance:
    """What the importer published for one key.

    Attributes:
        id: the instance id (68 hex: the create's entry hash).
        values: field name -> the last value written, for every field ever written (fields
            since removed included, they are hidden in the lake, not forgotten); no value = absent.
    """

    id: str
    values: dict[str, str]


@dataclass
class TableModel:
    """What the lake holds for an imported schema, as far as the importer wrote it.

    Attributes:
        fields: the visible fields (the current lens), in lens order.
        key_field: the field that keyed the last snapshot.
        instances: key -> its live instance, in creation order.
        header: the last snapshot's fields, in header order.
    """

    fields: tuple[str, ...]
    key_field: str
    instances: dict[str, Instance]
    header: tuple[str, ...] = ()


def choose_key_field(table: SnapshotTable, *, key_column: str | None, model: TableModel | None) -> str:
    """The field that keys this snapshot's rows.

    Without ``key_column``: the first column. With it: the previous key field when the snapshot
    has it, else the column whose header or field name is ``key_column``, else (a renamed key
    column) the new column sharing the most values with the old keys, if they share at least
    :data:`RENAME_THRESHOLD` of the smaller of the two sets (so rows added or removed at the
    same time do not hide the rename).

    Args:
        table: the snapshot.
        key_column: the ``--key`` option (a header as written or a field name), or None.
        model: the state after the previous snapshot, or None for the first.

    Returns:
        A field name of ``table``.

    Raises:
        SnapshotError: ``no_key_column`` when the snapshot has no columns or no key column
            can be found.
    """
    if not table.columns:
        raise SnapshotError("the header has no columns", code="no_key_column", file=table.name)
    if key_column is None:
        return table.columns[0].field
    fields = table.fields
    if model is not None and model.key_field in fields:
        return model.key_field
    wanted = {key_column, key_column.strip(), normalise_field_name(key_column, 0)}
    for col in table.columns:
        if col.header in wanted or col.field in wanted:
            return col.field
    if model is not None and model.instances:
        best, best_share = None, 0.0
        for name in fields:
            if name in model.fields:
                continue
            values = {r.values[name].strip() for r in table.records if name in r.values}
            if values:
                share = len(values & model.instances.keys()) / min(len(values), len(model.instances))
                if share > best_share:
                    best, best_share = name, share
        if best is not None and best_share >= RENAME_THRESHOLD:
            return best
    was = f" (the key field was {model.key_field})" if model is not None else ""
    raise SnapshotError(f"no key column {key_column!r}{was} in the header: "
                        f"{', '.join(c.header for c in table.columns)}",
                        code="no_key_column", file=table.name)


def key_rows(table: SnapshotTable, key_field: str) -> tuple[dict[str, dict[str, str]], tuple[Issue, ...]]:
    """The snapshot's rows by key, with the documented rules for bad keys.

    The key cell is stripped of surrounding spaces; a row with an empty key is skipped; a key met
    twice: the last row wins, at the position of the first.

    Args:
        table: the snapshot.
        key_field: the key's field name (a field of ``table``).

    Returns:
        ``(rows, issues)``: key -> non-empty values by field name (the key field included, as
        stripped), in first-appearance order; issues ``missing_key``, ``key_whitespace`` and
        one ``duplicate_key`` per repeated key (warnings, but for ``key_whitespace``).
    """
    issues = _Issues()
    rows: dict[str, dict[str, str]] = {}
    seen: dict[str, list[int]] = {}
    for record in table.records:
        raw = record.values.get(key_field, "")
        key = raw.strip()
        if not key:
            issues.count("missing_key", "warning", "{n} row{s} with an empty key skipped", record.line)
            continue
        values = record.values
        if key != raw:
            issues.count("key_whitespace", "note", "{n} key{s} stripped of surrounding spaces", record.line)
            values = {**values, key_field: key}
        rows[key] = values
        seen.setdefault(key, []).append(record.line)
    for key, lines in seen.items():
        if len(lines) > 1:
            issues.add(Issue("duplicate_key", "warning",
                             f"key {key!r} appears {len(lines)} times: the last row (line {lines[-1]}) wins",
                             len(lines), tuple(lines[:_EXAMPLE_LINES])))
    return rows, issues.issues()


@dataclass(frozen=True)
class Rename:
    """A removed and an added column that look like one column renamed.

    Attributes:
        old: the removed field.
        new: the added field.
        similarity: share of agreeing values on the rows with a value in either (0..1).
        published: whether it is published as a ``rename``; False when another field of the
            schema has had the new name (then: remove + create + an update per row whose value
            differs).
    """

    old: str
    new: str
    similarity: float
    published: bool = True


def detect_renames(removed: Sequence[str], added: Sequence[str], old: Mapping[str, Instance],
                   new: Mapping[str, Mapping[str, str]], *,
                   threshold: float = RENAME_THRESHOLD) -> tuple[Rename, ...]:
    """Pair removed and added columns whose values mostly agree.

    For each pair, over the keys in both ``old`` and ``new``: the share of rows where the old
    field's value equals the new field's, among the rows with a value in either. Pairs at or
    above ``threshold`` are taken best first, each field in one pair at most.

    Args:
        removed: fields of the old header missing from the new one.
        added: fields of the new header missing from the old one.
        old: key -> instance (its values before this snapshot).
        new: key -> this snapshot's values.
        threshold: the least share that makes a rename.

    Returns:
        The renames, in the order of ``added``.
    """
    common = [k for k in new if k in old]
    scored: list[tuple[float, int, int]] = []
    for i, r in enumerate(removed):
        for j, a in enumerate(added):
            agree = either = 0
            for k in common:
                before, after = old[k].values.get(r), new[k].get(a)
                if before is None and after is None:
                    continue
                either += 1
                agree += before == after
            if either and agree / either >= threshold:
                scored.append((agree / either, -i, -j))
    pairs: dict[int, Rename] = {}
    used: set[int] = set()
    for score, mi, mj in sorted(scored, reverse=True):
        if -mi in used or -mj in pairs:
            continue
        used.add(-mi)
        pairs[-mj] = Rename(removed[-mi], added[-mj], round(score, 3))
    return tuple(pairs[j] for j in sorted(pairs))


@dataclass(frozen=True)
class HeaderDiff:
    """How a snapshot's header differs from the current fields.

    Attributes:
        old: the fields before (lens order).
        new: the snapshot's fields (header order).
        removed: fields of ``old`` not in ``new`` (lens order).
        added: fields of ``new`` not in ``old`` (header order).
        renames: removed/added pairs taken for renames (those ``published`` are ``rename`` changes;
            their fields are neither removed nor created).
        reordered: the columns kept appear in another order (nothing is published for it).
    """

    old: tuple[str, ...]
    new: tuple[str, ...]
    removed: tuple[str, ...]
    added: tuple[str, ...]
    renames: tuple[Rename, ...] = ()
    reordered: bool = False

    @property
    def renaming(self) -> dict[str, str]:
        """Old name -> new name of each rename published as one."""
        return {r.old: r.new for r in self.renames if r.published}

    @property
    def changes(self) -> tuple[FieldChange, ...]:
        """The field changes: renames and removes (lens order), then creates of ``text`` fields
        (header order)."""
        renaming = self.renaming
        return (*(FieldChange(name, "rename", to=renaming[name]) if name in renaming else FieldChange(name, "remove")
                  for name in self.removed),
                *(FieldChange(name, "create", type=_FIELD_TYPE) for name in self.added
                  if name not in renaming.values()))

    @property
    def migration(self) -> SchemaMigration | None:
        """The ``schema-migration`` to publish, or None when the fields are unchanged."""
        changes = self.changes
        return SchemaMigration(changes) if changes else None

    @property
    def fields_after(self) -> tuple[str, ...]:
        """The lens after the migration: kept and renamed fields in lens order (a rename keeps the
        place), then the added ones."""
        renaming = self.renaming
        return (*(renaming.get(f, f) for f in self.old if f not in self.removed or f in renaming),
                *(f for f in self.added if f not in renaming.values()))


def diff_header(old_fields: Sequence[str], new_fields: Sequence[str], *,
                old: Mapping[str, Instance] | None = None,
                new: Mapping[str, Mapping[str, str]] | None = None,
                old_header: Sequence[str] | None = None,
                may_rename: Callable[[str, str], bool] | None = None) -> HeaderDiff:
    """Compare the current fields with a snapshot's header.

    Args:
        old_fields: the current lens's fields (empty for the first snapshot).
        new_fields: the snapshot's field names, in header order.
        old: key -> instance before this snapshot, to detect renames (none detected without).
        new: key -> this snapshot's values, to detect renames.
        old_header: the previous snapshot's fields in header order, to tell a reordering
            (``old_fields`` when not given).
        may_rename: whether the schema may rename a field to a name
            (:meth:`SchemaVersions.may_rename`: not when another field has had it); a rename it
            refuses is published as remove + create. None: every rename may.

    Returns:
        The diff; ``diff.migration`` is what to publish.
    """
    old_set, new_set = set(old_fields), set(new_fields)
    removed = tuple(f for f in old_fields if f not in new_set)
    added = tuple(f for f in new_fields if f not in old_set)
    before = old_fields if old_header is None else old_header
    kept_old = [f for f in before if f in new_set]
    kept_new = [f for f in new_fields if f in set(before)]
    renames = detect_renames(removed, added, old, new) if old and new and removed and added else ()
    if may_rename is not None:
        renames = tuple(r if may_rename(r.old, r.new) else replace(r, published=False) for r in renames)
    return HeaderDiff(tuple(old_fields), tuple(new_fields), removed, added, renames, kept_old != kept_new)


@dataclass(frozen=True)
class RowDiff:
    """The instance messages a snapshot calls for.

    Attributes:
        creates: (key, fields) for each new key: its non-empty values.
        updates: (key, fields) for each kept key whose values differ: only the changed fields,
            None where a value was emptied.
        deletes: the keys gone, in the order their instances were created.
    """

    creates: tuple[tuple[str, dict[str, str]], ...]
    updates: tuple[tuple[str, dict[str, str | None]], ...]
    deletes: tuple[str, ...]

    @property
    def messages(self) -> int:
        """How many instance messages the diff publishes."""
        return len(self.creates) + len(self.updates) + len(self.deletes)


def diff_rows(instances: Mapping[str, Instance], rows: Mapping[str, Mapping[str, str]],
              fields: Sequence[str]) -> RowDiff:
    """Diff a snapshot's rows against the live instances, by key.

    Only ``fields`` (the lens after this snapshot's migration) are compared; an instance's value
    of a field is its last written one, also when the field was hidden meanwhile (a re-created
    field shows it again).

    Args:
        instances: key -> live instance before this snapshot.
        rows: key -> this snapshot's non-empty values (:func:`key_rows`).
        fields: the fields to write and compare.

    Returns:
        The creates, updates and deletes.
    """
    creates: list[tuple[str, dict[str, str]]] = []
    updates: list[tuple[str, dict[str, str | None]]] = []
    for key, values in rows.items():
        instance = instances.get(key)
        if instance is None:
            creates.append((key, {f: values[f] for f in fields if f in values}))
            continue
        changed = {f: values.get(f) for f in fields if values.get(f) != instance.values.get(f)}
        if changed:
            updates.append((key, changed))
    deletes = tuple(key for key in instances if key not in rows)
    return RowDiff(tuple(creates), tuple(updates), deletes)


@dataclass(frozen=True)
class SnapshotPlan:
    """Everything one snapshot publishes, computed by :func:`plan_snapshot`.

    Attributes:
        table: the snapshot read.
        key_field: the field keying its rows.
        header: the header diff (``header.migration`` is published first, when not None).
        rows: the row diff (creates, updates, deletes at the version after the migration).
        row_count: rows kept after the key rules (distinct non-empty keys).
        issues: the table's issues and those of the key rules and header diff.
        without_renames: when the header has renames published as such, the messages the plan
            would publish with each of them a remove + create (and an update per row to carry
            the values over), for comparison; else None.
    """

    table: SnapshotTable
    key_field: str
    header: HeaderDiff
    rows: RowDiff
    row_count: int
    issues: tuple[Issue, ...]
    without_renames: int | None = None

    @property
    def messages(self) -> int:
        """Instance messages plus the migration (the schema-meta of a first import not counted)."""
        return self.rows.messages + (self.header.migration is not None)


def plan_snapshot(model: TableModel | None, table: SnapshotTable, *,
                  key_column: str | None = None, versions: SchemaVersions | None = None) -> SnapshotPlan:
    """Compute the messages of one snapshot against the state left by the previous ones.

    Args:
        model: the state after the previous snapshot, or None for the first one.
        table: the snapshot (:func:`parse_snapshot`).
        key_column: the ``--key`` option, or None for the first column.
        versions: the schema's versions, to tell which renames it may take (:func:`diff_header`);
            None: the schema has no fields yet.

    Returns:
        The plan; :func:`advance_model` applies it once published.

    Raises:
        SnapshotError: ``no_key_column`` (:func:`choose_key_field`).
    """
    key_field = choose_key_field(table, key_column=key_column, model=model)
    rows, key_issues = key_rows(table, key_field)
    instances: Mapping[str, Instance] = model.instances if model is not None else {}
    header = diff_header(model.fields if model is not None else (), table.fields, old=instances, new=rows,
                         old_header=model.header if model is not None else None,
                         may_rename=versions.may_rename if versions is not None else None)
    instances = _renamed(instances, header.renaming)  # the row diff compares values under the new names
    issues = [*table.issues, *key_issues]
    if model is not None and key_field != model.key_field:
        if any(r.old == model.key_field and r.new == key_field for r in header.renames) or \
                (model.key_field in header.removed and key_field in header.added):
            issues.append(Issue("key_column_renamed", "note",
                                f"the key column is now {key_field} (was {model.key_field})"))
        else:
            issues.append(Issue("key_column_changed", "warning",
                                f"the key is now column {key_field} (was {model.key_field}): rows are "
                                "matched by the values of the new key column"))
    if header.reordered:
        issues.append(Issue("column_order", "note", "columns reordered (the lens keeps its order)"))
    diff = diff_rows(instances, rows, header.fields_after)
    without = None
    if header.renaming:
        unrenamed = replace(header, renames=tuple(replace(r, published=False) for r in header.renames))
        without = diff_rows(model.instances if model is not None else {}, rows, unrenamed.fields_after).messages + 1
    return SnapshotPlan(table, key_field, header, diff, len(rows), tuple(issues), without)


def _renamed(instances: Mapping[str, Instance], renaming: Mapping[str, str]) -> Mapping[str, Instance]:
    """The instances with the values of renamed fields under their new names (a rename moves no
    value in the lake: the field is the same)."""
    if not renaming:
        return instances
    return {k: Instance(i.id, {renaming.get(name, name): value for name, value in i.values.items()})
            for k, i in instances.items()}


def advance_model(model: TableModel | None, plan: SnapshotPlan, created: Mapping[str, str]) -> TableModel:
    """The state after a plan was published.

    Args:
        model: the state the plan was computed against (None for the first snapshot).
        plan: the published plan.
        created: key -> instance id of every create of the plan.

    Returns:
        A new model (``model`` is not changed).

    Raises:
        KeyError: a create of the plan has no instance id in ``created``.
    """
    instances = {k: Instance(i.id, dict(i.values))
                 for k, i in _renamed(model.instances if model else {}, plan.header.renaming).items()}
    for key in plan.rows.deletes:
        del instances[key]
    for key, changed in plan.rows.updates:
        values = instances[key].values
        for name, value in changed.items():
            if value is None:
                values.pop(name, None)
            else:
                values[name] = value
    for key, fields in plan.rows.creates:
        instances[key] = Instance(created[key], dict(fields))
    return TableModel(plan.header.fields_after, plan.key_field, instances, plan.table.fields)


# --------------------------------------------------------------------------------------------
# import state
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ImportedSnapshot:
    """One imported snapshot, as recorded in the import state.

    Attributes:
        file: the file name.
        sha256: hex digest of its bytes when imported.
        schema_version: the schema's version after it (its migration's, or the one before).
        messages: messages it published (schema-meta and migration included).
        creates: ``create`` messages.
        updates: ``update`` messages.
        deletes: ``delete`` messages.
        rows: its rows after the key rules (live instances after it).
        warnings: issues of level warning.
        landed: the landing file name its messages went to (None when it published nothing, or
            when a stopped run was settled later).
        imported_at: when it was imported (UTC, ISO 8601).
    """

    file: str
    sha256: str
    schema_version: int
    messages: int
    creates: int
    updates: int
    deletes: int
    rows: int
    warnings: int = 0
    landed: str | None = None
    imported_at: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ImportedSnapshot:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass
class _SchemaImport:
    """The import state of one schema (one entry of ``<signer>.imports.json``)."""

    schema_id: str
    key_column: str | None
    model: TableModel
    snapshots: list[ImportedSnapshot]
    logs: dict[str, int]  # {"schema": seq, "instance": seq}: the signer's log lengths after it

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_id": self.schema_id,
            "key_column": self.key_column,
            "key_field": self.model.key_field,
            "fields": list(self.model.fields),
            "header": list(self.model.header),
            "snapshots": [s.to_json() for s in self.snapshots],
            "logs": self.logs,
            "instances": {k: [i.id, i.values] for k, i in self.model.instances.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> _SchemaImport:
        model = TableModel(tuple(data["fields"]), str(data["key_field"]),
                           {str(k): Instance(str(v[0]), dict(v[1])) for k, v in data["instances"].items()},
                           tuple(data.get("header", data["fields"])))
        return cls(str(data["schema_id"]), data.get("key_column"), model,
                   [ImportedSnapshot.from_json(s) for s in data["snapshots"]],
                   {str(k): int(v) for k, v in data["logs"].items()})


def import_state_path(keys_folder: str | os.PathLike[str], signer: str = DEFAULT_KEY) -> Path:
    """Where the import state of key ``signer`` lives: ``<keys_folder>/<signer>.imports.json``."""
    return Path(keys_folder) / f"{signer}.imports.json"


def _load_state(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"version": STATE_VERSION, "schemas": {}}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("schemas"), dict):
            raise ValueError("no 'schemas' object")
    except (OSError, ValueError) as exc:
        raise SnapshotError(f"damaged import state: {exc}", code="bad_import_state", file=str(path)) from None
    return data


def _save_state(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, ensure_ascii=False, separators=(",", ":"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _schema_import(data: Mapping[str, Any], schema: str, path: Path, key: str) -> _SchemaImport | None:
    entry = data["schemas"].get(schema)
    if entry is None:
        return None
    try:
        return _SchemaImport.from_json(entry[key]) if entry.get(key) is not None else None
    except (KeyError, ValueError, TypeError, IndexError) as exc:
        raise SnapshotError(f"damaged import state of schema {schema!r}: {exc!r}", code="bad_import_state",
                            file=str(path)) from None


def imported_snapshots(keys_folder: str | os.PathLike[str], schema: str, *,
                       signer: str | None = None) -> list[ImportedSnapshot]:
    """The snapshots imported into a schema, oldest first (committed ones only).

    Snapshot k (1-based, in this list) ended at schema version ``result[k-1].schema_version``.

    Args:
        keys_folder: the key store folder.
        schema: the schema name given to the import.
        signer: the signing key's name; None looks through every key's import state.

    Returns:
        The records; empty when the schema was never imported.

    Raises:
        SnapshotError: ``ambiguous_schema`` when several keys imported a schema of that name
            (give ``signer``), ``bad_import_state`` for a damaged state file.
    """
    folder = Path(keys_folder)
    paths = [import_state_path(folder, signer)] if signer is not None else \
        sorted(folder.glob("*.imports.json")) if folder.is_dir() else []
    found: list[list[ImportedSnapshot]] = []
    for path in paths:
        record = _schema_import(_load_state(path), schema, path, "committed")
        if record is not None:
            found.append(record.snapshots)
    if len(found) > 1:
        raise SnapshotError(f"several keys imported a schema named {schema!r}: give the signer",
                            code="ambiguous_schema")
    return found[0] if found else []


@contextmanager
def _import_lock(store: KeyStore, signer: str) -> Iterator[None]:
    """One import at a time per signing key (released by the system however the run ends)."""
    store.key_file(signer)  # the key name is checked (PublishError) before it names a file
    store.folder.mkdir(parents=True, exist_ok=True)
    try:
        with flocked(store.folder / f"{signer}.imports.lock", timeout=0, mode=0o600):
            yield
    except LockBusy:
        raise SnapshotError(f"another import with key {signer!r} is running", code="locked") from None


# --------------------------------------------------------------------------------------------
# importing a folder (I/O: reads the folder, publishes, keeps the state)
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SnapshotReport:
    """What one snapshot of a run did (or, for a skipped one, had done).

    Attributes:
        file: the file name.
        status: ``imported`` (in this run) or ``skipped`` (imported before).
        record: its import record (version reached, message counts).
        columns: its header (imported snapshots only; empty for skipped ones).
        key_field: the field keying its rows.
        migration: the field changes published (empty when the header did not change).
        renames: removed/added columns taken for renames.
        issues: what was fixed or decided while reading it.
        first: whether it was the schema's first snapshot (the schema-meta came with it).
        seconds: time spent on it.
        without_renames: :attr:`SnapshotPlan.without_renames`.
    """

    file: str
    status: Literal["imported", "skipped"]
    record: ImportedSnapshot
    columns: tuple[Column, ...] = ()
    key_field: str = ""
    migration: tuple[FieldChange, ...] = ()
    renames: tuple[Rename, ...] = ()
    issues: tuple[Issue, ...] = ()
    first: bool = False
    seconds: float = 0.0
    without_renames: int | None = None


@dataclass
class ImportSummary:
    """The result of :func:`import_snapshots`.

    Attributes:
        schema: the schema name.
        schema_id: ``<author hex>:<log_id>`` (empty when nothing was ever imported).
        signer: the signing key's name.
        key_created: whether the signing key was created by this run.
        snapshots: one report per snapshot of the folder (skipped ones included), in order.
        ignored: names of folder entries that are not snapshots.
        missing: imported snapshots no longer in the folder.
        pending: new snapshots left for a later run (``limit``).
        settled: what a stopped earlier run left, and how it was settled (None when nothing).
        version_before: the schema version the previous import left (0 when none).
    """

    schema: str
    schema_id: str
    signer: str
    key_created: bool = False
    snapshots: list[SnapshotReport] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    settled: str | None = None
    version_before: int = 0

    def _imported(self) -> list[ImportedSnapshot]:
        return [s.record for s in self.snapshots if s.status == "imported"]

    @property
    def imported(self) -> int:
        """Snapshots imported by this run."""
        return len(self._imported())

    @property
    def skipped(self) -> int:
        """Snapshots already imported before."""
        return sum(s.status == "skipped" for s in self.snapshots)

    @property
    def creates(self) -> int:
        """``create`` messages published by this run."""
        return sum(r.creates for r in self._imported())

    @property
    def updates(self) -> int:
        """``update`` messages published by this run."""
        return sum(r.updates for r in self._imported())

    @property
    def deletes(self) -> int:
        """``delete`` messages published by this run."""
        return sum(r.deletes for r in self._imported())

    @property
    def messages(self) -> int:
        """Messages published by this run (schema messages included)."""
        return sum(r.messages for r in self._imported())

    @property
    def warnings(self) -> int:
        """Issues of level warning in the snapshots imported by this run."""
        return sum(i.level == "warning" for s in self.snapshots for i in s.issues)

    @property
    def notes(self) -> int:
        """Issues of level note in the snapshots imported by this run."""
        return sum(i.level == "note" for s in self.snapshots for i in s.issues)

    @property
    def versions(self) -> tuple[int, int] | None:
        """(version before, version after) this run, or None when it imported nothing."""
        done = self._imported()
        return (self.version_before, done[-1].schema_version) if done else None


def _log_lengths(publisher: Publisher, schema_id: SchemaId | None) -> dict[str, int]:
    if schema_id is None:
        return {"schema": 0, "instance": 0}
    schema_log = publisher.state.logs.get(schema_id.log_id)
    instance_log = publisher.state.instance_log(schema_id)
    return {"schema": len(schema_log.hashes) if schema_log is not None else 0,
            "instance": len(instance_log.hashes) if instance_log is not None else 0}


def _settle(publisher: Publisher, data: dict[str, Any], schema: str, path: Path) -> str | None:
    """Commit or drop the pending state a stopped run left, by the publisher's log lengths."""
    entry = data["schemas"].get(schema) or {}
    pending = _schema_import(data, schema, path, "pending")
    if pending is None:
        return None
    committed = _schema_import(data, schema, path, "committed")
    actual = _log_lengths(publisher, SchemaId.parse(pending.schema_id))
    before = entry.get("before") or {"schema": 0, "instance": 0}
    if actual == pending.logs:
        entry["committed"], outcome = entry["pending"], "committed"
    elif actual == before:
        outcome = "dropped"
    else:
        raise SnapshotError(
            f"a stopped import of schema {schema!r} left a pending snapshot "
            f"({pending.snapshots[-1].file}), and key {publisher.key.name!r} has published on its logs "
            f"since (log lengths {actual}, expected {pending.logs} or {before}); the import state "
            "cannot be settled", code="import_state_out_of_sync", file=str(path))
    entry.pop("pending", None)
    entry.pop("before", None)
    if committed is None and outcome == "dropped":
        data["schemas"].pop(schema, None)
    _save_state(path, data)
    return f"{pending.snapshots[-1].file}: the pending import of a stopped run was {outcome}"


def _check_folder(record: _SchemaImport | None, files: list[Path], summary: ImportSummary) -> list[Path]:
    """Skipped reports for the imported files; the new files. Raises for changed or inserted ones."""
    done = {s.file: s for s in record.snapshots} if record else {}
    by_name = {p.name: p for p in files}
    for snap in done.values():
        path = by_name.get(snap.file)
        if path is None:
            summary.missing.append(snap.file)
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != snap.sha256:
            raise SnapshotError(
                f"was imported into schema {summary.schema!r} on {snap.imported_at or 'an earlier run'} "
                f"and has changed since (sha256 {snap.sha256[:12]}... then, {digest[:12]}... now); "
                "history is append-only: restore the file, or import the folder into a new schema",
                code="snapshot_changed",
                file=str(path))
    for snap in (record.snapshots if record else []):
        if snap.file in by_name:
            summary.snapshots.append(SnapshotReport(snap.file, "skipped", snap))
    new = [p for p in files if p.name not in done]
    if record and record.snapshots and new:
        last = record.snapshots[-1].file
        early = [p.name for p in new if p.name < last]
        if early:
            raise SnapshotError(
                f"{', '.join(early)} sort{'s' if len(early) == 1 else ''} before {last}, the last snapshot "
                f"imported into schema {summary.schema!r}; only snapshots newer than it can be added",
                code="snapshot_out_of_order", file=early[0])
    return new


def _check_schema(publisher: Publisher, record: _SchemaImport, schema: str) -> None:
    """Refuse when the schema or its instances changed outside the importer since its last import."""
    schema_id = SchemaId.parse(record.schema_id)
    actual = _log_lengths(publisher, schema_id)
    versions = publisher.schema_versions(schema_id)
    last = record.snapshots[-1].schema_version if record.snapshots else 0
    if versions is None or actual != record.logs or versions.current_version != last or \
            set(versions.lens(versions.current_version).names) != set(record.model.fields):
        now = versions.current_version if versions is not None else "unknown"
        raise SnapshotError(
            f"schema {schema!r} ({schema_id}) changed outside the importer since its last import "
            f"(version {last} then, {now} now; log lengths {record.logs} then, {actual} now), e.g. by a "
            "revert or by hand: "
            "the row diff would be computed against a wrong picture; import into a new schema",
            code="schema_moved")


def _start_schema(publisher: Publisher, schema: str, folder: Path) -> SchemaId:
    """The schema to import into: a new one, or one of this key with an empty lens and no instances."""
    log = publisher.state.schema_logs().get(schema)
    if log is None:
        meta = SchemaMeta(name=schema, description=f"imported from table snapshots ({folder.name})")
        return publisher.schema_init(meta)
    schema_id = SchemaId(publisher.key.public_key, log.log_id)
    versions = publisher.schema_versions(schema_id)
    if versions is None or len(versions.lens(versions.current_version)) or \
            publisher.state.instance_log(schema_id) is not None:
        raise SnapshotError(
            f"key {publisher.key.name!r} already has a schema named {schema!r} ({schema_id}) that the "
            "importer did not create and that has fields or instances; import into another schema name",
            code="schema_not_imported")
    return schema_id


def _publish(publisher: Publisher, schema_id: SchemaId, plan: SnapshotPlan, model: TableModel | None,
             before_migration: Callable[[SchemaId, SchemaMigration], None] | None = None) -> tuple[int, dict[str, str]]:
    """Publish a plan (not flushed); returns the schema version it ends at and the new instance ids."""
    sid = str(schema_id)
    versions = publisher.schema_versions(schema_id)
    assert versions is not None  # a schema of the signer's own key
    version = versions.current_version
    migration = plan.header.migration
    if migration is not None:
        if before_migration is not None:
            before_migration(schema_id, migration)
        version = publisher.schema_message(sid, migration)
    instances = model.instances if model is not None else {}
    created: dict[str, str] = {}
    for key, fields in plan.rows.creates:
        created[key] = publisher.create(sid, fields, version=version)
    for key, changed in plan.rows.updates:
        publisher.update(sid, instances[key].id, changed, version=version)
    for key in plan.rows.deletes:
        publisher.delete(sid, instances[key].id, version=version)
    return version, created


def import_snapshots(folder: str | os.PathLike[str], *, schema: str, store: KeyStore,
                     landing: str | os.PathLike[str], signer: str = DEFAULT_KEY,
                     key_column: str | None = None, limit: int | None = None,
                     max_payload: int = DEFAULT_MAX_PAYLOAD,
                     on_snapshot: Callable[[SnapshotReport], None] | None = None,
                     before_migration: Callable[[SchemaId, SchemaMigration], None] | None = None) -> ImportSummary:
    """Import the snapshots of ``folder`` not imported yet into schema ``schema``.

    Each new snapshot is planned (:func:`plan_snapshot`), published with key ``signer`` (created
    if missing) into a landing file of its own, and committed to the import state before the next
    one starts, so an error in snapshot k keeps snapshots 1..k-1 imported and publishes nothing
    of k.

    Args:
        folder: the folder of snapshots (:func:`list_snapshots`).
        schema: the schema name (the schema-meta ``name``; the import state's key).
        store: the key store (the import state lives beside the keys).
        landing: the landing folder.
        signer: the signing key's name.
        key_column: the key column (a header or field name); None for the first column. Fixed by
            the first import of the schema: another value later is refused.
        max_payload: the largest payload ingest accepts (:class:`Publisher`).
        limit: import at most this many new snapshots (None: all), e.g. one at a time with an
            ``ingest`` in between.
        on_snapshot: called with each snapshot's report (skipped ones first), for progress.
        before_migration: called with the schema and the migration a header change makes, before
            it is published (e.g. to check its impact on a lake, ``lakehouse schema check``).

    Returns:
        The summary of the run.

    Raises:
        SnapshotError: ``no_snapshots``, ``snapshot_changed``, ``snapshot_out_of_order``,
            ``key_column_changed`` (another ``key_column`` than the first import's),
            ``schema_moved``, ``schema_not_imported``, ``import_state_out_of_sync``, ``locked``,
            and the errors of :func:`parse_snapshot` and :func:`choose_key_field`.
        PublishError, MessageError: when publishing is refused (e.g. a schema name that is not
            1-64 printable ASCII characters).
    """
    folder = Path(folder)
    files, ignored = list_snapshots(folder)
    with _import_lock(store, signer):
        publisher = Publisher(store, signer, landing, create_key=True, max_payload=max_payload)
        path = import_state_path(store.folder, signer)
        data = _load_state(path)
        summary = ImportSummary(schema, "", signer, key_created=publisher.key_created, ignored=ignored)
        summary.settled = _settle(publisher, data, schema, path)
        record = _schema_import(data, schema, path, "committed")
        if record is not None:
            summary.schema_id = record.schema_id
            summary.version_before = record.snapshots[-1].schema_version if record.snapshots else 0
            if key_column is not None and key_column != record.key_column:
                raise SnapshotError(
                    f"schema {schema!r} was imported with --key {record.key_column or '(first column)'}; "
                    f"it cannot change to {key_column!r}", code="key_column_changed")
            key_column = record.key_column
        new = _check_folder(record, files, summary)
        if on_snapshot is not None:
            for report in summary.snapshots:
                on_snapshot(report)
        if limit is not None:
            summary.pending = [p.name for p in new[limit:]]
            new = new[:limit]
        if new and record is not None:
            _check_schema(publisher, record, schema)
        for file in new:
            started = time.perf_counter()
            table = read_snapshot(file)
            model = record.model if record is not None else None
            versions = publisher.schema_versions(SchemaId.parse(record.schema_id)) if record is not None else None
            plan = plan_snapshot(model, table, key_column=key_column, versions=versions)
            try:
                if record is not None:
                    schema_id = SchemaId.parse(record.schema_id)
                    before = _log_lengths(publisher, schema_id)
                else:
                    existing = publisher.state.schema_logs().get(schema)
                    before = _log_lengths(publisher, None if existing is None else
                                          SchemaId(publisher.key.public_key, existing.log_id))
                    schema_id = _start_schema(publisher, schema, folder)
                version, created = _publish(publisher, schema_id, plan, model, before_migration)
                logs = _log_lengths(publisher, schema_id)
                messages = logs["schema"] + logs["instance"] - before["schema"] - before["instance"]
                snap = ImportedSnapshot(
                    file.name, table.sha256, version, messages, len(plan.rows.creates),
                    len(plan.rows.updates), len(plan.rows.deletes), plan.row_count,
                    sum(i.level == "warning" for i in plan.issues), None,
                    datetime.now(timezone.utc).isoformat(timespec="seconds"))
                new_record = _SchemaImport(str(schema_id), key_column, advance_model(model, plan, created),
                                           [*(record.snapshots if record else []), snap], logs)
                entry = data["schemas"].setdefault(schema, {})
                entry["pending"], entry["before"] = new_record.to_json(), before
                _save_state(path, data)
            except BaseException:
                publisher.discard()
                raise
            landed = publisher.flush()
            if landed is not None:
                snap = replace(snap, landed=landed.name)
                new_record.snapshots[-1] = snap
            entry["committed"] = new_record.to_json()
            entry.pop("pending")
            entry.pop("before")
            _save_state(path, data)
            report = SnapshotReport(file.name, "imported", snap, table.columns, plan.key_field,
                                    plan.header.changes, plan.header.renames, plan.issues, record is None,
                                    time.perf_counter() - started, plan.without_renames)
            record = new_record
            summary.schema_id = record.schema_id
            summary.snapshots.append(report)
            if on_snapshot is not None:
                on_snapshot(report)
    return summary

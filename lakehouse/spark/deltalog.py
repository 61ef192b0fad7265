"""A Delta table read from its own ``_delta_log`` with pyarrow: its files at a version, and its rows
with deletion vectors applied (the Delta protocol, "Deletion Vectors" and "Checkpoints").

The lake's gold and silver tables carry deletion vectors (a run deletes the rows it replaces
without writing their files again), and the ``deltalake`` package (1.6) refuses to read such
tables ("reader features {'deletionVectors'} not yet supported"). The lake reads what it needs of
them without an engine job: which files a table has and how many of their rows are deleted (to
decide when to compact it, :func:`snapshot`), and, for checks and for tools outside the engine,
its rows (:func:`read_rows`). Local paths and URIs ``pyarrow.fs`` reads (``file://``, ``s3://``).

Supported: JSON commits, classic parquet checkpoints (one file or in parts) found through
``_last_checkpoint`` or the listing, deletion vectors stored beside the table (``u``), at an
absolute path (``p``) or inline (``i``), unpartitioned tables and partition columns. Not
supported (an error says so): column mapping, and V2 checkpoints (UUID-named), which neither engine
writes unless asked.
"""

from __future__ import annotations

import json
import re
import struct
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa

from lakehouse.errors import LakehouseError
from lakehouse.spark.tables import filesystem_of

_COMMIT = re.compile(r"(\d{20})\.json")
_CHECKPOINT = re.compile(r"(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet")
_V2_CHECKPOINT = re.compile(r"\d{20}\.checkpoint\.[0-9a-fA-F-]{36}\.(?:json|parquet)")
_ROARING_ARRAY_MAGIC = 1681511377  # Delta's RoaringBitmapArray, portable serialization


class DeltaLogError(LakehouseError):
    """A Delta log this reader cannot read (a feature it does not support, or a damaged log)."""

    default_code = "delta_log"


@dataclass(frozen=True)
class DataFile:
    """One data file of a snapshot: its path (relative to the table, or absolute), size in bytes,
    rows written (``numRecords`` of its statistics, None without them), rows its deletion vector
    deletes, the vector's descriptor (None without one), its partition values, and of its
    statistics the greatest value of each top-level column (``maxValues``), the nulls of each
    (``nullCount``) and the least value of each (``minValues``; all empty without statistics)."""

    path: str
    size: int
    records: int | None
    deleted: int
    deletion_vector: dict[str, Any] | None
    partition_values: dict[str, str | None]
    maxima: dict[str, Any] = field(default_factory=dict)
    null_counts: dict[str, Any] = field(default_factory=dict)
    minima: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Snapshot:
    """A table at one version: its files, properties (``configuration``), schema (the log's
    ``schemaString``, parsed) and partition columns."""

    version: int
    files: tuple[DataFile, ...]
    properties: dict[str, str]
    schema: dict[str, Any]
    partition_columns: tuple[str, ...]

    @property
    def rows(self) -> int | None:
        """Live rows (written less deleted), None when a file has no statistics."""
        if any(f.records is None for f in self.files):
            return None
        return sum((f.records or 0) - f.deleted for f in self.files)

    @property
    def deleted_share(self) -> float:
        """Deleted rows over rows written, 0.0 for an empty table or one without statistics."""
        written = sum(f.records or 0 for f in self.files)
        return sum(f.deleted for f in self.files) / written if written else 0.0

    def integer_max(self, column: str) -> int | None:
        """The greatest value of the integer ``column`` over the live rows, from the files'
        statistics (``maxValues``, Delta protocol "Per-file Statistics"): None for a table with no
        rows in it, or only nulls in ``column``.

        Raises:
            LookupError: the statistics do not tell: a file without them, or without an integer
                maximum of ``column`` though it has values there, or one with deleted rows (its
                statistics still count them).
        """
        found: int | None = None
        for f in self.files:
            if f.records is None or f.deleted:
                raise LookupError(f"{f.path} has no statistics, or deleted rows they still count")
            if f.records == 0 or f.null_counts.get(column) == f.records:  # no value of the column in it
                continue
            value = f.maxima.get(column)
            if not isinstance(value, int) or isinstance(value, bool):
                raise LookupError(f"the statistics of {f.path} do not give the greatest {column}")
            found = value if found is None else max(found, value)
        return found

    def files_past(self, column: str, value: int) -> list[DataFile]:
        """The files that can hold a row whose integer ``column`` is past ``value``, from the files'
        statistics (``maxValues``): every file with rows but those whose greatest ``column`` is at
        most ``value`` (a run's rows are in files of their own: the files of the later runs or
        batches).

        Raises:
            LookupError: the statistics do not tell for a file: it has none, or no integer maximum
                of ``column``, or (a file that can hold such rows) deleted rows they still count.
        """
        found = []
        for f in self.files:
            top = f.maxima.get(column)
            if f.records == 0 or (isinstance(top, int) and not isinstance(top, bool) and top <= value):
                continue
            if f.records is None or not isinstance(top, int) or isinstance(top, bool):
                raise LookupError(f"the statistics of {f.path} do not give the greatest {column}")
            if f.deleted or f.deletion_vector is not None:
                raise LookupError(f"{f.path} has deleted rows its statistics still count")
            found.append(f)
        return found


def snapshot(location: str, version: int | None = None) -> Snapshot:
    """The table at ``location`` as of ``version`` (the latest by default).

    Raises:
        FileNotFoundError: no Delta table there, or not that version.
        DeltaLogError: a log this reader does not support (module docstring).
    """
    filesystem, root = filesystem_of(location)
    log = f"{root}/_delta_log"
    names = _log_names(filesystem, log)
    commits = sorted(int(m.group(1)) for n in names if (m := _COMMIT.fullmatch(n)))
    checkpoints: dict[int, list[str]] = {}
    for n in names:
        if (m := _CHECKPOINT.fullmatch(n)) is not None:
            checkpoints.setdefault(int(m.group(1)), []).append(n)
        elif _V2_CHECKPOINT.fullmatch(n):  # named by a UUID (a file system's .crc beside a file is not one)
            raise DeltaLogError(f"{location}: V2 checkpoints ({n}) are not read here")
    latest = max([*commits, *checkpoints], default=None)
    if latest is None:
        raise FileNotFoundError(f"{location} is not a Delta table")
    target = latest if version is None else version
    if target > latest or target < 0:
        raise FileNotFoundError(f"{location} has no version {target} (latest {latest})")
    start = max((v for v in checkpoints if v <= target), default=None)
    state = _State()
    if start is not None:
        parts = sorted(checkpoints[start])
        _apply(state, _checkpoint_actions(filesystem, [f"{log}/{p}" for p in parts]))
    first = (start + 1) if start is not None else 0
    return _replayed(state, filesystem, location, log, set(commits), first, target)


def advanced(snap: Snapshot, location: str) -> Snapshot:
    """The table at ``location`` at its latest version, from ``snap`` (an earlier snapshot of it)
    and the commits since: only those commits are read, not the log before ``snap``'s version
    (a gold table keeps every commit, for time travel, and no checkpoint).

    Raises:
        FileNotFoundError: no Delta table there, or a commit after ``snap`` is missing.
        DeltaLogError: as :func:`snapshot`.
    """
    filesystem, root = filesystem_of(location)
    log = f"{root}/_delta_log"
    commits = {int(m.group(1)) for n in _log_names(filesystem, log) if (m := _COMMIT.fullmatch(n))}
    if not commits:
        raise FileNotFoundError(f"{location} is not a Delta table")
    state = _State()
    state.files = {(f.path, _dv_id({"deletionVector": f.deletion_vector})): f for f in snap.files}
    state.metadata = {"configuration": snap.properties, "schemaString": json.dumps(snap.schema),
                      "partitionColumns": list(snap.partition_columns)}
    return _replayed(state, filesystem, location, log, commits, snap.version + 1, max(max(commits), snap.version))


def metadata(location: str) -> dict[str, Any]:
    """The table's metaData action at its latest version (``schemaString``, ``configuration``,
    ``partitionColumns``...), from that version's checksum file when it has one (Delta protocol,
    "Version Checksum File": both engines write one beside each commit, with the table's
    metaData), else from the log replayed (:func:`snapshot`). A gold table's log at 10,000,000
    messages lists 2,048 files: the checksum is one small read.

    Raises:
        FileNotFoundError: no Delta table there.
        DeltaLogError: as :func:`snapshot`.
    """
    filesystem, root = filesystem_of(location)
    log = f"{root}/_delta_log"
    names = set(_log_names(filesystem, log))
    commits = [int(m.group(1)) for n in names if (m := _COMMIT.fullmatch(n))]
    checksum = f"{max(commits):020d}.crc" if commits else None
    if checksum in names:
        try:
            with filesystem.open_input_stream(f"{log}/{checksum}") as stream:
                meta = _loads(stream.read()).get("metadata")
            if isinstance(meta, dict) and isinstance(meta.get("schemaString"), str):
                return meta
        except (OSError, ValueError, AttributeError):
            pass  # a checksum cut short or of another shape: the log tells
    snap = snapshot(location)
    return {"schemaString": json.dumps(snap.schema), "configuration": snap.properties,
            "partitionColumns": list(snap.partition_columns)}


def schema(location: str) -> dict[str, Any]:
    """The table's schema at its latest version (its metaData's ``schemaString`` parsed: a Spark
    ``StructType`` as JSON), read as :func:`metadata` reads it.

    Raises:
        FileNotFoundError: no Delta table there.
        DeltaLogError: as :func:`snapshot`, or the table maps its columns (column mapping).
    """
    meta = metadata(location)
    if (meta.get("configuration") or {}).get("delta.columnMapping.mode", "none") != "none":
        raise DeltaLogError(f"{location}: column mapping is not read here")
    return dict(json.loads(meta["schemaString"]))


def _log_names(filesystem: Any, log: str) -> list[str]:
    """The names of the files in a table's ``_delta_log`` folder (none when it is missing)."""
    from pyarrow import fs

    return [i.base_name for i in filesystem.get_file_info(fs.FileSelector(log, allow_not_found=True))]


def _replayed(state: _State, filesystem: Any, location: str, log: str, commits: set[int], first: int,
              target: int) -> Snapshot:
    """``state`` with the commits ``first`` to ``target`` of ``log`` applied, as the snapshot at ``target``."""
    for v in range(first, target + 1):
        if v not in commits:
            raise FileNotFoundError(f"{location}: commit {v} is missing from its log")
        with filesystem.open_input_stream(f"{log}/{v:020d}.json") as stream:
            lines = stream.read().splitlines()
        _apply(state, (_loads(line) for line in lines if line.strip()))
    meta = state.metadata
    if meta is None:
        raise DeltaLogError(f"{location}: no metaData action up to version {target}")
    properties = dict(meta.get("configuration") or {})
    if properties.get("delta.columnMapping.mode", "none") != "none":
        raise DeltaLogError(f"{location}: column mapping is not read here")
    # an added file's statistics are parsed once it is known to be live (a table written again whole,
    # or bucket by bucket, removes most of the files its earlier commits added)
    files = tuple(f if isinstance(f, DataFile) else _data_file(f) for f in state.files.values())
    return Snapshot(target, files, properties, json.loads(meta["schemaString"]),
                    tuple(meta.get("partitionColumns") or ()))


class _State:
    def __init__(self) -> None:
        # a file of an earlier snapshot, or an added file's action as the log has it
        self.files: dict[tuple[str, str], DataFile | dict[str, Any]] = {}
        self.metadata: dict[str, Any] | None = None


def _dv_id(action: dict[str, Any]) -> str:
    dv = action.get("deletionVector")
    if not dv:
        return ""
    return f"{dv['storageType']}{dv['pathOrInlineDv']}@{dv.get('offset')}"


def _apply(state: _State, actions: Iterable[dict[str, Any]]) -> None:
    """One commit's actions (or a checkpoint's): its removes, then its adds (a file given a new
    deletion vector is removed and added again in the same commit)."""
    adds = []
    for action in actions:
        if action.get("metaData"):
            state.metadata = action["metaData"]
        elif action.get("remove"):
            removed = action["remove"]
            state.files.pop((removed["path"], _dv_id(removed)), None)
        elif action.get("add"):
            adds.append(action["add"])
    for add in adds:
        state.files[add["path"], _dv_id(add)] = add


def _checkpoint_actions(filesystem: Any, paths: list[str]) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq

    for path in paths:
        with filesystem.open_input_file(path) as handle:
            table = pq.read_table(handle, columns=[c for c in ("add", "metaData")
                                                   if c in pq.read_schema(handle).names])
        for column in table.column_names:
            for value in table.column(column).to_pylist():
                if value is not None:
                    if column == "add" and isinstance(value.get("partitionValues"), list):  # a map as pairs
                        value["partitionValues"] = dict(value["partitionValues"])
                    if column == "metaData" and isinstance(value.get("configuration"), list):
                        value["configuration"] = dict(value["configuration"])
                    yield {column: value}


def _loads(text: str | bytes) -> Any:
    """JSON text parsed by ``orjson`` (a few times faster: a log holds a line a file, and a line's
    statistics are JSON of their own), or by ``json`` where ``orjson`` refuses it (``NaN``, integers
    past 64 bits, which Delta writers may put in statistics)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _data_file(add: dict[str, Any]) -> DataFile:
    stats = _loads(add["stats"]) if add.get("stats") else {}
    dv = add.get("deletionVector") or None
    return DataFile(add["path"], int(add.get("size") or 0), stats.get("numRecords"),
                    int(dv["cardinality"]) if dv else 0, dv, dict(add.get("partitionValues") or {}),
                    dict(stats.get("maxValues") or {}), dict(stats.get("nullCount") or {}),
                    dict(stats.get("minValues") or {}))


def _z85_decode(text: str) -> bytes:
    """ZeroMQ's Z85 (RFC 32/Z85), as the Delta protocol encodes deletion vector paths and inline vectors."""
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
    if len(text) % 5:
        raise DeltaLogError(f"Z85 text of {len(text)} characters (not a multiple of 5)")
    index = {c: i for i, c in enumerate(alphabet)}
    out = bytearray()
    for start in range(0, len(text), 5):
        value = 0
        for c in text[start:start + 5]:
            value = value * 85 + index[c]
        out += value.to_bytes(4, "big")
    return bytes(out)


def deleted_rows(location: str, dv: dict[str, Any]) -> list[int]:
    """The row indexes a deletion vector descriptor deletes, ascending.

    Raises:
        DeltaLogError: a vector of a storage type or layout this reader does not support.
    """
    from pyroaring import BitMap

    kind, where = dv["storageType"], dv["pathOrInlineDv"]
    if kind == "i":
        data = _z85_decode(where)[: int(dv["sizeInBytes"])]
    else:
        filesystem, root = filesystem_of(location)
        if kind == "u":
            prefix, encoded = where[:-20], where[-20:]
            name = f"deletion_vector_{uuid.UUID(bytes=_z85_decode(encoded))}.bin"
            path = f"{root}/{prefix}/{name}" if prefix else f"{root}/{name}"
        elif kind == "p":
            filesystem, path = filesystem_of(where)
        else:
            raise DeltaLogError(f"{location}: deletion vector storage type {kind!r} is not read here")
        with filesystem.open_input_file(path) as handle:
            handle.seek(int(dv.get("offset") or 0))
            (size,) = struct.unpack(">i", handle.read(4))
            data = handle.read(size)
    magic, count = struct.unpack_from("<iq", data)
    if magic != _ROARING_ARRAY_MAGIC:
        raise DeltaLogError(f"{location}: a deletion vector of an unknown format (magic {magic})")
    rows: list[int] = []
    offset = 12
    for n in range(count):
        (high,) = struct.unpack_from("<i", data, offset)
        if n != count - 1:
            raise DeltaLogError(f"{location}: a deletion vector over more than 2^32 rows of a file is not read here")
        rows.extend((high << 32) | low for low in BitMap.deserialize(data[offset + 4:]))
    return sorted(rows)


def read_rows(location: str, version: int | None = None) -> pa.Table:
    """The table's live rows as of ``version`` (the latest by default): every data file read with
    pyarrow, its deleted rows left out, partition columns added; columns in the table's order.

    Raises:
        FileNotFoundError: as :func:`snapshot`.
        DeltaLogError: as :func:`snapshot` and :func:`deleted_rows`.
    """
    import numpy as np
    import pyarrow.parquet as pq

    snap = snapshot(location, version)
    filesystem, root = filesystem_of(location)
    names = [f["name"] for f in snap.schema["fields"]]
    pieces = []
    for f in snap.files:
        with filesystem.open_input_file(data_path(root, f)) as handle:
            table = pq.read_table(handle)
        if f.deletion_vector:
            keep = np.ones(table.num_rows, dtype=bool)
            keep[deleted_rows(location, f.deletion_vector)] = False
            table = table.filter(pa.array(keep))
        for column in snap.partition_columns:
            table = table.append_column(column, pa.array([f.partition_values.get(column)] * table.num_rows,
                                                         pa.string()))
        pieces.append(table.select([n for n in names if n in table.column_names]))
    if not pieces:
        return pa.table({n: pa.array([], pa.null()) for n in names})
    return pa.concat_tables(pieces, promote_options="permissive")


def data_path(location: str, f: DataFile) -> str:
    """Where a data file of the table at ``location`` is, as the engines read it: its path in the
    log when absolute (a URI or a path from the root), else that path, unquoted, under ``location``
    (a path or a URI, as the table was opened)."""
    if "://" in f.path or f.path.startswith("/"):
        return f.path
    return f"{location.rstrip('/')}/{_unquote(f.path)}"


def _unquote(path: str) -> str:
    from urllib.parse import unquote

    return unquote(path)

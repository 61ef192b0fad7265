"""The reverse-edge index of the cascade region walk (:func:`lakehouse.spark.cascades.update_in_region`):
every relation edge of the active schemas' instance states, sorted by target, in Arrow files under
``<lake root>/_cascade_edges``, kept from one gold run to the next.

Why: a region walk asks, level by level, which states point at the level's ids. Staging every
edge from ``silver.instance_states`` for that costs each run the same whatever it changed (about
1.2 s at 1,000,000 messages on Sail, the largest part of a trickle's cascade step); the index
answers the same question from files the last run left, brought up to date with the states of
the instances this run changed, so that a run costs its change.

Layout (one folder, two files current; a file's name carries the gold run that wrote it):

- ``base-<gold run>.arrow``: rows ``target``, ``source`` (raw 34-byte entry hashes, FORMAT.md
  section 1), ``deleted`` (the source's), sorted by ``target``: a level is a binary search per id
  in the memory-mapped file.
- ``patch-<gold run>.arrow``: the same columns, for every source whose state changed since the
  base was written: its edges now, or one row with a null ``target`` when it has none. The
  index is the base's edges of the sources the patch does not name, and the patch's. When the
  patch passes :data:`COMPACT_ROWS` rows, the run writes the base again instead.

The patch's metadata names its base, the silver run its states reflect and the schemas they
cover. A run trusts the index only when the patch was written by the last finished gold run
(a run that died leaves a patch named by a run that never finished) and reflects the silver run
and the schemas of the stored cascade set; else it builds the index again from staged edges.
An id that is not 68 lowercase hex characters (never an entry hash) makes no index: the walk
then goes on over the staged edges as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lakehouse.spark.tables import filesystem_of, remove_tree

ID_BYTES = 34
"""An entry hash's bytes: a YASMF BLAKE3 hash, its two-byte prefix and 32 bytes (FORMAT.md section 1)."""

FOLDER = "_cascade_edges"

COMPACT_ROWS = 50_000
"""Patch rows past which a run writes the base again (about 0.5 s at 1,000,000 messages, 628,000
edges) instead of a larger patch, which every level scans."""


@dataclass(frozen=True)
class Stamp:
    """What an index reflects: the gold run that wrote it, the silver run of its states and the
    schemas (ids as text) whose states it holds."""

    gold_run: int
    silver_run: int
    schemas: tuple[str, ...]


def folder_of(lake_root: str) -> str:
    """The index's folder in the lake at ``lake_root`` (a local path or a URI)."""
    return f"{lake_root.rstrip('/')}/{FOLDER}"


def remove(lake_root: str) -> None:
    """Remove the index of the lake at ``lake_root``: a first run or a rebuild does, since gold run
    numbers start again in a lake whose gold state was taken away, and a stale index could
    otherwise carry the number a later run looks for."""
    remove_tree(folder_of(lake_root))


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema([("target", pa.binary(ID_BYTES)), ("source", pa.binary(ID_BYTES)), ("deleted", pa.bool_())])


def raw_ids(hex_ids: Any) -> Any:
    """An Arrow array of hex ids (strings, no nulls) as raw fixed-width ids (``binary(34)``); None
    when one is not 68 lowercase hex characters."""
    import numpy as np
    import pyarrow as pa

    if hex_ids.null_count:
        return None
    if isinstance(hex_ids, pa.ChunkedArray):
        hex_ids = hex_ids.combine_chunks()
    hex_ids = hex_ids.cast(pa.large_string())
    n = len(hex_ids)
    if not n:
        return pa.array([], pa.binary(ID_BYTES))
    offsets = np.frombuffer(hex_ids.buffers()[1], dtype=np.int64)[hex_ids.offset:hex_ids.offset + n + 1]
    if not (np.diff(offsets) == 2 * ID_BYTES).all():
        return None
    text = hex_ids.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]]
    if any(c in text for c in b"ABCDEF"):
        return None
    try:
        raw = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(ID_BYTES), n, [None, pa.py_buffer(raw)])


def _keys(column: Any) -> Any:
    """A ``binary(34)`` column (one chunk or several, no nulls) as a numpy ``S34`` array over its
    bytes (no copy for one chunk): sorted and searched as the bytes compare."""
    import numpy as np
    import pyarrow as pa

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not len(array):
        return np.array([], dtype=f"S{ID_BYTES}")
    return np.frombuffer(array.buffers()[1], dtype=f"S{ID_BYTES}", count=len(array), offset=array.offset * ID_BYTES)


class EdgeIndex:
    """The index as read or built here: the base (sorted by target) and the patch (module docstring).

    Args:
        base: rows of the base (``target``, ``source``, ``deleted``), sorted by ``target``.
        patch: rows of the patch (``target`` null for a source with no edges).
        base_name: the base's file name when it is stored; None for a base not written yet.
    """

    def __init__(self, base: Any, patch: Any, base_name: str | None) -> None:
        import pyarrow.compute as pc

        self._base = base
        self._patch = patch
        self._base_name = base_name
        self._keys = _keys(base.column("target"))
        self._replaced: set[bytes] = set(patch.column("source").to_pylist())
        self._patch_at: dict[bytes, list[tuple[bytes, bool]]] = {}
        self._patch_of: dict[bytes, set[bytes]] = {}
        edges = patch.filter(pc.is_valid(patch.column("target")))
        for target, source, deleted in zip(edges.column("target").to_pylist(), edges.column("source").to_pylist(),
                                           edges.column("deleted").to_pylist(), strict=True):
            self._patch_at.setdefault(target, []).append((source, bool(deleted)))
            self._patch_of.setdefault(source, set()).add(target)

    @property
    def rows(self) -> tuple[int, int]:
        """The rows of the base and of the patch."""
        return self._base.num_rows, self._patch.num_rows

    @classmethod
    def of_edges(cls, edges: Any) -> EdgeIndex | None:
        """The index of staged region edges (an Arrow table of
        :data:`lakehouse.spark.cascades.REGION_EDGES_DDL`: hex ``source``, ``deleted``, hex
        ``target``), with an empty patch; None when an id is not an entry hash's hex."""
        import numpy as np
        import pyarrow as pa

        targets, sources = raw_ids(edges.column("target")), raw_ids(edges.column("source"))
        if targets is None or sources is None:
            return None
        order = pa.array(np.argsort(_keys(targets), kind="stable"))
        deleted = edges.column("deleted").combine_chunks().fill_null(False)
        base = pa.table([targets.take(order), sources.take(order), deleted.take(order)], schema=_schema())
        return cls(base, _schema().empty_table(), None)

    @classmethod
    def open(cls, lake_root: str, stamp: Stamp) -> EdgeIndex | None:
        """The index the gold run ``stamp.gold_run`` wrote, when it reflects ``stamp``'s silver run
        and schemas; None when there is none such (or it cannot be read: a run builds it again)."""
        import pyarrow as pa
        import pyarrow.ipc as ipc

        filesystem, folder = filesystem_of(folder_of(lake_root))
        try:
            patch_file = ipc.open_file(_source(filesystem, f"{folder}/{_name('patch', stamp.gold_run)}"))
            meta = {k.decode(): v.decode() for k, v in (patch_file.schema.metadata or {}).items()}
            if (int(meta.get("silver_run", -1)) != stamp.silver_run
                    or tuple(json.loads(meta.get("schemas", "[]"))) != stamp.schemas):
                return None
            base = ipc.open_file(_source(filesystem, f"{folder}/{meta['base']}")).read_all()
            patch = patch_file.read_all()
        except (OSError, KeyError, ValueError, pa.ArrowInvalid):
            return None
        if base.schema.remove_metadata() != _schema() or patch.schema.remove_metadata() != _schema():
            return None
        return cls(base, patch, meta["base"])

    def patched(self, changed: Iterable[bytes], states: Iterable[tuple[bytes, bool, list[bytes]]]) -> EdgeIndex:
        """The index brought up to date with the states of the ``changed`` sources (raw ids):
        ``states`` gives ``(id, deleted, targets)`` of those that have one (an id without a state
        has no edges). Ids must be raw entry hashes (:data:`ID_BYTES`)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        changed = set(changed)
        kept = self._patch.filter(pc.invert(pc.is_in(self._patch.column("source"),
                                                      value_set=pa.array(sorted(changed), pa.binary(ID_BYTES)))))
        rows: list[tuple[bytes | None, bytes, bool]] = []
        seen: set[bytes] = set()
        for source, deleted, targets in states:
            seen.add(source)
            if targets:
                rows.extend((target, source, deleted) for target in sorted(set(targets)))
            else:
                rows.append((None, source, deleted))
        rows.extend((None, source, False) for source in sorted(changed - seen))
        fresh = pa.table({"target": pa.array([r[0] for r in rows], pa.binary(ID_BYTES)),
                          "source": pa.array([r[1] for r in rows], pa.binary(ID_BYTES)),
                          "deleted": pa.array([r[2] for r in rows], pa.bool_())}, schema=_schema())
        patch = pa.concat_tables([kept, fresh])
        if patch.num_rows <= COMPACT_ROWS:
            return EdgeIndex(self._base, patch, self._base_name)
        return EdgeIndex(self._compacted(patch), _schema().empty_table(), None)

    def _compacted(self, patch: Any) -> Any:
        """The base and ``patch`` as one sorted base."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        replaced = pa.array(sorted(set(patch.column("source").to_pylist())), pa.binary(ID_BYTES))
        rows = pa.concat_tables([self._base.filter(pc.invert(pc.is_in(self._base.column("source"), value_set=replaced))),
                                 patch.filter(pc.is_valid(patch.column("target")))]).combine_chunks()
        return rows.take(pa.array(np.argsort(_keys(rows.column("target")), kind="stable")))

    def save(self, lake_root: str, stamp: Stamp) -> None:
        """Write the index as the gold run ``stamp.gold_run``'s (the base too when it is not
        stored yet), then remove the folder's other files. A file is written whole under a
        temporary name then renamed (an object store's put is whole already)."""
        from pyarrow import fs

        filesystem, folder = filesystem_of(folder_of(lake_root))
        filesystem.create_dir(folder, recursive=True)
        if self._base_name is None:
            self._base_name = _name("base", stamp.gold_run)
            _write(filesystem, f"{folder}/{self._base_name}", self._base, {})
        patch = _name("patch", stamp.gold_run)
        _write(filesystem, f"{folder}/{patch}", self._patch,
               {"base": self._base_name, "silver_run": str(stamp.silver_run), "schemas": json.dumps(list(stamp.schemas))})
        for info in filesystem.get_file_info(fs.FileSelector(folder, allow_not_found=True)):
            if info.base_name not in (self._base_name, patch) and info.type == fs.FileType.File:
                filesystem.delete_file(info.path)

    def pointing_at(self, ids: Iterable[bytes]) -> set[tuple[bytes, bool]]:
        """``(source, deleted)`` of every edge whose target is one of ``ids`` (raw)."""
        import numpy as np
        import pyarrow as pa

        wanted = sorted(set(ids))
        found: set[tuple[bytes, bool]] = set()
        if wanted and len(self._keys):
            query = np.array(wanted, dtype=f"S{ID_BYTES}")
            lo, hi = np.searchsorted(self._keys, query, "left"), np.searchsorted(self._keys, query, "right")
            at = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi, strict=True) if b > a] or [np.array([], int)])
            if len(at):
                rows = self._base.take(pa.array(at))
                found = {(source, bool(deleted)) for source, deleted in
                         zip(rows.column("source").to_pylist(), rows.column("deleted").to_pylist(), strict=True)
                         if source not in self._replaced}
        for target in wanted:
            found.update(self._patch_at.get(target, ()))
        return found

    def targets_of(self, ids: Iterable[bytes]) -> set[bytes]:
        """The targets of the edges whose source is one of ``ids`` (raw)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        wanted = set(ids)
        from_base = wanted - self._replaced
        targets: set[bytes] = set()
        if from_base:
            hits = self._base.filter(pc.is_in(self._base.column("source"),
                                              value_set=pa.array(sorted(from_base), pa.binary(ID_BYTES))))
            targets.update(hits.column("target").to_pylist())
        for source in wanted & self._replaced:
            targets.update(self._patch_of.get(source, ()))
        return targets


def _name(kind: str, gold_run: int) -> str:
    return f"{kind}-{gold_run:012d}.arrow"


def _source(filesystem: Any, path: str) -> Any:
    """A file to read: memory-mapped when local, else opened on its store."""
    import pyarrow as pa
    from pyarrow import fs

    if isinstance(filesystem, fs.LocalFileSystem):
        return pa.memory_map(path)
    return filesystem.open_input_file(path)


def _write(filesystem: Any, path: str, rows: Any, metadata: dict[str, str]) -> None:
    import pyarrow.ipc as ipc
    from pyarrow import fs

    local = isinstance(filesystem, fs.LocalFileSystem)
    written = f"{path}.tmp" if local else path
    table = rows.replace_schema_metadata(metadata).combine_chunks()
    with filesystem.open_output_stream(written) as out, ipc.new_file(out, table.schema) as writer:
        writer.write_table(table)
    if local:
        filesystem.move(written, path)

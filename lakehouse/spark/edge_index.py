"""The reverse-edge index of the cascade region walk (:func:`lakehouse.spark.cascades.update_in_region`):
every relation edge of the active schemas' instance states, sorted by target, in Arrow files under
``<lake root>/_cascade_edges``, kept from one gold run to the next.

Why: a region walk asks, level by level, which states point at the level's ids. Staging every
edge from ``silver.instance_states`` for that costs each run the same whatever it changed (about
1.2 s at 1,000,000 messages on Sail, the largest part of a trickle's cascade step); the index
answers the same question from files the last run left, brought up to date with the states of
the instances this run changed, so that a run costs its change.

Layout (one folder, three files current; a file's name carries the gold run that wrote it):

- ``base-<gold run>.arrow``: rows ``target``, ``source`` (raw 34-byte entry hashes, FORMAT.md
  section 1), ``deleted`` (the source's), sorted by ``target``: a level is a binary search per id
  in the memory-mapped file.
- ``gone-<gold run>.arrow``: the base's deleted ids (``id``), sorted: a region's states and the
  deleted ids at its edge are answered here too, with no read of the states.
- ``patch-<gold run>.arrow``: the same columns as the base's edges, for every source whose state
  changed since the base was written: its edges now, or one row with a null ``target`` when it
  has none. The index is the base's edges of the sources the patch does not name, and the
  patch's; an id is deleted as the patch says, or, when the patch does not name it, when the
  base's deleted ids hold it. When the patch passes :data:`COMPACT_ROWS` rows, the run writes the
  base again instead.

The patch's metadata names its base, the silver run its states reflect and the schemas they
cover. A run trusts the index only when the patch was written by the last finished gold run
(a run that died leaves a patch named by a run that never finished) and reflects the silver run
and the schemas of the stored cascade set; else it builds the index again from staged edges.
An id that is not 68 lowercase hex characters (never an entry hash) makes no index: the walk
then goes on over the staged edges as before.

A lake on object storage keeps the index on the store, and each machine that runs on it a local
copy of the base's two files in a cache folder (setting ``index_cache``), named by the BLAKE3
digest of their bytes, which the patch's metadata records: a run reads the patch from the store
(small) and maps the base from the cache, as a local lake maps its own files, instead of
downloading the base each run (46 MB at 1,000,000 messages, 395 MB at 10,000,000). A base not in
the cache is fetched once and checked against its digest; a copy that differs makes no index (the
run builds it again). The cache holds no lake state: emptied, it is filled again from the store.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakehouse.config import user_cache
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


def cache_folder(setting: str = "") -> Path:
    """The folder of this machine's copies of the indexes of lakes on object storage: ``setting``
    (``index_cache``), else ``~/.cache/lakehouse/edge-index`` (``XDG_CACHE_HOME`` when set)."""
    return Path(setting).expanduser() if setting else user_cache("edge-index")


def folder_of(lake_root: str) -> str:
    """The index's folder in the lake at ``lake_root`` (a local path or a URI)."""
    return f"{lake_root.rstrip('/')}/{FOLDER}"


def _gone_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("id", pa.binary(ID_BYTES))])


def remove(lake_root: str) -> None:
    """Remove the index of the lake at ``lake_root``: a first run or a rebuild does, since gold run
    numbers start again in a lake whose gold state was taken away, and a stale index could
    otherwise carry the number a later run looks for."""
    remove_tree(folder_of(lake_root))


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema([("target", pa.binary(ID_BYTES)), ("source", pa.binary(ID_BYTES)), ("deleted", pa.bool_())])


def raw_ids(hex_ids: Any, *, nulls: bool = False) -> Any:
    """An Arrow array of hex ids (strings) as raw fixed-width ids (``binary(34)``); None when one is
    not 68 lowercase hex characters (a space is none), or is null and ``nulls`` is false (with
    ``nulls``, a null stays null, its bytes zero)."""
    import binascii

    import numpy as np
    import pyarrow as pa

    if isinstance(hex_ids, pa.ChunkedArray):
        hex_ids = hex_ids.combine_chunks()
    if hex_ids.null_count and not nulls:
        return None
    if not pa.types.is_string(hex_ids.type):
        hex_ids = hex_ids.cast(pa.large_string())
    n = len(hex_ids)
    if not n:
        return pa.array([], pa.binary(ID_BYTES))
    width = np.int32 if pa.types.is_string(hex_ids.type) else np.int64
    offsets = np.frombuffer(hex_ids.buffers()[1], dtype=width)[hex_ids.offset:hex_ids.offset + n + 1]
    lengths = np.diff(offsets)
    valid = np.ones(n, dtype=bool) if not hex_ids.null_count else hex_ids.is_valid().to_numpy(zero_copy_only=False)
    if not ((lengths == 2 * ID_BYTES) == valid).all():  # a null takes no characters
        return None
    text = hex_ids.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]]
    if any(c in text for c in b"ABCDEF"):
        return None
    try:
        # not bytes.fromhex: it skips whitespace, and a 68-character id with spaces in it would
        # decode short of its 34 bytes
        raw = binascii.unhexlify(text)
    except binascii.Error:
        return None
    if valid.all():
        return pa.FixedSizeBinaryArray.from_buffers(pa.binary(ID_BYTES), n, [None, pa.py_buffer(raw)])
    spread = np.zeros((n, ID_BYTES), dtype=np.uint8)
    spread[valid] = np.frombuffer(raw, dtype=np.uint8).reshape(-1, ID_BYTES)
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(ID_BYTES), n, [pa.array(valid).buffers()[1],
                                                                         pa.py_buffer(spread.tobytes())])


def _keys(column: Any) -> Any:
    """A ``binary(34)`` column (one chunk or several, no nulls) as a numpy ``S34`` array over its
    bytes (no copy for one chunk): sorted and searched as the bytes compare. A column of a
    memory-mapped file in one chunk stays in the file: a search reads the pages it looks at
    (``combine_chunks`` copies even one chunk: the 10,000,000-message trickle's base, 5,063,781
    edges, cost 0.1-1.1 s a run to copy)."""
    import numpy as np
    import pyarrow as pa

    array = column
    if isinstance(column, pa.ChunkedArray):
        array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if not len(array):
        return np.array([], dtype=f"S{ID_BYTES}")
    return np.frombuffer(array.buffers()[1], dtype=f"S{ID_BYTES}", count=len(array), offset=array.offset * ID_BYTES)


def _order(column: Any) -> Any:
    """The indices that sort a ``binary(34)`` column by its bytes (:func:`_keys`), as an Arrow array."""
    import numpy as np
    import pyarrow as pa

    return pa.array(np.argsort(_keys(column), kind="stable"))


def _isin(column: Any, ids: Iterable[bytes]) -> Any:
    """Whether each id of a ``binary(34)`` column is one of ``ids`` (raw): an Arrow boolean mask."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.is_in(column, value_set=pa.array(sorted(ids), pa.binary(ID_BYTES)))


class EdgeIndex:
    """The index as read or built here: the base (edges sorted by target, and the deleted ids) and
    the patch (module docstring).

    Args:
        base: rows of the base's edges (``target``, ``source``, ``deleted``), sorted by ``target``.
        gone: the base's deleted ids (``id``), sorted.
        patch: rows of the patch (``target`` null for a source with no edges).
        base_name: the base's file name when it is stored; None for a base not written yet.
        digests: the BLAKE3 digests (hex) of the stored base's file and of its deleted ids' file,
            when known (a lake on object storage: the cache's names for them).
    """

    def __init__(self, base: Any, gone: Any, patch: Any, base_name: str | None,
                 digests: tuple[str, str] | None = None) -> None:
        import pyarrow.compute as pc

        self._base, self._gone, self._patch, self._base_name = base, gone, patch, base_name
        self._digests = digests if base_name is not None else None
        self._keys = _keys(base.column("target"))
        self._gone_keys = _keys(gone.column("id"))
        self._patch_at: dict[bytes, list[tuple[bytes, bool]]] = {}
        self._patch_of: dict[bytes, set[bytes]] = {}
        # every source the patch names, and whether it is deleted now
        self._replaced: dict[bytes, bool] = dict(zip(patch.column("source").to_pylist(),
                                                     (bool(d) for d in patch.column("deleted").to_pylist()),
                                                     strict=True))
        edges = patch.filter(pc.is_valid(patch.column("target")))
        for target, source, deleted in zip(edges.column("target").to_pylist(), edges.column("source").to_pylist(),
                                           edges.column("deleted").to_pylist(), strict=True):
            self._patch_at.setdefault(target, []).append((source, bool(deleted)))
            self._patch_of.setdefault(source, set()).add(target)

    @property
    def rows(self) -> tuple[int, int]:
        """The rows of the base's edges and of the patch."""
        return self._base.num_rows, self._patch.num_rows

    @property
    def deleted_count(self) -> int:
        """How many of the states it reflects are deleted."""
        replaced = sorted(self._replaced)
        in_base = int(self._in_gone(replaced).sum()) if replaced else 0
        return len(self._gone_keys) - in_base + sum(self._replaced.values())

    @classmethod
    def of_edges(cls, edges: Any) -> EdgeIndex | None:
        """The index of staged region edges (an Arrow table of
        :data:`lakehouse.spark.cascades.REGION_EDGES_DDL`: hex ``source``, ``deleted``, hex
        ``target``, null for a deleted state with no edge), with an empty patch; None when an id is
        not an entry hash's hex."""
        import numpy as np
        import pyarrow as pa

        targets, sources = raw_ids(edges.column("target"), nulls=True), raw_ids(edges.column("source"))
        if targets is None or sources is None:
            return None
        deleted = edges.column("deleted").combine_chunks().fill_null(False)
        linked = np.flatnonzero(targets.is_valid().to_numpy(zero_copy_only=False))
        order = pa.array(linked[np.argsort(_keys(targets)[linked], kind="stable")])
        base = pa.table([targets.take(order), sources.take(order), deleted.take(order)], schema=_schema())
        # the deleted sources, distinct and sorted (numpy compares the bytes as the index searches them)
        gone_ids = np.unique(_keys(sources)[deleted.to_numpy(zero_copy_only=False)])
        gone = pa.table([pa.FixedSizeBinaryArray.from_buffers(pa.binary(ID_BYTES), len(gone_ids),
                                                              [None, pa.py_buffer(gone_ids.tobytes())])],
                        schema=_gone_schema())
        return cls(base, gone, _schema().empty_table(), None)

    @classmethod
    def open(cls, lake_root: str, stamp: Stamp, cache: Path | None = None) -> EdgeIndex | None:
        """The index the gold run ``stamp.gold_run`` wrote, when it reflects ``stamp``'s silver run
        and schemas; None when there is none such (or it cannot be read: a run builds it again).
        For a lake on object storage, ``cache`` (:func:`cache_folder`) holds this machine's copies
        of the base's files (module docstring); None: they are read from the store."""
        import pyarrow as pa
        import pyarrow.ipc as ipc

        filesystem, folder = filesystem_of(folder_of(lake_root))
        try:
            patch_file = ipc.open_file(_source(filesystem, f"{folder}/{_name('patch', stamp.gold_run)}"))
            meta = {k.decode(): v.decode() for k, v in (patch_file.schema.metadata or {}).items()}
            if (int(meta.get("silver_run", -1)) != stamp.silver_run
                    or tuple(json.loads(meta.get("schemas", "[]"))) != stamp.schemas):
                return None
            paths = (f"{folder}/{meta['base']}", f"{folder}/{_gone_name(meta['base'])}")
            digests = (meta["base_digest"], meta["gone_digest"]) if "base_digest" in meta else None
            copies = _copies(cache, filesystem, folder)
            if copies is not None and digests is not None:
                base, gone = (ipc.open_file(pa.memory_map(str(_fetched(filesystem, path, digest, copies)))).read_all()
                              for path, digest in zip(paths, digests, strict=True))
            else:
                base, gone = (ipc.open_file(_source(filesystem, path)).read_all() for path in paths)
            patch = patch_file.read_all()
        except (OSError, KeyError, ValueError, pa.ArrowInvalid):
            return None
        if (base.schema.remove_metadata() != _schema() or patch.schema.remove_metadata() != _schema()
                or gone.schema.remove_metadata() != _gone_schema()):
            return None
        return cls(base, gone, patch, meta["base"], digests)

    def patched(self, changed: Iterable[bytes], states: Iterable[tuple[bytes, bool, list[bytes]]]) -> EdgeIndex:
        """The index brought up to date with the states of the ``changed`` sources (raw ids):
        ``states`` gives ``(id, deleted, targets)`` of those that have one (an id without a state
        has no edges and is not deleted). Ids must be raw entry hashes (:data:`ID_BYTES`)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        changed = set(changed)
        kept = self._patch.filter(pc.invert(_isin(self._patch.column("source"), changed)))
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
        patched = EdgeIndex(self._base, self._gone, pa.concat_tables([kept, fresh]), self._base_name, self._digests)
        return patched if patched.rows[1] <= COMPACT_ROWS else patched._compacted()

    def _compacted(self) -> EdgeIndex:
        """The base and the patch as one base, with an empty patch."""
        import pyarrow as pa
        import pyarrow.compute as pc

        rows = pa.concat_tables([self._base.filter(pc.invert(_isin(self._base.column("source"), self._replaced))),
                                 self._patch.filter(pc.is_valid(self._patch.column("target")))]).combine_chunks()
        base = rows.take(_order(rows.column("target")))
        gone_ids = self._gone.filter(pc.invert(_isin(self._gone.column("id"), self._replaced))).column("id")
        now_gone = pa.array(sorted(i for i, deleted in self._replaced.items() if deleted), pa.binary(ID_BYTES))
        ids = pa.concat_arrays([gone_ids.combine_chunks(), now_gone]) if len(gone_ids) else now_gone
        gone = pa.table([ids.take(_order(ids))], schema=_gone_schema())
        return EdgeIndex(base, gone, _schema().empty_table(), None)

    def save(self, lake_root: str, stamp: Stamp, cache: Path | None = None) -> None:
        """Write the index as the gold run ``stamp.gold_run``'s (the base too when it is not
        stored yet), then remove the folder's other files. A file is written whole under a
        temporary name then renamed (an object store's put is whole already). For a lake on
        object storage with a ``cache`` (:func:`cache_folder`), a new base is written to the cache
        first and sent to the store from there, and the patch names its files' digests; the
        cache keeps the current base's files only."""
        from pyarrow import fs

        filesystem, folder = filesystem_of(folder_of(lake_root))
        copies = _copies(cache, filesystem, folder)
        if isinstance(filesystem, fs.LocalFileSystem):  # a store has no folders to make
            filesystem.create_dir(folder, recursive=True)
        if self._base_name is None:
            self._base_name = _name("base", stamp.gold_run)
            paths = (f"{folder}/{self._base_name}", f"{folder}/{_gone_name(self._base_name)}")
            if copies is None:
                for path, rows in zip(paths, (self._base, self._gone), strict=True):
                    _write(filesystem, path, rows, {})
            else:
                digests = [_cached_write(copies, rows) for rows in (self._base, self._gone)]
                for path, digest in zip(paths, digests, strict=True):
                    fs.copy_files(str(copies / f"{digest}.arrow"), path, source_filesystem=fs.LocalFileSystem(),
                                  destination_filesystem=filesystem)
                self._digests = (digests[0], digests[1])
        patch = _name("patch", stamp.gold_run)
        meta = {"base": self._base_name, "silver_run": str(stamp.silver_run), "schemas": json.dumps(list(stamp.schemas))}
        if self._digests is not None:
            meta |= {"base_digest": self._digests[0], "gone_digest": self._digests[1]}
        _write(filesystem, f"{folder}/{patch}", self._patch, meta)
        keep = {self._base_name, _gone_name(self._base_name), patch}
        for info in filesystem.get_file_info(fs.FileSelector(folder, allow_not_found=True)):
            if info.base_name not in keep and info.type == fs.FileType.File:
                filesystem.delete_file(info.path)
        if copies is not None and self._digests is not None:
            current = {f"{digest}.arrow" for digest in self._digests}
            for old in copies.glob("*.arrow"):
                if old.name not in current:
                    old.unlink(missing_ok=True)  # a run mapping it keeps its pages

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
        return {target for targets in self.states_of(ids).values() for target in targets[1]}

    def states_of(self, ids: Iterable[bytes]) -> dict[bytes, tuple[bool, list[bytes]]]:
        """Of each of ``ids`` (raw): whether its state is deleted, and the ids its edges point at
        (sorted); ``(False, [])`` for an id without a state."""

        wanted = sorted(set(ids))
        from_base = [i for i in wanted if i not in self._replaced]
        targets: dict[bytes, set[bytes]] = {}
        if from_base:
            hits = self._base.filter(_isin(self._base.column("source"), from_base))
            for source, target in zip(hits.column("source").to_pylist(), hits.column("target").to_pylist(), strict=True):
                targets.setdefault(source, set()).add(target)
        gone = self.deleted_among(wanted)
        return {i: (i in gone, sorted(self._patch_of.get(i, ()) if i in self._replaced else targets.get(i, ())))
                for i in wanted}

    def deleted_among(self, ids: Iterable[bytes]) -> set[bytes]:
        """Those of ``ids`` (raw) whose state is deleted."""
        wanted = set(ids)
        from_base = sorted(wanted - self._replaced.keys())
        gone = {i for i in wanted & self._replaced.keys() if self._replaced[i]}
        if from_base:
            gone.update(i for i, is_gone in zip(from_base, self._in_gone(from_base), strict=True) if is_gone)
        return gone

    def removed(self) -> set[bytes]:
        """The ids a cascade removes, from every deleted state over every edge the index holds
        (:func:`removed_of`): the set a walk of every edge gives
        (:func:`lakehouse.spark.cascades.walk_all`), an edge whose target can never be gone
        carrying nothing; raw ids."""
        whole = self if not self._patch.num_rows else self._compacted()
        return removed_of(whole._gone.column("id"), whole._base.column("source"), whole._base.column("target"))

    def _in_gone(self, ids: list[bytes]) -> Any:
        """Whether each of ``ids`` (raw, sorted) is in the base's deleted ids: a numpy bool array."""
        import numpy as np

        if not len(self._gone_keys):
            return np.zeros(len(ids), dtype=bool)
        query = np.array(ids, dtype=f"S{ID_BYTES}")
        at = np.minimum(np.searchsorted(self._gone_keys, query, "left"), len(self._gone_keys) - 1)
        return self._gone_keys[at] == query


def removed_of(deleted: Any, sources: Any, targets: Any) -> set[bytes]:
    """:func:`lakehouse.core.gold.removed_by_cascade` of raw ids (Arrow binary columns of one type:
    the deleted ids, and the edges as sources and targets), the ids numbered by Arrow's dictionary
    encoding and walked by :func:`lakehouse.core.gold.removed_by_cascade_numbered`: the removed ids."""
    import pyarrow as pa

    from lakehouse.core.gold import removed_by_cascade_numbered

    def flat(column: Any) -> Any:
        return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column

    deleted, sources, targets = flat(deleted), flat(sources), flat(targets)
    numbered = pa.concat_arrays([deleted, sources, targets]).dictionary_encode()
    numbers = numbered.indices.to_numpy(zero_copy_only=False)
    d, s = len(deleted), len(sources)
    removed = removed_by_cascade_numbered(len(numbered.dictionary), numbers[:d], numbers[d:d + s], numbers[d + s:])
    return set(numbered.dictionary.take(pa.array(removed)).to_pylist())


def _name(kind: str, gold_run: int) -> str:
    return f"{kind}-{gold_run:012d}.arrow"


def _gone_name(base_name: str) -> str:
    """The file of a base's deleted ids, beside it."""
    return "gone-" + base_name.removeprefix("base-")


def _copies(cache: Path | None, filesystem: Any, folder: str) -> Path | None:
    """This machine's folder of copies of the index at ``folder`` of a store (under ``cache``, by
    a digest of the store's type and the folder); None for a local lake or without a cache."""
    import blake3
    from pyarrow import fs

    if cache is None or isinstance(filesystem, fs.LocalFileSystem):
        return None
    return cache / blake3.blake3(f"{filesystem.type_name}:{folder}".encode()).hexdigest()[:32]


def _digest_of(path: Path) -> str:
    """The BLAKE3 digest (hex) of a file's bytes."""
    import blake3

    return str(blake3.blake3(max_threads=blake3.blake3.AUTO).update_mmap(path).hexdigest())


def _cached_write(copies: Path, rows: Any) -> str:
    """Write ``rows`` as an Arrow file into the cache folder ``copies``, named by its digest: the digest."""
    copies.mkdir(parents=True, exist_ok=True)
    part = copies / f"written.part{os.getpid()}"
    _write(_local(), str(part), rows, {})
    digest = _digest_of(part)
    part.replace(copies / f"{digest}.arrow")
    return digest


def _fetched(filesystem: Any, path: str, digest: str, copies: Path) -> Path:
    """The local copy of the store's file ``path`` whose bytes have the BLAKE3 ``digest``: from the
    cache folder ``copies``, else fetched into it first.

    Raises:
        OSError: it could not be fetched or written here.
        ValueError: the store's bytes are not those the digest names.
    """
    import blake3

    copy = copies / f"{digest}.arrow"
    if copy.is_file():
        return copy
    copies.mkdir(parents=True, exist_ok=True)
    part = copies / f"{digest}.part{os.getpid()}"
    hasher = blake3.blake3()
    try:
        with filesystem.open_input_stream(path) as got, part.open("wb") as out:
            while chunk := got.read(8 << 20):
                hasher.update(chunk)
                out.write(chunk)
        if hasher.hexdigest() != digest:
            raise ValueError(f"{path}: its bytes are not the index file its patch names ({digest})")
        part.replace(copy)
    finally:
        part.unlink(missing_ok=True)
    return copy


def _local() -> Any:
    from pyarrow import fs

    return fs.LocalFileSystem()


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

"""Table names, locations and catalog registration (LAKEHOUSE.md, Layers).

Every table is a Delta table at ``<lake_root>/<layer>/<name>`` and is known to SQL as
``<layer>.<name>``. Sail's catalog lives in memory, so :func:`register_lake` registers the lake's
tables at the start of each session: every bronze and silver table found under the lake root, and
the gold tables that ``silver.gold_versions`` lists for the latest gold run (so the tables of
abandoned schema versions stay out of the catalog, and ``gold.<name>`` names the latest version).
"""

from __future__ import annotations

import contextlib
import re
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.store import absolute_root, arrow_uri

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LAYERS: tuple[str, ...] = ("bronze", "silver", "gold")
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,127}$")


@dataclass(frozen=True)
class TableRef:
    """A lake table: ``layer`` (bronze/silver/gold), ``name`` and its Delta ``location``."""

    layer: str
    name: str
    location: str

    @property
    def qualified(self) -> str:
        """``layer.name``, as SQL names it."""
        return f"{self.layer}.{self.name}"


def table(lake_root: str, layer: str, name: str) -> TableRef:
    """The table ``layer.name`` of the lake at ``lake_root``.

    Raises:
        ValueError: unknown layer or a name that is not a lowercase SQL identifier.
    """
    if layer not in LAYERS:
        raise ValueError(f"unknown layer {layer!r}; expected one of {', '.join(LAYERS)}")
    if not _NAME.match(name):
        raise ValueError(f"table name {name!r} must match {_NAME.pattern}")
    return TableRef(layer, name, f"{absolute_root(lake_root)}/{layer}/{name}")


def staging_folder(lake_root: str, job: str) -> str:
    """The folder where a run of ``job`` (``ingest``, ``silver``, ``gold``) stages its intermediate
    results: under the lake root, so that a lake on object storage keeps them on the store; a root
    given with a trailing slash makes no empty path part (an S3 key with ``//``)."""
    return f"{lake_root.rstrip('/')}/_staging/{job}"


def is_delta_table(location: str) -> bool:
    """Whether ``location`` (a local path or a URI the ``deltalake`` package reads) holds a Delta
    table: its log has a commit or a checkpoint (read by ``deltalake``, not by listing local files,
    so that a lake root on object storage is read the same way)."""
    from deltalake import DeltaTable

    return bool(DeltaTable.is_deltatable(arrow_uri(location)))


def filesystem_of(location: str) -> tuple[Any, str]:
    """The ``pyarrow.fs`` file system of ``location`` (a local path, resolved, or a URI it reads:
    ``file://``, ``s3://`` or ``s3a://``, ...) and the path within it."""
    from pyarrow import fs

    if "://" in location:
        filesystem, path = fs.FileSystem.from_uri(arrow_uri(location))
        return filesystem, path.rstrip("/")
    return fs.LocalFileSystem(), str(Path(location).resolve())


def remove_file(location: str) -> None:
    """Delete the file ``location`` (a local path or a URI, :func:`filesystem_of`), when it is there.

    Raises:
        OSError: it is there and could not be deleted.
    """
    filesystem, path = filesystem_of(location)
    with contextlib.suppress(FileNotFoundError):
        filesystem.delete_file(path)


def remove_tree(location: str) -> bool:
    """Remove the folder ``location`` and all under it (:func:`filesystem_of`: a local path or a
    URI, so that a lake on object storage keeps its staging folders on the store).

    A store may show a folder that holds nothing: S3Proxy on a file system sometimes leaves the
    emptied directory on its disk (up to 3 removals of 40 here, still there 10 s later), which it
    answers as a folder but lists as empty, so the delete finds nothing ("Path does not exist").
    Such a folder counts as there, and as removed; one that still holds a file after a failed
    delete is an error.

    Returns:
        Whether there was anything to remove (the folder was there).

    Raises:
        OSError: the folder or a file under it could not be removed.
    """
    from pyarrow import fs

    filesystem, path = filesystem_of(location)
    if filesystem.get_file_info(path).type == fs.FileType.NotFound:
        return False
    try:
        filesystem.delete_dir(path)
    except FileNotFoundError:
        left = filesystem.get_file_info(fs.FileSelector(path, recursive=True, allow_not_found=True))
        if any(info.type == fs.FileType.File for info in left):
            raise
    return True


def _listing(location: str) -> list[Any]:
    """What is directly under ``location`` (:func:`filesystem_of`), as ``pyarrow.fs.FileInfo``;
    nothing when it does not exist."""
    from pyarrow import fs

    filesystem, path = filesystem_of(location)
    return list(filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True)))


def _folders(location: str) -> list[str]:
    """The names of the folders directly under ``location``, sorted (:func:`_listing`)."""
    from pyarrow import fs

    return sorted(info.base_name for info in _listing(location) if info.type == fs.FileType.Directory)


def lake_tables(lake_root: str) -> list[TableRef]:
    """Every Delta table under a lake root (a local path or a URI), in layer then name order."""
    found = []
    for layer in LAYERS:
        for name in _folders(f"{lake_root.rstrip('/')}/{layer}"):
            ref = table(lake_root, layer, name) if _NAME.match(name) else None
            if ref is not None and is_delta_table(ref.location):
                found.append(ref)
    return found


# what this process registered in each session's catalog: qualified name -> location (Sail keeps
# the catalog per session, in memory; a session's catalog is not shared with other processes)
_REGISTERED: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()


def register_table(spark: SparkSession, ref: TableRef, *, unnamed: bool = False) -> None:
    """Make ``ref`` known to SQL as ``layer.name`` (replacing an older registration).

    A name this process already registered in this session at the same location is left as it is:
    the catalog names a location, and every read of it sees the table's latest Delta version.

    Args:
        unnamed: the caller listed the layer's tables and this name is not among them: no older
            registration to drop first.
    """
    done = _REGISTERED.setdefault(spark, {})
    if done.get(ref.qualified) == ref.location:
        return
    _database(spark, ref.layer)
    if not unnamed:
        spark.sql(f"DROP TABLE IF EXISTS {ref.qualified}")
    location = ref.location.replace("'", "\\'")
    plain = f"CREATE TABLE {ref.qualified} USING delta LOCATION '{location}'"
    created = False
    if spark not in _DECLARES:  # the session's first registration tells whether its engine needs the columns
        spark.sql(plain)
        created = bool(spark.sql(f"DESCRIBE TABLE {ref.qualified}").collect())
        _DECLARES[spark] = not created
        if not created:
            spark.sql(f"DROP TABLE {ref.qualified}")
    if not created and _DECLARES[spark]:
        declared = table_columns(spark, ref.location)
        # Sail refuses a declared ARRAY (see _DECLARES): such a table is named without columns, as
        # is one whose declared columns the engine refuses for another reason
        if "array<" not in declared:
            with contextlib.suppress(Exception):
                spark.sql(f"CREATE TABLE {ref.qualified} ({declared}) USING delta LOCATION '{location}'")
                created = True
    if not created:
        spark.sql(plain)
    done[ref.qualified] = ref.location


# the databases this process created in each session's catalog (a statement per table a run
# registers, 47 of them after a gold run at 1M, cost Sail about 0.1 s)
_DATABASES: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


def _database(spark: SparkSession, layer: str) -> None:
    """Create the database ``layer`` in the session's catalog unless this process did already."""
    done = _DATABASES.setdefault(spark, set())
    if layer not in done:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {layer}")
        done.add(layer)


# whether a session's engine is given each table's columns: Sail names a table registered without
# columns with none (``DESCRIBE TABLE`` is empty, though queries read every column); Delta Lake on
# Apache Spark reads them from the table and refuses a declared list whose field metadata differs.
# Sail also refuses a declared ARRAY column (its element is named ``element`` in the table and
# nothing in the statement), so a table with one is named without columns there
_DECLARES: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def table_columns(spark: SparkSession, location: str) -> str:
    """The column list of a Delta table's current schema, as ``CREATE TABLE`` declares it (the engine
    checks it against the table's own schema). Read from the table's Delta log
    (:func:`lakehouse.spark.deltalog.schema`), not asked of the engine: Sail replays the whole log to
    tell a table's schema (the 43 names of a gold run at 10,000,000 messages cost 1.1 s a run).

    A log this reader does not read (:class:`lakehouse.spark.deltalog.DeltaLogError`) is asked of
    the engine.

    Raises:
        FileNotFoundError: no Delta table at ``location``.
    """
    from pyspark.sql.types import StructType

    from lakehouse.spark import deltalog  # built on this module

    try:
        schema = StructType.fromJson(deltalog.schema(location))
    except deltalog.DeltaLogError:
        schema = spark.read.format("delta").load(location).schema
    return ", ".join(f"`{f.name}` {f.dataType.simpleString()}{'' if f.nullable else ' NOT NULL'}"
                     for f in schema.fields)


def _forget(spark: SparkSession, layer: str, name: str) -> None:
    """Drop ``layer.name`` from the catalog (if there) and from what this process registered."""
    spark.sql(f"DROP TABLE IF EXISTS {layer}.`{name}`")
    _REGISTERED.get(spark, {}).pop(f"{layer}.{name}", None)


_COMMIT = re.compile(r"[0-9]{20}\.json")


def delta_version(location: str) -> int:
    """The latest Delta version of a table: its newest commit file, found by listing its log as a
    Delta reader does (through ``pyarrow.fs``, so a URI on object storage works too). Not by
    loading the table with the ``deltalake`` package: that replays every commit since the last
    checkpoint, and a gold table keeps none for time travel (50 ms at 300 versions, measured).

    Raises:
        FileNotFoundError: ``location`` holds no Delta table.
    """
    commits = [int(info.base_name[:20]) for info in _listing(f"{location.rstrip('/')}/_delta_log")
               if _COMMIT.fullmatch(info.base_name)]
    if not commits:
        raise FileNotFoundError(f"{location} is not a Delta table")
    return max(commits)


def current_gold_rows(spark: SparkSession, lake_root: str) -> list[Any]:
    """The ``silver.gold_versions`` rows of the latest gold run, one per gold table, by name and version."""
    from lakehouse.spark.catalog import GOLD_VERSIONS  # the catalog and delta are built on this module
    from lakehouse.spark.delta import read_rows

    rows = read_rows(spark, GOLD_VERSIONS.at(lake_root)) or []
    last = max((r["gold_run"] for r in rows), default=None)
    return sorted((r for r in rows if r["gold_run"] == last and r["table_name"] is not None),
                  key=lambda r: (r["name"], r["version"]))


def current_gold(spark: SparkSession, lake_root: str) -> list[TableRef]:
    """The gold tables of the latest gold run: ``<name>_v<n>``, ``<name>`` for the current version,
    and the change feed ``<name>_v<n>_changes`` of each that has one."""
    from lakehouse.spark.catalog import changes_table

    refs = []
    for r in current_gold_rows(spark, lake_root):
        # found from the lake root, not from the stored location: a lake copied or moved reads its own tables
        location = table(lake_root, "gold", r["table_name"]).location
        refs.append(TableRef("gold", r["table_name"], location))
        if r["is_current"]:
            refs.append(TableRef("gold", r["name"], location))
        feed = changes_table(lake_root, r["table_name"])
        if is_delta_table(feed.location):
            refs.append(feed)
    return refs


def register_gold(spark: SparkSession, lake_root: str) -> list[TableRef]:
    """Name the current gold tables in the catalog and drop the names of any others.

    Returns:
        The gold tables registered.
    """
    _database(spark, "gold")
    refs = current_gold(spark, lake_root)
    wanted = {ref.name for ref in refs}
    listed = {r["tableName"] for r in spark.sql("SHOW TABLES IN gold").collect()}
    for name in listed - wanted:
        _forget(spark, "gold", name)
    for ref in refs:
        register_table(spark, ref, unnamed=ref.name not in listed)
    return refs


def register_lake(spark: SparkSession, lake_root: str) -> list[TableRef]:
    """Register the ``bronze``, ``silver`` and ``gold`` namespaces and the lake's tables in them.

    Returns:
        The tables registered.
    """
    for layer in LAYERS:
        _database(spark, layer)
    refs = [ref for ref in lake_tables(lake_root) if ref.layer != "gold"]
    for ref in refs:
        register_table(spark, ref)
    return refs + register_gold(spark, lake_root)


def catalog_stamp(lake_root: str) -> tuple[Any, ...]:
    """What decides the catalog's names: the lake's tables and the latest commit of
    ``silver.gold_versions``. When it changes, :func:`register_lake` has something to do."""
    from lakehouse.spark.catalog import GOLD_VERSIONS

    versions = GOLD_VERSIONS.at(lake_root).location
    return (tuple(ref.qualified for ref in lake_tables(lake_root)),
            delta_version(versions) if is_delta_table(versions) else -1)

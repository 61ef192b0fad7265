"""Cascades in the engine (SEMANTICS.md section 5, notes 14-15): the edges a cascade can travel,
the set of instances cascades remove, walked here over numbered ids, and the frames of ids the
gold job hands between its steps.

A walk over every edge (:func:`walk_all`) stages the edges from ``silver.instance_states`` in one
query, then walks them in the client (pure: :func:`lakehouse.core.gold.removed_by_cascade_numbered`)
or, for a large lake, in the engine a level at a time; a run that changed a few instances brings
the last run's set up to date around them instead (:func:`update_in_region`, its levels walked
by :class:`RegionEdges`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse.core.gold import removed_in_region
from lakehouse.core.messages import SchemaId
from lakehouse.core.revert import SchemaPlan
from lakehouse.spark import buckets, catalog, delta
from lakehouse.spark.edge_index import ID_BYTES, EdgeIndex, Stamp, removed_of
from lakehouse.spark.groups import arrow_schema, spark_schema
from lakehouse.spark.lake import changed_instances

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.spark import deltalog
    from lakehouse.spark.tables import TableRef


# changed instances (with those pointing at them) up to which a run brings the last cascade set up
# to date around them (update_in_region) instead of computing it again from every edge
CASCADE_REGION_LIMIT = 20_000

REGION_SHARE = 20
"""With an edge index, a region walk goes on until its region passes the index's edges over this
(:func:`region_limit`), when that is more than :data:`CASCADE_REGION_LIMIT`. Over an index a level
is a binary search per id, so the region's cost follows its ids (about 70 us an id at 1,000,000
messages), while the walk of every edge that follows a walk that gives up costs the index's edges
(about 3 us an edge there, and the levels already walked are lost): at the bench's 628,000 edges
the two meet near a region of 30,000. The last 1 % of that lake has a region of 22,401: its
cascade step 4.1-4.2 s as a region walk against 5.4-5.5 s given up at 20,000
(``tests/benchmarks/README.md``, Run BO)."""


def region_limit(index: EdgeIndex | None) -> int:
    """The region past which a region walk (:func:`update_in_region`) gives up: :data:`CASCADE_REGION_LIMIT`,
    or with an edge index its edges (base and patch) over :data:`REGION_SHARE` when that is more
    (both read at the call)."""
    if index is None:
        return CASCADE_REGION_LIMIT
    return max(CASCADE_REGION_LIMIT, sum(index.rows) // REGION_SHARE)


@dataclass(frozen=True)
class RegionUpdate:
    """The last run's removed set brought up to date around the changed instances
    (:func:`update_in_region`): the removed ids (``instance_id``; not staged: a read of the stored
    set less the region, and the region's removed ids), the ids whose verdict flipped (raw
    hashes), how many instances the region held, the change to the stored set (:class:`SetChange`),
    and how many states are deleted when the walk's edge index counts them (None when it does not)."""

    removed: DataFrame
    flipped: set[bytes]
    region: int
    change: SetChange
    deleted: int | None = None  # the deleted states, when the walk's edge index knows them
    # the region's removed ids when the region holds every changed instance the caller gave (not
    # found again from the stored set's silver run): then every instance a run touches, changed or
    # flipped, is in the region, and these are the removed ones among them
    of_region: frozenset[str] | None = None
    # the states (``STATES_DDL``) of the changed instances the caller gave, staged, when the walk
    # read them whole to patch the last run's edge index: the projection's read of them (the
    # touched instances' buckets of states a second time) is then spared
    changed_states: DataFrame | None = None


@dataclass(frozen=True)
class SetChange:
    """What a region walk changed in ``silver.cascade_removed`` (:func:`write_removed`): the ids
    (hex) it adds and those it takes out, the set's snapshot as the run read it before (None when
    its Delta log could not be read so) and the schema rows it held."""

    added: frozenset[str]
    dropped: frozenset[str]
    snap: deltalog.Snapshot | None
    markers: int

    @property
    def buckets(self) -> int | None:
        """The set's number of buckets (None: it has none yet, or its log was not read)."""
        return None if self.snap is None else buckets.of_snapshot(self.snap)

    @property
    def held(self) -> int | None:
        """The ids the set held before (None when its Delta log does not count them)."""
        rows = None if self.snap is None else self.snap.rows
        return None if rows is None else rows - self.markers

    @property
    def count(self) -> int | None:
        """The ids the set holds after the change, when the count before is known."""
        return None if self.held is None else self.held - len(self.dropped) + len(self.added)


@dataclass(frozen=True)
class Cascaded:
    """The states after cascades: the live ones, the touched ones (changed, or whose cascade
    verdict flipped) and their number per schema, and the live rows per schema (counted only in a
    run that writes a table whole or replays one: empty in a run that only merges, whose merged
    tables' rows are read from their Delta logs after the writes); the changed ones
    (``(schema, instance_id)``) and those whose cascade verdict flipped (``instance_id``; None when
    none did), which the change feed gives as causes. When every table is written whole, nothing
    reads the touched and flipped ones: their counts are then empty, and the flipped ones None."""

    removed: DataFrame
    live: DataFrame
    live_counts: dict[str, int]
    touched: DataFrame
    touched_counts: dict[str, int]
    changed: DataFrame
    flipped: DataFrame | None
    # schema -> the 16-bit hashes of its touched ids (:func:`lakehouse.spark.buckets.hash_column`): the
    # buckets a merge of its tables reads
    touched_hashes: dict[str, set[int]] = field(default_factory=dict)
    # the stored set (``silver.cascade_removed``) stands as it is: empty, nothing can cascade, and it
    # covers the same schemas; the run does not write it again
    unchanged: bool = False
    # what a region walk changed in the stored set (written as that change, write_removed); None:
    # the set was computed again (written whole)
    change: SetChange | None = None
    # the removed ids among the touched ones (and maybe others), when a region walk knows them
    # from its region alone (RegionUpdate.of_region): a small frame in place of every removed id
    of_touched: DataFrame | None = None
    # the touched instances' states (``STATES_DDL``), staged, when a region walk staged the changed
    # ones' (RegionUpdate.changed_states); None: read from silver's states by the projection
    touched_states: DataFrame | None = None
    # schema -> its touched ids (hex), when they were read in this process (few): a merge of its
    # tables is then computed here (lakehouse.spark.gold.HereRows); None: not read here
    touched_ids: dict[str, frozenset[str]] | None = None

    @property
    def removed_of_touched(self) -> DataFrame:
        """Ids (``instance_id``) among which are exactly the touched instances a cascade removes:
        what a join with the touched instances reads of the removed set."""
        return self.of_touched if self.of_touched is not None else self.removed


def ids_frame(spark: SparkSession, ids: set[bytes]) -> DataFrame:
    """A one-column ``instance_id`` DataFrame (hex) of ``ids`` (raw hashes), sent as Arrow binary:
    half the bytes of their hex."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    ddl = "id BINARY"
    raw = spark.createDataFrame(pa.table({"id": sorted(ids)}, schema=arrow_schema(ddl)), spark_schema(ddl))
    return raw.select(F.lower(F.hex("id")).alias("instance_id"))


def hex_ids_frame(spark: SparkSession, ids: set[str]) -> DataFrame:
    """A one-column ``instance_id`` DataFrame of ``ids`` (hex, as the tables hold them)."""
    import pyarrow as pa

    ddl = "instance_id STRING"
    return spark.createDataFrame(pa.table({"instance_id": sorted(ids)}, schema=arrow_schema(ddl)), spark_schema(ddl))


CLIENT_WALK_EDGES = 1_000_000
"""Rows of a full walk's staged edges (:func:`stage_edges`) up to which the walk runs in the client,
numbered and walked with numpy (:func:`removed_of_edges`: fast at any depth; its memory follows
the edges, about 200 bytes an edge); past it, in the engine a level at a time
(:func:`removed_in_engine`), so that the client's memory does not grow with the lake. The bench
history has about 630,000 edges at 1,000,000 messages, 5,100,000 at 10,000,000 (the edge indexes
of ``tests/benchmarks/README.md``, Runs BC and BG)."""

INDEX_EDGES = 8_000_000
"""Rows of a region walk's staged edges up to which it builds an edge index of them
(:mod:`lakehouse.spark.edge_index`) and walks its levels over it, though they are past
:data:`CLIENT_WALK_EDGES`: they are read here once to build it (about 200 bytes an edge while it is
built, then dropped), and the index is kept between runs and memory-mapped, so later runs only
patch it; past it, and when no index can be built, the levels run in the engine. At 10,000,000
messages the bench lake's index holds 5,063,781 edges and 1,464,511 deleted ids, and a trickle's
region walk in the engine took 12-13 s (``tests/benchmarks/README.md``, Run BG)."""

ENGINE_WALK_LEVELS = 64
"""Levels a walk in the engine goes down (each a join of the level's ids with the edges, a few
tenths of a second) before the walk goes on in the client instead: a cascade down a long chain
(a reply to a reply ...) would otherwise cost a query per link."""

EDGES_DDL = "source BINARY, target BINARY"
_IDS_DDL = "id BINARY"


@dataclass(frozen=True)
class RegionTooLarge:
    """What a region walk (:func:`update_in_region`) that gave up (its region passed
    :data:`CASCADE_REGION_LIMIT`) leaves for the walk of every edge that follows: the edge index
    it walked over, of the same states (None: it had none)."""

    index: EdgeIndex | None


@dataclass(frozen=True)
class Walked:
    """The removed set of a walk over every edge (:func:`walk_all`): the removed ids (staged,
    ``instance_id``) and their number; the ids whose verdict differs from the last run's set
    (staged, ``instance_id``; None when none does or when not asked for); where it walked
    (``client`` or ``engine``) and how many staged edge rows it walked."""

    removed: DataFrame
    count: int
    flipped: DataFrame | None
    where: str
    edges: int


def stage_edges(states: DataFrame, staging: str) -> str:
    """What :func:`lakehouse.core.gold.removed_by_cascade` needs of ``states`` to give the same
    set as from every deleted instance and every relation edge, in one query, staged: its folder.

    Only an edge whose target can be gone carries a cascade: a target that is deleted or has
    cascading edges of its own (it may be removed). Every deleted instance comes along (a row
    whose ``source`` is null): as a target it starts a cascade, as a source it is gone already and
    never counted as removed. Keeping only those at an end of a carrying edge took a join as long
    as the rest of the query (5.6 s at 10,000,000 messages), to save the transfer of a few hundred
    thousand ids. Rows of :data:`EDGES_DDL`, raw hashes: half the bytes of their hex. Staged, and
    read by the client with pyarrow (not through the engine's connection): at 10,000,000 messages
    (3,000,000 edges) 9.5 s through Spark Connect against 4.1 s written and 0.9 s read; Sail sends
    each batch an operator made as one message, and the batch of a semi join's kept side can pass
    the client's 128 MiB limit on messages.
    """
    from pyspark.sql import functions as F

    pairs = states.where(F.size("targets") > 0).select(F.col("instance_id").alias("source"),
                                                        F.explode("targets").alias("target"))
    can_be_gone = states.where(F.col("deleted") | (F.size("targets") > 0)).select(F.col("instance_id").alias("target"))
    carrying = pairs.join(can_be_gone, "target", "left_semi")
    seeds = states.where(F.col("deleted")).select(F.lit(None).cast("string").alias("source"),
                                                  F.col("instance_id").alias("target"))
    path = f"{staging}/cascade_found"
    delta.stage(carrying.unionByName(seeds).select(F.unhex("source").alias("source"), F.unhex("target").alias("target")),
                path, EDGES_DDL)
    return path


def removed_of_edges(found: Any) -> set[bytes]:
    """:func:`lakehouse.core.gold.removed_by_cascade` of :func:`stage_edges`' rows (an Arrow table
    of :data:`EDGES_DDL`), the ids numbered by Arrow's dictionary encoding and walked by
    :func:`lakehouse.core.gold.removed_by_cascade_numbered`: the removed ids, raw hashes."""
    import pyarrow.compute as pc

    is_seed = pc.is_null(found.column("source"))
    edges = found.filter(pc.invert(is_seed))
    return removed_of(found.column("target").filter(is_seed), edges.column("source"), edges.column("target"))


def _stage_counted(df: DataFrame, path: str, ddl: str) -> tuple[DataFrame, int]:
    """``df`` staged (:func:`lakehouse.spark.delta.stage`) and its rows counted from the files."""
    return delta.stage(df, path, ddl), delta.staged_rows(path)


def removed_in_engine(spark: SparkSession, found: str, staging: str, levels: int | None = None) -> list[str] | None:
    """The walk of :func:`lakehouse.core.gold.removed_by_cascade` in the engine, over the staged
    edges ``found`` (:func:`stage_edges`): the deleted ids, then a level at a time the sources of
    the edges into the last level's ids that are not gone yet, each level staged
    (``{staging}/cascade_gone/<n>``) and counted from its files. The client holds a level's
    count, never its ids.

    Returns:
        The staged folders of the levels that removed instances (rows of ``id BINARY``), in order;
        None when the walk did not end within ``levels`` levels (default :data:`ENGINE_WALK_LEVELS`,
        read at the call).
    """
    from pyspark.sql import functions as F

    levels = ENGINE_WALK_LEVELS if levels is None else levels
    staged = spark.read.schema(EDGES_DDL).parquet(found)
    edges = staged.where(F.col("source").isNotNull())
    first = f"{staging}/cascade_gone/0"
    frontier, seeds = _stage_counted(staged.where(F.col("source").isNull()).select(F.col("target").alias("id"))
                                     .distinct(), first, _IDS_DDL)
    if not seeds:
        return []
    gone = [first]
    for level in range(1, levels + 1):
        reached = edges.join(frontier.withColumnRenamed("id", "target"), "target", "left_semi")
        fresh = (reached.select(F.col("source").alias("id")).distinct()
                 .join(spark.read.schema(_IDS_DDL).parquet(*gone), "id", "left_anti"))
        path = f"{staging}/cascade_gone/{level}"
        frontier, reached_rows = _stage_counted(fresh, path, _IDS_DDL)
        if not reached_rows:
            return gone[1:]
        gone.append(path)
    return None


def walk_all(spark: SparkSession, states: DataFrame, before: DataFrame | None, staging: str, *,
             flipped: bool = True, client_edges: int | None = None, index: EdgeIndex | None = None) -> Walked:
    """The removed set of the cascades from every edge of ``states`` (``silver.instance_states``:
    ``instance_id``, ``deleted``, ``targets``), walked in the client when the edges are at most
    ``client_edges`` rows (default :data:`CLIENT_WALK_EDGES`, read at the call), else in the
    engine (:func:`removed_in_engine`), and in the client after all when a walk in the engine
    does not end within :data:`ENGINE_WALK_LEVELS` levels.

    Args:
        before: the ids (``instance_id``) of the last run's removed set; None: no set before (every
            removed id flipped).
        flipped: stage the ids whose verdict flipped (the symmetric difference with ``before``).
        index: an edge index of the same states (:class:`RegionTooLarge`: a region walk that gave
            up): walked in the client (:meth:`lakehouse.spark.edge_index.EdgeIndex.removed`) when
            it holds at most ``client_edges`` rows, instead of staging the edges again (the 1 %
            incremental at 1,000,000 messages staged them for 1.5 s).
    """
    from pyspark.sql import functions as F

    limit = CLIENT_WALK_EDGES if client_edges is None else client_edges
    in_client: Callable[[], set[bytes]]
    if index is not None and (rows := sum(index.rows)) <= limit:
        in_client, levels = index.removed, None
    else:
        found = stage_edges(states, staging)
        rows = delta.staged_rows(found)
        levels = removed_in_engine(spark, found, staging) if rows > limit else None

        def in_client() -> set[bytes]:
            return removed_of_edges(delta.read_staged(found, arrow_schema(EDGES_DDL)))
    if levels is None:  # in the client
        removed = in_client()
        removed_df = delta.stage(ids_frame(spark, removed), f"{staging}/removed")
        changed: set[bytes] = set()
        if flipped:
            changed = removed ^ (set() if before is None else set(
                before.select(F.unhex("instance_id")).toArrow().column(0).to_pylist()))
        flipped_df = delta.stage(ids_frame(spark, changed), f"{staging}/flipped") if changed else None
        return Walked(removed_df, len(removed), flipped_df, "client", rows)
    gone = (spark.read.schema(_IDS_DDL).parquet(*levels) if levels
            else spark.createDataFrame([], spark_schema(_IDS_DDL)))
    removed_df, count = _stage_counted(gone.select(F.lower(F.hex("id")).alias("instance_id")), f"{staging}/removed",
                                       "instance_id STRING")
    flipped_df = None
    if flipped:
        old = before.select("instance_id") if before is not None else removed_df.limit(0)
        either = (removed_df.join(old, "instance_id", "left_anti")
                  .unionByName(old.join(removed_df, "instance_id", "left_anti")))
        staged_flipped, flips = _stage_counted(either, f"{staging}/flipped", "instance_id STRING")
        flipped_df = staged_flipped if flips else None
    return Walked(removed_df, count, flipped_df, "engine", rows)


REGION_EDGES_DDL = "source STRING, deleted BOOLEAN, target STRING"
"""A region walk's edges (:class:`RegionEdges`): a state's id, whether it is deleted, and an id it
points at, hex as the states hold them (their raw hashes, half the bytes, cost the engine more to
stage and to query than the client saves in reading them: 1.66 s against 1.07-1.21 s at 1,000,000
messages)."""


class RegionEdges:
    """The relation edges a region walk (:func:`update_in_region`) follows from target to source,
    a level at a time. A region walk stages them once (:meth:`stage`) before its first level, and
    its levels then run in the client over the staged rows read with pyarrow when they are at most
    :data:`CLIENT_WALK_EDGES` (read at the call), else in the engine over the staged folder; a
    level asked before they are staged queries the states' edges in the engine.

    Why staged before the first level: at 1,000,000 messages the first level in the engine took
    0.57 s and the staging 0.79 s, so a walk that goes past its first level (the trickle bench's
    does: the instances a trickle changes are pointed at) saves the first, and one that ends there
    pays 0.22 s more.

    Why in the client: a level in the engine is a query whose cost does not follow its ids
    (Sail 0.10-0.25 s, Apache Spark 0.33-1.37 s, for 10 to 1,000 ids among the 1,000,000-message
    bench history's 628,000 edges, its literal ids in ``IN`` or joined, its edges sorted by target
    or not), and the bench's history walks a dozen levels; in the client a level is a scan of
    Arrow arrays (about 19 ms there; ``tests/benchmarks/README.md``, Run AS). The client holds
    the edges as the full walk's client path does, within the same bound.

    Args:
        states: ``silver.instance_states`` (``instance_id``, ``deleted``, ``targets``), hex ids.
    """

    def __init__(self, spark: SparkSession, states: DataFrame) -> None:
        from pyspark.sql import functions as F

        self._spark = spark
        # a deleted state with no edge comes along as one row with a null target: an edge index
        # built from the staged rows knows every deleted state (lakehouse.spark.edge_index)
        self._edges = states.where((F.size("targets") > 0) | F.col("deleted")).select(
            F.col("instance_id").alias("source"), "deleted", F.explode_outer("targets").alias("target"))
        self._here: Any = None  # the staged edges as an Arrow table, once read
        self._index: EdgeIndex | None = None  # the levels' index, once given (use)

    def use(self, index: EdgeIndex) -> None:
        """Walk the next levels over ``index`` (:mod:`lakehouse.spark.edge_index`): the same edges,
        kept between runs, searched by target; the staged edges read here, if any, are let go."""
        self._index, self._here = index, None

    @property
    def index(self) -> EdgeIndex | None:
        """The edge index the levels are walked over (:meth:`use`), or None."""
        return self._index

    @property
    def here(self) -> Any:
        """The staged edges read here (an Arrow table of :data:`REGION_EDGES_DDL`), or None."""
        return self._here

    def stage(self, path: str, client_edges: int | None = None) -> int:
        """Stage the edges at ``path`` and read them here when they are at most ``client_edges``
        rows (default :data:`CLIENT_WALK_EDGES`, read at the call); returns their rows."""
        limit = CLIENT_WALK_EDGES if client_edges is None else client_edges
        self._edges, rows = _stage_counted(self._edges, path, REGION_EDGES_DDL)
        if rows <= limit:
            self._here = delta.read_staged(path, arrow_schema(REGION_EDGES_DDL))
        return rows

    def forget_here(self) -> None:
        """Let the staged edges read here go: the next levels run in the engine."""
        self._here = None

    @property
    def where(self) -> str:
        """Where the next levels run: ``"index"`` (:meth:`use`), ``"client"`` (the staged edges read
        here) or ``"engine"``."""
        if self._index is not None:
            return "index"
        return "engine" if self._here is None else "client"

    def pointing_at(self, ids: set[str]) -> set[tuple[str, bool]]:
        """The ``(source, deleted)`` of every edge whose target is one of ``ids`` (hex)."""
        if self._index is not None:
            return {(source.hex(), deleted) for source, deleted in self._index.pointing_at(_raw(ids))}
        if self._here is not None:
            here = self._here_where("target", ids)
            return {(source, bool(deleted))
                    for source, deleted in zip(here.column("source").to_pylist(), here.column("deleted").to_pylist(),
                                               strict=True)}
        level = hex_ids_frame(self._spark, ids).withColumnRenamed("instance_id", "target")
        return {(r["source"], bool(r["deleted"]))
                for r in self._edges.join(level, "target", "left_semi").select("source", "deleted").distinct().collect()}

    def targets_of(self, ids: set[str]) -> set[str] | None:
        """The targets of the edges whose source is one of ``ids`` (hex), when the edges are read
        here (:attr:`where` is ``"index"`` or ``"client"``); None when they are not (the caller asks
        the engine)."""
        if self._index is not None:
            return {target.hex() for target in self._index.targets_of(_raw(ids))}
        if self._here is None:
            return None
        return {t for t in self._here_where("source", ids).column("target").to_pylist() if t is not None}

    def _here_where(self, column: str, ids: set[str]) -> Any:
        """The edges read here whose ``column`` (``source`` or ``target``) is one of ``ids`` (hex)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        return self._here.filter(pc.is_in(self._here.column(column), value_set=pa.array(sorted(ids), pa.string())))


def _raw(ids: Iterable[str]) -> set[bytes]:
    """The raw bytes of the hex ids that are entry hashes (68 lowercase hex characters): the only
    ids an edge index holds (:mod:`lakehouse.spark.edge_index`)."""
    raw = set()
    for i in ids:
        if len(i) == 2 * ID_BYTES and i == i.lower():
            try:
                raw.add(bytes.fromhex(i))
            except ValueError:
                continue
    return raw


def _kept_index(root: str, last: Stamp, cache: Path | None = None) -> EdgeIndex | None:
    """The edge index the gold run ``last.gold_run`` left (:meth:`EdgeIndex.open`; ``cache``: its
    copies on this machine); None when there is none to trust, or it holds more edges than the
    client walks over an index (:data:`INDEX_EDGES`, read at the call)."""
    index = EdgeIndex.open(root, last, cache)
    return None if index is None or sum(index.rows) > INDEX_EDGES else index


def _patched_index(index: EdgeIndex, changed: set[str], changed_states: DataFrame) -> EdgeIndex | None:
    """``index`` (:func:`_kept_index`) brought up to date with the states of the ``changed`` ids
    (``changed_states``: theirs, with instance_id, deleted and targets); None when a changed state
    names an id no index holds."""
    raw_changed = _raw(changed)
    if len(raw_changed) != len(changed):
        return None
    states = []
    for r in changed_states.select("instance_id", "deleted", "targets").collect():
        targets = list(r["targets"] or [])
        raw_targets = _raw(targets)
        if len(raw_targets) != len(set(targets)):
            return None
        states.append((bytes.fromhex(r["instance_id"]), bool(r["deleted"]), sorted(raw_targets)))
    return index.patched(raw_changed, states)


def update_in_region(spark: SparkSession, root: str, states: DataFrame, changed: DataFrame, before: DataFrame, *,
                     plans: Mapping[SchemaId, SchemaPlan], lost_place: bool, shown: Mapping[str, str],
                     staging: str, bucketed: tuple[DataFrame, int] | None = None,
                     index_at: Stamp | None = None, last_gold_run: int = 0,
                     before_snap: deltalog.Snapshot | None = None,
                     index_cache: Path | None = None,
                     keep_changed: bool = True) -> RegionUpdate | RegionTooLarge | None:
    """The removed set of the last run's cascades brought up to date around the changed instances
    (:func:`lakehouse.core.gold.removed_in_region`): the region is the changed instances and those
    pointing at one, found level by level (:class:`RegionEdges`: the edges staged and the levels
    walked over them, in the client while they are few enough); only the region's states, and the
    verdicts at its edge, are read.
    A run that changes a few instances judges a few states again instead of walking every edge.

    The changed instances are those changed since the silver run the stored set reflects:
    ``changed`` when every plan counts from it, else (a revert counts from its snapshots' older
    runs) found again from it, so that a revert's region holds what changed since the last run,
    not since its snapshots. Valid when the stored set (``silver.cascade_removed``,
    :func:`removed_rows`) covers the same schemas as this run, and no entry lost its place since
    the run it reflects (an instance whose state went with it may be named nowhere). None when it
    is not valid; :class:`RegionTooLarge` when the region grows past :func:`region_limit`:
    the caller computes the set again (over the index the walk had, when it had one).

    Args:
        states: ``silver.instance_states`` of the run's schemas.
        changed: (schema, instance_id) of the instances changed since each plan's silver run.
        before: ``silver.cascade_removed`` as the last run left it.
        plans: the run's plan of each schema it writes.
        lost_place: an entry lost its place in its log since a plan's silver run.
        shown: schema -> the location of its current gold table as the last run left it.
        staging: the run's staging folder.
        bucketed: ``states`` with silver's layout column and their number of buckets
            (:mod:`lakehouse.spark.buckets`), when they have buckets: the region's states are read
            from the files of its buckets only.
        index_at: what this run's edge index reflects (:mod:`lakehouse.spark.edge_index`): the
            levels are walked over the index the last gold run (``last_gold_run``) left, brought up
            to date with the changed states, or over one built from the staged edges, and the
            index is saved for the next run. None: the edges are staged and walked as they are.
        index_cache: this machine's copies of the index of a lake on object storage
            (:func:`lakehouse.spark.edge_index.cache_folder`); None: read from the store.
        before_snap: the snapshot of ``before``'s Delta table as the run read it
            (:func:`lakehouse.spark.buckets.layout`; None: not read so): when it has buckets
            (:mod:`lakehouse.spark.buckets`), the set's schema rows and the region's ids are read
            from their buckets only, and the set's count comes from its rows.
        keep_changed: the caller reads the changed instances' states after the walk: when the walk
            reads them to patch the index, and they are the caller's (not found again), they are
            staged whole and handed back (:attr:`RegionUpdate.changed_states`); else only the
            columns the patch needs are read.
    """
    from pyspark.sql import functions as F

    if "silver_run" not in before.columns:
        return None
    before_buckets = None if before_snap is None else buckets.of_snapshot(before_snap)
    # the schema rows have no id: in the bucket of hash 0 (buckets.hash_column)
    markers = buckets.where_in(before, [0], before_buckets).where(F.col("instance_id").isNull())
    marker_rows = markers.select("schema", "silver_run").collect()
    covered = {r["schema"]: int(r["silver_run"]) for r in marker_rows}
    if set(covered) != {str(sid) for sid in plans}:
        return None
    given = True  # the region grows from the caller's changed instances
    if any(plan.since != covered[str(sid)] for sid, plan in plans.items()):
        given = False
        since = {sid: SchemaPlan("merge", covered[str(sid)]) for sid in plans}
        changed, lost_place = changed_instances(spark, root, since, shown, staged=f"{staging}/changed_since")
    if lost_place:
        return None
    region: set[str] = set()
    runs = set(covered.values())
    # the index the last run left, opened before the changed ids are read: its size sets the limit
    kept = (_kept_index(root, Stamp(last_gold_run, runs.pop(), index_at.schemas), index_cache)
            if index_at is not None and len(runs) == 1 else None)
    limit = region_limit(kept)
    frontier = {r[0] for r in changed.select("instance_id").distinct().limit(limit + 1).collect()}

    def states_of(ids: set[str]) -> DataFrame:  # the states of these ids, read from their buckets when known
        if bucketed is None:
            return states
        return buckets.where_in(bucketed[0], (buckets.hash_of(i) for i in ids), bucketed[1])

    edges = RegionEdges(spark, states)
    index = changed_states = None
    if kept is not None and len(frontier) <= limit:
        # the changed states whole, staged, when the caller reads them after (given: they are its
        # changed instances), so that their buckets are read once a run, not twice (a trickle at
        # 1,000,000 messages on Sail: 0.25 s here and 0.40-0.54 s there before); else (a revert's
        # region, found again; a run writing its tables whole) the patch's columns only
        of_frontier = states_of(frontier).join(hex_ids_frame(spark, frontier), "instance_id", "left_semi")
        if given and keep_changed:
            changed_states = delta.stage(of_frontier.select(*delta.columns(catalog.STATES_DDL)),
                                         f"{staging}/changed_states", catalog.STATES_DDL)
            of_frontier = changed_states
        index = _patched_index(kept, frontier, of_frontier)
        if index is not None:
            edges.use(index)
            index.save(root, index_at, index_cache)  # type: ignore[arg-type]
    depth = 0
    while frontier:
        region |= frontier
        if len(region) > limit:
            return RegionTooLarge(edges.index)
        depth += 1
        if depth == 1 and index is None:
            # read here up to INDEX_EDGES rows when an index is to be kept: built from them, then
            # walked over (the rows read here let go); past CLIENT_WALK_EDGES without one, the
            # levels run in the engine
            rows = edges.stage(f"{staging}/cascade_edges", INDEX_EDGES if index_at is not None else None)
            built = EdgeIndex.of_edges(edges.here) if index_at is not None and edges.here is not None else None
            if built is not None:
                edges.use(built)
                built.save(root, index_at, index_cache)  # type: ignore[arg-type]
                # the first frontier was read whole (it is within the limit): the levels after it
                # go on to the limit of the index built
                limit = region_limit(built)
            elif rows > CLIENT_WALK_EDGES:
                edges.forget_here()
        pointing = edges.pointing_at(frontier)
        # a deleted instance that did not change (the changed ones are all in the first frontier)
        # is gone before and after: what points at it is removed either way, so the region need
        # not grow past it
        frontier = {source for source, deleted in pointing if not deleted} - region
        region |= {source for source, _ in pointing}

    # read once or twice, by queries that stage their results: sent with them, not staged first
    region_df = hex_ids_frame(spark, region)
    edge = None if edges.index is not None else edges.targets_of(region)
    if edges.index is not None:  # the index knows the region's states and which ids at its edge are gone
        found = {i.hex(): (deleted, [t.hex() for t in targets])
                 for i, (deleted, targets) in edges.index.states_of(_raw(region)).items()}
        edge = {t for _, targets in found.values() for t in targets} - region
        looked_up = hex_ids_frame(spark, region | edge)
        deleted_at_edge = {i.hex() for i in edges.index.deleted_among(_raw(edge))}
    elif edge is None:  # the edges are in the engine: the region's states first, then its edge's
        found = {r["instance_id"]: (bool(r["deleted"]), list(r["targets"]))
                 for r in states_of(region).join(region_df, "instance_id", "left_semi")
                 .select("instance_id", "deleted", "targets").collect()}
        edge = {t for _, targets in found.values() for t in targets} - region
        looked_up = hex_ids_frame(spark, region | edge)
        deleted_at_edge = ({r[0] for r in states_of(region | edge).where(F.col("deleted"))
                            .join(looked_up, "instance_id", "left_semi").select("instance_id").collect()} & edge
                           if edge else set())
    else:
        # the edges here name the region's targets, the same states' targets: the states of the
        # region and of its edge in one read (a trickle at 1,000,000 messages: 0.18 s less)
        edge -= region
        looked_up = hex_ids_frame(spark, region | edge)
        read = states_of(region | edge).join(looked_up, "instance_id", "left_semi").select(
            "instance_id", "deleted", "targets").collect()
        found = {r["instance_id"]: (bool(r["deleted"]), list(r["targets"])) for r in read if r["instance_id"] in region}
        deleted_at_edge = {r["instance_id"] for r in read if r["deleted"] and r["instance_id"] in edge}
    in_region = {i: found.get(i, (False, [])) for i in region}
    old = before.where(F.col("instance_id").isNotNull()).select("instance_id")
    gone_before = {r[0] for r in buckets.where_in(old, (buckets.hash_of(i) for i in region | edge), before_buckets)
                   .join(looked_up, "instance_id", "left_semi").collect()}
    now = removed_in_region(in_region, (gone_before & edge) | deleted_at_edge)
    # not staged: read by the steps that need every removed id only (a table written whole or
    # replayed, a change feed that compares more than the touched instances); at 10,000,000
    # messages the set holds 964,984 ids, and staging them cost each run 0.4-0.7 s
    removed = old.join(region_df, "instance_id", "left_anti").unionByName(hex_ids_frame(spark, now))
    change = SetChange(frozenset(now - gone_before), frozenset((gone_before & region) - now), before_snap,
                       len(marker_rows))
    return RegionUpdate(removed, {bytes.fromhex(i) for i in change.added | change.dropped}, len(region), change,
                        None if edges.index is None else edges.index.deleted_count, frozenset(now) if given else None,
                        changed_states)


def write_removed(spark: SparkSession, ref: TableRef, removed: DataFrame, schemas: Iterable[SchemaId],
                  silver_run: int, staging: str, change: SetChange | None = None, held: int | None = None) -> None:
    """Write ``silver.cascade_removed`` (:func:`removed_rows`) as one new Delta version: given the
    change a region walk made to it (``change``), only that: the ids it takes out and the schema
    rows marked deleted in deletion vectors of the files of their buckets, the ids it adds and the
    new schema rows in a file (:func:`lakehouse.spark.delta.replace_rows`, a MERGE keyed null-safe
    by ``(instance_id, schema)``: a schema row has no id); else written whole, in buckets of the
    ids (:func:`lakehouse.spark.buckets.write`) with deletion vectors on. Also whole when the
    table has no buckets yet, or its merges left too many files or deleted rows
    (:func:`lakehouse.spark.delta.mergeable`). At 10,000,000 messages the set holds 964,984 ids,
    written whole each run (0.4-0.7 s) before.

    Args:
        ref: the table.
        removed: every removed id (``instance_id``); may read ``ref`` itself (staged first when
            the table is written whole).
        schemas: the schemas whose states the set covers (a schema row each).
        silver_run: the silver run the set reflects.
        staging: the run's staging folder.
        change: what a region walk changed (:class:`SetChange`), None when it was computed again.
        held: how many ids ``removed`` holds, when the caller counted them (the buckets of a whole
            write are chosen for them; counted here otherwise).
    """
    from pyspark.sql import functions as F

    covered = [str(sid) for sid in schemas]
    # the snapshot the run read before the change: nothing writes the set between
    count = None if change is None else change.buckets
    if change is not None and change.snap is not None and count is not None and delta.mergeable(ref, change.snap):
        ddl = f"{catalog.CASCADE_REMOVED_DDL}, {buckets.DDL}"
        keys = spark.createDataFrame([*((i, None) for i in sorted(change.dropped | change.added)),
                                      *((None, schema) for schema in covered)], "instance_id STRING, schema STRING")
        rows = spark.createDataFrame([*((i, None, None) for i in sorted(change.added)),
                                      *((None, schema, silver_run) for schema in covered)], catalog.CASCADE_REMOVED_DDL)
        hashes = {buckets.hash_of(i) for i in change.dropped | change.added} | {0}  # 0: the schema rows' bucket
        delta.replace_rows(spark, ref, ddl, rows.select("*", buckets.column(count)), keys, ("instance_id", "schema"),
                           buckets.condition({h for h in hashes if h is not None}, count)
                           if None not in hashes else None)
        return
    if change is not None:  # a read of this table: staged before the table is written
        removed = delta.stage(removed, f"{staging}/removed_written")
    rows = removed_rows(spark, removed, covered, silver_run)
    buckets.write(rows.select(*delta.columns(catalog.CASCADE_REMOVED_DDL)), ref,
                  buckets.count_for(held if held is not None else rows.where(F.col("instance_id").isNotNull()).count()),
                  **delta.DELETION_VECTORS)


def removed_rows(spark: SparkSession, removed: DataFrame, schemas: Iterable[SchemaId | str],
                 silver_run: int) -> DataFrame:
    """``silver.cascade_removed`` (``CASCADE_REMOVED_DDL``): the ``removed`` ids, and a row per
    schema whose states the set covers (``instance_id`` null) with the silver run it reflects."""
    from pyspark.sql import functions as F

    covered = spark.createDataFrame([(None, str(sid), silver_run) for sid in schemas], catalog.CASCADE_REMOVED_DDL)
    return removed.select("instance_id", F.lit(None).cast("string").alias("schema"),
                          F.lit(None).cast("bigint").alias("silver_run")).unionByName(covered)

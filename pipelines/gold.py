"""``make materialize``, gold part: registered schemas -> ``gold.<name>_v<n>`` (registering them is
:mod:`pipelines.register`).

SEMANTICS.md sections 5 and 6, notes 14-19 of ``docs/semantics-notes.md``. Steps:

1. the registered schemas (``silver.registrations``) that silver has seen and whose relations
   point only at registered, non-waiting schemas; the others wait, with what for, and their
   tables stay readable as the last run left them (their rows are carried into each run);
2. a plan per schema (:class:`~lakehouse.core.revert.SchemaPlan`): ``full`` (first run,
   ``--rebuild``, or newly active), ``revert`` (a revert abandoned versions since the last run),
   else ``merge``;
3. **instance states**: silver folds them (``silver.instance_states``, every instance log's);
   the instances with a message whose silver row changed since the last gold run (every
   instance, for ``full``) are the changed ones;
4. cascades over all states (:func:`lakehouse.core.gold.removed_by_cascade`, a level at a time
   over the edges a cascade can travel, in the client over numbered ids or, past
   :data:`lakehouse.spark.cascades.CLIENT_WALK_EDGES` edges, in the engine:
   :func:`lakehouse.spark.cascades.walk_all`), or, when the last run's set covers the same
   schemas, that set brought up to date around the changed instances
   (:func:`lakehouse.spark.cascades.update_in_region`); the instances whose cascade status flipped
   join the touched ones (``silver.cascade_removed`` keeps the last set);
5. gold tables, typed Delta tables with a large ``delta.checkpointInterval`` (time travel on Sail).
   Each schema's live states (or its touched ones, for ``merge``) are projected once into a
   staged **wide frame**, one column per distinct field definition of its tables
   (:class:`lakehouse.core.projection.Projection`), and each table is a select of its columns;
   ``merge`` writes each table again as its other rows plus the touched instances' live rows
   (:func:`lakehouse.spark.gold.rewrite_rows`), so only what changed is folded and projected;
   ``revert`` reads each surviving table as of the Delta version written before the first
   abandoned version appeared and replays onto it the instances whose messages changed since
   (:func:`lakehouse.spark.gold.replay`), or, when no version of the table predates the abandoned
   version, merges in the rows of the instances changed since the last run; a table new in this
   run (a new version) is projected from the stored instance states, with no message folded again.
   It is not derived from the previous version's table: that table no longer holds the fields
   hidden at its version, which a field re-created at the new version must show again (note 12);
6. the **change feed** of each table written (:func:`lakehouse.spark.feeds.table_changes`): one
   the row an insert added, the row a delete removed, an update's row before and row after,
   appended to ``gold.<name>_v<n>_changes``; ``silver.gold_changes`` indexes it per run and table;
7. ``silver.gold_versions``: per run, a marker row and one row per current table with its Delta
   version, whether this run wrote it, the silver run, bronze batch and schema version it reflects
   (``lakehouse history``, time travel); the catalog names ``gold.<name>_v<n>`` and ``gold.<name>``
   (the latest version with a table), and no longer names the tables of abandoned versions.

A run with nothing new (same silver run, same registrations) writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property, reduce
from typing import TYPE_CHECKING, Any

from lakehouse.core.gold import InstanceState
from lakehouse.core.messages import SchemaId
from lakehouse.core.projection import Projection, plan_projection
from lakehouse.core.registry import gold_table_name, waits_of
from lakehouse.core.revert import PlanMode, SchemaPlan, TableAction, carried_rows, plan_schema, table_action
from lakehouse.core.schemas import SchemaVersions
from lakehouse.progress import Timeline
from lakehouse.spark import buckets, cascades, catalog, delta, edge_index, feeds, lake, workers
from lakehouse.spark import gold as G
from lakehouse.spark import silver as S
from lakehouse.spark.groups import arrow_schema
from lakehouse.spark.lake import gold_state_tables, load_schemas, registrations, silver_tables
from lakehouse.spark.retry import retried
from lakehouse.spark.tables import (
    TableRef,
    delta_version,
    is_delta_table,
    register_gold,
    register_table,
    remove_tree,
    staging_folder,
    table,
)

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.config import Settings

TABLE_WRITERS = 4  # gold tables written at the same time by one run
# touched instances up to which a run projects their rows into the tables it rewrites here, not in
# the engine, where a Python function costs a call per table: gold for the last 1 % of a
# 100,000-message history went from 1.24 to 1.08 s in a fresh process, as `make materialize` runs
# (medians of six). Past this, the rows would weigh on the plans that carry them
LOCAL_PROJECTION_LIMIT = 20_000


@dataclass
class GoldTable:
    """One gold table written (or kept) by a run."""

    name: str
    schema: str
    version: int
    rows: int
    delta_version: int


@dataclass
class GoldSummary:
    """What one gold run did."""

    run_id: int = 0
    registered: int = 0
    waiting: dict[str, str] = field(default_factory=dict)
    unregistered: dict[str, str] = field(default_factory=dict)
    tables: list[GoldTable] = field(default_factory=list)
    modes: dict[str, PlanMode] = field(default_factory=dict)  # schema -> its plan's mode
    instances: int = 0
    deleted: int = 0
    cascaded: int = 0
    # instances whose cascade verdict was found again (the changed ones and those pointing at them;
    # 0 when no value of the active schemas cascades), or None when the removed set was computed
    # again from every edge
    cascade_region: int | None = None
    up_to_date: bool = False
    seconds: float = 0.0
    retried: list[str] = field(default_factory=list)  # transient engine failures survived
    changes: dict[str, dict[str, int]] = field(default_factory=dict)  # table -> insert/update/delete -> rows
    steps: dict[str, float] = field(default_factory=dict)  # step -> wall seconds (Timeline)


def _stamp(spark: SparkSession, root: str) -> tuple[int, int, int]:
    """(silver run, bronze watermark, registrations): what a gold run reflects. ``registrations``
    counts the commits of ``silver.registrations`` (each register or drop is one), so that a drop
    followed by a registration is not taken for no change."""
    run, watermark = delta.integer_max(spark, silver_tables(root)["runs"], "run_id", "watermark") or (0, 0)
    regs = gold_state_tables(root)["registrations"]
    return int(run or 0), int(watermark or 0), delta_version(regs.location) + 1 if is_delta_table(regs.location) else 0


@dataclass(frozen=True)
class _Run:
    """What the steps of one gold run start from: the lake, the registered schemas and their plans,
    and the rows the last run left in ``silver.gold_versions``."""

    spark: SparkSession
    root: str
    refs: dict[str, TableRef]  # gold_state_tables
    summary: GoldSummary
    stamp: tuple[int, int, int]  # silver run, bronze watermark, registrations (_stamp)
    schemas: dict[SchemaId, SchemaVersions]
    names: dict[SchemaId, str]
    active: list[SchemaId]
    previous: list[Any]  # every earlier run's rows
    last: list[Any]  # the last run's rows
    marker: tuple[Any, ...]  # this run's marker row
    carried: list[tuple[Any, ...]]  # the waiting schemas' rows, carried
    rebuild: bool
    feed: bool  # the change feed is kept (setting change_feed)
    full: bool  # a first run or a rebuild: every plan is full
    plans: dict[SchemaId, SchemaPlan]  # of the active schemas (lakehouse.core.revert.plan_schema)
    staging: str
    index_cache: Path  # this machine's copies of the edge index of a lake on a store (setting index_cache)
    here_rows: int  # rows up to which a write, or the changed instances, go through this process (delta.here_rows_for)

    @cached_property
    def known(self) -> dict[str, Any]:
        """The last run's rows by table name."""
        return {r["table_name"]: r for r in self.last}


@dataclass(frozen=True)
class _States:
    """Step 3's result (:func:`_states`): the instance states of the active schemas and those
    changed since each plan's silver run."""

    states: DataFrame  # silver.instance_states of the active schemas (STATES_DDL)
    changed: DataFrame  # (schema, instance_id) of the changed instances
    # the same with silver's layout column, and its number of buckets (None: it has none): a read of
    # a few instances' states names their buckets (lakehouse.spark.buckets.where_in)
    stored: DataFrame
    buckets: int | None
    lost_place: bool = False  # an entry lost its place in its log since a plan's silver run (lakehouse.spark.lake.changed_instances)
    # silver.replaced_states when the silver run this one reflects wrote it, and the merged schemas
    # whose tables reflect the silver run before (their rows as they were are projected from it)
    replaced: DataFrame | None = None
    projected_before: frozenset[SchemaId] = frozenset()


_Result = tuple[tuple[Any, ...], "GoldTable | None", "tuple[Any, ...] | None"]
"""One table's outcome in a run: its ``silver.gold_versions`` row, the table written (None when
kept) and its ``silver.gold_changes`` row (None when not written, or with no change feed)."""


@retried("gold")
def run_gold(spark: SparkSession, settings: Settings, *, rebuild: bool = False) -> GoldSummary:
    """Bring the gold tables up to date with silver and the registrations (module docstring).

    Returns:
        The summary: tables written with their rows and Delta versions, schemas waiting, schemas
        seen but not registered.
    """
    started = time.monotonic()
    timeline = Timeline()
    run = _start(spark, settings.lake_root, rebuild, feed=settings.change_feed == "on",
                 index_cache=edge_index.cache_folder(settings.index_cache), here_rows=delta.here_rows_for(settings))
    if run.summary.up_to_date or not run.active:
        if run.feed and feeds.lacks_preimages(run.root):  # a lake from before: its feeds gain them now
            feeds.feed_start(spark, run.root, run.summary.run_id - 1)
        if not run.summary.up_to_date:  # every registered schema waits: the run is recorded all the same
            G.append_versions(spark, run.refs["gold_versions"], [run.marker, *run.carried])
        register_gold(spark, run.root)
        run.summary.seconds = time.monotonic() - started
        return run.summary
    timeline.mark("plan")
    workers.start(workers.processes_for(settings))
    run.summary.modes = {str(sid): plan.mode for sid, plan in run.plans.items()}
    feed_base = feeds.feed_start(spark, run.root, run.summary.run_id - 1) if run.feed else {}
    jobs = [(sid, version) for sid in run.active for version in run.schemas[sid].gold_versions()]
    how = {(sid, version): table_action(run.plans[sid], version, gold_table_name(run.names[sid], version) in run.known)
           for sid, version in jobs}
    states = _states(run)
    timeline.mark("states")
    cascaded = _cascades(run, states, how)
    timeline.mark("cascades")
    wides = _project(run, states, cascaded, how)
    timeline.mark("projection")
    results = _bring_up_to_date(run, cascaded, how, wides, jobs, feed_base)
    timeline.mark("tables")
    _finish(run, cascaded, results)
    timeline.mark("finish")
    run.summary.steps = timeline.steps
    run.summary.seconds = time.monotonic() - started
    return run.summary


def _start(spark: SparkSession, root: str, rebuild: bool, *, feed: bool, index_cache: Path, here_rows: int = 0
           ) -> _Run:
    """Steps 1 and 6 of the module docstring, read, and step 2: what the run reflects, the registered
    schemas, which of them wait, whether anything changed since the last run
    (``summary.up_to_date``), and the plan of each active schema
    (:func:`lakehouse.core.revert.plan_schema`, pure: planned also when nothing changed)."""
    summary = GoldSummary()
    stamp = _stamp(spark, root)
    refs = gold_state_tables(root)
    previous = delta.read_rows(spark, refs["gold_versions"]) or []
    last_run = max((r["gold_run"] for r in previous), default=0)
    last = [r for r in previous if r["gold_run"] == last_run]
    last_marker = next((r for r in last if r["table_name"] is None), None)
    summary.run_id = last_run + 1
    schemas = load_schemas(spark, root)
    names = registrations(spark, root)
    summary.registered = len(names)
    summary.unregistered = {str(s): sv.meta.name for s, sv in schemas.items() if s not in names}
    waiting = waits_of(schemas, names)
    summary.waiting = {str(s): why for s, why in waiting.items()}
    silver_run, watermark, n_regs = stamp
    summary.up_to_date = (last_marker is not None and not rebuild
                          and (last_marker["silver_run"], last_marker["registrations"]) == (silver_run, n_regs))
    marker = delta.row(catalog.GOLD_VERSIONS_DDL, gold_run=summary.run_id, silver_run=silver_run, watermark=watermark,
                       registrations=n_regs, written_at=datetime.now(timezone.utc))
    # a waiting schema keeps its tables; one silver no longer knows (a fork at seq 1 of its log
    # took its versions away) has none left to keep
    carried = carried_rows(last, [str(s) for s in waiting if s in schemas], summary.run_id,
                           delta.columns(catalog.GOLD_VERSIONS_DDL))
    active = sorted((s for s in names if s not in waiting), key=str)
    full = rebuild or not last
    plans = {sid: plan_schema(str(sid), schemas[sid], previous, full) for sid in active}
    return _Run(spark, root, refs, summary, stamp, schemas, names, active, previous, last, marker, carried, rebuild,
                feed, full, plans, staging_folder(root, "gold"), index_cache, here_rows)


def _states(run: _Run) -> _States:
    """Step 3: the instance states of the active schemas (silver folds them,
    ``silver.instance_states``), and the instances changed since each schema's plan's silver run.

    In a first run or a rebuild (``run.full``: every plan is ``full``) every instance counts as
    changed and every table is written whole from the live states: the changed ones are then not
    looked up.
    """
    from pyspark.sql import functions as F

    ref = silver_tables(run.root)["instance_states"]
    stored = run.spark.read.format("delta").load(ref.location).where(F.col("schema").isin([str(s) for s in run.active]))
    states = stored.select(*delta.columns(catalog.STATES_DDL))
    if run.full:
        return _States(states, states.select("schema", "instance_id"), stored, None)
    count = buckets.layout(ref.location)[1]
    changed, lost_place = lake.changed_instances(run.spark, run.root, run.plans, _shown(run),
                                                 staged=f"{run.staging}/changed", here_rows=run.here_rows)
    silver_run = run.stamp[0]
    following = {sid for sid, plan in run.plans.items() if plan.mode == "merge" and plan.since == silver_run - 1}
    replaced = delta.read(run.spark, silver_tables(run.root)["replaced_states"]) if run.feed and following else None
    if replaced is not None:
        named = replaced.where(F.col("instance_id").isNull()).select("run_id", "schema").collect()
        if [r["run_id"] for r in named if r["schema"] is None] == [silver_run]:  # it lists this silver run's
            unlisted = {r["schema"] for r in named if r["schema"] is not None}
            return _States(states, changed, stored, count, lost_place, replaced.where(F.col("instance_id").isNotNull()),
                           frozenset(sid for sid in following if str(sid) not in unlisted))
    return _States(states, changed, stored, count, lost_place)


def _shown(run: _Run) -> dict[str, str]:
    """Schema -> the location of its current gold table as the last run left it (``table``'s form, so
    that a lake root that is a URI keeps its ``//``)."""
    return {str(r["schema"]): table(run.root, "gold", r["table_name"]).location for r in run.last
            if r["table_name"] is not None and r["is_current"]}


def _cascades(run: _Run, found: _States, how: Mapping[tuple[SchemaId, int], TableAction]) -> cascades.Cascaded:
    """Step 4: cascades over every active schema: the last run's removed set brought up to date
    around the changed instances when it can be (:func:`lakehouse.spark.cascades.update_in_region`), else computed again from
    the edges that can carry one (:func:`lakehouse.spark.cascades.walk_all`), and neither when no
    value of the active schemas can cascade and the last run's set is empty (it stays empty); the
    instances whose verdict flipped since the last run join the touched ones. Fills the summary's
    ``deleted`` and ``cascaded``."""
    from pyspark.sql import functions as F

    spark, staging, states, changed = run.spark, run.staging, found.states, found.changed
    before = delta.read(spark, run.refs["cascade_removed"])
    # its Delta log read once here: its buckets, the ids it holds (the summary's count after a
    # region walk, with no query of the set) and, at the run's end, how its change is written
    before_snap = None if before is None else buckets.layout(run.refs["cascade_removed"].location)[0]
    # the touched instances and the flipped ones are read by merges and replays only: a run that
    # writes every table whole (a first run, a rebuild) leaves them as they are
    needs_touched = any(way != "write" for way in how.values())
    unchanged = False  # the stored set stands as it is: not written again (_finish)
    cascading = any(run.schemas[sid].cascading for sid in run.active)
    if run.full:
        edge_index.remove(run.root)
    walked_region = None if run.full or before is None or not cascading else cascades.update_in_region(
        spark, run.root, states, changed, before, plans=run.plans, lost_place=found.lost_place, shown=_shown(run),
        staging=staging, bucketed=None if found.buckets is None else (found.stored, found.buckets),
        index_at=edge_index.Stamp(run.summary.run_id, run.stamp[0], tuple(sorted(str(sid) for sid in run.active))),
        last_gold_run=run.summary.run_id - 1,
        before_snap=before_snap, index_cache=run.index_cache, keep_changed=needs_touched)
    update = walked_region if isinstance(walked_region, cascades.RegionUpdate) else None
    too_large = walked_region if isinstance(walked_region, cascades.RegionTooLarge) else None
    stored, kept = (0, set()) if cascading or before is None else _stored_set(before)
    if not cascading and not stored:
        # no value of the active schemas cascades, at any version, and the last run removed none:
        # the set stays empty and no verdict flips (a walk would find no edge; on Apache Spark it
        # cost a small run 3.4-3.8 s in jobs)
        removed_df, flipped_df = spark.createDataFrame([], "instance_id STRING"), None
        run.summary.cascade_region = 0
        # the stored set, empty, stands when it covers these schemas: its silver run is then an
        # earlier one, from which a later run that can cascade brings it up to date (semantics note 31)
        unchanged = kept == {str(sid) for sid in run.active}
    elif update is not None:
        removed_df = update.removed
        if any(way != "merge" for way in how.values()):
            # every removed id is read: by the live states (twice for a replay) and their counts
            removed_df = delta.stage(removed_df, f"{staging}/removed")
        flipped_df = (delta.stage(cascades.ids_frame(spark, update.flipped), f"{staging}/flipped")
                      if update.flipped and needs_touched else None)
        run.summary.cascade_region = update.region
        counted = update.change.count
        run.summary.cascaded = counted if counted is not None else removed_df.count()
    else:
        # staged: the set is read by several steps (and by each table's change feed), and a local
        # relation travels with every plan that reads it (about 5 MB for the 150,000 ids at 1M)
        walked = cascades.walk_all(spark, states, None if before is None or run.full else
                                   before.where(F.col("instance_id").isNotNull()).select("instance_id"),
                                   str(staging), flipped=needs_touched,
                                   index=None if too_large is None else too_large.index)
        removed_df, flipped_df = walked.removed, walked.flipped
        run.summary.cascaded = walked.count
    live = states.where(~F.col("deleted"))
    if run.summary.cascaded:
        live = live.join(removed_df, "instance_id", "left_anti")
    if any(way == "replay" for way in how.values()):
        # a replay reads its schema's live states twice for each of its tables: staged once. A
        # table written whole or merged reads them once for its schema (a staged wide frame), and
        # staging every schema's costs more than it saves (0.7 s against 0.3 s in a 1M rebuild)
        live = delta.stage(live, f"{staging}/live")
    # every live instance has one row in each table of its schema: the rows of the tables written
    # whole or replayed, and the deleted instances for the summary, in one pass over the states. A
    # run that only merges counts the deleted ones alone (no join with the removed set: 0.20 s
    # against 0.44 at 1,000,000 messages); a merged table's rows are then read from its Delta log
    # after its write (lakehouse.spark.gold.rewrite_rows), and the deleted ones are those a region
    # walk's edge index counted, when it walked over one (a query over every state less)
    live_counts: dict[str, int] = {}
    if any(way != "merge" for way in how.values()):
        gone = F.col("deleted") | F.col("_removed").isNotNull()
        counts = (states.join(removed_df.withColumn("_removed", F.lit(True)), "instance_id", "left").groupBy("schema")
                  .agg(F.count(F.when(~gone, 1)).alias("live"), F.count(F.when(F.col("deleted"), 1)).alias("deleted"))
                  .collect())
        live_counts = {r["schema"]: int(r["live"]) for r in counts}
        run.summary.deleted = sum(int(r["deleted"]) for r in counts)
    elif update is not None and update.deleted is not None:
        run.summary.deleted = update.deleted
    else:
        counts = states.where(F.col("deleted")).groupBy("schema").agg(F.count("*").alias("deleted")).collect()
        run.summary.deleted = sum(int(r["deleted"]) for r in counts)
    touched = changed
    touched_counts: dict[str, int] = {}
    touched_hashes: dict[str, set[int]] = {}
    touched_ids: dict[str, frozenset[str]] | None = None
    # the touched states, when the region walk staged the changed ones': those and the flipped ones'
    touched_states = None if update is None else update.changed_states
    if needs_touched:
        if flipped_df is not None:
            of_flipped = states  # read from the buckets of the flipped ids when they are known here
            if update is not None and found.buckets is not None:
                of_flipped = buckets.where_in(found.stored, (buckets.hash_of(i.hex()) for i in update.flipped),
                                              found.buckets)
            of_flipped = of_flipped.join(flipped_df, "instance_id", "left_semi")
            if touched_states is not None:
                # the flipped ones' states whole (those not changed), staged: their ids and states
                # both taken from there, so that their buckets are read once
                of_flipped = delta.stage(of_flipped.select(*delta.columns(catalog.STATES_DDL))
                                         .join(touched_states.select("instance_id"), "instance_id", "left_anti"),
                                         f"{staging}/flipped_states", catalog.STATES_DDL)
                touched_states = touched_states.unionByName(of_flipped)
            touched = touched.unionByName(of_flipped.select("schema", "instance_id"))
        touched = delta.stage(touched.distinct(), f"{staging}/touched")
        touched_counts, touched_hashes, touched_ids = _touched_per_schema(touched, f"{staging}/touched")
    return cascades.Cascaded(removed_df, live, live_counts, touched, touched_counts, changed, flipped_df, touched_hashes,
                             unchanged, None if update is None else update.change,
                             None if update is None or update.of_region is None
                             else cascades.hex_ids_frame(spark, set(update.of_region)),
                             touched_states if needs_touched else None, touched_ids)


def _touched_per_schema(touched: DataFrame, path: str
                        ) -> tuple[dict[str, int], dict[str, set[int]], dict[str, frozenset[str]] | None]:
    """Per schema, how many instances the run touches, the hashes of their ids
    (:func:`lakehouse.spark.buckets.hash_column`, at most 65,536 a schema: a merge reads only their
    buckets) and, when read here, the ids themselves (a merge computed here,
    :class:`lakehouse.spark.gold.HereRows`; None when asked of the engine). ``touched``: (schema,
    instance_id), staged at ``path``. Read here from the staged files when they hold at most
    :data:`LOCAL_PROJECTION_LIMIT` rows and every id's hash is certain on this side
    (:func:`lakehouse.spark.buckets.hash_of`), else asked of the engine: a query less for a small
    run (a trickle at 1,000,000 messages on Sail: 0.16 s)."""
    from pyspark.sql import functions as F

    if delta.staged_rows(path) <= LOCAL_PROJECTION_LIMIT:
        here = delta.read_staged(path, arrow_schema("schema STRING, instance_id STRING"))
        hashes: dict[str, set[int]] = {}
        ids: dict[str, set[str]] = {}
        for schema, instance_id in zip(here.column("schema").to_pylist(), here.column("instance_id").to_pylist(),
                                       strict=True):
            h = None if instance_id is None else buckets.hash_of(instance_id)
            if h is None:
                break
            ids.setdefault(schema, set()).add(instance_id)
            hashes.setdefault(schema, set()).add(h)
        else:
            return {k: len(v) for k, v in ids.items()}, hashes, {k: frozenset(v) for k, v in ids.items()}
    per_schema = touched.groupBy("schema").agg(F.count("*").alias("count"),
                                               F.collect_set(buckets.hash_column()).alias("hashes")).collect()
    return ({r["schema"]: int(r["count"]) for r in per_schema},
            {r["schema"]: {int(h) for h in r["hashes"]} for r in per_schema}, None)


def _stored_set(before: DataFrame) -> tuple[int, set[str]]:
    """``silver.cascade_removed`` in one small job: how many ids it holds, and the schemas it covers
    (none in a lake from before the set named them, whose every row is an id)."""
    from pyspark.sql import functions as F

    if "schema" not in before.columns:
        return before.count(), set()
    rows = (before.groupBy(F.col("instance_id").isNull().alias("marker"))
            .agg(F.count("*").alias("rows"), F.collect_set("schema").alias("schemas")).collect())
    return (sum(int(r["rows"]) for r in rows if not r["marker"]),
            {str(schema) for r in rows if r["marker"] for schema in r["schemas"]})


@dataclass(frozen=True)
class _Projected:
    """One schema's wide frames for this run (:func:`_project`): the projection, and the wide frame
    of every live state (a table written whole), of the touched states (a merge) and of their states
    before it (a merge's change feed), each None when no table of the schema needs it; and the
    touched and before frames as Arrow tables when they were projected here."""

    projection: Projection
    whole: DataFrame | None = None
    touched: DataFrame | None = None
    before: DataFrame | None = None
    touched_here: Any = None
    before_here: Any = None


def _project(run: _Run, found: _States, cascaded: cascades.Cascaded, how: Mapping[tuple[SchemaId, int], TableAction]
             ) -> dict[SchemaId, _Projected]:
    """Step 5, first half: each schema's wide frames (:class:`_Projected`), projected once and
    staged, then read by every table of the schema: every live state for a schema with a table
    written whole, the touched ones for a merge and, for the change feed of a merge that follows
    the silver run its tables reflect, the states those instances had then
    (:func:`_states_before`), projected here when they are few (:data:`LOCAL_PROJECTION_LIMIT`),
    else in the engine; those projected here are kept here too, as Arrow tables."""
    from pyspark.sql import functions as F

    spark, staging, active = run.spark, run.staging, run.active
    rewriting = sorted(set(cascaded.touched_counts) & {str(sid) for (sid, _), way in how.items() if way == "merge"})
    projections = {sid: plan_projection(run.schemas[sid]) for sid in active}
    whole = sorted({sid for (sid, _), way in how.items() if way == "write"}, key=str)
    merging = sorted({sid for sid in active if str(sid) in rewriting}, key=str)
    before = sorted(set(merging) & found.projected_before, key=str)
    touched_states = _touched_states(found, cascaded)
    if before and cascaded.touched_states is None:
        # read by the touched frame and by the states before: staged once, so that the states' buckets are
        # read once (the projection step of a trickle at 1,000,000 messages: 0.95 s -> 0.62 s, medians of 6)
        touched_states = delta.stage(touched_states, f"{staging}/touched_states")
    touched_live = touched_states.where(~F.col("deleted")).join(cascaded.removed_of_touched, "instance_id", "left_anti")
    frames = {"touched": touched_live}
    if before:
        frames["before"] = _states_before(found, cascaded, touched_states).where(
            F.col("schema").isin([str(s) for s in before]))
    local: dict[tuple[str, str], list[InstanceState]] | None = None
    if sum(cascaded.touched_counts[schema] for schema in rewriting) <= LOCAL_PROJECTION_LIMIT:
        local = {(str(sid), kind): [] for sid in merging for kind in frames}
        if rewriting:  # the states of every kind in one job
            cols = delta.columns(catalog.STATES_DDL)
            kinds = [frame.where(F.col("schema").isin(rewriting)).select(*cols, F.lit(kind).alias("_kind"))
                     for kind, frame in frames.items()]
            for row in reduce(lambda a, b: a.unionByName(b), kinds).toArrow().to_pylist():
                local[row["schema"], row["_kind"]].append(S.state_of(row))

    here: dict[tuple[SchemaId, str], Any] = {}  # the wide tables projected here (Arrow)

    def wide(sid: SchemaId, kind: str) -> DataFrame:
        n = active.index(sid)
        if kind == "whole":
            of_schema = cascaded.live.where(F.col("schema") == str(sid))
            return delta.stage(G.project_wide(of_schema, projections[sid]), f"{staging}/wide_{n}")
        if local is not None:
            here[sid, kind] = G.wide_table(projections[sid], local[str(sid), kind])
            return G.wide_local(spark, here[sid, kind], projections[sid])
        states_of = frames[kind].where(F.col("schema") == str(sid))
        return delta.stage(G.project_wide(states_of, projections[sid]), f"{staging}/{kind}_wide_{n}")

    with ThreadPoolExecutor(max_workers=TABLE_WRITERS) as pool:
        wide_jobs = ([(sid, "whole") for sid in whole] + [(sid, "touched") for sid in merging]
                     + [(sid, "before") for sid in before])
        wides: dict[tuple[SchemaId, str], DataFrame] = dict(zip(wide_jobs, pool.map(lambda job: wide(*job), wide_jobs),
                                                     strict=True))
    return {sid: _Projected(projections[sid], wides.get((sid, "whole")), wides.get((sid, "touched")),
                            wides.get((sid, "before")), here.get((sid, "touched")), here.get((sid, "before")))
            for sid in active}


def _touched_states(found: _States, cascaded: cascades.Cascaded) -> DataFrame:
    """The states of the touched instances (``STATES_DDL``): those the cascade step staged
    (:attr:`lakehouse.spark.cascades.Cascaded.touched_states`), else read from the files of their
    buckets only when silver's states have buckets: a read that follows the change, not the lake."""
    if cascaded.touched_states is not None:
        return cascaded.touched_states
    hashes = set().union(*cascaded.touched_hashes.values())
    return (buckets.where_in(found.stored, hashes, found.buckets).select(*delta.columns(catalog.STATES_DDL))
            .join(cascaded.touched.select("instance_id"), "instance_id", "left_semi"))


def _states_before(found: _States, cascaded: cascades.Cascaded, touched_states: DataFrame) -> DataFrame:
    """The states the touched instances had when the tables were last written, of those that were
    live then: the one the silver run replaced (``silver.replaced_states``), else the state now
    (silver did not change it: only its cascade verdict flipped, or a message that changed nothing);
    not deleted, and not removed by the cascade the last run found (removed now, or flipped, but not
    both). ``STATES_DDL`` columns; valid for the schemas of ``found.projected_before``.
    ``touched_states``: the touched instances' states now (:func:`_touched_states`)."""
    from pyspark.sql import functions as F

    assert found.replaced is not None
    cols = delta.columns(catalog.STATES_DDL)
    listed = found.replaced.join(cascaded.touched.select("instance_id"), "instance_id", "left_semi")
    then = listed.where(F.col("existed")).select(*cols).unionByName(
        touched_states.join(listed.select("instance_id"), "instance_id", "left_anti"))
    then = then.where(~F.col("deleted")).join(cascaded.touched, ["schema", "instance_id"], "left_semi")
    flags = then.join(cascaded.removed_of_touched.withColumn("_now", F.lit(True)), "instance_id", "left")
    removed_then = F.coalesce(F.col("_now"), F.lit(False))
    if cascaded.flipped is not None:
        flags = flags.join(cascaded.flipped.withColumn("_flipped", F.lit(True)), "instance_id", "left")
        removed_then = removed_then != F.coalesce(F.col("_flipped"), F.lit(False))
    return flags.where(~removed_then).select(*cols)


def _bring_up_to_date(run: _Run, cascaded: cascades.Cascaded, how: Mapping[tuple[SchemaId, int], TableAction],
                      wides: Mapping[SchemaId, _Projected], jobs: list[tuple[SchemaId, int]],
                      feed_base: dict[str, int]) -> list[_Result]:
    """Step 5, second half, and step 6: each gold table written, replayed, merged or kept as it is
    (:func:`lakehouse.core.revert.table_action`), then its change feed (:func:`lakehouse.spark.feeds.table_changes`), several
    at a time: each write is one engine job, and much of a small job is fixed cost that others
    can overlap.

    Args:
        feed_base: gold table -> the Delta version its change feed reached
            (:func:`lakehouse.spark.feeds.feed_start`; empty with no change feed).

    Returns:
        Per job, its ``silver.gold_versions`` row, the table written (None when kept) and its
        ``silver.gold_changes`` row (None when kept, or with no change feed).
    """
    from pyspark.sql import functions as F

    spark, root, staging, summary = run.spark, run.root, run.staging, run.summary
    silver_run, watermark, n_regs = run.stamp
    known = run.known
    written_at = datetime.now(timezone.utc)
    # what each table that survives a revert replays: the instances changed since its snapshot's silver
    # run, computed once per (schema, silver run) rather than once per table
    snapshot_runs = sorted({(sid, since) for sid, plan in run.plans.items() if plan.mode == "revert"
                            for _, since in plan.snapshots.values()}, key=str)
    replayed = {(sid, since): lake.changed_instances(spark, root, {sid: SchemaPlan("merge", since)},
                                                     staged=f"{staging}/replayed_{n}")[0].select("instance_id")
                for n, (sid, since) in enumerate(snapshot_runs)}
    # one DataFrame per schema, shared by its tables: the engine is asked for its columns once
    live_of = {sid: cascaded.live.where(F.col("schema") == str(sid)) for sid in run.active}
    touched_of = {sid: cascaded.touched.where(F.col("schema") == str(sid)) for sid in run.active}
    # what the change feeds of the merged tables look up for their causes, once for all of them: of
    # the touched instances only when every such feed compares only those (it reached its table's
    # last version, :func:`lakehouse.spark.feeds.table_changes`), which is the rule
    merged = [gold_table_name(run.names[sid], version) for (sid, version), way in how.items()
              if way == "merge" and run.plans[sid].mode != "revert" and str(sid) in cascaded.touched_counts
              and feed_base.get(gold_table_name(run.names[sid], version)) is not None]
    feed_run = feeds.FeedRun(spark, root, summary.run_id, silver_run, watermark, run.names, run.plans, run.schemas,
                             feed_base, known, staging)
    at_last = all(feeds.at_last(feed_run, name) for name in merged)
    cause_flags = feeds.cause_flags(cascaded, staging, touched_only=at_last) if run.feed and merged else None
    # and held here, for the feeds compared here (:func:`lakehouse.spark.feeds.table_changes`): as many as the touched instances
    flags_here = None
    if cause_flags is not None and at_last and any(w.before_here is not None for w in wides.values()):
        flags_here = {r["instance_id"]: (r["_changed_in"], bool(r["_removed"]), bool(r["_flipped"]))
                      for r in cause_flags.toArrow().to_pylist()}

    def bring_up_to_date(sid: SchemaId, version: int) -> _Result:
        sv, name, plan, wide = run.schemas[sid], run.names[sid], run.plans[sid], wides[sid]
        projection = wide.projection
        ref = catalog.gold_table(root, name, version)

        def version_row(delta_version_: int, rows: int, written: bool) -> tuple[Any, ...]:
            # the location relative to the lake root: a lake copied or moved keeps pointing at itself
            return delta.row(catalog.GOLD_VERSIONS_DDL, gold_run=summary.run_id, silver_run=silver_run, watermark=watermark,
                             registrations=n_regs, schema=str(sid), name=name, version=version,
                             table_name=ref.name, location=f"gold/{ref.name}", delta_version=delta_version_,
                             is_current=version == sv.gold_versions()[-1], rows=rows, written=written,
                             schema_version=sv.current_version, written_at=written_at)

        way = how[sid, version]
        # every table of the schema has a row per live instance: counted when a table of it is written
        # whole or replayed, else (only merges) read from each merged table's log after its write
        live_rows = cascaded.live_counts.get(str(sid), 0)
        # the rows written (a whole table, or a merge's touched instances), and a merge's rows of
        # those instances before it
        fresh = then = None
        here = None  # a merge's rows before and after it, when both were projected here
        written_version: int | None = None  # a merge's Delta version, read with its rows
        if way == "write":
            assert wide.whole is not None
            fresh = G.table_rows(wide.whole, projection, version)
            G.write_table(fresh, ref, live_rows, here_rows=run.here_rows)
        elif way == "replay":
            delta_version_, since = plan.snapshots[version]
            G.replay(projection, version, ref, delta_version_, replayed[sid, since], live_of[sid], staging, live_rows,
                     here_rows=run.here_rows)
        elif str(sid) in cascaded.touched_counts:
            assert wide.touched is not None
            fresh = G.table_rows(wide.touched, projection, version)
            # the change, when held here: written from here, the engine is asked nothing for the table
            held = (G.HereRows(cascaded.touched_ids[str(sid)], G.table_arrow(wide.touched_here, projection, version))
                    if cascaded.touched_ids is not None and wide.touched_here is not None else None)
            rewritten = G.rewrite_rows(spark, sv, version, ref, fresh, touched_of[sid],
                                       cascaded.touched_hashes.get(str(sid)), here_rows=run.here_rows, here=held)
            live_rows, written_version = rewritten.rows, rewritten.delta_version
            if wide.before is not None:
                then = G.table_rows(wide.before, projection, version)
            if wide.before_here is not None:
                here = (G.local_rows(wide.before_here, projection, version),
                        G.local_rows(wide.touched_here, projection, version))
        else:  # nothing of this schema changed: the table stays as it is
            prior = known[ref.name]
            return version_row(prior["delta_version"], prior["rows"], False), None, None
        written = GoldTable(ref.name, str(sid), version, live_rows,
                            written_version if written_version is not None else delta_version(ref.location))
        delta.checkpoint_log(ref, written.delta_version)  # its log replayed from a checkpoint, now and then
        feed_row = (feeds.table_changes(feed_run, cascaded, sid, version, way, written.delta_version, written_at,
                                        written.rows, fresh, then, cause_flags, here, flags_here)
                    if run.feed else None)
        return version_row(written.delta_version, written.rows, True), written, feed_row

    with ThreadPoolExecutor(max_workers=TABLE_WRITERS) as pool:
        return list(pool.map(lambda job: bring_up_to_date(*job), jobs))


def _finish(run: _Run, cascaded: cascades.Cascaded, results: list[_Result]) -> None:
    """Step 7: the summary's tables, then the writes that finish the run: the change feed's index,
    the cascade set and ``silver.gold_versions``, which is the run's commit point. A run that dies
    before it is done again in full by the next one (the table writes are idempotent, the cascade
    flips are computed against the last finished run, and what the change feed holds of an
    unfinished run is taken out first, :func:`lakehouse.spark.feeds.feed_start`)."""
    summary = run.summary
    summary.tables = [written for _, written, _ in results if written is not None]
    # a row per live instance in each table of its schema: any of its tables gives its live instances
    columns = delta.columns(catalog.GOLD_VERSIONS_DDL)
    rows_of = {named["schema"]: named["rows"] for named in (dict(zip(columns, row, strict=True)) for row, _, _ in results)}
    summary.instances = sum(rows_of.get(str(sid), 0) for sid in run.active)
    feed_rows = [row for _, _, row in results if row is not None]
    named = (dict(zip(delta.columns(catalog.GOLD_CHANGES_DDL), row, strict=True)) for row in feed_rows)
    summary.changes = {r["table_name"]: {"insert": r["inserts"], "update": r["updates"], "delete": r["deletes"]}
                       for r in named}
    if feed_rows:
        delta.append_rows(run.spark, feed_rows, catalog.GOLD_CHANGES_DDL, run.refs["gold_changes"])
        register_table(run.spark, run.refs["gold_changes"])
    if not cascaded.unchanged:
        cascades.write_removed(run.spark, run.refs["cascade_removed"], cascaded.removed, run.active, run.stamp[0],
                               run.staging, cascaded.change, held=run.summary.cascaded)
    G.append_versions(run.spark, run.refs["gold_versions"], [run.marker, *(row for row, _, _ in results), *run.carried])
    register_gold(run.spark, run.root)
    remove_tree(run.staging)



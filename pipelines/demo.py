"""``make demo``: a real register history through the whole lake, in a few screens.

Imports ``data/registers/local-authority-eng`` snapshot by snapshot (each one published,
ingested and materialized, as a register publisher and an operator would have done over time),
then shows the gold table, the schema's history, a time-travel query to an early version, what
``lakehouse schema check`` said of the migration that removed ``website`` before it was published,
a revert to the version before that migration, and the change feed of the removal and of the
revert. Works in its own folder (``demo/``),
recreated on every run, so it never touches the lake of ``conf/lakehouse.yaml``; its lake may be
named apart (``--lake s3://bucket/demo``, a lake on object storage), and is then emptied first too,
but only when it is empty or one the demo made (:data:`DEMO_MARK`).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from lakehouse.core.messages import SchemaId, SchemaMigration
from lakehouse.core.registry import gold_table_name
from lakehouse.errors import DemoError, HistoryError
from lakehouse.publish.importer import SnapshotReport, import_snapshots
from lakehouse.publish.keys import KeyStore
from lakehouse.sql import render, run_statement
from lakehouse.store import absolute_root
from pipelines.gold import GoldSummary, run_gold
from pipelines.history import schema_history
from pipelines.impact import Impact, check_message
from pipelines.ingest import run_ingest
from pipelines.register import register_schema
from pipelines.revert import revert_schema
from pipelines.silver import run_silver

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.config import Settings

DEFAULT_REGISTER = Path(__file__).resolve().parents[1] / "data" / "registers" / "local-authority-eng"
NAME = "local_authority_eng"


@dataclass
class DemoResult:
    """What the demo found, for its test: snapshots imported, rows, and the revert's effect."""

    snapshots: int
    rows: int
    versions: int
    time_travel_rows: int
    websites_before_revert: int
    websites_after_revert: int
    feed_revert_changes: int  # rows the revert's gold run fed to the table of the version it went back to
    websites_hidden_by_check: int  # values of `website` the check said the removal would hide
    rename_messages: tuple[int, int] = (0, 0)  # messages of the snapshots with a renamed column: published,
    # and as remove + create + an update per row would have published them


DEMO_MARK = "_lakehouse_demo"
"""The object at the root of a demo's lake named apart: the demo empties such a lake on its next run."""


def demo_settings(settings: Settings, workdir: Path, lake: str = "") -> Settings:
    """The demo's own lake (``lake``, else under ``workdir``), landing folder and key store under ``workdir``."""
    return settings.with_overrides(lake_root=lake or str(workdir / "lake"), landing=str(workdir / "landing"),
                                   keys=str(workdir / "keys"))


def prepare_lake(lake_root: str) -> None:
    """Empty a demo lake named apart from its folder (a URI such as ``s3://bucket/demo``) and mark
    it as the demo's (:data:`DEMO_MARK`); run under the lake's lock, whose object or files it keeps.

    Raises:
        DemoError: the lake holds something and no demo made it (nothing is removed).
    """
    from pyarrow import fs

    from lakehouse.leaselock import LOCK_OBJECT
    from lakehouse.lock import lock_path
    from lakehouse.spark.tables import filesystem_of

    lock = lock_path(lake_root).name if "://" not in lake_root else ""
    kept = {LOCK_OBJECT, lock, f"{lock}.holder"} - {""}
    filesystem, root = filesystem_of(lake_root)
    listed = [info for info in filesystem.get_file_info(fs.FileSelector(root, allow_not_found=True))
              if info.base_name not in kept]
    names = {info.base_name for info in listed}
    if names and DEMO_MARK not in names:
        raise DemoError(f"{lake_root} holds {len(names)} object(s) or folder(s) ({', '.join(sorted(names)[:3])}"
                        f"{', ...' if len(names) > 3 else ''}) and is not a lake the demo made: the demo empties "
                        "its lake first, so name an empty place for it (--lake, DEMO_LAKE)")
    for info in listed:
        if info.type == fs.FileType.Directory:
            filesystem.delete_dir(info.path)
        else:
            filesystem.delete_file(info.path)
    if isinstance(filesystem, fs.LocalFileSystem):  # a store has no folders: the mark's key makes the place
        filesystem.create_dir(root, recursive=True)
    with filesystem.open_output_stream(f"{root}/{DEMO_MARK}") as out:
        out.write(b"a lake made by `lakehouse demo`: its next run empties it\n")


def prepare_workdir(workdir: Path, register: Path = DEFAULT_REGISTER) -> None:
    """Check the demo's input and empty its folder (the demo starts from nothing on every run).

    Raises:
        DemoError: the register folder is missing.
    """
    if not register.is_dir():
        raise DemoError(f"{register} is missing: the demo reads the register snapshots in data/registers of the repository")
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)


def run_demo(spark: SparkSession, settings: Settings, console: Console, *,
             register: Path = DEFAULT_REGISTER) -> DemoResult:
    """Run the demo (module docstring) in the lake of ``settings`` and print its screens on ``console``.

    Args:
        settings: the demo's settings (:func:`demo_settings`), on an empty folder
            (:func:`prepare_workdir`).

    Raises:
        DemoError: a step did not give what the demo shows.
    """
    started = time.monotonic()
    lake = absolute_root(settings.lake_root)

    console.rule("[bold]1. A register's history, published as signed messages, snapshot by snapshot")
    console.print(f"{register.name}: {len(list(register.glob('*.tsv')))} published snapshots of the register "
                  "of English local authorities. Each becomes a schema migration (when its header changed) and "
                  "create/update/delete messages (the row diff), then `make ingest materialize`.\n")
    checks: list[Impact] = []
    imported, rename_messages = _import_all(spark, settings, register, console, checks)

    console.rule(f"[bold]2. The gold table: gold.{NAME}")
    _query(spark, console, f"SELECT local_authority_eng, local_authority_type AS type, name, official_name, "
                           f"_version, _updates FROM gold.{NAME} ORDER BY local_authority_eng LIMIT 5")
    rows = int(run_statement(spark, f"SELECT count(*) FROM gold.{NAME}")[1][0][0])
    console.print(f"{rows} rows: one per local authority in the last snapshot.\n")

    console.rule("[bold]3. The schema's versions: lakehouse history " + NAME)
    history = schema_history(spark, settings, NAME)
    table = Table("version", "kind", "fields (+ created, - removed, ~ renamed or updated)", "gold table",
                  title_justify="left")
    for v in history.versions:
        table.add_row(str(v["version"]), v["kind"] or "-", _compact(v["changes"]) or "-",
                      f"gold.{v['gold_table']}" if v["gold_table"] else "")
    console.print(table)

    console.rule("[bold]4. Time travel: an early version, as it was after the first snapshot")
    first_table = next(v["gold_table"] for v in history.versions if v["gold_table"])
    first_write = history.tables[first_table][0]
    statement = (f"SELECT local_authority, uk, name, name_cy, website FROM gold.{first_table} "
                 f"VERSION AS OF {first_write['delta_version']} ORDER BY local_authority LIMIT 3")
    _query(spark, console, statement)
    travel_rows = int(run_statement(spark, f"SELECT count(*) FROM gold.{first_table} VERSION AS OF "
                                           f"{first_write['delta_version']}")[1][0][0])
    console.print(f"{travel_rows} rows, with the columns of the first snapshot (schema version "
                  f"{first_table.rsplit('_v', 1)[1]}), as written by gold run {first_write['gold_run']}.\n")

    removal = next((v for v in history.versions if "remove website" in v["changes"]), None)
    check = next((c for c in checks if "website" in c.hidden), None)
    if removal is None or check is None:
        raise DemoError("the register's history has no removal of `website` to check and revert")
    console.rule("[bold]5. Before the migration that removed `website`: lakehouse schema check")
    hidden = check.fields["website"].counts.get("hidden", 0) if "website" in check.fields else 0
    console.print(f"Each migration the import published was checked first on the lake as it then was (the check "
                  f"`lakehouse schema migrate` runs, and `lakehouse schema check {NAME} <lens file>` alone). "
                  f"The one that became version {check.version}:")
    table = Table("field", "kept", "converted", "defaulted", "hidden", title_justify="left",
                  title=f"values of {check.instances} live instances, version {check.current} -> {check.version}")
    for name, f in sorted(check.fields.items()):
        table.add_row(name, *(str(f.counts.get(o, 0)) for o in ("kept", "converted", "defaulted", "hidden")))
    console.print(table)
    console.print(f"It would hide {hidden} `website` values from readers of version {check.version} and later "
                  f"(older versions keep showing them), and add gold.{gold_table_name(NAME, check.version)}.\n")

    console.rule("[bold]6. Revert: back to the version before `website` was removed")
    target = max(v["version"] for v in history.versions if v["gold_table"] and v["version"] < removal["version"])
    before = _websites(spark)
    console.print(f"version {removal['version']} removed `website`; "
                  f"[bold]make revert SCHEMA={NAME} TARGET={target} YES=1[/] signs a schema-revert with the schema "
                  "author's key, then ingests and materializes it:")
    summary = revert_schema(spark, settings, NAME, target)
    after = _websites(spark)
    abandoned = list(range(target + 1, summary.version))
    console.print(f"schema version {summary.version} shows the lens of version {target}; abandoned: version(s) "
                  f"{', '.join(map(str, abandoned))}, whose tables leave the catalog.")
    _query(spark, console, f"SELECT local_authority_eng, name, website FROM gold.{NAME} "
                           "WHERE website IS NOT NULL ORDER BY local_authority_eng LIMIT 5")
    console.print(f"`website` is back: {after} rows have one (before the revert: "
                  f"{'no such column' if before is None else before}).\n")

    console.rule("[bold]7. The change feed: what each gold run changed, in each version's shape")
    removed_table = gold_table_name(NAME, removal["version"])
    removed_run = history.tables[removed_table][0]["gold_run"] if removed_table in history.tables else 0
    kept_table = gold_table_name(NAME, target)
    console.print(f"Every gold table has a change feed, gold.<table>_changes; silver.gold_changes counts each run's "
                  f"changes. The run that removed `website` ({removed_run}) started the feed of {removed_table}; "
                  f"the revert's run ({summary.gold.run_id}) ended it, and fed {kept_table}, the version it went back "
                  "to, the rows it changed there:")
    _query(spark, console, f"SELECT gold_run, table_name, inserts, updates, deletes FROM silver.gold_changes "
                           f"WHERE gold_run IN ({removed_run}, {summary.gold.run_id}) ORDER BY gold_run, version")
    _query(spark, console, f"SELECT _change, _cause, local_authority_eng, name, website, _version "
                           f"FROM gold.{kept_table}_changes WHERE _gold_run = {summary.gold.run_id} "
                           "ORDER BY local_authority_eng, _change DESC LIMIT 6")
    fed = int(run_statement(spark, f"SELECT count(*) FROM gold.{kept_table}_changes "
                                   f"WHERE _gold_run = {summary.gold.run_id}")[1][0][0])
    console.print(f"A consumer of version {target} reads `lakehouse changes {NAME} --version {target} --since "
                  f"<its last run>`: {fed} rows from the revert, in the shape of version {target}, `website` "
                  "included: each update as its row before (`update_preimage`) and its row after "
                  "(`update_postimage`).\n")

    console.rule("[bold]8. Your turn")
    console.print(f"The demo lake is in {lake}. Query it with Spark SQL:\n"
                  f"  LAKEHOUSE_LAKE_ROOT={lake} make sql\n"
                  f"  sql> SELECT name, website FROM gold.{NAME} WHERE name LIKE 'Bath%';\n"
                  f"  sql> SELECT status, count(*) FROM silver.messages GROUP BY status;\n"
                  f"  sql> SELECT * FROM gold.{first_table} VERSION AS OF {first_write['delta_version']};\n"
                  f"or see its layers with `LAKEHOUSE_LAKE_ROOT={lake} make status`. "
                  f"The demo took {time.monotonic() - started:.0f} s.")
    if after == 0 or before is not None:
        raise DemoError("the revert did not bring `website` back")
    return DemoResult(imported, rows, len(history.versions), travel_rows, before or 0, after, fed, hidden,
                      rename_messages)


def snapshot_by_snapshot(spark: SparkSession, settings: Settings, register: Path, name: str,
                         checks: list[Impact] | None = None) -> Iterator[tuple[SnapshotReport, GoldSummary]]:
    """Import a folder of snapshots one at a time, each followed by ingest and materialize.

    The schema is registered as ``gold.<name>`` after the first snapshot. Yields, per snapshot
    imported, its import report and the gold run that followed, so that each snapshot is one
    Delta version of its gold table. ``checks``: when given, each migration a header change makes
    is checked on the lake before it is published (:func:`pipelines.impact.check_message`), and
    its report appended.
    """

    def check(schema: SchemaId, migration: SchemaMigration) -> None:
        if checks is not None:
            with suppress(HistoryError):  # the first migration comes before the lake has seen the schema
                checks.append(check_message(spark, settings, str(schema), migration))

    store = KeyStore(settings.keys)
    registered = False
    while True:
        reports: list[SnapshotReport] = []
        summary = import_snapshots(register, schema=name, store=store, landing=settings.landing, limit=1,
                                   max_payload=settings.max_payload,
                                   on_snapshot=reports.append, before_migration=check)
        new = [r for r in reports if r.status == "imported"]
        if not new:
            return
        run_ingest(spark, settings)
        run_silver(spark, settings)
        if not registered:
            register_schema(spark, settings, summary.schema_id, name)
            registered = True
        gold = run_gold(spark, settings)
        for report in new:
            yield report, gold


def _import_all(spark: SparkSession, settings: Settings, register: Path, console: Console,
                checks: list[Impact]) -> tuple[int, tuple[int, int]]:
    """Section 1: import the register snapshot by snapshot. Returns the snapshots imported and the
    messages of those with a renamed column, (published, as remove + create would have been)."""
    table = Table("snapshot", "version", "created", "updated", "deleted", "header change", "gold rows",
                  title_justify="left")
    count, rows = 0, 0
    renamed: list[tuple[str, str, int, int]] = []
    for r, gold in snapshot_by_snapshot(spark, settings, register, NAME, checks):
        if gold.tables:  # a snapshot equal to the previous one publishes nothing: gold stays as it was
            rows = max(gold.tables, key=lambda t: t.version).rows
        change = _compact([f"{c.action} {c.name}" + (f">{c.to}" if c.to else "") for c in r.migration])
        table.add_row(r.file.split("_", 1)[0], str(r.record.schema_version), str(r.record.creates),
                      str(r.record.updates), str(r.record.deletes), change, f"{rows}")
        if r.without_renames is not None:
            names = ", ".join(f"{x.old} to {x.new}" for x in r.renames if x.published)
            renamed.append((r.file.split("_", 1)[0], names, r.record.messages, r.without_renames))
        count += 1
    console.print(table)
    for snapshot, names, published, before in renamed:
        console.print(f"Snapshot {snapshot} renamed {names}: a `rename` in its migration keeps every value, so "
                      f"the snapshot took {published} message(s); as remove + create + an update per row it took "
                      f"{before}.")
    return count, (sum(r[2] for r in renamed), sum(r[3] for r in renamed))


def _compact(changes: list[str]) -> str:
    """``["create a<text>", "remove b", "rename c>d"]`` -> ``"+a -b ~c>d"``."""
    signs = {"create": "+", "remove": "-", "update": "~", "rename": "~"}  # a rename shows ~old>new
    out = []
    for change in changes:
        action, _, rest = change.partition(" ")
        out.append(signs.get(action, action + " ") + rest.split("<", 1)[0].split(" ", 1)[0])
    return " ".join(out)


def _query(spark: SparkSession, console: Console, statement: str) -> None:
    console.print(f"[dim]sql>[/] {statement};")
    columns, rows = run_statement(spark, statement)
    console.print(render(columns, rows, "table"))


def _websites(spark: SparkSession) -> Any:
    columns, _ = run_statement(spark, f"SELECT * FROM gold.{NAME} LIMIT 0")
    if "website" not in columns:
        return None
    return int(run_statement(spark, f"SELECT count(website) FROM gold.{NAME}")[1][0][0])

"""``python -m tests.benchmarks.trickle``: where the time of a small run into a large lake goes, step
by step, and the same figures for two checkouts on the same lake.

A trickle is the last 0.01 % of the bench's history (:func:`tests.benchmarks.suite.generate_landing`:
100 lines at 1,000,000 messages) taken in by ``materialize`` after the rest: the cost the issue of
materializing at the cost of the change asks to follow the change, not the lake. Two commands:

- ``build --messages N --folder DIR``: the history generated once, all of it but the trickle
  ingested and materialized (the schemas registered) into ``DIR/base``: the first 99 % in one run,
  then the rest but the trickle in a second (the state a lake kept up to date run after run is in,
  with what an incremental run leaves for the next, such as the cascade edge index); the
  trickle's landing files kept in ``DIR/held/trickle``, the lake as the first run left it in
  ``DIR/before_tail`` and the tail's landing files in ``DIR/held/tail``. A 1,000,000-message lake
  takes this 2-core machine about ten minutes and 4 GB.
- ``run --folder DIR [--reps 3] [--engine sail|spark] [--json FILE] [--spark-events DIR] [--conf KEY=VALUE]
  [--lines N [--chain]] [--tail]``: ``DIR/base`` copied, then
  ``materialize`` run once with nothing new (not timed: a lake built by an earlier checkout is
  brought to this one's shape, which some releases do once, and the engine warms up); that lake
  is the start of every rep: copied, the trickle landed and ingested, then silver and gold timed
  with the steps of each (their :class:`lakehouse.progress.Timeline`). Run it from two checkouts
  (a ``git worktree`` of the older commit, run with its own directory first on ``sys.path``) on
  the same folder, alternating, to compare them on the same lake: this machine's speed drifts by
  tens of percent over minutes, so compare reps of one session, not with figures of another day.
  ``--lines N`` takes in only the trickle's first N lines: the same change into lakes of two
  sizes (the trickle itself is 0.01 % of each history, so it grows with the lake). ``--chain``
  makes the reps successive runs of one lake, each with the next N lines (``--reps 10 --lines 10``:
  the 100-line trickle of 1,000,000 messages in ten runs): the cost of a lake kept up to date run
  after run, what a run leaves for later (appended files, a table written whole once it has too
  many) paid where it falls.
  On Apache Spark, ``--spark-events DIR`` also counts the engine's jobs per step, and the MERGEs and
  writes each step ran (:mod:`tests.benchmarks.spark_events`). ``--tail`` times the tail instead
  (the bench's last 1 % but the trickle) into copies of ``DIR/before_tail``: the incremental run
  of ``make bench``, step by step, on a lake the full run left.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from lakehouse.config import Settings, load_settings
from lakehouse.spark import bronze
from lakehouse.spark.session import open_engine
from pipelines.gold import run_gold
from pipelines.ingest import run_ingest
from pipelines.register import register_schema
from pipelines.silver import run_silver
from tests.benchmarks import spark_events
from tests.benchmarks.suite import add_conf_argument, generate_landing, print_figures

console = Console(stderr=True)


def _settings(folder: Path, lake: str, engine: str = "sail", spark_conf: dict[str, str] | None = None) -> Settings:
    return load_settings(environ={}).with_overrides(lake_root=str(folder / lake), landing=str(folder / "landing"),
                                                    keys=str(folder / "keys"), engine=engine,
                                                    spark_conf=spark_conf or {})


def build(messages: int, folder: Path, seed: int = 5) -> dict[str, Any]:
    """``DIR/base``: the history of ``messages`` messages but its trickle, materialized.

    Returns:
        The lines' counts and the seconds of the ingest and of the full materialize.
    """
    folder.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        generated = pool.submit(generate_landing, messages, seed, str(folder)).result()
    history = generated.pop("history").history()
    settings = _settings(folder, "base")
    bronze.start_workers()
    figures = {k: v for k, v in generated.items() if k.endswith("lines")}
    with open_engine(settings) as running:
        begun = time.monotonic()
        run_ingest(running.spark, settings)
        figures["ingest_seconds"] = round(time.monotonic() - begun, 2)
        begun = time.monotonic()
        run_silver(running.spark, settings)
        for sid, name in history.names.items():
            register_schema(running.spark, settings, str(sid), name)
        run_gold(running.spark, settings)
        figures["materialize_seconds"] = round(time.monotonic() - begun, 2)
        # the tail is part of the base here, taken in by an incremental run of its own; the lake
        # before it is kept for `run --tail`
        shutil.copytree(folder / "base", folder / "before_tail")
        for path in Path(folder, "held", "tail").iterdir():
            shutil.copy(path, folder / "landing" / f"tail-{path.name}")
        begun = time.monotonic()
        run_ingest(running.spark, settings)
        run_silver(running.spark, settings)
        run_gold(running.spark, settings)
        figures["tail_seconds"] = round(time.monotonic() - begun, 2)
    return figures


def _land(trickle: list[Path], landed: list[Path], lines: int | None, skip: int = 0) -> None:
    """The trickle's landing files copied to ``landed``; with ``lines``, only ``lines`` of its lines
    after its first ``skip`` (in file order: each log's entries in their order)."""
    left = lines
    for path, to in zip(trickle, landed, strict=True):
        if left is None:
            shutil.copy(path, to)
            continue
        every = path.read_text().splitlines(keepends=True)
        kept = every[skip:skip + left]
        skip = max(0, skip - len(every))
        to.write_text("".join(kept))
        left -= len(kept)


def run(folder: Path, reps: int, engine: str, events: Path | None = None,
        spark_conf: dict[str, str] | None = None, lines: int | None = None, chain: bool = False,
        tail: bool = False) -> list[dict[str, Any]]:
    """The reps of the module docstring: per rep, the seconds of silver and gold and of each of
    their steps; with ``events`` (Apache Spark only), the engine's event log written there and
    counted per step (``silver_jobs``, ``gold_jobs``: :func:`tests.benchmarks.spark_events.per_step`);
    ``spark_conf``: Apache Spark settings more (``spark_conf``), such as the driver's Java options;
    ``lines``: only the trickle's first ``lines`` lines (the same change into lakes of two sizes);
    with ``chain``, rep ``r`` takes in the ``lines`` lines after the first ``r * lines`` into the
    lake the rep before it left (successive runs of a lake kept up to date: what a run leaves for
    the next, such as a table's appended files until it is written whole, is paid where it falls);
    with ``tail``, the tail into copies of ``before_tail`` instead (its landing files, which ``build``
    landed for ``base``, are new to that lake)."""
    trickle = sorted(Path(folder, "held", "trickle").iterdir())
    ready, lake = folder / "ready", folder / "lake"
    if events is not None:
        shutil.rmtree(events, ignore_errors=True)
    conf = {**(spark_conf or {}), **(spark_events.event_log_conf(events) if events is not None else {})}
    settings = _settings(folder, "lake", engine, conf)
    bronze.start_workers()
    out: list[dict[str, Any]] = []
    with open_engine(settings) as running:
        spark = running.spark
        shutil.rmtree(ready, ignore_errors=True)
        shutil.copytree(folder / ("before_tail" if tail else "base"), ready)
        start = _settings(folder, "ready", engine, conf)
        run_silver(spark, start)  # nothing new: a lake of an older checkout brought to this one's shape
        run_gold(spark, start)
        for rep in range(reps):
            if rep == 0 or not chain:
                shutil.rmtree(lake, ignore_errors=True)
                shutil.copytree(ready, lake)
            landed: list[Path] = []
            if not tail:  # the tail's landing files are there already
                landed = [folder / "landing" / f"trickle-{rep}-{path.name}" for path in trickle]
                _land(trickle, landed, lines, rep * lines if chain and lines is not None else 0)
            os.sync()  # the copies on disk before the timed steps, not written back during them
            run_ingest(spark, settings)
            begun, begun_at = time.monotonic(), time.time()
            silver = run_silver(spark, settings)
            middle, middle_at = time.monotonic(), time.time()
            gold = run_gold(spark, settings)
            ended = time.monotonic()
            out.append({"rep": rep, "silver": round(middle - begun, 2), "gold": round(ended - middle, 2),
                        "materialize": round(ended - begun, 2), "silver_steps": silver.steps, "gold_steps": gold.steps,
                        "_windows": (begun_at, middle_at)})
            for path in landed:
                path.unlink()
    logged = spark_events.read(events) if events is not None else None
    for figures in out:
        silver_at, gold_at = figures.pop("_windows")
        if logged is not None:
            for job, at in (("silver", silver_at), ("gold", gold_at)):
                figures[f"{job}_jobs"] = spark_events.per_step(logged,
                                                               spark_events.step_windows(at, figures[f"{job}_steps"]))
    return out


def _print_jobs(reps: list[dict[str, Any]]) -> None:
    """Per rep and step: the engine's jobs, their seconds summed, and its MERGEs and writes."""
    table = Table("step", *(f"rep {r['rep']}: jobs (job-s)" for r in reps), "MERGEs / writes (median s, jobs)",
                  title="Apache Spark's jobs per step (event log)")
    for job in ("silver", "gold"):
        for name in dict.fromkeys(name for r in reps for name in r[f"{job}_jobs"]):
            steps = [r[f"{job}_jobs"].get(name, {}) for r in reps]
            last = steps[-1]
            said = "; ".join(f"{k} {v['count']} ({v['median_seconds']:.2f} s, {v['median_jobs']:g})"
                             for k, v in last.items() if isinstance(v, dict))
            table.add_row(f"{job}: {name}", *(f"{s.get('jobs', 0)} ({s.get('job_seconds', 0.0):.1f})" for s in steps),
                          said)
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    built = commands.add_parser("build", help="generate and materialize the lake but its trickle")
    built.add_argument("--messages", type=int, required=True)
    built.add_argument("--folder", type=Path, required=True)
    timed = commands.add_parser("run", help="time the trickle into copies of the lake")
    timed.add_argument("--folder", type=Path, required=True)
    timed.add_argument("--reps", type=int, default=3)
    timed.add_argument("--engine", choices=["sail", "spark"], default="sail")
    timed.add_argument("--json", type=Path, help="also write the figures to this file")
    timed.add_argument("--lines", type=int, help="take in only the trickle's first N lines (the same change into "
                                                 "lakes of two sizes)")
    timed.add_argument("--spark-events", type=Path, metavar="DIR",
                       help="Apache Spark only: write the engine's event log to DIR and count its jobs per step")
    timed.add_argument("--chain", action="store_true",
                       help="with --lines N: each rep takes in the next N lines into the lake the rep before left")
    timed.add_argument("--tail", action="store_true",
                       help="the tail (the last 1 %% but the trickle) into copies of the lake before it instead")
    add_conf_argument(timed)
    args = parser.parse_args()
    if args.command == "build":
        print(json.dumps(build(args.messages, args.folder)))
        return
    if args.spark_events is not None and args.engine != "spark":
        parser.error("--spark-events needs --engine spark (Sail writes no event log)")
    if args.chain and args.lines is None:
        parser.error("--chain needs --lines N: each rep takes in the next N lines of the trickle")
    if args.tail and args.lines is not None:
        parser.error("--tail takes in the whole tail: no --lines")
    if args.tail and not (args.folder / "before_tail").is_dir():
        parser.error(f"{args.folder}/before_tail is missing: build the folder again with this checkout")
    reps = run(args.folder, args.reps, args.engine, args.spark_events, dict(args.conf), args.lines, args.chain,
               args.tail)
    start = "before_tail" if args.tail else "base"
    table = Table("seconds", *(f"rep {r['rep']}" for r in reps),
                  title=f"{'tail' if args.tail else 'trickle'} into {args.folder}/{start}")
    for total in ("materialize", "silver", "gold"):
        table.add_row(total, *(f"{r[total]:.2f}" for r in reps))
        if total != "materialize":  # then the job's steps, as its timeline names them
            for name in dict.fromkeys(name for r in reps for name in r[f"{total}_steps"]):
                table.add_row(f"  {name}", *(f"{r[f'{total}_steps'].get(name, 0.0):.2f}" for r in reps))
    if args.spark_events is not None:
        _print_jobs(reps)
    print_figures(table, reps, args.json)


if __name__ == "__main__":
    main()

"""``python -m tests.benchmarks.log_age``: what opening a Delta table costs against the number of
commits in its log, with and without checkpoints: how a lake's runs grow with its age.

``python -m tests.benchmarks.log_age [--commits 100,1000,2000] [--engine sail|spark] [--shape append|rewrite]
[--json FILE]``. Two tables get one commit each, written by embedded Sail (either engine reads what
the other wrote): with ``--shape append`` (the default), a single-row append, as the lake's
append-per-run tables are; with ``--shape rewrite``, :data:`REWRITTEN` of the :data:`BUCKETS`
buckets of a :data:`ROWS`-row table in buckets written again
(:func:`lakehouse.spark.delta.write_buckets`), as a trickle writes a gold table at 1,000,000
messages (a remove and an add for each of those files a commit):

- ``plain``: with the ``delta.checkpointInterval`` of gold tables and their change tables
  (:data:`lakehouse.spark.session.TIME_TRAVEL_CHECKPOINT_INTERVAL`: no checkpoint, so that Sail
  can travel to every version), read as it stood after each count of ``--commits`` (a copy of its
  log cut there);
- ``checkpointed``: Delta's default checkpoint every 10 commits, at the largest count; and the same
  table with its ``_last_checkpoint`` hint taken away (``checkpointed-no-hint``).

Then, in a new ``--engine`` process (each ``lakehouse`` command is one, and opens each table it
reads once), per table: the first read (a count, which builds the table's snapshot from its log),
a second one, a first time travel to a version about half way (``versionAsOf`` of
:func:`half_way`; "fails" and the engine's message when it cannot),
:func:`lakehouse.spark.deltalog.snapshot` (this package's own reader of the log), and one more
append (``--shape rewrite``: one more such commit). Seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.table import Table

from lakehouse.config import load_settings
from lakehouse.spark.session import TIME_TRAVEL_CHECKPOINT_INTERVAL, open_engine
from tests.benchmarks.suite import print_figures

CHECKPOINT_INTERVAL = 10
"""Delta's default ``delta.checkpointInterval``: the ``checkpointed`` table's."""
ROWS, BUCKETS, REWRITTEN = 100_000, 128, 30
"""``--shape rewrite``: the table's rows and buckets (a gold table at 1,000,000 messages has about
110,000 rows in 128 buckets), and the buckets a commit writes again (a trickle of 100 lines touches
about 30 of each gold table's)."""


def _rewrite(spark: Any, location: str, seed: int) -> None:
    """One commit of ``--shape rewrite``: :data:`REWRITTEN` buckets, picked by ``seed``, written again
    with the rows they hold."""
    import random

    from lakehouse.spark import buckets, delta
    from lakehouse.spark.tables import TableRef

    named = sorted(random.Random(seed).sample(range(BUCKETS, 2 * BUCKETS), REWRITTEN))
    rows = spark.read.format("delta").load(location).where(delta.buckets_where(named))
    delta.write_buckets(rows.select("instance_id", "payload", buckets.COLUMN), TableRef("gold", "aged", location), named)


def build(folder: Path, commits: int, shape: str = "append") -> None:
    """Write ``plain`` and ``checkpointed`` in ``folder``, ``commits`` commits of ``shape`` each
    (the module docstring), on Sail."""
    from pyspark.sql import functions as F

    from lakehouse.spark import buckets

    settings = load_settings(environ={}).with_overrides(engine="sail", lake_root=str(folder))
    with open_engine(settings) as running:
        spark = running.spark
        for name, interval in [("plain", TIME_TRAVEL_CHECKPOINT_INTERVAL), ("checkpointed", CHECKPOINT_INTERVAL)]:
            location = str(folder / name)
            if shape == "rewrite":  # the table as a full run leaves it: a file a bucket, then rewrites
                ids = spark.range(ROWS).select(F.sha2(F.col("id").cast("string"), 256).alias("instance_id"),
                                               F.lit("x" * 40).alias("payload"))
                (ids.select("*", buckets.column(BUCKETS)).repartition(BUCKETS, buckets.COLUMN).write.format("delta")
                 .partitionBy(buckets.COLUMN).option("delta.checkpointInterval", str(interval)).save(location))
            for i in range(commits - (shape == "rewrite")):
                if shape == "rewrite":
                    _rewrite(spark, location, i)
                    continue
                (spark.createDataFrame([(i, "x" * 40)], "id BIGINT, payload STRING").write.format("delta")
                 .mode("append").option("delta.checkpointInterval", str(interval)).save(location))


def cut(source: Path, target: Path, commits: int) -> None:
    """A copy of the table ``source`` as it stood after its first ``commits`` commits: its log's
    files of later versions left out (their data files stay, unreferenced)."""
    shutil.copytree(source, target)
    log = target / "_delta_log"
    for path in log.iterdir():
        if path.name[:20].isdigit() and int(path.name[:20]) >= commits:
            path.unlink()


def half_way(commits: int) -> int:
    """The version time travel reads: about half way, neither one a checkpoint was written at nor
    the one after (Sail reads those with the ``_last_checkpoint`` hint in place)."""
    return max(commits // 2 - 3, 0)


def _seconds(action: Callable[[], Any]) -> float:
    start = time.monotonic()
    action()
    return time.monotonic() - start


def _one(spark: Any, name: str, commits: int, location: str, shape: str = "append") -> dict[str, Any]:
    from lakehouse.spark import deltalog

    def count(version: int | None = None) -> int:
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return int(reader.load(location).count())

    def append() -> None:
        if shape == "rewrite":
            _rewrite(spark, location, -1)
            return
        spark.createDataFrame([(-1, "y")], "id BIGINT, payload STRING").write.format("delta").mode("append").save(location)

    first = _seconds(count)
    again = _seconds(count)
    try:
        travel: float | str = _seconds(lambda: count(half_way(commits)))
    except Exception as exc:  # noqa: BLE001 - the engine's refusal is the figure
        travel = "fails: " + str(exc).splitlines()[0][:80]
    log = _seconds(lambda: deltalog.snapshot(location))
    appended = _seconds(append)
    return {"table": name, "commits": commits, "first_read": first, "read_again": again,
            "travel_half_way": travel, "deltalog_snapshot": log, "append": appended}


def measure(engine: str, tables: list[tuple[str, int, str]], shape: str = "append") -> list[dict[str, Any]]:
    """Each table's figures, in a new engine (see the module docstring); ``tables`` are
    ``(name, commits, location)``, their commits of ``shape``."""
    folder = Path(tempfile.mkdtemp(prefix="lakehouse-log-age-engine-"))
    settings = load_settings(environ={}).with_overrides(engine=engine, lake_root=str(folder))
    try:
        with open_engine(settings) as running:
            spark = running.spark
            warm = str(folder / "warm")
            spark.range(3).write.format("delta").mode("overwrite").save(warm)
            for _ in range(3):  # the engine's first Delta reads are not the log's cost
                spark.read.format("delta").load(warm).count()
            return [_one(spark, name, commits, location, shape) for name, commits, location in tables]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", default="100,1000,2000", help="commit counts, comma separated")
    parser.add_argument("--engine", choices=["sail", "spark"], default="sail")
    parser.add_argument("--shape", choices=["append", "rewrite"], default="append",
                        help="each commit: a single-row append, or buckets of a table written again")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the engine child that reads them
    args = parser.parse_args()
    counts = sorted({int(c) for c in args.commits.split(",")})
    if args.measure is not None:
        tables = json.loads(args.measure.read_text())
        args.measure.write_text(json.dumps(measure(args.engine, [tuple(t) for t in tables], args.shape)))
        return
    folder = Path(tempfile.mkdtemp(prefix="lakehouse-log-age-"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path.cwd()), os.environ.get("PYTHONPATH")]))}
    try:
        built = _seconds(lambda: build(folder, counts[-1], args.shape))
        tables: list[tuple[str, int, str]] = []
        for n in counts:
            cut(folder / "plain", folder / f"plain-{n}", n)
            tables.append(("plain", n, str(folder / f"plain-{n}")))
        shutil.copytree(folder / "checkpointed", folder / "no-hint")
        (folder / "no-hint" / "_delta_log" / "_last_checkpoint").unlink(missing_ok=True)  # none below 11 commits
        tables += [("checkpointed", counts[-1], str(folder / "checkpointed")),
                   ("checkpointed-no-hint", counts[-1], str(folder / "no-hint"))]
        plan = folder / "tables.json"
        plan.write_text(json.dumps(tables))
        subprocess.run([sys.executable, "-m", "tests.benchmarks.log_age", "--engine", args.engine,
                        "--shape", args.shape, "--measure", str(plan)], check=True, env=env)
        rows = json.loads(plan.read_text())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    figures = {"engine": args.engine, "shape": args.shape, "built_seconds": built, "tables": rows}
    table = Table("table", "commits", "first read", "again", "travel half way", "deltalog",
                  "append" if args.shape == "append" else "rewrite",
                  title=f"{args.engine}: opening a Delta table against its log, commits of shape {args.shape} (s)")
    for r in rows:
        travel = r["travel_half_way"]
        table.add_row(r["table"], f"{r['commits']:,}", f"{r['first_read']:.3f}", f"{r['read_again']:.3f}",
                      travel if isinstance(travel, str) else f"{travel:.3f}", f"{r['deltalog_snapshot']:.3f}",
                      f"{r['append']:.3f}")
    print_figures(table, figures, args.json)


if __name__ == "__main__":
    main()

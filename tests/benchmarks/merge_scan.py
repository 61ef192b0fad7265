"""``python -m tests.benchmarks.merge_scan``: what a MERGE of a few keys costs against the size of
its target, on one engine, and whether a layout lets the engine skip the target's files.

``python -m tests.benchmarks.merge_scan --rows 3000000 [--keys 5] [--engine sail|spark-connect]
[--json FILE]``. Three Delta tables (deletion vectors on) of ``--rows`` rows with the columns of a
small gold table (``instance_id``: a SHA-256 hex id, as every instance id; a number; 50 bytes of
text), written with the same rows:

- ``plain``: as a gold table is written today;
- ``sorted``: 30 files, each a range of ``instance_id`` (a file's min and max bound its ids);
- ``bucketed``: written as a gold table is (:func:`lakehouse.spark.gold.write_table`: partitioned
  by ``_bucket``, :mod:`lakehouse.spark.buckets`, their number chosen from ``--rows``).

On each, twice: the MERGE of :func:`lakehouse.spark.delta.replace_rows` (a delete marker and a new
row per key) of ``--keys`` keys; on ``sorted``, the same MERGE with the keys as literals in its
``ON`` clause (``t.instance_id IN (...)``), which file statistics could prune on; on
``bucketed``, with the keys' buckets as literals (``t._bucket IN (...)``), which partition pruning
can use; a ``DELETE ... WHERE instance_id IN (...)`` on ``plain``; and ``bucketed`` written whole
by :func:`lakehouse.spark.gold.write_table` (its other rows read back and the keys' new rows: how
:func:`lakehouse.spark.gold.rewrite_rows` writes a table of at most ``WHOLE_TABLE_ROWS`` rows).
Seconds per statement (the better of the two tries): a statement whose cost does not follow
``--rows`` skips files.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.table import Table

from lakehouse.config import load_settings
from lakehouse.spark import buckets as layout
from lakehouse.spark.gold import write_table
from lakehouse.spark.session import open_engine
from lakehouse.spark.tables import TableRef
from tests.benchmarks.suite import print_figures


def _bucket_of(instance_id: str, count: int) -> int:
    """The ``_bucket`` of an id in a table of ``count`` buckets (:func:`lakehouse.spark.buckets.values_for`
    of its 16-bit hash, the hex after its two-byte prefix, as :func:`lakehouse.spark.buckets.hash_column`
    reads it)."""
    return layout.values_for([int(instance_id[4:8], 16)], count)[0]


def _timed(action: Callable[[], Any], tries: int = 2) -> float:
    best = float("inf")
    for _ in range(tries):
        begun = time.monotonic()
        action()
        best = min(best, time.monotonic() - begun)
    return round(best, 3)


def measure(spark: Any, folder: str, rows: int, keys: int) -> dict[str, Any]:
    """The figures of the module docstring for one engine: statement -> seconds."""
    from pyspark.sql import functions as F

    count = layout.count_for(rows)
    base = spark.range(rows).select(F.sha2(F.col("id").cast("string"), 256).alias("instance_id"),
                                    F.col("id").alias("v"), F.repeat(F.lit("x"), 50).alias("pad"))
    dv = {"delta.enableDeletionVectors": "true"}
    tables = {"plain": f"{folder}/plain", "sorted": f"{folder}/sorted", "bucketed": f"{folder}/bucketed"}
    base.write.format("delta").options(**dv).save(tables["plain"])
    base.repartitionByRange(30, "instance_id").sortWithinPartitions("instance_id").write.format("delta").options(
        **dv).save(tables["sorted"])
    bucketed = TableRef("gold", "bucketed", tables["bucketed"])
    write_table(base, bucketed, rows)
    chosen = [r[0] for r in spark.read.format("delta").load(tables["plain"]).orderBy(F.rand(7)).limit(keys).collect()]
    ids = ", ".join(f"'{k}'" for k in chosen)
    buckets = ", ".join(sorted({str(_bucket_of(k, count)) for k in chosen}))

    def merge(location: str, with_bucket: bool, extra: str) -> Callable[[], None]:
        columns = "instance_id STRING, v BIGINT, pad STRING" + (", _bucket INT" if with_bucket else "")
        bucket_of = (lambda k: (_bucket_of(k, count),)) if with_bucket else (lambda k: ())
        new = [(k, -1, "y", *bucket_of(k)) for k in chosen]
        gone = [(k, None, None, *bucket_of(k)) for k in chosen]
        names = ["instance_id", "v", "pad", *(["_bucket"] if with_bucket else [])]

        def run() -> None:
            source = spark.createDataFrame([(*r, False) for r in new] + [(*r, True) for r in gone],
                                           f"{columns}, _gone BOOLEAN")
            source.createOrReplaceTempView("merge_scan_source")
            spark.sql(f"MERGE INTO delta.`{location}` AS t USING merge_scan_source AS s "
                      f"ON t.instance_id = s.instance_id AND s._gone {extra} WHEN MATCHED THEN DELETE "
                      f"WHEN NOT MATCHED AND NOT s._gone THEN INSERT ({', '.join(names)}) "
                      f"VALUES ({', '.join('s.' + n for n in names)})").collect()
        return run

    def whole(ref: TableRef) -> Callable[[], None]:
        """The table written whole, as a gold table of at most WHOLE_TABLE_ROWS rows is: its rows but
        the keys' read back, and the keys' new rows."""
        def run() -> None:
            new = spark.createDataFrame([(k, -1, "y") for k in chosen], "instance_id STRING, v BIGINT, pad STRING")
            kept = spark.read.format("delta").load(ref.location).join(new.select("instance_id"), "instance_id",
                                                                      "left_anti")
            write_table(kept.select("instance_id", "v", "pad").unionByName(new), ref, rows)
        return run

    figures: dict[str, Any] = {
        "merge, plain": _timed(merge(tables["plain"], False, "")),
        "merge, sorted": _timed(merge(tables["sorted"], False, "")),
        "merge, sorted, ids in ON": _timed(merge(tables["sorted"], False, f"AND t.instance_id IN ({ids})")),
        "merge, bucketed": _timed(merge(tables["bucketed"], True, "")),
        "merge, bucketed, buckets in ON": _timed(merge(tables["bucketed"], True, f"AND t._bucket IN ({buckets})")),
        "delete, plain, ids in WHERE": _timed(
            lambda: spark.sql(f"DELETE FROM delta.`{tables['plain']}` WHERE instance_id IN ({ids})").collect()),
        "whole write, bucketed": _timed(whole(bucketed)),
    }
    for name, location in tables.items():  # every statement kept the rows: each MERGE replaced its keys
        expected = rows - (keys if name == "plain" else 0)
        got = spark.read.format("delta").load(location).count()
        assert got == expected, f"{name}: {got} rows, expected {expected}"
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=3_000_000, help="rows of each target table")
    parser.add_argument("--keys", type=int, default=5, help="keys each statement replaces")
    parser.add_argument("--engine", choices=["sail", "spark-connect"], default="sail")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    settings = load_settings(environ={}).with_overrides(engine=args.engine)
    folder = tempfile.mkdtemp(prefix="lakehouse-merge-scan-")
    try:
        with open_engine(settings) as running:
            figures = {"engine": args.engine, "rows": args.rows, "keys": args.keys,
                       "seconds": measure(running.spark, folder, args.rows, args.keys)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    table = Table("statement", "s", title=f"{args.engine}, {args.rows:,} rows, {args.keys} keys")
    for name, seconds in figures["seconds"].items():
        table.add_row(name, f"{seconds:.3f}")
    print_figures(table, figures, args.json)


if __name__ == "__main__":
    main()

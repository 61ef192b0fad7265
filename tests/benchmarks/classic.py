"""The gold computation on parquet, the same code on any engine: embedded Sail or Apache Spark classic.

Apache Spark's Delta jars cannot be fetched here, so both engines run the
``full`` gold path of :mod:`pipelines.gold` on parquet instead of Delta: fold every instance's
applied messages into its state (:func:`lakehouse.spark.gold.fold_states` through
:func:`lakehouse.spark.groups.map_groups`), remove deleted instances and cascades
(:func:`lakehouse.core.gold.removed_by_cascade`), and project one table per schema version
(:func:`lakehouse.spark.gold.project_rows`).

``python -m tests.benchmarks.classic INPUTS SCHEMAS OUT`` runs it on PySpark classic in this
process (``local[*]``, Java needed) and prints ``{"seconds": ..., "rows": ...}``; the suite calls it
in a subprocess so that the two engines never share a process.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse.core.gold import removed_by_cascade
from lakehouse.core.messages import SchemaId
from lakehouse.core.schemas import SchemaVersions
from lakehouse.spark import gold as G
from lakehouse.spark.groups import map_groups

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def gold_on_parquet(spark: SparkSession, inputs: str, schemas: dict[SchemaId, SchemaVersions],
                    names: dict[SchemaId, str], out: str) -> int:
    """Gold tables as parquet folders ``out/<name>_v<n>`` from the applied instance messages.

    Args:
        inputs: parquet of (schema, author, instance, seq_num, entry_hash, payload), the applied
            create/update/delete messages of the registered schemas' instance logs.
        schemas: every registered schema's versions.
        names: registered schema -> gold name.

    Returns:
        The rows written over all tables.
    """
    from pyspark.sql import functions as F

    messages = spark.read.parquet(inputs)
    states_path = f"{out}/_states"
    map_groups(messages, ["schema", "instance"], G.fold_states(schemas), G.STATES_DDL) \
        .write.mode("overwrite").parquet(states_path)
    states = spark.read.schema(G.STATES_DDL).parquet(states_path)
    deleted = [r["instance_id"] for r in states.where(F.col("deleted")).select("instance_id").collect()]
    edges = {r["instance_id"]: list(r["targets"])
             for r in states.where(F.size("targets") > 0).select("instance_id", "targets").collect()}
    removed = removed_by_cascade(deleted, edges)
    live = states.where(~F.col("deleted"))
    if removed:
        live = live.join(spark.createDataFrame([(i,) for i in sorted(removed)], "instance_id STRING"),
                         "instance_id", "left_anti")
    live_path = f"{out}/_live"
    live.write.mode("overwrite").parquet(live_path)
    live = spark.read.schema(G.STATES_DDL).parquet(live_path)
    written = 0
    for sid, name in sorted(names.items(), key=lambda kv: kv[1]):
        sv = schemas[sid]
        of_schema = live.where(F.col("schema") == str(sid))
        for version in sv.gold_versions():
            G.project(of_schema, sv, version).write.mode("overwrite").parquet(f"{out}/{name}_v{version}")
            written += spark.read.parquet(f"{out}/{name}_v{version}").count()
    return written


def main() -> None:
    inputs, schemas_file, out = sys.argv[1:4]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(f"local[{os.cpu_count() or 1}]").appName("lakehouse-bench")
             .config("spark.sql.session.timeZone", "UTC").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "8g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    schemas, names = pickle.loads(Path(schemas_file).read_bytes())
    started = time.monotonic()
    rows = gold_on_parquet(spark, inputs, schemas, names, out)
    seconds = time.monotonic() - started
    spark.stop()
    print(json.dumps({"seconds": seconds, "rows": rows}))


if __name__ == "__main__":
    main()

"""Which Delta Lake features each engine offers, measured (README, Engines; ``docs/engines.md``).

Each probe runs a feature's statement on a fresh table and reports whether the engine did what
the feature promises. The expected table is the one the README and ``docs/engines.md`` print: a
change upstream (a feature gained or lost) fails here, and the docs are updated with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.parity


def _table(spark: Any, path: Path, **options: str) -> str:
    # one file holds both rows, so that deleting one of them keeps the file (and marks the row deleted)
    writer = spark.createDataFrame([(1, "a"), (2, "b")], "id BIGINT, v STRING").coalesce(1).write.format("delta")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save(str(path))
    spark.createDataFrame([(3, "c")], "id BIGINT, v STRING").write.format("delta").mode("append").save(str(path))
    return f"delta.`{path}`"


def describe_history(spark: Any, path: Path) -> bool:
    name = _table(spark, path)
    return sorted(r["version"] for r in spark.sql(f"DESCRIBE HISTORY {name}").collect()) == [0, 1]


def restore(spark: Any, path: Path) -> bool:
    name = _table(spark, path)
    spark.sql(f"RESTORE TABLE {name} TO VERSION AS OF 0").collect()
    return sorted(r["id"] for r in spark.read.format("delta").load(str(path)).collect()) == [1, 2]


def change_data_feed(spark: Any, path: Path) -> bool:
    _table(spark, path, **{"delta.enableChangeDataFeed": "true"})
    feed = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1).load(str(path))
    return [(r["id"], r["_change_type"]) for r in feed.collect()] == [(3, "insert")]


def deletion_vectors(spark: Any, path: Path) -> bool:
    name = _table(spark, path, **{"delta.enableDeletionVectors": "true"})
    spark.sql(f"DELETE FROM {name} WHERE id = 1").collect()
    log = sorted((path / "_delta_log").glob("*.json"))[-1].read_text()
    actions = [json.loads(line) for line in log.splitlines()]
    rows = sorted(r["id"] for r in spark.read.format("delta").load(str(path)).collect())
    return rows == [2, 3] and any((a.get("add") or {}).get("deletionVector") for a in actions)


def time_travel_sql(spark: Any, path: Path) -> bool:
    name = _table(spark, path)
    return spark.sql(f"SELECT count(*) AS n FROM {name} VERSION AS OF 0").collect()[0]["n"] == 2


def _checkpointed(spark: Any, path: Path) -> None:
    # versions 0 to 8, one row each, a checkpoint at 3 and at 6: version 5 is two past the one before it
    for i in range(9):
        (spark.createDataFrame([(i, "a")], "id BIGINT, v STRING").write.format("delta").mode("append")
         .option("delta.checkpointInterval", "3").save(str(path)))


def time_travel_before_a_checkpoint(spark: Any, path: Path) -> bool:
    _checkpointed(spark, path)
    return spark.read.format("delta").option("versionAsOf", 5).load(str(path)).count() == 6


def time_travel_before_a_checkpoint_without_its_hint(spark: Any, path: Path) -> bool:
    """Sail lists the log from the version before the one asked for when ``_last_checkpoint`` names
    a later one, and finds no checkpoint there unless one was written at either of those two
    versions: without the hint it lists the whole log."""
    _checkpointed(spark, path)
    (path / "_delta_log" / "_last_checkpoint").unlink()
    return spark.read.format("delta").option("versionAsOf", 5).load(str(path)).count() == 6


PROBES: dict[str, Callable[[Any, Path], bool]] = {
    "DESCRIBE HISTORY": describe_history,
    "RESTORE": restore,
    "change data feed": change_data_feed,
    "deletion vectors (written by DELETE)": deletion_vectors,
    "VERSION AS OF in SQL": time_travel_sql,
    "time travel before a checkpoint": time_travel_before_a_checkpoint,
    "time travel before a checkpoint, without _last_checkpoint": time_travel_before_a_checkpoint_without_its_hint,
}
# what docs/engines.md and the README say, measured with pysail 0.7.2 and Apache Spark 4.0 with delta-spark 4.0
EXPECTED = {
    "sail": {"DESCRIBE HISTORY": False, "RESTORE": False, "change data feed": False,
             "deletion vectors (written by DELETE)": True, "VERSION AS OF in SQL": True,
             "time travel before a checkpoint": False,
             "time travel before a checkpoint, without _last_checkpoint": True},
    "spark": {"DESCRIBE HISTORY": True, "RESTORE": True, "change data feed": True,
              "deletion vectors (written by DELETE)": True, "VERSION AS OF in SQL": True,
              "time travel before a checkpoint": True,
              "time travel before a checkpoint, without _last_checkpoint": True},
}


def probe(spark: Any, folder: Path) -> dict[str, bool]:
    """Every probe's outcome; a statement the engine refuses counts as not offered."""
    found = {}
    for n, (feature, check) in enumerate(PROBES.items()):
        try:
            found[feature] = bool(check(spark, folder / f"t{n}"))
        except Exception:  # noqa: BLE001 - the engine's refusals come in many classes
            found[feature] = False
    return found


def test_each_engine_offers_the_delta_features_the_docs_say(spark: Any, engine_name: str, tmp_path: Path) -> None:
    assert probe(spark, tmp_path) == EXPECTED[engine_name]

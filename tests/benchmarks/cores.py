"""How the full materialize on Apache Spark scales with cores: ``local[1]`` against ``local[2]``.

``python -m tests.benchmarks.cores --lake DIR --names JSON --master local[1]`` runs the full
materialize (silver, every schema registered, gold) of an ingested lake in a process of its own,
with Apache Spark (``engine: spark``) at that master, and prints ``{"seconds": ...}``: the time of
the materialize only, the engine's start left out. :func:`cores_figures` runs it on copies of one
lake for each master, one after the other, for the bench (``measure`` on Apache Spark).
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
from pathlib import Path
from typing import Any

CORES = (1, 2)


def full_seconds(lake: str, names: dict[str, str], master: str) -> tuple[float, dict[str, float]]:
    """Seconds of the full materialize of the ingested lake ``lake`` on Apache Spark at ``master``,
    and its timeline (step -> seconds, silver's then gold's)."""
    from lakehouse.config import load_settings
    from lakehouse.spark.session import open_engine
    from pipelines.gold import register_schema, run_gold
    from pipelines.silver import run_silver

    settings = load_settings(environ={}).with_overrides(lake_root=lake, engine="spark",
                                                        spark_conf={"spark.master": master})
    with open_engine(settings) as engine:
        started = time.monotonic()
        silver = run_silver(engine.spark, settings)
        for sid, name in names.items():
            register_schema(engine.spark, settings, sid, name)
        gold = run_gold(engine.spark, settings)
        return time.monotonic() - started, {**{f"silver: {k}": v for k, v in silver.steps.items()},
                                            **{f"gold: {k}": v for k, v in gold.steps.items()}}


def child_env() -> dict[str, str]:
    """This process's environment for a bench process of its own: without what marks a Spark
    Connect client (``SPARK_CONNECT_MODE_ENABLED``, ``SPARK_REMOTE``), which is this process's."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_CONNECT", "SPARK_REMOTE"))}


def cores_figures(lake: str, names: dict[str, str]) -> dict[str, Any]:
    """The full materialize of ``lake`` (left as it is) on Apache Spark at ``local[n]`` for each of :data:`CORES`,
    each in a process of its own on a copy of it: ``full_local_<n>_seconds`` and ``_timeline``
    (step -> seconds), and ``cores_speedup`` (one core's time over two cores').

    Raises:
        SystemExit: a run failed.
    """
    figures: dict[str, Any] = {}
    env = child_env()
    for cores in CORES:
        master = f"local[{cores}]"
        with tempfile.TemporaryDirectory() as tmp:
            copy = f"{tmp}/lake"
            shutil.copytree(lake, copy)
            os.sync()
            done = subprocess.run([sys.executable, "-m", "tests.benchmarks.cores", "--lake", copy, "--names",
                                   json.dumps(names), "--master", master], env=env, check=False,
                                  stdout=subprocess.PIPE, text=True)
            if done.returncode != 0:
                raise SystemExit(f"the full materialize on Apache Spark at {master} failed (exit {done.returncode})")
            measured = json.loads(done.stdout.splitlines()[-1])
            figures[f"full_local_{cores}_seconds"] = round(measured["seconds"], 2)
            figures[f"full_local_{cores}_timeline"] = measured["steps"]
    figures["cores_speedup"] = round(figures["full_local_1_seconds"] / figures["full_local_2_seconds"], 2)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lake", required=True, type=Path, help="an ingested lake (changed in place)")
    parser.add_argument("--names", required=True, help="JSON: schema id -> the name it is registered under")
    parser.add_argument("--master", required=True, help="Spark master, such as local[1]")
    args = parser.parse_args()
    seconds, steps = full_seconds(str(args.lake), json.loads(args.names), args.master)
    print(json.dumps({"seconds": seconds, "steps": steps}))


if __name__ == "__main__":
    main()

"""Helpers for tests that run the pipelines on a lake under ``tmp_path``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lakehouse.config import Settings
from lakehouse.spark import buckets
from lakehouse.spark.tables import is_delta_table, table

REPO = Path(__file__).resolve().parents[1]


def write_landing(settings: Settings, name: str, lines: Iterable[Mapping[str, Any] | str]) -> Path:
    """Write one landing file (FORMAT.md section 2); str items are written as they are (raw lines)."""
    folder = Path(settings.landing)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with path.open("w") as out:
        for line in lines:
            out.write((line if isinstance(line, str) else json.dumps(dict(line))) + "\n")
    return path


def rows(spark: Any, settings: Settings, layer: str, name: str, *, drop: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Every row of one lake table as dicts, sorted for comparison; [] when the table does not exist."""
    location = table(settings.lake_root, layer, name).location
    if not is_delta_table(location):  # a local path or a URI (a lake on a store)
        return []
    df = spark.read.format("delta").load(location)
    keep = [c for c in df.columns if c not in set(drop)]
    out = [r.asDict() for r in df.select(*keep).collect()]
    return sorted(out, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def gold_data(row: Mapping[str, Any]) -> dict[str, Any]:
    """A gold row without its layout column (``_bucket``, semantics note 26): what the contract, the
    reference model and the change feed give of it."""
    return {k: v for k, v in row.items() if k != buckets.COLUMN}


def cli_env(settings: Settings, **extra: str) -> dict[str, str]:
    """Environment for running ``lakehouse`` in a subprocess against ``settings``' lake."""
    own = {"LAKEHOUSE_LAKE_ROOT", "LAKEHOUSE_LANDING", "LAKEHOUSE_KEYS", "LAKEHOUSE_CONFIG", "LAKEHOUSE_FAULT_AFTER"}
    env = {k: v for k, v in os.environ.items() if k not in own}
    env.update(LAKEHOUSE_LAKE_ROOT=settings.lake_root, LAKEHOUSE_LANDING=settings.landing,
               LAKEHOUSE_KEYS=settings.keys, PYTHONPATH=str(REPO))
    if settings.spark_remote:  # the test's engine (Apache Spark: the test run's Spark Connect server)
        env["LAKEHOUSE_SPARK_REMOTE"] = settings.spark_remote
    env.update(extra)
    return env


def run_cli(settings: Settings, *args: str, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m lakehouse.cli ARGS`` in a subprocess (its own engine); output captured."""
    return subprocess.run([sys.executable, "-m", "lakehouse.cli", *args], cwd=REPO, env=cli_env(settings, **extra),
                          capture_output=True, text=True, timeout=timeout, check=False)

"""``python -m tests.benchmarks.rebuild_peaks --folder DIR``: where a full run's time and memory go,
step by step.

``DIR/base`` (a lake ``python -m tests.benchmarks.trickle build`` made) is copied to ``DIR/lake``,
then silver and gold are rebuilt there (``materialize --rebuild``) in this process, on Sail, while
the resident memory of this process (the engine's) and of its children (the Python workers) is
sampled every 0.1 s. Printed: each step's seconds and the most memory of the process tree in it
(:class:`lakehouse.progress.Timeline`'s steps), and the most of this process and of its children
alone. Knobs, each in one run (compare runs alternating, in one session):

- ``--group-rows N``: the setting ``group_rows`` (input rows a log or instance pass holds at once);
- ``--sliced-from N``: :data:`lakehouse.spark.buckets.SLICED_FROM` (buckets from which silver's
  whole writes go in slices).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from lakehouse.config import load_settings
from lakehouse.spark.session import open_engine
from pipelines.gold import run_gold
from pipelines.silver import run_silver
from tests.benchmarks.cores import rss_mib
from tests.benchmarks.suite import _Sampler


class _Split(_Sampler):
    """:class:`tests.benchmarks.suite._Sampler`, and this process's memory apart from its children's."""

    def __init__(self, every: float = 0.1) -> None:
        super().__init__(every)
        self.apart: list[tuple[float, float]] = []  # (this process, its children), MiB

    def sample(self, pids: list[int]) -> None:
        each = {pid: rss_mib(pid) for pid in pids}
        own = each.get(os.getpid(), 0.0)
        self.samples.append((time.monotonic(), sum(each.values())))
        self.apart.append((own, sum(each.values()) - own))


def measure(folder: Path, group_rows: int | None = None, sliced_from: int | None = None) -> dict[str, Any]:
    """The rebuild of a copy of ``folder/base`` with the module docstring's knobs; its figures."""
    from lakehouse.spark import buckets

    lake = folder / "lake"
    shutil.rmtree(lake, ignore_errors=True)
    shutil.copytree(folder / "base", lake)
    os.sync()
    settings = load_settings(environ={}).with_overrides(lake_root=str(lake), engine="sail")
    if group_rows is not None:
        settings = settings.with_overrides(group_rows=group_rows)
    if sliced_from is not None:
        buckets.SLICED_FROM = sliced_from
    with open_engine(settings) as running, _Split() as sampled:
        begun = time.monotonic()
        silver = run_silver(running.spark, settings, rebuild=True)
        middle = time.monotonic()
        gold = run_gold(running.spark, settings, rebuild=True)
        ended = time.monotonic()
    peaks = sampled.peaks(begun, {f"silver: {k}": v for k, v in silver.steps.items()}, ended,
                          {f"gold: {k}": v for k, v in gold.steps.items()})
    seconds = {**{f"silver: {k}": round(v, 2) for k, v in silver.steps.items()},
               **{f"gold: {k}": round(v, 2) for k, v in gold.steps.items()}}
    return {"group_rows": settings.group_rows, "sliced_from": buckets.SLICED_FROM,
            "silver_seconds": round(middle - begun, 2), "gold_seconds": round(ended - middle, 2),
            "peak_mib": round(max(mib for _, mib in sampled.samples)),
            "process_peak_mib": round(max(own for own, _ in sampled.apart)),
            "children_peak_mib": round(max(children for _, children in sampled.apart)),
            "steps": {name: {"seconds": seconds[name], "peak_mib": peaks[name]} for name in seconds}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, required=True, help="a trickle bench folder (its base is copied)")
    parser.add_argument("--group-rows", type=int)
    parser.add_argument("--sliced-from", type=int)
    args = parser.parse_args()
    print(json.dumps(measure(args.folder, args.group_rows, args.sliced_from), indent=2))


if __name__ == "__main__":
    main()

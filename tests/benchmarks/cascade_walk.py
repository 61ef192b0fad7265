"""``python -m tests.benchmarks.cascade_walk``: the walk of every cascade edge (a first run's, a
rebuild's) in the client against in the engine, on a materialized lake: seconds, and how much the
client process grew.

``python -m tests.benchmarks.cascade_walk --lake DIR [--engine sail|spark] [--reps 2] [--json FILE]``.
``DIR`` is a lake root that gold has run on (a trickle bench's ``DIR/base``). Each rep, each way
alternating (client, engine, client, ...), in a fresh process of its own:
:func:`lakehouse.spark.cascades.walk_all` over ``silver.instance_states`` with no set before,
``client_edges`` above the edges (the client walks: numbered, numpy) or -1 (the engine walks, a
level at a time). Figures per walk: seconds, the removed ids (both ways must agree), the edges,
and the growth of the process's resident memory during the walk over its size before (sampled
every 20 ms): with ``--engine spark`` the process is the client alone (the engine is a JVM of its
own); with Sail the engine runs inside it, and its buffers count too.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tests.benchmarks.cores import TreeSampler, rss_mib
from tests.benchmarks.suite import print_figures

console = Console(stderr=True)


class _OwnPeak(TreeSampler):
    """The peak resident memory of this process alone, sampled."""

    def __init__(self) -> None:
        super().__init__(0.02, lambda: [os.getpid()])
        self.peak = rss_mib(os.getpid())

    def sample(self, pids: list[int]) -> None:
        self.peak = max(self.peak, rss_mib(pids[0]))


def walk_once(lake: str, engine: str, way: str) -> dict[str, Any]:
    """One walk, ``client`` or ``engine``, in this process: the figures of the module docstring."""
    from lakehouse.config import load_settings
    from lakehouse.spark import cascades
    from lakehouse.spark.session import open_engine
    from lakehouse.spark.tables import table

    settings = load_settings(environ={}).with_overrides(lake_root=lake, engine=engine)
    with open_engine(settings) as running, tempfile.TemporaryDirectory(prefix="lakehouse-walk-") as staging:
        spark = running.spark
        states = spark.read.format("delta").load(table(lake, "silver", "instance_states").location)
        states.select("instance_id").limit(1).collect()  # the table's log read before the clock starts
        before = rss_mib(os.getpid())
        with _OwnPeak() as peak:
            begun = time.monotonic()
            walked = cascades.walk_all(spark, states, None, staging, flipped=False,
                                       client_edges=(1 << 62) if way == "client" else -1)
            seconds = time.monotonic() - begun
    return {"way": walked.where, "seconds": round(seconds, 2), "removed": walked.count, "edges": walked.edges,
            "grew_mib": round(peak.peak - before, 1), "rss_before_mib": round(before, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lake", type=Path, required=True, help="a lake root gold has run on")
    parser.add_argument("--engine", choices=["sail", "spark"], default="sail")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    figures: list[dict[str, Any]] = []
    for rep in range(args.reps):
        for way in ("client", "engine"):
            with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
                figures.append({"rep": rep, **pool.submit(walk_once, str(args.lake.resolve()), args.engine,
                                                          way).result()})
            console.print(figures[-1])
    removed = {f["removed"] for f in figures}
    assert len(removed) == 1, f"the ways removed different sets: {figures}"
    table = Table("rep", "way", "s", "removed", "edges", "grew MiB", "before MiB",
                  title=f"cascade walk over every edge, {args.engine}, {args.lake}")
    for f in figures:
        table.add_row(str(f["rep"]), f["way"], f"{f['seconds']:.2f}", f"{f['removed']:,}", f"{f['edges']:,}",
                      f"{f['grew_mib']:.0f}", f"{f['rss_before_mib']:.0f}")
    print_figures(table, figures, args.json)


if __name__ == "__main__":
    main()

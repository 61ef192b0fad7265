"""``python -m tests.benchmarks.store``: a lake on object storage, and Apache Spark as a cluster,
beside a lake on local disk in the same run.

``python -m tests.benchmarks.store --messages 100000 [--engine spark-connect --master
local-cluster[2,1,1536]] [--lakes both|local|store] [--conf KEY=VALUE] [--json FILE]``. One generated history (the bench's,
:func:`tests.benchmarks.suite.generate_landing`) is taken into two lakes, one after the other, with
the same engine: on local disk, and on an S3 API server on loopback (as the tests start it,
:mod:`tests.s3`: S3Proxy, objects in a local folder, or moto with ``LAKEHOUSE_TEST_S3_SERVER=moto``;
a server on the same two cores, so the store's figures are an upper bound of what a real store costs).
For each lake:

1. ``ingest``: the first 99 % of the lines;
2. ``full``: silver and gold of those (every schema registered);
3. ``incremental``: ingest, silver and gold of the last 1 %;

each step's seconds and peak resident memory of this process (the client: the pipelines' own
Python), of the engine's driver (Sail runs in this process; Apache Spark's driver is its Spark
Connect server's JVM, whose executors, with ``--master local-cluster[...]``, are processes of their
own), and of the whole process tree but the store's server. The driver's peak against the scale says whether the driver
grows with the lake (run two scales).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager, nullcontext, suppress
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
from tests.benchmarks.cores import TreeSampler, process_tree, rss_mib
from tests.benchmarks.suite import add_conf_argument, generate_landing
from tests.s3 import running_store

console = Console(stderr=True)


def _lake_processes() -> list[int]:
    """This process and its descendants but the store's server (its memory is the store's, not the
    pipelines': moto keeps every object in memory)."""
    def server(pid: int) -> bool:
        with suppress(OSError):
            line = Path(f"/proc/{pid}/cmdline").read_bytes()
            return b"moto_server" in line or b"s3proxy" in line
        return False

    return [pid for pid in process_tree() if not server(pid)]


class Peaks(TreeSampler):
    """The highest resident memory (MiB), sampled every ``every`` seconds while in its ``with``
    block (:class:`tests.benchmarks.cores.TreeSampler`), of this process, of the driver process
    ``driver`` (None: this process) and of this process's whole tree but the store's server
    (:func:`_lake_processes`)."""

    def __init__(self, driver: int | None, every: float = 0.2) -> None:
        super().__init__(every, _lake_processes)
        self.client = self.driver = self.tree = 0.0
        self._driver = driver

    def sample(self, pids: list[int]) -> None:
        own = rss_mib(os.getpid())
        self.client = max(self.client, own)
        self.driver = max(self.driver, rss_mib(self._driver) if self._driver else own)
        self.tree = max(self.tree, sum(rss_mib(pid) for pid in pids))


@contextmanager
def _step(name: str, figures: dict[str, Any], driver: int | None) -> Iterator[None]:
    console.print(f"  [bold]{name}[/bold] ...")
    started = time.monotonic()
    with Peaks(driver) as peaks:
        yield
    figures[name] = {"seconds": round(time.monotonic() - started, 2), "client_peak_mib": round(peaks.client),
                     "driver_peak_mib": round(peaks.driver), "tree_peak_mib": round(peaks.tree)}
    console.print(f"    {figures[name]}")


def measure_lake(settings: Settings, names: dict[str, str], *, tail: bool) -> dict[str, Any]:
    """The steps of the module docstring on the lake of ``settings``; ``tail``: the last 1 % is
    in the landing folder now (the incremental step), else the first 99 % is (ingest and full)."""
    figures: dict[str, Any] = {}
    with open_engine(settings) as engine:
        server = getattr(engine, "_server", None)
        process = getattr(server, "_process", None)
        driver = process.pid if process is not None else None  # Apache Spark's JVM; None: Sail, in this process
        spark = engine.spark
        if not tail:
            with _step("ingest", figures, driver):
                run_ingest(spark, settings)
            with _step("full", figures, driver):
                run_silver(spark, settings)
                for sid, name in names.items():
                    register_schema(spark, settings, sid, name)
                gold = run_gold(spark, settings)
            figures["gold_rows"] = sum(t.rows for t in gold.tables)
        else:
            with _step("incremental", figures, driver):
                run_ingest(spark, settings)
                run_silver(spark, settings)
                gold = run_gold(spark, settings)
            figures["gold_rows"] = sum(t.rows for t in gold.tables)
    return figures


def measure(messages: int, *, engine: str, master: str, lakes: tuple[str, ...] = ("local", "store"),
            spark_conf: dict[str, str] | None = None, seed: int = 5) -> dict[str, Any]:
    """The lakes of ``lakes`` (``local``: on local disk, ``store``: on the S3 server), one after the
    other, at one scale; figures by lake, then step. ``spark_conf``: more Apache Spark settings (say
    ``spark.driver.memory``), beside ``master``."""
    figures: dict[str, Any] = {"messages": messages, "engine": engine, "master": master or None}
    with tempfile.TemporaryDirectory() as tmp, (running_store() if "store" in lakes else nullcontext()):
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            generated = pool.submit(generate_landing, messages, seed, tmp).result()
        names = {str(sid): name for sid, name in generated.pop("history").history().names.items()}
        figures.update({k: v for k, v in generated.items() if k != "generate_peak_mib"})
        conf = {**({"spark.master": master} if master else {}), **(spark_conf or {})}
        base = load_settings(environ={}).with_overrides(landing=f"{tmp}/landing", keys=f"{tmp}/keys", engine=engine,
                                                        spark_conf=conf)
        roots = {"local": f"{tmp}/lake", "store": f"s3://lake/bench-{uuid.uuid4().hex[:8]}"}
        settings_of = {kind: base.with_overrides(lake_root=roots[kind]) for kind in lakes}
        os.sync()
        for kind, settings in settings_of.items():
            console.print(f"[bold]{messages:,} messages, {engine}{' ' + master if master else ''}, {kind} lake[/bold]")
            figures[kind] = measure_lake(settings, names, tail=False)
        shutil.move(Path(tmp, "held", "tail"), Path(tmp, "landing", "tail"))
        os.sync()
        for kind, settings in settings_of.items():
            console.print(f"[bold]{messages:,} messages, {kind} lake: the last 1 %[/bold]")
            figures[kind].update(measure_lake(settings, names, tail=True))
    if len(lakes) == 2 and figures["local"]["gold_rows"] != figures["store"]["gold_rows"]:
        raise SystemExit(f"the lakes disagree: {figures['local']['gold_rows']} gold rows on local disk, "
                         f"{figures['store']['gold_rows']} on the store")
    return figures


def report(results: list[dict[str, Any]]) -> None:
    table = Table("messages", "engine", "step", "lake", "seconds", "client MiB", "driver MiB", "tree MiB",
                  title="a lake on local disk and on the store, one run")
    for r in results:
        for step in ("ingest", "full", "incremental"):
            for kind in ("local", "store"):
                if kind not in r:
                    continue
                f = r[kind][step]
                table.add_row(f"{r['messages']:,}", f"{r['engine']} {r['master'] or ''}".strip(), step, kind,
                              f"{f['seconds']:.1f}", str(f["client_peak_mib"]), str(f["driver_peak_mib"]),
                              str(f["tree_peak_mib"]))
    Console().print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, action="append", help="history size; repeat for several scales")
    parser.add_argument("--engine", choices=["sail", "spark-connect"], default="sail")
    parser.add_argument("--master", default="", help="Apache Spark's master, such as local-cluster[2,1,1536]")
    parser.add_argument("--lakes", choices=["both", "local", "store"], default="both",
                        help="the lakes to measure (both: local disk, then the store)")
    add_conf_argument(parser)
    parser.add_argument("--json", type=Path, help="also write the JSON figures to this file")
    args = parser.parse_args()
    lakes = ("local", "store") if args.lakes == "both" else (args.lakes,)
    spark_conf = dict(args.conf)
    bronze.start_workers()
    results = [measure(n, engine=args.engine, master=args.master, lakes=lakes, spark_conf=spark_conf)
               for n in sorted(args.messages or [100_000])]
    report(results)
    text = json.dumps({"cores": os.cpu_count(), "results": results})
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()

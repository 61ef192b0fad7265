"""How the full materialize on Apache Spark scales with cores: ``local[1]`` against ``local[2]``.

``python -m tests.benchmarks.cores --lake DIR --names JSON --master local[1]`` runs the full
materialize (silver, every schema registered, gold) of an ingested lake in a process of its own,
with Apache Spark (``engine: spark``) at that master, and prints ``{"seconds": ...}``: the time of
the materialize only, the engine's start left out, and the CPU time the process and its
descendants (the JVM, its Python workers) spent in it: ``local[1]`` runs one task at a time, but
the JVM's compiler and collector threads and the Python worker beside the task use more than one
core. :func:`cores_figures` runs it on copies of one lake for each master, one after the other, for
the bench (``measure`` on Apache Spark).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any, Self

CORES = (1, 2)


def process_tree() -> list[int]:
    """This process and its descendants (an engine's JVM and Python workers), Linux only."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError, ValueError, IndexError):
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    tree, grew = [os.getpid()], True
    while grew:
        more = [pid for pid, parent in parents.items() if parent in tree and pid not in tree]
        tree += more
        grew = bool(more)
    return tree


def rss_mib(pid: int) -> float:
    """The resident memory of one process, in MiB (0 when it is gone). Linux only."""
    with suppress(OSError, ValueError, IndexError):
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return 0.0


class TreeSampler:
    """Calls :meth:`sample` every ``every`` seconds in a thread while in its ``with`` block, with
    the processes ``processes`` gives (default :func:`process_tree`), looked up again each second (a
    look-up reads every process's ``stat``). Linux only."""

    def __init__(self, every: float, processes: Callable[[], list[int]] = process_tree) -> None:
        self._every, self._processes, self._stop = every, processes, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self, pids: list[int]) -> None:
        """One sample of ``pids`` (this process first)."""
        raise NotImplementedError

    def _run(self) -> None:
        pids, looked = self._processes(), time.monotonic()
        while not self._stop.wait(self._every):
            if time.monotonic() - looked > 1.0:
                pids, looked = self._processes(), time.monotonic()
            self.sample(pids)


def tree_cpu_seconds() -> float:
    """The CPU time (user and system) of this process and its descendants so far, those that ended
    and were waited for included (a process's ``cutime`` and ``cstime``), in seconds. Linux only
    (0.0 where there is no ``/proc``)."""
    ticks = 0
    for pid in process_tree():
        with suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += sum(int(f) for f in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def full_seconds(lake: str, names: dict[str, str], master: str) -> tuple[float, dict[str, float], float]:
    """Seconds of the full materialize of the ingested lake ``lake`` on Apache Spark at ``master``,
    its timeline (step -> seconds, silver's then gold's), and the CPU seconds of this process and
    its descendants in it (:func:`tree_cpu_seconds`)."""
    from lakehouse.config import load_settings
    from lakehouse.spark.session import open_engine
    from pipelines.gold import run_gold
    from pipelines.register import register_schema
    from pipelines.silver import run_silver

    settings = load_settings(environ={}).with_overrides(lake_root=lake, engine="spark",
                                                        spark_conf={"spark.master": master})
    with open_engine(settings) as engine:
        started, cpu = time.monotonic(), tree_cpu_seconds()
        silver = run_silver(engine.spark, settings)
        for sid, name in names.items():
            register_schema(engine.spark, settings, sid, name)
        gold = run_gold(engine.spark, settings)
        return (time.monotonic() - started, {**{f"silver: {k}": v for k, v in silver.steps.items()},
                                             **{f"gold: {k}": v for k, v in gold.steps.items()}},
                tree_cpu_seconds() - cpu)


def child_env() -> dict[str, str]:
    """This process's environment for a bench process of its own: without what marks a Spark
    Connect client (``SPARK_CONNECT_MODE_ENABLED``, ``SPARK_REMOTE``), which is this process's."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_CONNECT", "SPARK_REMOTE"))}


def cores_figures(lake: str, names: dict[str, str]) -> dict[str, Any]:
    """The full materialize of ``lake`` (left as it is) on Apache Spark at ``local[n]`` for each of :data:`CORES`,
    each in a process of its own on a copy of it: ``full_local_<n>_seconds``, ``_timeline`` (step ->
    seconds) and ``_cores_busy`` (CPU seconds of the process tree per second of the run), and
    ``cores_speedup`` (one core's time over two cores').

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
            figures[f"full_local_{cores}_cores_busy"] = round(measured["cpu_seconds"] / measured["seconds"], 2)
    figures["cores_speedup"] = round(figures["full_local_1_seconds"] / figures["full_local_2_seconds"], 2)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lake", required=True, type=Path, help="an ingested lake (changed in place)")
    parser.add_argument("--names", required=True, help="JSON: schema id -> the name it is registered under")
    parser.add_argument("--master", required=True, help="Spark master, such as local[1]")
    args = parser.parse_args()
    seconds, steps, cpu = full_seconds(str(args.lake), json.loads(args.names), args.master)
    print(json.dumps({"seconds": seconds, "steps": steps, "cpu_seconds": cpu}))


if __name__ == "__main__":
    main()

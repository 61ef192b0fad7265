"""``make bench``: how fast, how it scales, against what.

``python -m tests.benchmarks --messages 100000 --messages 1000000 [--json FILE]``. For each
scale, one realistic generated history (:meth:`tests.simulate.Knobs.realistic`: many
authors, three schemas with eight migrations each, creates/updates/deletes at mixed versions) is
measured on embedded Sail, then on Apache Spark with Delta Lake (``engine: spark``, in a process of
its own: PySpark cannot hold a classic session beside Sail's Spark Connect one), in this order, on
one lake per engine:

1. ``ingest``: the first 99 % of the lines, full verification, entries per second; and the same
   machine's bound measured in the same run: ed25519 verifications per second on all cores, the
   higher of a measure right before and one right after the ingest;
2. ``full``: silver and gold of those (every schema registered), messages per second and the peak
   resident memory during that step of this process and its children (Sail runs in this process;
   Apache Spark's JVM and Python workers are its children), and the most of it sampled in each
   step of the run's timeline. The history is generated in a process of its own, which writes
   its lines to landing files and hands back only the schema logs' (for the revert), so that
   the figures are the pipelines';
3. ``incremental``: materialize (silver and gold) of the last 1 % of the lines (but the last
   0.01 %), as a ratio of ``full``, the materialize of the first 99 %; the ingest of those lines
   is timed on its own (``incremental_ingest``), and both sides with their ingest give a second
   ratio; then the same on a copy of the lake taken before it, with the change feed off
   (``change_feed: off``): the feed's share of the incremental run; then ``trickle``, the last
   0.01 % materialized on both lakes: the feed's seconds in a run with few changes;
4. ``revert``: a revert near the head (:func:`revert_line`) ingested and materialized (time travel
   plus replay), as a ratio of ``rebuild``, silver and gold recomputed from bronze; between them
   ``optimize``, what those runs left compacted (:mod:`pipelines.optimize`); then
   ``small_files``: the first :data:`SMALL_FILES` lines ingested into fresh lakes as that many
   one-line files and as one file (:func:`small_files_figures`), the per-file cost of an ingest;
5. ``engines``: each step's time on Apache Spark over its time on Sail, and whether both engines
   wrote the same number of gold rows; how Apache Spark scales with cores: the full materialize
   again at ``local[1]`` and at ``local[2]``, each in a process of its own on a copy of the
   ingested lake (:mod:`tests.benchmarks.cores`); and the pure-Python reference model
   (:func:`lakehouse.core.reference.reference`, lines to gold tables) against ingest + ``full``.

Prints a table per scale, then a growth table (how each figure grows from the smallest scale to the
others), then one JSON object with everything; ``--json`` also writes it to a file.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey
from rich.console import Console
from rich.table import Table

from lakehouse.config import Settings, load_settings
from lakehouse.core.messages import SchemaId, SchemaRevert
from lakehouse.core.reference import reference
from lakehouse.core.schemas import SchemaVersions
from lakehouse.spark import bronze
from lakehouse.spark.lake import load_schemas
from lakehouse.spark.session import open_engine
from pipelines.gold import run_gold
from pipelines.ingest import run_ingest
from pipelines.optimize import run_optimize
from pipelines.register import register_schema
from pipelines.silver import run_silver
from tests.benchmarks.cores import TreeSampler, child_env, cores_figures, rss_mib
from tests.benchmarks.cores import process_tree as _tree
from tests.simulate import History, Knobs, schema_line, simulate, write_landing

console = Console(stderr=True)


def add_conf_argument(parser: argparse.ArgumentParser) -> None:
    """Give a bench's command line ``--conf KEY=VALUE`` (repeatable): Apache Spark settings more for
    its run, which its settings (built from an empty environment) would not take from
    ``LAKEHOUSE_SPARK_CONF``. ``args.conf`` is then a list of (key, value) pairs: ``dict(args.conf)``.
    A value without ``=`` is a usage error that names it."""
    def setting(text: str) -> tuple[str, str]:
        key, equals, value = text.partition("=")
        if not equals or not key:
            raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
        return key, value

    parser.add_argument("--conf", action="append", default=[], type=setting, metavar="KEY=VALUE",
                        help="an Apache Spark setting more, such as spark.driver.memory=1g; repeat for several")


def print_figures(table: Any, figures: Any, path: Path | None) -> None:
    """A bench's end: its rich ``table`` on stderr, its ``figures`` as JSON on stdout, and in the
    file ``path`` too when given (``--json``)."""
    console.print(table)
    print(json.dumps(figures, indent=2))
    if path is not None:
        path.write_text(json.dumps(figures, indent=2))


def verify_bound(seconds: float = 3.0) -> float:
    """ed25519 verifications per second on all cores (one thread per core, pynacl releases the GIL)."""
    key = SigningKey(b"\x07" * 32)
    signed = key.sign(b"x" * 200)
    verify = key.verify_key.verify

    def work(deadline: float) -> int:
        n = 0
        while time.monotonic() < deadline:
            for _ in range(200):
                verify(signed)
            n += 200
        return n

    cores = os.cpu_count() or 1
    deadline = time.monotonic() + seconds
    with ThreadPoolExecutor(cores) as pool:
        total = sum(pool.map(work, [deadline] * cores))
    return total / seconds


def _peak_rss_reset() -> None:
    """Reset the peak resident set size of this process and its descendants (Linux ``clear_refs``)."""
    for pid in _tree():
        with suppress(OSError):
            Path(f"/proc/{pid}/clear_refs").write_text("5")


def _peak_rss_mib() -> float | None:
    """The sum of the peak resident set sizes, since the last reset, of this process and its
    descendants, in MiB (an upper bound of their peak together; None off Linux)."""
    total, found = 0, False
    for pid in _tree():
        with suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
                    found = True
    return round(total / 1024, 1) if found else None


class _Sampler(TreeSampler):
    """The resident memory of this process and its descendants together (MiB), sampled every
    ``every`` seconds while in its ``with`` block (:class:`tests.benchmarks.cores.TreeSampler`):
    ``samples``, (time, MiB) pairs."""

    def __init__(self, every: float = 0.1) -> None:
        super().__init__(every)
        self.samples: list[tuple[float, float]] = []

    def sample(self, pids: list[int]) -> None:
        self.samples.append((time.monotonic(), sum(rss_mib(pid) for pid in pids)))

    def peaks(self, begun: float, first: dict[str, float], ended: float, last: dict[str, float]) -> dict[str, float]:
        """The highest sample in each step of two timelines: ``first``'s steps (name -> seconds)
        from ``begun`` on, ``last``'s ending at ``ended`` (what runs between them is in neither)."""
        windows, at = {}, begun
        for name, seconds in first.items():
            windows[name], at = (at, at + seconds), at + seconds
        at = ended - sum(last.values())
        for name, seconds in last.items():
            windows[name], at = (at, at + seconds), at + seconds
        # a step shorter than the sampling interval gets the first sample after it
        return {name: round(max((mib for t, mib in self.samples if a <= t <= b + self._every), default=0.0))
                for name, (a, b) in windows.items()}


@contextmanager
def _step(name: str, figures: dict[str, Any]) -> Iterator[None]:
    """Time a step into ``figures[<name>_seconds]`` and its peak memory into ``<name>_peak_mib``."""
    console.print(f"[bold]{name}[/bold] ...")
    _peak_rss_reset()
    started = time.monotonic()
    yield
    figures[f"{name}_seconds"] = round(time.monotonic() - started, 2)
    figures[f"{name}_peak_mib"] = _peak_rss_mib()
    console.print(f"  {name}: {figures[f'{name}_seconds']} s")


def schema_history(history: History) -> History:
    """``history`` with only what :func:`revert_line` needs: the lines of its schema authors, their
    keys, the schema names."""
    authors = {sid.author.hex() for sid in history.names}
    lines = tuple(line for line in history.lines if not isinstance(line, str) and line["entry"][2:66] in authors)
    keys = {author: key for author, key in history.keys.items() if author in authors}
    return History(lines, history.names, history.claims, keys)


def landing_lines(folder: Path) -> list[str]:
    """The lines of the landing files at the top of ``folder`` (``landing-*.jsonl``, in order) as
    text: what :func:`tests.simulate.write_landing` wrote of them, which the reference model reads
    as it read the lines themselves."""
    return [line.rstrip("\n") for path in sorted(folder.glob("landing-*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines()]


def generate_landing(messages: int, seed: int, folder: str) -> dict[str, Any]:
    """The bench's history (:meth:`Knobs.realistic`), written as landing files under ``folder``:
    the first 99 % in ``landing/``, the tail but its last 0.01 % in ``held/tail/``, those in
    ``held/trickle/`` (moved into ``landing/`` when their step comes).

    Returns:
        The lines' counts (``lines``, ``base_lines``, ``tail_lines``, ``trickle_lines``), this
        process's peak resident memory (``generate_peak_mib``) and the history's
        :func:`schema_history` (``history``), its keys as seeds (a key does not pickle).
    """
    history = simulate(Knobs.realistic(messages), seed=seed)
    lines = history.lines
    cut = len(lines) - max(1, len(lines) // 100)
    # the last lines of the tail, 0.01 % of the history, arrive on their own after it: the change
    # feed's cost for a run with few changes into large tables
    trickle_cut = len(lines) - max(1, len(lines) // TRICKLE)
    write_landing(lines[:cut], Path(folder, "landing"))
    write_landing(lines[cut:trickle_cut], Path(folder, "held", "tail"))
    write_landing(lines[trickle_cut:], Path(folder, "held", "trickle"))
    kept = schema_history(history)
    return {"lines": len(lines), "base_lines": cut, "tail_lines": trickle_cut - cut, "trickle_lines": len(lines) - trickle_cut,
            "generate_peak_mib": _own_peak_mib(),
            "history": _Seeded(kept.lines, dict(kept.names), {a: bytes(k) for a, k in kept.keys.items()})}


@dataclass(frozen=True)
class _Seeded:
    """A :func:`schema_history` as it crosses processes: signing keys as their seeds."""

    lines: tuple[Any, ...]
    names: dict[SchemaId, str]
    seeds: dict[str, bytes]

    def history(self) -> History:
        return History(self.lines, self.names, Counter(), {a: SigningKey(seed) for a, seed in self.seeds.items()})


def _own_peak_mib() -> float | None:
    """This process's peak resident memory (``VmHWM``), in MiB; None off Linux."""
    with suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


def revert_line(history: History, schemas: dict[SchemaId, SchemaVersions]) -> tuple[dict[str, str], str, int]:
    """The landing line of a revert near the head: of the schema with the most gold versions, to its
    latest earlier gold version.

    Raises:
        SystemExit: no schema has two gold versions.
    """
    choices = [(len(sv.gold_versions()), sv.gold_versions()[-2], sid) for sid, sv in schemas.items()
               if len(sv.gold_versions()) > 1]
    if not choices:
        raise SystemExit("no schema has an earlier gold version to revert to")
    _, target, sid = max(choices, key=lambda c: (c[0], c[1], str(c[2])))
    return schema_line(history, sid, SchemaRevert(target)), str(sid), target


TRICKLE = 10_000  # the trickle step's lines: 1 of this many of the history's

SMALL_FILES = 2000
"""Landing files of one line each in the small-files step: what a publisher writes, one per message."""


def small_files_figures(spark: Any, settings: Settings, folder: Path, lines: list[str]) -> dict[str, Any]:
    """The per-file cost of an ingest: the first :data:`SMALL_FILES` lines of the history
    ingested into a fresh lake as that many one-line files, and, into another, as one file.

    Returns:
        ``one_file_ingest_seconds``, ``small_files_ingest_seconds`` and their ratio
        ``small_files_over_one_file``.
    """
    lines = lines[:SMALL_FILES]
    out: dict[str, Any] = {}
    for name, files in (("one_file", [lines]), ("small_files", [[line] for line in lines])):
        lake = settings.with_overrides(lake_root=str(folder / name / "lake"), landing=str(folder / name / "landing"))
        landing = Path(lake.landing)
        landing.mkdir(parents=True)
        for i, chunk in enumerate(files):
            (landing / f"message-{i:05d}.jsonl").write_text("".join(f"{line}\n" for line in chunk), encoding="utf-8")
        os.sync()
        with _step(f"{name}_ingest", out):
            summary = run_ingest(spark, lake)
        assert summary.new == len(lines), (name, summary)
        shutil.rmtree(folder / name)
    out["small_files_over_one_file"] = round(out["small_files_ingest_seconds"] / out["one_file_ingest_seconds"], 2)
    return {k: v for k, v in out.items() if not k.endswith("_peak_mib")}


def measure(messages: int, *, seed: int = 5, engine: str = "sail", oracle: bool = True) -> dict[str, Any]:
    """Every figure of steps 1-4 of the module docstring at one scale on one engine (``sail`` or
    ``spark``), and the reference model's (``oracle``). Returns them by name (seconds, ratios, MiB)."""
    figures: dict[str, Any] = {"messages": messages, "engine": engine}
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(environ={}).with_overrides(lake_root=f"{tmp}/lake", landing=f"{tmp}/landing",
                                                            keys=f"{tmp}/keys", engine=engine)
        root = settings.lake_root
        # generated in a process of its own, which writes the lines to landing files and hands back
        # only the schema logs the revert step signs after: the memory figures are the
        # pipelines', not the generator's (a 1,000,000-message history holds about 1 GB)
        with _step("generate", figures):
            spawn = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
                generated = pool.submit(generate_landing, messages, seed, tmp).result()
        figures.pop("generate_peak_mib")  # this process's: the generator's comes with what it gave
        history = generated.pop("history").history()
        figures.update(generated)
        # landing files arrive before an ingest reads them: flushed to disk here, or the kernel
        # writes them back during the timed step (about 0.2 s of a 3.4 s ingest, measured)
        os.sync()
        bronze.start_workers()  # as `lakehouse ingest` does: the checking processes start with the engine
        with open_engine(settings) as running:
            spark = running.spark
            # the bound right before and right after the ingest: this machine's speed drifts by
            # tens of percent over minutes, and a slow moment lowers a measured bound, so the
            # ingest is compared with the higher of the two
            before = verify_bound()
            with _step("ingest", figures):
                run_ingest(spark, settings)
            after = verify_bound()
            figures["verify_bound_per_second"] = round(max(before, after))
            figures["verify_bound_before_after"] = [round(before), round(after)]
            figures["ingest_entries_per_second"] = round(figures["base_lines"] / figures["ingest_seconds"])
            figures["ingest_share_of_bound"] = round(figures["ingest_entries_per_second"]
                                                     / figures["verify_bound_per_second"], 2)
            if figures["engine"] == "spark":  # the ingested lake, for the full run at one and two cores
                shutil.copytree(root, f"{tmp}/lake_ingested")
            with _step("full", figures), _Sampler() as sampler:
                begun = time.monotonic()
                silver = run_silver(spark, settings)
                for sid, name in history.names.items():
                    register_schema(spark, settings, str(sid), name)
                gold = run_gold(spark, settings)
                ended = time.monotonic()
            # the timeline of the full run: where its seconds went, step by step
            figures["full_timeline"] = {**{f"silver: {k}": v for k, v in silver.steps.items()},
                                        **{f"gold: {k}": v for k, v in gold.steps.items()}}
            # where the memory goes: the highest resident memory of the process tree in each step
            figures["full_step_peak_mib"] = sampler.peaks(
                begun, {f"silver: {k}": v for k, v in silver.steps.items()},
                ended, {f"gold: {k}": v for k, v in gold.steps.items()})
            figures["full_messages_per_second"] = round(figures["base_lines"] / figures["full_seconds"])
            figures["gold_rows"] = sum(t.rows for t in gold.tables)

            # the same lake without the change feed, for the incremental run's cost of it
            shutil.copytree(root, f"{tmp}/lake_without_feed")
            shutil.move(Path(tmp, "held", "tail"), Path(tmp, "landing", "tail"))
            os.sync()
            with _step("incremental_ingest", figures):
                run_ingest(spark, settings)
            with _step("incremental", figures):
                silver = run_silver(spark, settings)
                gold = run_gold(spark, settings)
            figures["incremental_timeline"] = {**{f"silver: {k}": v for k, v in silver.steps.items()},
                                               **{f"gold: {k}": v for k, v in gold.steps.items()}}
            without = settings.with_overrides(lake_root=f"{tmp}/lake_without_feed", change_feed="off")
            run_ingest(spark, without)
            with _step("incremental_without_feed", figures):
                run_silver(spark, without)
                run_gold(spark, without)
            figures["feed_share_of_incremental"] = round(
                1 - figures["incremental_without_feed_seconds"] / figures["incremental_seconds"], 3)
            shutil.move(Path(tmp, "held", "trickle"), Path(tmp, "landing", "trickle"))
            os.sync()
            for lake, step in ((settings, "trickle"), (without, "trickle_without_feed")):
                run_ingest(spark, lake)
                with _step(step, figures):
                    run_silver(spark, lake)
                    run_gold(spark, lake)
            shutil.rmtree(f"{tmp}/lake_without_feed")
            figures["feed_seconds_of_trickle"] = round(
                figures["trickle_seconds"] - figures["trickle_without_feed_seconds"], 2)
            # materialize against materialize (the goal), and with each side's ingest
            figures["incremental_over_full"] = round(figures["incremental_seconds"] / figures["full_seconds"], 3)
            figures["incremental_with_ingest_over_full_with_ingest"] = round(
                (figures["incremental_ingest_seconds"] + figures["incremental_seconds"])
                / (figures["ingest_seconds"] + figures["full_seconds"]), 3)

            if oracle:
                schemas = load_schemas(spark, root)
                names = {sid: name for sid, name in history.names.items() if sid in schemas}

            line, schema, target = revert_line(history, load_schemas(spark, root))
            Path(tmp, "landing", "revert.jsonl").write_text(json.dumps(line) + "\n")
            os.sync()
            with _step("revert", figures):
                run_ingest(spark, settings)
                silver = run_silver(spark, settings)
                gold = run_gold(spark, settings)
            figures.update(revert_schema=schema, revert_target=target, revert_mode=gold.modes.get(schema),
                           revert_instance_logs_judged=silver.instance_logs_judged,
                           revert_instances_judged_again=silver.instances_judged_again,
                           revert_cascade_region=gold.cascade_region)
            figures["revert_timeline"] = {**{f"silver: {k}": v for k, v in silver.steps.items()},
                                          **{f"gold: {k}": v for k, v in gold.steps.items()}}
            # what those runs left to compact, compacted (`lakehouse optimize`)
            with _step("optimize", figures):
                optimized = run_optimize(spark, settings)
            figures.update(optimize_commits=optimized.commits,
                           optimize_files_rewritten=sum(c.files_rewritten for c in optimized.compacted),
                           optimize_files_after=sum(c.files_after for c in optimized.compacted))
            with _step("rebuild", figures):
                run_silver(spark, settings, rebuild=True)
                run_gold(spark, settings, rebuild=True)
            figures["revert_over_rebuild"] = round(figures["revert_seconds"] / figures["rebuild_seconds"], 3)
            figures.update(small_files_figures(spark, settings, Path(tmp, "small"),
                                               landing_lines(Path(tmp, "landing"))))
        if figures["engine"] == "spark":  # the engine stopped: the two runs have the machine
            console.print("[bold]full at local[1] and local[2][/bold] ...")
            figures.update(cores_figures(f"{tmp}/lake_ingested", {str(sid): name for sid, name in history.names.items()}))
            console.print(f"  local[1] / local[2]: {figures['cores_speedup']}")
        # the reference reads the lines of the first ingest back, as the landing files give them
        read_back = landing_lines(Path(tmp, "landing")) if oracle else []

    if oracle:
        with _step("reference", figures):
            ref = reference(read_back)
            tables = ref.gold(names)
        figures["reference_over_engine"] = round(
            figures["reference_seconds"] / (figures["ingest_seconds"] + figures["full_seconds"]), 2)
        figures["reference_gold_rows"] = sum(len(t) for t in tables.values())
    return figures


_SHOWN = [
    ("ingest_entries_per_second", "ingest, entries/s (full verification)"),
    ("verify_bound_per_second", "ed25519 bound, verifications/s on all cores"),
    ("ingest_share_of_bound", "ingest / bound (goal >= 0.60)"),
    ("full_seconds", "full materialize (silver + gold), s"),
    ("full_messages_per_second", "full materialize, messages/s"),
    ("full_peak_mib", "full materialize, peak memory of the process and its children, MiB"),
    ("incremental_ingest_seconds", "ingest of +1 % of the history, s"),
    ("incremental_seconds", "incremental materialize of it (silver + gold), s"),
    ("incremental_over_full", "incremental / full materialize (goal <= 0.05)"),
    ("incremental_without_feed_seconds", "the same incremental materialize without the change feed, s"),
    ("feed_share_of_incremental", "the change feed's share of the incremental materialize"),
    ("incremental_with_ingest_over_full_with_ingest", "the same, each with its ingest"),
    ("trickle_seconds", "materialize of +0.01 % more (silver + gold), s"),
    ("trickle_without_feed_seconds", "the same without the change feed, s"),
    ("feed_seconds_of_trickle", "the change feed's seconds of it"),
    ("revert_seconds", "revert near the head, s"),
    ("optimize_seconds", "optimize after those runs (every table compacted), s"),
    ("optimize_peak_mib", "optimize, peak memory of the process and its children, MiB"),
    ("optimize_files_rewritten", "optimize: data files written again"),
    ("optimize_files_after", "optimize: the files they became"),
    ("rebuild_seconds", "full rebuild, s"),
    ("revert_over_rebuild", "revert / rebuild (goal <= 0.10)"),
    ("revert_instance_logs_judged", "revert: instance logs judged again (whole or in part)"),
    ("revert_instances_judged_again", "revert: instances judged again in logs judged in part"),
    ("revert_cascade_region", "revert: cascade verdicts found again (None: every edge read)"),
    ("one_file_ingest_seconds", f"ingest of {SMALL_FILES:,} lines in one file, s"),
    ("small_files_ingest_seconds", f"ingest of the same lines in {SMALL_FILES:,} one-line files, s"),
    ("small_files_over_one_file", "the same, many files / one file"),
    ("spark_ingest_seconds", "Apache Spark: ingest, s"),
    ("spark_full_seconds", "Apache Spark: full materialize, s"),
    ("spark_full_peak_mib", "Apache Spark: full materialize, peak memory of the JVM and workers, MiB"),
    ("spark_incremental_seconds", "Apache Spark: incremental materialize, s"),
    ("spark_revert_seconds", "Apache Spark: revert, s"),
    ("spark_rebuild_seconds", "Apache Spark: rebuild, s"),
    ("spark_full_local_1_seconds", "Apache Spark: full materialize at local[1], s"),
    ("spark_full_local_2_seconds", "Apache Spark: full materialize at local[2], s"),
    ("spark_cores_speedup", "Apache Spark: full at local[1] / at local[2] (goal >= 1.6)"),
    ("spark_full_local_1_cores_busy", "Apache Spark: full at local[1], CPU seconds per second (JVM and workers)"),
    ("spark_full_local_2_cores_busy", "Apache Spark: full at local[2], CPU seconds per second (JVM and workers)"),
    ("spark_over_sail_ingest", "Apache Spark / Sail: ingest"),
    ("spark_over_sail_full", "Apache Spark / Sail: full materialize"),
    ("spark_over_sail_incremental", "Apache Spark / Sail: incremental"),
    ("spark_over_sail_revert", "Apache Spark / Sail: revert"),
    ("spark_over_sail_rebuild", "Apache Spark / Sail: rebuild"),
    ("reference_seconds", "reference model, lines to gold, s"),
    ("reference_over_engine", "reference / (ingest + full)"),
]
_GROWTH = ["ingest_seconds", "full_seconds", "full_peak_mib", "incremental_ingest_seconds", "incremental_seconds",
           "revert_seconds", "optimize_seconds", "rebuild_seconds", "spark_full_seconds", "spark_incremental_seconds",
           "reference_seconds"]


def report(results: list[dict[str, Any]]) -> None:
    """Print the figures per scale, and how each grows from the smallest scale (1.0 = linear)."""
    out = Console()
    table = Table(title=f"lens-lakehouse benchmarks ({os.cpu_count()} cores)")
    table.add_column("measure")
    for r in results:
        table.add_column(f"{r['messages']:,} messages", justify="right")
    for key, label in _SHOWN:
        table.add_row(label, *(f"{r[key]:,}" if isinstance(r.get(key), (int, float)) else str(r.get(key, "-"))
                               for r in results))
    out.print(table)
    for run, title in (("full", "full materialize, step by step (s)"),
                       ("full_step_peak", "full materialize, the most resident memory of the process "
                                          "and its children in each step (MiB, sampled every 0.1 s)"),
                       ("incremental", "incremental materialize, step by step (s)"),
                       ("revert", "revert materialize, step by step (s)")):
        timeline = Table(title=title)
        timeline.add_column("step")
        suffix = "mib" if run.endswith("peak") else "timeline"
        columns = [(r, key) for r in results for key in (f"{run}_{suffix}", f"spark_{run}_{suffix}") if key in r]
        steps = list(dict.fromkeys(step for r, key in columns for step in r[key]))
        for r, key in columns:
            engine = "Apache Spark" if key.startswith("spark") else r.get("engine", "sail")
            timeline.add_column(f"{r['messages']:,}, {engine}", justify="right")
        for step in steps:
            timeline.add_row(step, *(str(r[key].get(step, "-")) for r, key in columns))
        if steps:
            out.print(timeline)
    if len(results) > 1:
        first = results[0]
        growth = Table(title=f"growth from {first['messages']:,} messages (time ratio / size ratio; 1.0 = linear)")
        growth.add_column("measure")
        for r in results[1:]:
            growth.add_column(f"x{r['messages'] / first['messages']:g}", justify="right")
        for key in _GROWTH:
            cells = []
            for r in results[1:]:
                a, b = first.get(key), r.get(key)
                if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a:
                    cells.append(f"{b / a / (r['messages'] / first['messages']):.2f}")
                else:
                    cells.append("-")
            growth.add_row(key, *cells)
        out.print(growth)


STEPS = ("ingest", "full", "incremental", "revert", "rebuild")


def on_apache_spark(messages: int, seed: int = 5) -> dict[str, Any]:
    """:func:`measure` on Apache Spark, in a process of its own (``--engine spark``)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "spark.json")
        env = child_env()
        done = subprocess.run([sys.executable, "-m", "tests.benchmarks", "--engine", "spark", "--no-reference",
                               "--messages", str(messages), "--seed", str(seed), "--json", str(out)], env=env,
                              check=False)
        if done.returncode != 0:
            raise SystemExit(f"the Apache Spark run at {messages:,} messages failed (exit {done.returncode})")
        result: dict[str, Any] = json.loads(out.read_text())["results"][0]
        return result


def beside(sail: dict[str, Any], spark: dict[str, Any]) -> dict[str, Any]:
    """Sail's figures with Apache Spark's (``spark_*``) and each step's Apache Spark / Sail ratio.

    Raises:
        SystemExit: the engines wrote different numbers of gold rows.
    """
    if sail["gold_rows"] != spark["gold_rows"]:
        raise SystemExit(f"Apache Spark wrote {spark['gold_rows']} gold rows, Sail {sail['gold_rows']}: "
                         "the engines disagree")
    merged = dict(sail)
    merged.update({f"spark_{k}": v for k, v in spark.items() if k not in ("messages", "engine")})
    for step in STEPS:
        merged[f"spark_over_sail_{step}"] = round(spark[f"{step}_seconds"] / sail[f"{step}_seconds"], 2)
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, action="append", help="history size; repeat for several scales")
    parser.add_argument("--json", type=Path, help="also write the JSON figures to this file")
    parser.add_argument("--engine", choices=["both", "sail", "spark"], default="both",
                        help="the engines to measure (both: Sail here, Apache Spark in a process of its own)")
    parser.add_argument("--seed", type=int, default=5, help="the generated history's seed")
    parser.add_argument("--no-reference", action="store_true", help="skip the reference model")
    args = parser.parse_args()
    results = []
    for n in sorted(args.messages or [100_000]):
        if args.engine == "spark":
            results.append(measure(n, seed=args.seed, engine="spark", oracle=False))
            continue
        sail = measure(n, seed=args.seed, oracle=not args.no_reference)
        results.append(beside(sail, on_apache_spark(n, args.seed)) if args.engine == "both" else sail)
    document = {"cores": os.cpu_count(), "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
                                                             / 2**30, 1), "results": results}
    report(results)
    text = json.dumps(document)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()

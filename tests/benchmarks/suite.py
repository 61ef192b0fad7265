"""``make bench``: how fast, how it scales, against what.

``python -m tests.benchmarks --messages 100000 --messages 1000000 [--json FILE]``. For each
scale, one realistic generated history (:meth:`lakehouse.publish.simulate.Knobs.realistic`: many
authors, three schemas with eight migrations each, creates/updates/deletes at mixed versions) is
measured on the embedded engine, in this order, on one lake:

1. ``ingest``: the first 99 % of the lines, full verification, entries per second; and the same
   machine's bound measured in the same run: ed25519 verifications per second on all cores, the
   higher of a measure right before and one right after the ingest;
2. ``full``: silver and gold of those (every schema registered), messages per second and the
   process's peak resident memory during that step (the embedded engine runs in this process);
3. ``incremental``: materialize (silver and gold) of the last 1 % of the lines, as a ratio of
   ``full``, the materialize of the first 99 %; the ingest of those lines is timed on its own
   (``incremental_ingest``), and both sides with their ingest give a second ratio;
4. ``revert``: a revert near the head (:func:`revert_line`) ingested and materialized (time travel
   plus replay), as a ratio of ``rebuild``, silver and gold recomputed from bronze;
5. ``engines``: the full gold computation on parquet (:mod:`tests.benchmarks.classic`) on the
   embedded engine and on Apache Spark classic in a subprocess; and the pure-Python reference model
   (:func:`lakehouse.core.reference.reference`, lines to gold tables) against ingest + ``full``.

Prints a table per scale, then a growth table (how each figure grows from the smallest scale to the
others), then one JSON object with everything; ``--json`` also writes it to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

from nacl.signing import SigningKey
from rich.console import Console
from rich.table import Table

from lakehouse.config import load_settings
from lakehouse.core.entries import decode_entry, lipmaa, sign_entry, skiplink_required, yasmf_hash
from lakehouse.core.messages import SchemaId, SchemaRevert, encode_message
from lakehouse.core.reference import reference
from lakehouse.core.schemas import SchemaVersions
from lakehouse.publish.simulate import History, Knobs, simulate, write_landing
from lakehouse.spark import bronze
from lakehouse.spark.session import open_engine
from pipelines.gold import applied_instance_messages, cascade_signature, register_schema, run_gold
from pipelines.ingest import run_ingest
from pipelines.silver import load_schemas, run_silver
from tests.benchmarks.classic import gold_on_parquet

T = TypeVar("T")
console = Console(stderr=True)


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
    """Reset this process's peak resident set size (Linux ``clear_refs``); a no-op elsewhere."""
    with suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _peak_rss_mib() -> float | None:
    """This process's peak resident set size since the last reset, in MiB (None off Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


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


def revert_line(history: History, schemas: dict[SchemaId, SchemaVersions]) -> tuple[dict[str, str], str, int]:
    """The landing line of a revert near the head: of the schema with the most gold versions, to the
    latest earlier gold version whose cascade fields are the current ones (so that gold takes the
    time travel path; another target would fold every instance again, see
    :func:`pipelines.gold.cascade_signature`).

    Raises:
        SystemExit: no schema has such a target.
    """
    choices = []
    for sid, sv in schemas.items():
        now = cascade_signature(sv, sv.current_version)
        targets = [v for v in sv.gold_versions()[:-1] if cascade_signature(sv, v) == now]
        if targets:
            choices.append((len(sv.gold_versions()), targets[-1], sid))
    if not choices:
        raise SystemExit("no schema has an earlier gold version with the current cascade fields")
    _, target, sid = max(choices, key=lambda c: (c[0], c[1], str(c[2])))
    hashes: dict[int, bytes] = {}
    for line in history.lines:
        if isinstance(line, str):
            continue
        entry = decode_entry(bytes.fromhex(line["entry"]))
        if entry.author == sid.author and entry.log_id == sid.log_id:
            hashes[entry.seq_num] = yasmf_hash(bytes.fromhex(line["entry"]))
    seq = max(hashes) + 1
    payload = encode_message(SchemaRevert(target))
    data = sign_entry(history.keys[sid.author.hex()], log_id=sid.log_id, seq_num=seq, payload=payload,
                      backlink=hashes[seq - 1], skiplink=hashes[lipmaa(seq)] if skiplink_required(seq) else None)
    return {"entry": data.hex(), "payload": payload.hex()}, str(sid), target


def _timed(fn: Callable[[], T]) -> tuple[T, float]:
    started = time.monotonic()
    result = fn()
    return result, time.monotonic() - started


def measure(messages: int, *, seed: int = 5, classic: bool = True, oracle: bool = True) -> dict[str, Any]:
    """Every figure of the module docstring at one scale. Returns them by name (seconds, ratios, MiB)."""
    figures: dict[str, Any] = {"messages": messages}
    with _step("generate", figures):
        history = simulate(Knobs.realistic(messages), seed=seed)
    lines = list(history.lines)
    cut = len(lines) - max(1, len(lines) // 100)
    base, tail = lines[:cut], lines[cut:]
    figures.update(lines=len(lines), base_lines=len(base), tail_lines=len(tail))
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(environ={}).with_overrides(lake_root=f"{tmp}/lake", landing=f"{tmp}/landing",
                                                            keys=f"{tmp}/keys")
        root = str(settings.lake_root)
        write_landing(base, Path(tmp, "landing"))
        # landing files arrive before an ingest reads them: flushed to disk here, or the kernel
        # writes them back during the timed step (about 0.2 s of a 3.4 s ingest, measured)
        os.sync()
        bronze.start_workers()  # as `lakehouse ingest` does: the checking processes start with the engine
        with open_engine(settings) as engine:
            spark = engine.spark
            # the bound right before and right after the ingest: this machine's speed drifts by
            # tens of percent over minutes, and a slow moment lowers a measured bound, so the
            # ingest is compared with the higher of the two
            before = verify_bound()
            with _step("ingest", figures):
                run_ingest(spark, settings)
            after = verify_bound()
            figures["verify_bound_per_second"] = round(max(before, after))
            figures["verify_bound_before_after"] = [round(before), round(after)]
            figures["ingest_entries_per_second"] = round(len(base) / figures["ingest_seconds"])
            figures["ingest_share_of_bound"] = round(figures["ingest_entries_per_second"]
                                                     / figures["verify_bound_per_second"], 2)
            with _step("full", figures):
                run_silver(spark, settings)
                for sid, name in history.names.items():
                    register_schema(spark, settings, str(sid), name)
                gold = run_gold(spark, settings)
            figures["full_messages_per_second"] = round(len(base) / figures["full_seconds"])
            figures["gold_rows"] = sum(t.rows for t in gold.tables)

            write_landing(tail, Path(tmp, "landing", "tail"))
            os.sync()
            with _step("incremental_ingest", figures):
                run_ingest(spark, settings)
            with _step("incremental", figures):
                run_silver(spark, settings)
                run_gold(spark, settings)
            # materialize against materialize (the goal), and with each side's ingest
            figures["incremental_over_full"] = round(figures["incremental_seconds"] / figures["full_seconds"], 3)
            figures["incremental_with_ingest_over_full_with_ingest"] = round(
                (figures["incremental_ingest_seconds"] + figures["incremental_seconds"])
                / (figures["ingest_seconds"] + figures["full_seconds"]), 3)

            if classic or oracle:
                schemas = load_schemas(spark, root)
                names = {sid: name for sid, name in history.names.items() if sid in schemas}
            if classic:
                inputs = f"{tmp}/gold_inputs"
                applied_instance_messages(spark, root, sorted(names, key=str)).write.parquet(inputs)
                Path(tmp, "schemas.pickle").write_bytes(pickle.dumps((schemas, names)))
                rows, seconds = _timed(lambda: gold_on_parquet(spark, inputs, schemas, names, f"{tmp}/sail_out"))
                figures.update(parquet_gold_sail_seconds=round(seconds, 2), parquet_gold_rows=rows)

            line, schema, target = revert_line(history, load_schemas(spark, root))
            Path(tmp, "landing", "revert.jsonl").write_text(json.dumps(line) + "\n")
            os.sync()
            with _step("revert", figures):
                run_ingest(spark, settings)
                run_silver(spark, settings)
                gold = run_gold(spark, settings)
            figures.update(revert_schema=schema, revert_target=target, revert_mode=gold.modes.get(schema))
            with _step("rebuild", figures):
                run_silver(spark, settings, rebuild=True)
                run_gold(spark, settings, rebuild=True)
            figures["revert_over_rebuild"] = round(figures["revert_seconds"] / figures["rebuild_seconds"], 3)

        if classic:
            console.print("[bold]Apache Spark classic[/bold] ...")
            # the Spark Connect client marks its process (SPARK_CONNECT_MODE_ENABLED): not the child's
            env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_CONNECT", "SPARK_REMOTE"))}
            done = subprocess.run([sys.executable, "-m", "tests.benchmarks.classic", f"{tmp}/gold_inputs",
                                   f"{tmp}/schemas.pickle", f"{tmp}/classic_out"], capture_output=True, text=True,
                                  env=env)
            if done.returncode != 0:
                figures["parquet_gold_spark_classic"] = f"failed: {done.stderr.strip().splitlines()[-1:]}"
            else:
                result = json.loads(done.stdout.strip().splitlines()[-1])
                if result["rows"] != figures["parquet_gold_rows"]:
                    raise SystemExit(f"Spark classic wrote {result['rows']} gold rows, Sail "
                                     f"{figures['parquet_gold_rows']}: the engines disagree")
                figures["parquet_gold_spark_classic_seconds"] = round(result["seconds"], 2)
                figures["spark_classic_over_sail"] = round(result["seconds"] / figures["parquet_gold_sail_seconds"], 2)
    if oracle:
        with _step("reference", figures):
            ref = reference(base)
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
    ("full_peak_mib", "full materialize, peak memory of the process, MiB"),
    ("incremental_ingest_seconds", "ingest of +1 % of the history, s"),
    ("incremental_seconds", "incremental materialize of it (silver + gold), s"),
    ("incremental_over_full", "incremental / full materialize (goal <= 0.10)"),
    ("incremental_with_ingest_over_full_with_ingest", "the same, each with its ingest"),
    ("revert_seconds", "revert near the head, s"),
    ("rebuild_seconds", "full rebuild, s"),
    ("revert_over_rebuild", "revert / rebuild (goal <= 0.25)"),
    ("parquet_gold_sail_seconds", "gold on parquet, embedded Sail, s"),
    ("parquet_gold_spark_classic_seconds", "gold on parquet, Apache Spark classic, s"),
    ("spark_classic_over_sail", "Spark classic / Sail"),
    ("reference_seconds", "reference model, lines to gold, s"),
    ("reference_over_engine", "reference / (ingest + full)"),
]
_GROWTH = ["ingest_seconds", "full_seconds", "full_peak_mib", "incremental_ingest_seconds", "incremental_seconds",
           "revert_seconds", "rebuild_seconds", "parquet_gold_sail_seconds", "parquet_gold_spark_classic_seconds",
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
                ok = isinstance(a, (int, float)) and isinstance(b, (int, float)) and a
                cells.append(f"{b / a / (r['messages'] / first['messages']):.2f}" if ok else "-")
            growth.add_row(key, *cells)
        out.print(growth)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, action="append", help="history size; repeat for several scales")
    parser.add_argument("--json", type=Path, help="also write the JSON figures to this file")
    parser.add_argument("--no-classic", action="store_true", help="skip Apache Spark classic")
    parser.add_argument("--no-reference", action="store_true", help="skip the reference model")
    args = parser.parse_args()
    results = [measure(n, classic=not args.no_classic, oracle=not args.no_reference)
               for n in sorted(args.messages or [100_000])]
    document = {"cores": os.cpu_count(), "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
                                                             / 2**30, 1), "results": results}
    report(results)
    text = json.dumps(document)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()

"""Ingest throughput on generated entries (full verification), and the machine's ed25519 bound.

Run: ``.venv/bin/python -m tests.benchmarks.ingest_throughput --entries 200000``. Prints one JSON
object: entries, seconds, entries per second, and verifications per second on all cores measured
in the same run (a thread pool over pynacl, which releases the GIL).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from nacl.signing import SigningKey

from lakehouse.config import load_settings
from lakehouse.publish.simulate import generate, write_landing
from lakehouse.spark.session import open_engine
from pipelines.ingest import run_ingest


def verify_bound(seconds: float = 3.0) -> float:
    """ed25519 verifications per second on all cores (one thread per core, pynacl)."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        lines = generate(args.entries, seed=1)
        generated = time.monotonic() - started
        write_landing(lines, Path(tmp, "landing"))
        settings = load_settings(environ={}).with_overrides(lake_root=f"{tmp}/lake", landing=f"{tmp}/landing",
                                                            keys=f"{tmp}/keys")
        with open_engine(settings) as engine:
            summary = run_ingest(engine.spark, settings)
        bound = verify_bound()
    print(json.dumps({
        "entries": summary.lines, "new": summary.new, "rejected": sum(summary.rejected.values()),
        "generate_seconds": round(generated, 1), "ingest_seconds": round(summary.seconds, 1),
        "entries_per_second": round(summary.lines / summary.seconds),
        "verify_bound_per_second": round(bound), "share_of_bound": round(summary.lines / summary.seconds / bound, 2),
        "cores": os.cpu_count(),
    }))


if __name__ == "__main__":
    main()

"""``python -m tests.benchmarks.udf_race``: how often the embedded engine garbles a Python function's version.

A minimal reproduction of the transient failure that :mod:`lakehouse.spark.retry` retries: on
embedded Sail, several jobs that run Python functions (``mapInArrow``) at once, round after
round; a job fails now and then with "Python version used to compile the UDF (3.11) does not match
the Python version at runtime (\\x00.11.7 ...)". Nothing of the project runs but the session
settings: the jobs are ``range -> mapInArrow (identity) -> count``.

Prints the jobs run, the failures by kind and the rate, and the first failure's text
(``docs/engines.md`` keeps the figures).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from lakehouse.config import load_settings
from lakehouse.spark.retry import transient
from lakehouse.spark.session import open_engine


def _identity(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200, help="rounds of concurrent jobs")
    parser.add_argument("--jobs", type=int, default=4, help="jobs at once per round (the gold writers run 4)")
    parser.add_argument("--rows", type=int, default=10_000, help="rows per job")
    parser.add_argument("--chain", type=int, default=1, help="Python functions per job, one after the other")
    args = parser.parse_args()
    failures: Counter[str] = Counter()
    first: dict[str, str] = {}
    started = time.monotonic()
    with open_engine(load_settings(environ={}).with_overrides(engine="sail")) as engine:
        spark = engine.spark

        def job(_: int) -> None:
            df = spark.range(args.rows)
            for _ in range(args.chain):
                df = df.mapInArrow(_identity, "id BIGINT")
            df.count()

        for _ in range(args.rounds):
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                for done in [pool.submit(job, n) for n in range(args.jobs)]:
                    try:
                        done.result()
                    except Exception as exc:  # noqa: BLE001 - counted by kind, the point of the script
                        kind = transient(exc) or type(exc).__name__
                        failures[kind] += 1
                        first.setdefault(kind, str(exc)[:400])
    total = args.rounds * args.jobs
    seconds = time.monotonic() - started
    print(f"{total:,} jobs ({args.jobs} at once, {args.chain} Python function(s) and {args.rows:,} rows each) "
          f"in {seconds:.0f} s")
    for kind, n in failures.most_common():
        print(f"  {kind}: {n} ({n / total:.3%})")
        print(f"    first: {first[kind]!r}")
    if not failures:
        print("  no failure")


if __name__ == "__main__":
    main()

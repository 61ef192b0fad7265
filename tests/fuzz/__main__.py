"""Run one fuzz target under atheris: ``python -m tests.fuzz TARGET [libFuzzer options]``.

The corpus the fuzzer grows is ``.fuzz/<target>/`` (kept between runs, not in the repository);
the seeds (:func:`tests.fuzz.targets.seeds`) and the inputs kept in ``tests/fuzz/found/<target>/``
are written to ``.fuzz/<target>-seeds/`` and read from there. A defect stops the run and is written to
``.fuzz/<target>-crash-<sha1>``: keep it in ``tests/fuzz/found/<target>/`` once fixed.

Options are libFuzzer's (``-max_total_time=300``, ``-runs=N``, ...); by default the input length
is capped at :data:`~tests.fuzz.targets.MAX_LEN`, memory at 2,048 MB beyond the peak the process
inherited (:data:`RSS_LIMIT_MB`), and one input at 10 s (a slow input is a defect from 100 ms of
CPU on, see :func:`~tests.fuzz.targets.checked`).
"""

from __future__ import annotations

import resource
import shutil
import sys
from pathlib import Path

RSS_LIMIT_MB = 2048
"""Memory, in MB, an input may take the fuzzer's process to beyond the peak it started with.
libFuzzer reads the process's peak resident memory (``getrusage``), which Linux carries across
``fork`` and ``exec`` from the process that started it: started by a test worker that had run the
engine (4,135 MB), every fuzzer stopped on its first check, "out-of-memory (limit: 2048Mb)"."""


def main(argv: list[str]) -> None:
    import atheris

    from tests.fuzz import targets as T

    if not argv or argv[0] not in T.TARGETS:
        sys.exit(f"usage: python -m tests.fuzz {{{','.join(T.TARGETS)}}} [libFuzzer options]")
    name, options = argv[0], argv[1:]
    inherited_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024  # KB on Linux
    with atheris.instrument_imports(include=["lakehouse"]):
        import lakehouse.core.entries
        import lakehouse.core.landing
        import lakehouse.core.lensfile
        import lakehouse.core.messages  # noqa: F401
    work = Path(".fuzz") / name
    work.mkdir(parents=True, exist_ok=True)
    seeds = Path(".fuzz") / f"{name}-seeds"  # written afresh: libFuzzer ends the process itself
    shutil.rmtree(seeds, ignore_errors=True)
    seeds.mkdir()
    for i, data in enumerate(T.seeds(name)):
        (seeds / f"seed-{i:04d}").write_bytes(data)
    for path in T.found(name):
        shutil.copy(path, seeds / f"found-{path.name}")
    defaults = [f"-max_len={T.MAX_LEN}", f"-rss_limit_mb={RSS_LIMIT_MB + inherited_mb}", "-timeout=10", f"-artifact_prefix={work.parent}/{name}-"]
    given = {o.split("=", 1)[0] for o in options}
    args = [sys.argv[0], *(d for d in defaults if d.split("=", 1)[0] not in given), *options, str(work), str(seeds)]
    atheris.Setup(args, T.checked(T.TARGETS[name]))
    atheris.Fuzz()

if __name__ == "__main__":
    main(sys.argv[1:])

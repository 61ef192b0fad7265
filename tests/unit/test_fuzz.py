"""The decoders against their fuzz corpora (:mod:`tests.fuzz.targets`), and each fuzzer briefly.

``make fuzz`` runs the fuzzers for minutes each; here every seed and every input that once was a
defect goes through its target (no exception but the project's own, each under 100 ms of CPU),
and each fuzzer runs for a few seconds, so that a target that no longer starts is seen.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz import targets as T

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", list(T.TARGETS))
def test_every_seed_and_every_input_once_a_defect_is_handled(name: str) -> None:
    run = T.checked(T.TARGETS[name])
    inputs = [*T.seeds(name), *(path.read_bytes() for path in T.found(name))]
    assert len(inputs) >= 5
    for data in inputs:
        run(data)


@pytest.mark.parametrize(("name", "kept"), [
    ("landing", "deep-array"),  # json.loads raised RecursionError: the ingest stopped
    ("landing", "deep-in-object"),
    ("lensfile", "nul-character"),  # PyYAML's reader raised before the parser's errors were in place
    ("lensfile", "alias-repeats-fields"),  # an alias would repeat a node wherever it is named
])
def test_the_inputs_found_by_fuzzing_are_kept(name: str, kept: str) -> None:
    """What the fuzzers found stays in the corpus: a target's function handles it now."""
    assert kept in [path.name for path in T.found(name)]


@pytest.mark.parametrize("name", list(T.TARGETS))
def test_each_fuzzer_runs_a_few_seconds_without_a_defect(name: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tests.fuzz", name, "-max_total_time=3"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300,
                          check=False)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "Done" in said and "cov:" in said
    assert not list(tmp_path.glob(".fuzz/*crash*")), said[-3000:]


LARGE_PARENT = """
import subprocess, sys
held = bytearray(2300 * 2**20)
held[::4096] = b"\\x01" * len(held[::4096])  # resident, not only reserved
done = subprocess.run([sys.executable, "-m", "tests.fuzz", "entry", "-max_total_time=1"], capture_output=True, text=True)
print(done.returncode)
print(done.stdout + done.stderr)
"""


def test_a_fuzzer_started_by_a_process_past_its_memory_limit_runs(tmp_path: Path) -> None:
    """A CI run: the fuzzers, started by a test worker that had run the engine (4,135 MB resident),
    stopped at once, "out-of-memory (limit: 2048Mb)": the peak a process inherits is not its own."""
    done = subprocess.run([sys.executable, "-c", LARGE_PARENT], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300, check=False)
    status, _, said = done.stdout.partition("\n")
    assert status == "0", said[-3000:] + done.stderr[-3000:]
    assert "Done" in said

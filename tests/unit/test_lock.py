from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lakehouse.errors import LockError
from lakehouse.lock import lake_lock

HOLD = """
import sys, time
from lakehouse.lock import lake_lock
with lake_lock(sys.argv[1], "ingest"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
    open(sys.argv[1] + "/done", "w").close()
"""


def _holder(root: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(root), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_second_run_stops_with_a_message_naming_the_holder(tmp_path: Path) -> None:
    proc = _holder(tmp_path, 30)
    try:
        with pytest.raises(LockError, match=r"in use by another run \(`lakehouse ingest`, pid \d+"), \
                lake_lock(str(tmp_path), "materialize"):
            pass
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_holder_does_not_leave_the_lock_stuck(tmp_path: Path) -> None:
    proc = _holder(tmp_path, 30)
    proc.kill()
    proc.wait()
    with lake_lock(str(tmp_path), "materialize"):
        pass


def test_waiting_run_gets_the_lock_when_the_holder_ends(tmp_path: Path) -> None:
    proc = _holder(tmp_path, 0.5)
    try:
        with lake_lock(str(tmp_path), "materialize", timeout=20):
            assert (tmp_path / "done").exists(), "got the lock while the holder still held it"
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()


def test_lock_is_reentrant_across_sequential_runs(tmp_path: Path) -> None:
    for _ in range(3):
        with lake_lock(str(tmp_path), "ingest"):
            pass


CHURN = """
import sys, time
from lakehouse.lock import lake_lock
for n in range(int(sys.argv[2])):
    with lake_lock(sys.argv[1], "materialize", timeout=30, poll=0.0005):
        time.sleep(0.001)
"""


def test_a_refused_run_always_reads_a_whole_holder(tmp_path: Path) -> None:
    """Issue: the refusal could read `lakehouse ?, pid ?` while the holder was writing who it is."""
    churn = subprocess.Popen([sys.executable, "-c", CHURN, str(tmp_path), "1500"])
    said: list[str] = []
    try:
        while churn.poll() is None:
            try:
                with lake_lock(str(tmp_path), "ingest"):
                    pass
            except LockError as exc:
                said.append(str(exc))
    finally:
        churn.kill()
        churn.wait()
    assert said, "the lock was never found taken"
    assert not [s for s in said if "?" in s or "unknown holder" in s], said[:3]


def test_one_file_lock_helper_waits_or_refuses_and_frees_the_lock_on_exit(tmp_path: Path) -> None:
    from lakehouse.lock import LockBusy, flocked

    path = tmp_path / "x.lock"
    with flocked(path):
        with pytest.raises(LockBusy), flocked(path, timeout=0):
            pass
        with pytest.raises(LockBusy), flocked(path, timeout=0.3, poll=0.1):
            pass
    with flocked(path, timeout=0):  # released when the first block ended
        pass

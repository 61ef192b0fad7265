"""One writer per lake: an exclusive lock that a crashed run cannot leave stuck.

LAKEHOUSE.md, engine caveats (MERGE, UPDATE, DELETE and overwrite fail on concurrent commits).
The lock is an ``fcntl.flock`` on ``<lake_root>/.lakehouse.lock``: the operating system releases
it when the holding process ends, however it ends, so a killed run never blocks the next one.
The holder writes who it is into a file beside it (``.lakehouse.lock.holder``), whole or not at
all (written aside, then renamed over the old one), so a waiting run can always say who holds it.
A lake on object storage (``s3://``) is locked with a lock object and a lease instead
(:mod:`lakehouse.leaselock`), which holds across machines.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from lakehouse.errors import LockError
from lakehouse.leaselock import Holder, LeaseBusy, LeaseLost, lease_lock
from lakehouse.store import is_store_root


def lock_path(lake_root: str) -> Path:
    """Where the file lock of ``lake_root`` lives (a local file; a remote root other than object
    storage, which :mod:`lakehouse.leaselock` locks, locks in the temp dir)."""
    if "://" in lake_root:
        digest = hashlib.sha256(lake_root.encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"lakehouse-{digest}.lock"
    return Path(lake_root) / ".lakehouse.lock"


class LockBusy(Exception):
    """:func:`flocked` found the lock held past its timeout (callers turn it into their own error)."""


@contextmanager
def flocked(path: Path, *, timeout: float | None = None, poll: float = 0.2, mode: int = 0o644) -> Iterator[None]:
    """Hold an exclusive ``fcntl.flock`` on the file ``path`` (created with ``mode`` if missing) for
    the block: the one lock helper of the project. The operating system releases it when the
    process ends, however it ends.

    Args:
        timeout: seconds to wait for it; None waits as long as it takes, 0 not at all.
        poll: seconds between attempts while waiting with a timeout.

    Raises:
        LockBusy: another process holds it past ``timeout``.
        OSError: the file cannot be opened (a read-only folder, ...).
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, mode)
    try:
        if timeout is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockBusy(str(path)) from None
                    time.sleep(poll)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextmanager
def lake_lock(lake_root: str, command: str, *, timeout: float = 0.0, poll: float = 0.2) -> Iterator[None]:
    """Hold the lake's lock for the duration of the block.

    Args:
        lake_root: the lake (its folder is created if missing).
        command: what this run is, shown to a run that finds the lock taken.
        timeout: seconds to wait for the lock; 0 stops at once.
        poll: seconds between attempts while waiting.

    Raises:
        LockError: another run holds the lock (says which command, its pid and since when, and
            on object storage its host), or code ``not_writable``: the lock cannot be created (a
            read-only lake, a store that refuses), or ``lock_lost``: on object storage, another
            run took the lock over while this one held it.
    """
    if is_store_root(lake_root):
        with _store_lock(lake_root, command, timeout):
            yield
        return
    path = lock_path(lake_root)
    with ExitStack() as held:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            held.enter_context(flocked(path, timeout=timeout, poll=poll))
        except LockBusy:
            raise LockError(f"the lake at {lake_root} is in use by another run ({_read_holder(path)}); wait for it "
                            "to finish, or set LAKEHOUSE_LOCK_TIMEOUT=<seconds> to wait") from None
        except OSError as exc:
            raise LockError(f"the lake at {lake_root} cannot be written here ({exc.strerror}: {path}): `lakehouse "
                            f"{command}` writes; status, history, sql and changes only read and work on it",
                            code="not_writable") from None
        holder_file = _holder_path(path)
        aside = holder_file.with_name(f"{holder_file.name}.{os.getpid()}")
        aside.write_text(json.dumps({"command": command, "pid": os.getpid(),
                                     "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}), encoding="utf-8")
        os.replace(aside, holder_file)  # atomic: a reader sees the old holder or the new one, never half of one
        yield


@contextmanager
def _store_lock(lake_root: str, command: str, timeout: float) -> Iterator[None]:
    """:func:`lakehouse.leaselock.lease_lock`, its refusals as :class:`LockError`; a takeover of a
    stale lock is said on standard error."""
    from botocore.exceptions import BotoCoreError, ClientError

    from lakehouse.progress import console

    def took_over(holder: Holder) -> None:
        console.print(f"took over the lock of the lake at {lake_root} from {holder.describe()}: its holder "
                      f"stopped renewing it (lease {holder.lease:.0f} s)")

    running = False  # the run's own failures pass through as they are
    try:
        with lease_lock(lake_root, command, timeout=timeout, on_takeover=took_over):
            running = True
            yield
            running = False
    except LeaseBusy as busy:
        raise LockError(f"the lake at {lake_root} is in use by another run ({busy}); wait for it to finish, or set "
                        "LAKEHOUSE_LOCK_TIMEOUT=<seconds> to wait") from None
    except LeaseLost as lost:
        raise LockError(f"the lake at {lake_root} was locked by another run before this one ended ({lost}): the "
                        "store was out of reach for longer than the lease; run `make materialize` again to check "
                        "the lake", code="lock_lost") from None
    except (ClientError, BotoCoreError) as exc:
        if running:
            raise
        raise LockError(f"the lock of the lake at {lake_root} cannot be written on its store ({exc})",
                        code="not_writable") from None


def _holder_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.holder")


def _read_holder(path: Path) -> str:
    try:
        data = json.loads(_holder_path(path).read_text(encoding="utf-8"))
        return f"`lakehouse {data['command']}`, pid {data['pid']}, since {data['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown holder"

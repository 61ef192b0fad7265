"""One writer per lake on object storage: a lock object with a lease, taken by a conditional put.

A lake on S3 (``s3://bucket/path``, ``s3a://`` for Apache Spark) is written from any machine that
reaches the store, so the local file lock of :mod:`lakehouse.lock` cannot keep two runs apart. Here
the lock is the object ``<lake root>/_lakehouse.lock``:

- **taken** by a put with ``If-None-Match: *``, which the store refuses when the object exists:
  of two runs, on any hosts, one creates it;
- **held** by renewing it: the holder writes it again every third of its lease (``If-Match`` its
  last ETag, so a holder that lost it learns so instead of writing over the new holder's);
- **given back** by a delete with ``If-Match`` its ETag;
- **taken over** when its holder stopped renewing it: the object is older than its lease, told by
  the store's own clock (its ``Last-Modified`` against the ``Date`` of the store's answer), so that
  no two machines' clocks are compared. The new holder replaces it with ``If-Match`` the stale
  ETag, so of two runs taking over at once one does, and says whose lock it took over.

The object holds the holder's host, process, command, start and lease, shown to a run that finds
the lock taken. The store is reached with boto3 and the lake's store settings (:mod:`lakehouse.store`).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Final
from urllib.parse import urlparse

from lakehouse.store import STORE_SCHEMES, s3_client

LOCK_OBJECT: Final = "_lakehouse.lock"
LEASE_SECONDS: Final = 60.0
"""How long a holder's lock stands without a renewal; the holder renews every third of it."""


class LeaseBusy(Exception):
    """The lock is held by a live holder past the wait (its description is the message)."""


class LeaseLost(Exception):
    """The holder found its lock object replaced or gone while it held it."""


def lock_location(lake_root: str) -> tuple[str, str]:
    """``(bucket, key)`` of the lock object of a lake at ``s3://bucket/path``.

    Raises:
        ValueError: ``lake_root`` is not an ``s3://`` or ``s3a://`` URI with a bucket.
    """
    parsed = urlparse(lake_root)
    if parsed.scheme not in STORE_SCHEMES or not parsed.netloc:
        raise ValueError(f"not a lake on object storage: {lake_root!r}")
    prefix = parsed.path.strip("/")
    return parsed.netloc, f"{prefix}/{LOCK_OBJECT}" if prefix else LOCK_OBJECT


@dataclass(frozen=True)
class Holder:
    """Who holds a lock object: what its body says, and how old the store says it is."""

    host: str
    pid: int
    command: str
    since: str
    lease: float
    age: float  # seconds since its last renewal, by the store's clock

    def describe(self) -> str:
        return (f"`lakehouse {self.command}`, pid {self.pid} on host {self.host}, since {self.since}, "
                f"renewed {self.age:.0f} s ago")


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


_CONFLICT: Final = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
_MISSING: Final = {"NoSuchKey", "404"}


class _Lease:
    """The lock object of one run: take, renew, give back (see the module docstring)."""

    def __init__(self, client: Any, bucket: str, key: str, command: str, lease: float, host: str) -> None:
        self.client, self.bucket, self.key, self.lease = client, bucket, key, lease
        self.holder = {"host": host, "pid": os.getpid(), "command": command, "lease": lease,
                       "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self.renewals = 0
        self.etag: str | None = None
        self.lost: str | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _put(self, **condition: str) -> str:
        # each write's body differs (its renewal count), so each has its own ETag: a takeover's
        # If-Match of the stale ETag fails when the holder renewed in between
        body = json.dumps({**self.holder, "renewal": self.renewals}).encode()
        answer = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=body, **condition)
        self.renewals += 1
        return str(answer["ETag"])

    def current(self) -> tuple[Holder, str] | None:
        """The holder now and its ETag, or None when there is no lock object."""
        from botocore.exceptions import ClientError

        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except ClientError as exc:
            if _code(exc) in _MISSING:
                return None
            raise
        raw = answer["Body"].read()
        now = parsedate_to_datetime(answer["ResponseMetadata"]["HTTPHeaders"]["date"])
        age = max(0.0, (now - answer["LastModified"]).total_seconds())
        try:
            data = json.loads(raw)
            holder = Holder(str(data["host"]), int(data["pid"]), str(data["command"]), str(data["since"]),
                            float(data["lease"]), age)
        except (ValueError, KeyError, TypeError):
            holder = Holder("unknown", 0, "unknown", "unknown", LEASE_SECONDS, age)
        return holder, str(answer["ETag"])

    def take(self, timeout: float, poll: float) -> Holder | None:
        """Take the lock, waiting up to ``timeout`` seconds for a live holder.

        Returns:
            The holder whose stale lock was taken over, or None.

        Raises:
            LeaseBusy: a live holder kept it past ``timeout``.
        """
        from botocore.exceptions import ClientError

        deadline = time.monotonic() + timeout
        while True:
            try:
                self.etag = self._put(IfNoneMatch="*")
                return None
            except ClientError as exc:
                if _code(exc) not in _CONFLICT:
                    raise
            found = self.current()
            if found is not None:
                holder, etag = found
                if holder.age > holder.lease:  # its holder stopped renewing it: take it over
                    try:
                        self.etag = self._put(IfMatch=etag)
                        return holder
                    except ClientError as exc:
                        if _code(exc) not in _CONFLICT | _MISSING:
                            raise
                elif time.monotonic() >= deadline:
                    raise LeaseBusy(holder.describe())
            time.sleep(poll if found is not None else 0)

    def renew_in_background(self) -> None:
        self._renewer = threading.Thread(target=self._renew, name="lakehouse-lease", daemon=True)
        self._renewer.start()

    def _renew(self) -> None:
        from botocore.exceptions import ClientError

        while not self._stop.wait(self.lease / 3):
            try:
                assert self.etag is not None
                self.etag = self._put(IfMatch=self.etag)
            except ClientError as exc:
                if _code(exc) in _CONFLICT | _MISSING:
                    self.lost = "the lock object was replaced or removed by another run"
                    return
            except Exception:  # noqa: BLE001 - a failed renewal is tried again at the next turn
                continue

    def give_back(self) -> None:
        from botocore.exceptions import ClientError

        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if self.lost is None and self.etag is not None:
            try:
                self.client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=self.etag)
            except ClientError as exc:
                if _code(exc) not in _CONFLICT | _MISSING:
                    raise


@contextmanager
def lease_lock(lake_root: str, command: str, *, timeout: float = 0.0, poll: float = 1.0,
               lease: float = LEASE_SECONDS, client: Any = None, host: str | None = None,
               on_takeover: Callable[[Holder], None] | None = None) -> Iterator[None]:
    """Hold the lock object of a lake on object storage for the block (see the module docstring).

    Args:
        lake_root: ``s3://bucket/path`` (or ``s3a://``).
        command: what this run is, shown to a run that finds the lock taken.
        timeout: seconds to wait for a live holder; 0 stops at once.
        poll: seconds between looks while waiting.
        lease: seconds the lock stands without a renewal (renewed every third of it).
        client: a boto3 S3 client (default: :func:`lakehouse.store.s3_client`).
        host: the name this run gives its host (default: ``socket.gethostname()``).
        on_takeover: called with the holder whose stale lock this run took over.

    Raises:
        LeaseBusy: a live holder kept the lock past ``timeout`` (the message names it).
        LeaseLost: the lock was taken from this run while it held it (its lease ran out unrenewed:
            the store was unreachable for longer than the lease); raised when the block ends.
        botocore.exceptions.ClientError: the store refused otherwise (no bucket, no access).
    """
    bucket, key = lock_location(lake_root)
    held = _Lease(client if client is not None else s3_client(), bucket, key, command, lease,
                  host if host is not None else socket.gethostname())
    taken_over = held.take(timeout, poll)
    if taken_over is not None and on_takeover is not None:
        on_takeover(taken_over)
    held.renew_in_background()
    try:
        yield
    finally:
        held.give_back()
    if held.lost is not None:
        raise LeaseLost(held.lost)

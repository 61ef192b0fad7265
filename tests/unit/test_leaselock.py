"""The lock of a lake on object storage (:mod:`lakehouse.leaselock`), against an S3 API server on
loopback (:mod:`tests.s3`), from processes that give themselves different host names."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lakehouse.errors import LockError
from lakehouse.leaselock import LeaseBusy, LeaseLost, lease_lock, lock_location
from lakehouse.lock import lake_lock

REPO = Path(__file__).resolve().parents[2]

HOLDER = """
import sys
from lakehouse.leaselock import lease_lock
root, host, lease = sys.argv[1], sys.argv[2], float(sys.argv[3])
with lease_lock(root, "materialize", lease=lease, host=host):
    print("held", flush=True)
    sys.stdin.readline()
print("given back", flush=True)
"""


def _holder(root: str, host: str, lease: float) -> subprocess.Popen[str]:
    """A process holding the lake's lock as host ``host`` until it reads a line."""
    held = subprocess.Popen([sys.executable, "-c", HOLDER, root, host, str(lease)], cwd=REPO, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert held.stdout is not None
    line = held.stdout.readline()
    assert line.strip() == "held", (line, held.stderr.read() if held.stderr else "")
    return held


def _lock_object(root: str) -> Any:
    import boto3

    bucket, key = lock_location(root)
    return boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=key).get("KeyCount", 0)


def test_of_two_hosts_one_holds_the_lock_and_the_other_is_refused_with_the_holder_named(store: Any) -> None:
    root = "s3://lake/two-hosts"
    first = _holder(root, "host-a", 30)
    try:
        with pytest.raises(LeaseBusy) as busy, lease_lock(root, "materialize", host="host-b"):
            pass
        said = str(busy.value)
        assert "host host-a" in said and f"pid {first.pid}" in said and "`lakehouse materialize`" in said
        out, _ = first.communicate("\n", timeout=60)
        assert "given back" in out
    finally:
        if first.poll() is None:
            first.kill()
    assert _lock_object(root) == 0  # given back: the object is gone
    with lease_lock(root, "materialize", host="host-b"):
        assert _lock_object(root) == 1


def test_a_holder_killed_is_taken_over_after_its_lease_and_not_before(store: Any) -> None:
    root = "s3://lake/killed"
    first = _holder(root, "host-a", 3)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    with pytest.raises(LeaseBusy), lease_lock(root, "ingest", host="host-b", lease=3):
        pass  # its lease is not over yet: a live holder could still be renewing it
    taken: list[Any] = []
    started = time.monotonic()
    with lease_lock(root, "ingest", host="host-b", lease=3, timeout=30, poll=0.5, on_takeover=taken.append):
        waited = time.monotonic() - started
    assert [(h.host, h.pid, h.command) for h in taken] == [("host-a", first.pid, "materialize")]
    assert taken[0].age > 3 and waited < 15


def test_a_holder_that_renews_keeps_the_lock_past_its_lease(store: Any) -> None:
    root = "s3://lake/renewed"
    first = _holder(root, "host-a", 2)
    try:
        time.sleep(5)  # more than twice its lease: its renewals keep it
        with pytest.raises(LeaseBusy), lease_lock(root, "ingest", host="host-b", lease=2):
            pass
    finally:
        first.communicate("\n", timeout=60)


def test_a_holder_whose_lock_was_taken_learns_it_when_its_block_ends(store: Any) -> None:
    import boto3

    root = "s3://lake/lost"
    bucket, key = lock_location(root)
    with pytest.raises(LeaseLost), lease_lock(root, "materialize", lease=1.5):
        boto3.client("s3").delete_object(Bucket=bucket, Key=key)  # as if another run had taken it
        time.sleep(1.5)  # a renewal finds it gone


def test_the_lake_lock_of_an_s3_lake_is_the_lease_and_says_who_holds_it(store: Any) -> None:
    root = "s3://lake/through-lake-lock"
    with lake_lock(root, "materialize"):
        with pytest.raises(LockError) as refused, lake_lock(root, "ingest"):
            pass
        assert "in use by another run" in str(refused.value) and "`lakehouse materialize`" in str(refused.value)
    with lake_lock(root, "ingest"):  # given back
        pass
    with pytest.raises(LockError) as missing, lake_lock("s3://no-such-bucket/x", "ingest"):
        pass
    assert missing.value.code == "not_writable" and "NoSuchBucket" in str(missing.value)


def test_a_store_error_of_the_run_itself_is_not_taken_for_the_lock_s(store: Any) -> None:
    from botocore.exceptions import ClientError

    failure = ClientError({"Error": {"Code": "SlowDown", "Message": "the run's own"}}, "PutObject")
    with pytest.raises(ClientError) as raised, lake_lock("s3://lake/own-failure", "ingest"):
        raise failure
    assert raised.value is failure
    with lake_lock("s3://lake/own-failure", "ingest"):  # and the lock was given back
        pass


def test_each_renewal_is_a_new_etag_so_a_takeover_of_what_was_stale_fails(store: Any) -> None:
    """A takeover writes ``If-Match`` the ETag it found stale: a renewal in between must change it,
    or the takeover would succeed over a live holder (the same body has the same ETag on S3)."""
    import boto3
    from botocore.exceptions import ClientError

    client = boto3.client("s3")
    root = "s3://lake/renewal-etags"
    bucket, key = lock_location(root)
    with lease_lock(root, "ingest", lease=1.5):
        seen = client.head_object(Bucket=bucket, Key=key)["ETag"]
        time.sleep(1.2)  # at least one renewal (every 0.5 s)
        assert client.head_object(Bucket=bucket, Key=key)["ETag"] != seen
        with pytest.raises(ClientError) as refused:
            client.put_object(Bucket=bucket, Key=key, Body=b"{}", IfMatch=seen)
        assert refused.value.response["Error"]["Code"] in ("PreconditionFailed", "412")

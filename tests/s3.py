"""An S3 API server on loopback for the tests (moto's ``moto_server``, :mod:`tests.moto_server`), as a pytest fixture."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def store() -> Iterator[dict[str, str]]:
    """An S3 API server (``moto_server``) on a loopback port, with a bucket ``lake``; the
    environment that points boto3 at it (:func:`running_store`)."""
    with running_store() as env:
        yield env


@contextmanager
def running_store() -> Iterator[dict[str, str]]:
    """Start an S3 API server (``moto_server``) on a free loopback port with a bucket ``lake``, and
    set the ``AWS_*`` variables that point every client at it for the block (restored after).

    With ``LAKEHOUSE_TEST_S3_LOG`` set to a file, the server's log of every request (a line each,
    method and path) is appended there: how many requests a story costs.

    Yields:
        Those variables.
    """
    port = _free_port()
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "test",
           "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ALLOW_HTTP": "true"}  # the Rust readers (delta-rs, Sail) refuse a plain-http endpoint otherwise
    log = os.environ.get("LAKEHOUSE_TEST_S3_LOG")
    said = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 (closed with the server)
    server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("moto_server.py")), "-p", str(port)],
                              stdout=said, stderr=said)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the S3 API server did not start"
                time.sleep(0.2)
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            import boto3

            boto3.client("s3").create_bucket(Bucket="lake")
            yield env
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    finally:
        server.terminate()
        server.wait(timeout=30)
        if not isinstance(said, int):
            said.close()



"""An S3 API server on loopback for the tests, as a pytest fixture: S3Proxy (``org.gaul:s3proxy``, a
Java server from Maven Central, objects in a local folder), or moto's ``moto_server``
(:mod:`tests.moto_server`) with ``LAKEHOUSE_TEST_S3_SERVER=moto``.

S3Proxy is the default: it serves requests on many threads, where moto is one Python process that
was busy most of an object-storage story (Apache Spark's S3A asks a dozen requests of every Delta
read); both take conditional puts (``If-None-Match``, ``If-Match``), which the lake's lease lock
needs (:mod:`lakehouse.leaselock`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest.mock import patch

import pytest

S3PROXY = "4.1.0"
"""The S3Proxy release the tests run (its one jar with its dependencies, about 55 MB, fetched from
Maven Central once into the jar cache, :func:`lakehouse.spark.jars.default_cache`)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def store() -> Iterator[dict[str, str]]:
    """An S3 API server on a loopback port, with a bucket ``lake``; the environment that points
    boto3 at it (:func:`running_store`)."""
    with running_store() as env:
        yield env


def s3proxy_jar() -> Path:
    """S3Proxy's jar with its dependencies, from the jar cache, else fetched from Maven Central and
    checked against the SHA-1 Maven Central publishes beside it. Not through
    :func:`lakehouse.spark.jars.resolved_jars`: Ivy resolves artifacts without a classifier, and
    S3Proxy's plain jar with its resolved dependencies lacks one it needs at start (args4j).

    Raises:
        RuntimeError: the jar could not be fetched, or its checksum differs (names the address).
    """
    from lakehouse.spark.jars import MAVEN_CENTRAL, default_cache

    name = f"s3proxy-{S3PROXY}-jar-with-dependencies.jar"
    jar = default_cache() / "s3proxy" / name
    if jar.is_file():
        return jar
    url = f"{MAVEN_CENTRAL}org/gaul/s3proxy/{S3PROXY}/{name}"
    jar.parent.mkdir(parents=True, exist_ok=True)
    part = jar.with_suffix(f".part{os.getpid()}")
    try:
        with urllib.request.urlopen(url, timeout=120) as got, part.open("wb") as out:
            shutil.copyfileobj(got, out)
        with urllib.request.urlopen(f"{url}.sha1", timeout=60) as got:
            expected = got.read().decode().split()[0].strip()
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise RuntimeError(f"could not fetch the S3 test server's jar {url}: {exc}") from None
    actual = hashlib.sha1(part.read_bytes()).hexdigest()  # noqa: S324 (Maven Central's checksum)
    if actual != expected:
        part.unlink(missing_ok=True)
        raise RuntimeError(f"{url}: SHA-1 {actual}, Maven Central says {expected}")
    part.replace(jar)
    return jar


def _server(port: int, folder: Path, said: int | object) -> subprocess.Popen[bytes]:
    """The S3 API server's process on ``port``: S3Proxy keeping its objects under ``folder``, or moto."""
    if os.environ.get("LAKEHOUSE_TEST_S3_SERVER", "s3proxy") == "moto":
        return subprocess.Popen([sys.executable, str(Path(__file__).with_name("moto_server.py")), "-p", str(port)],
                                stdout=said, stderr=said)  # type: ignore[arg-type]
    from lakehouse.spark.jars import _java

    (folder / "objects").mkdir()
    conf = folder / "s3proxy.conf"
    conf.write_text("\n".join([
        f"s3proxy.endpoint=http://127.0.0.1:{port}", "s3proxy.authorization=aws-v2-or-v4",
        "s3proxy.identity=test", "s3proxy.credential=test", "s3proxy.ignore-unknown-headers=true",
        "jclouds.provider=filesystem-nio2", f"jclouds.filesystem.basedir={folder / 'objects'}"]) + "\n",
        encoding="utf-8")
    return subprocess.Popen([_java(), "-Xmx1g", "-XX:+UseSerialGC", "-jar", str(s3proxy_jar()),
                             "--properties", str(conf)], stdout=said, stderr=said)  # type: ignore[arg-type]


@contextmanager
def running_store() -> Iterator[dict[str, str]]:
    """Start an S3 API server (:func:`_server`) on a free loopback port with a bucket ``lake``, and
    set the ``AWS_*`` variables that point every client at it for the block (restored after).

    With ``LAKEHOUSE_TEST_S3_LOG`` set to a file, the server's output is appended there (moto's: a
    line for every request, method and path: how many requests a story costs).

    Yields:
        Those variables.
    """
    port = _free_port()
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "test",
           "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ALLOW_HTTP": "true"}  # the Rust readers (delta-rs, Sail) refuse a plain-http endpoint otherwise
    log = os.environ.get("LAKEHOUSE_TEST_S3_LOG")
    said = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 (closed with the server)
    with tempfile.TemporaryDirectory(prefix="s3-store-") as folder:
        server = _server(port, Path(folder), said)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert server.poll() is None, f"the S3 API server ended with {server.returncode}"
                    assert time.monotonic() < deadline, "the S3 API server did not start"
                    time.sleep(0.2)
            with patch.dict(os.environ, env):
                import boto3

                boto3.client("s3").create_bucket(Bucket="lake")
                yield env
        finally:
            server.kill()  # its objects go with its folder: nothing to shut down cleanly
            server.wait(timeout=30)
            if not isinstance(said, int):
                said.close()

"""The Delta Lake jars for Apache Spark: which artifact, the cache, and a clear error when they
cannot be fetched (:mod:`lakehouse.spark.jars`)."""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from lakehouse.errors import EngineError
from lakehouse.spark import jars


def test_the_artifact_matches_the_installed_delta_spark_and_scala() -> None:
    artifact = jars.delta_artifact()
    scala = jars.scala_version()
    assert str(artifact) == f"io.delta:delta-spark_{scala}:{metadata.version('delta-spark')}"
    assert any((jars.pyspark_home() / "jars").glob(f"spark-core_{scala}-*.jar"))


def test_jars_listed_in_the_cache_are_used_without_resolving(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    artifact = jars.delta_artifact()
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"")
    (tmp_path / f"{artifact.name}-{artifact.version}.txt").write_text(f"{jar}\n")

    def no_resolving(*args: object, **kwargs: object) -> None:
        raise AssertionError("resolved again although the cache lists every jar")

    monkeypatch.setattr(subprocess, "Popen", no_resolving)
    assert jars.delta_jars(tmp_path, quiet=True) == [str(jar)]


def test_a_resolution_waits_for_one_under_way_and_takes_the_jars_it_listed(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes that find no manifest (test workers, two commands on a fresh machine) resolve
    one at a time: Ivy's cache is not safe for two. The one that waited resolves nothing."""
    import threading

    from lakehouse.lock import flocked

    artifact = jars.delta_artifact()
    jar = tmp_path / "a.jar"

    def no_resolving(*args: object, **kwargs: object) -> None:
        raise AssertionError("resolved again although another process listed every jar meanwhile")

    monkeypatch.setattr(subprocess, "Popen", no_resolving)
    got: list[object] = []
    with flocked(tmp_path / ".resolving.lock"):  # another process resolving
        waiting = threading.Thread(target=lambda: got.append(jars.delta_jars(tmp_path, quiet=True)))
        waiting.start()
        waiting.join(0.5)
        assert waiting.is_alive(), "a second resolution went ahead beside the first"
        jar.write_bytes(b"")
        (tmp_path / f"{artifact.name}-{artifact.version}.txt").write_text(f"{jar}\n")
    waiting.join(10)
    assert got == [[str(jar)]]


def test_a_manifest_naming_a_missing_jar_is_resolved_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    artifact = jars.delta_artifact()
    (tmp_path / f"{artifact.name}-{artifact.version}.txt").write_text(f"{tmp_path / 'gone.jar'}\n")
    monkeypatch.setattr(jars, "MAVEN_CENTRAL", "http://127.0.0.1:9/maven2/")  # nothing listens there
    with pytest.raises(EngineError) as failed:
        jars.delta_jars(tmp_path, quiet=True)
    assert str(artifact) in str(failed.value)


def test_an_unreachable_repository_is_an_error_naming_the_artifact(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jars, "MAVEN_CENTRAL", "http://127.0.0.1:9/maven2/")
    with pytest.raises(EngineError) as failed:
        jars.delta_jars(tmp_path / "cache", quiet=True)
    message = str(failed.value)
    assert str(jars.delta_artifact()) in message and "127.0.0.1:9" in message
    assert "LAKEHOUSE_ENGINE=sail" in message
    assert not list((tmp_path / "cache").glob("*.txt")), "no manifest is written for a failed resolution"


def test_no_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(EngineError, match="Java 17"):
        jars._java()

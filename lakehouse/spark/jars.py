"""The jars Apache Spark needs beyond its own, resolved from Maven Central once and cached.

LAKEHOUSE.md, Engine: Apache Spark reads and writes Delta tables through delta-spark's jars
(``io.delta:delta-spark_<scala>``), of the version that matches the installed ``delta-spark``
Python package (which itself matches the installed PySpark); a lake on S3 is reached through
Hadoop's S3A file system, ``org.apache.hadoop:hadoop-aws`` of the Hadoop version PySpark ships,
with the AWS SDK it needs (:func:`store_jars`, fetched only for such a lake). They are resolved with Apache Ivy,
the resolver Spark itself uses for ``spark.jars.packages``, run on its own (the Ivy jar ships with
PySpark) so that its output becomes one progress line and a failure a clear error. The resolved
jars are listed in a manifest in the cache folder; later runs, and CI on the same machine, read
that manifest and start Spark with ``spark.jars`` without resolving anything again. Processes
that find no manifest resolve one at a time (a file lock in the cache folder): Ivy's cache is not
safe for two at once (one deletes the ``.part`` file the other is downloading), and test workers
or two commands started together on a fresh machine would both resolve.

Spark's own artifacts and the Scala library are excluded: the installed PySpark has them.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from lakehouse.config import user_cache
from lakehouse.errors import EngineError
from lakehouse.lock import flocked
from lakehouse.progress import console

MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
_IVY_XML = """<ivy-module version="2.0">
  <info organisation="lakehouse" module="jars"/>
  <configurations><conf name="default"/></configurations>
  <dependencies>
    <dependency org="{org}" name="{name}" rev="{rev}" conf="default->default"/>
    <exclude org="org.scala-lang"/>
    <exclude org="org.apache.spark"/>
  </dependencies>
</ivy-module>
"""
_IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="central"/>
  <resolvers>
    <ibiblio name="central" m2compatible="true" root="{root}"/>
  </resolvers>
</ivysettings>
"""


@dataclass(frozen=True)
class Artifact:
    """A Maven artifact: ``group:name:version``."""

    group: str
    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.group}:{self.name}:{self.version}"


def pyspark_home() -> Path:
    """The installed PySpark's folder (its ``jars/`` and ``bin/`` are Spark's)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def scala_version(home: Path | None = None) -> str:
    """The Scala binary version of the installed Spark (``2.13``), from its ``spark-core`` jar.

    Raises:
        EngineError: no ``spark-core_<scala>`` jar in PySpark's ``jars/``.
    """
    return _version_in_jar_names(home, "spark-core", r"spark-core_(\d+\.\d+)-")


def delta_artifact() -> Artifact:
    """``io.delta:delta-spark_<scala>:<version>`` for the installed delta-spark package.

    Raises:
        EngineError: delta-spark is not installed.
    """
    try:
        version = metadata.version("delta-spark")
    except metadata.PackageNotFoundError:
        raise EngineError("engine `spark` needs the delta-spark package; run `make install`") from None
    return Artifact("io.delta", f"delta-spark_{scala_version()}", version)


def hadoop_version(home: Path | None = None) -> str:
    """The Hadoop version of the installed Spark (``3.4.1``), from its ``hadoop-client-api`` jar.

    Raises:
        EngineError: no ``hadoop-client-api`` jar in PySpark's ``jars/``.
    """
    return _version_in_jar_names(home, "hadoop-client-api", r"hadoop-client-api-(\d+(?:\.\d+)*)\.jar$")


def _version_in_jar_names(home: Path | None, jar: str, pattern: str) -> str:
    """The version ``pattern``'s group finds in the name of PySpark's first ``<jar>*.jar``.

    Raises:
        EngineError: no such jar in PySpark's ``jars/``.
    """
    jars = (home or pyspark_home()) / "jars"
    for path in sorted(jars.glob(f"{jar}*.jar")):
        found = re.match(pattern, path.name)
        if found:
            return found.group(1)
    raise EngineError(f"no {jar} jar in {jars}: the PySpark installation is incomplete; run `make install`")


def store_artifact() -> Artifact:
    """``org.apache.hadoop:hadoop-aws:<version>`` of the Hadoop the installed PySpark ships (its S3A
    file system, for ``s3a://`` and ``s3://`` lake roots; it brings the AWS SDK bundle, about 560 MB).

    Raises:
        EngineError: PySpark's Hadoop jars are missing.
    """
    return Artifact("org.apache.hadoop", "hadoop-aws", hadoop_version())


def default_cache() -> Path:
    """Where resolved jars are kept unless ``jars_cache`` says otherwise: ``~/.cache/lakehouse/jars``
    (:func:`lakehouse.config.user_cache`)."""
    return user_cache("jars")


def delta_jars(cache: str | os.PathLike[str] | None = None, *, quiet: bool = False) -> list[str]:
    """The local paths of the Delta Lake jars for the installed delta-spark, resolving them first
    when the cache does not hold them yet.

    Args:
        cache: the cache folder (default :func:`default_cache`); created when missing.
        quiet: no progress line while resolving.

    Returns:
        Absolute paths of the jars (delta-spark, delta-storage and their dependencies).

    Raises:
        EngineError: Java is missing, or the jars could not be fetched (names the artifact, the
            repository and Ivy's last words).
    """
    return resolved_jars(delta_artifact(), cache, what="the Delta Lake jars", quiet=quiet)


def store_jars(cache: str | os.PathLike[str] | None = None, *, quiet: bool = False) -> list[str]:
    """The local paths of Hadoop's S3A file system jars (:func:`store_artifact`) and their
    dependencies, resolving them first when the cache does not hold them yet; as :func:`delta_jars`.

    Raises:
        EngineError: as :func:`delta_jars`.
    """
    return resolved_jars(store_artifact(), cache, what="the S3 file system jars", quiet=quiet)


def resolved_jars(artifact: Artifact, cache: str | os.PathLike[str] | None = None, *, what: str,
                  quiet: bool = False) -> list[str]:
    """The local paths of ``artifact``'s jar and of its dependencies (Spark's own and Scala's left
    out), from the cache's manifest, else resolved from Maven Central with Ivy and listed there.

    Args:
        artifact: what to resolve.
        cache: the cache folder (default :func:`default_cache`); created when missing.
        what: how progress lines and errors name the jars.
        quiet: no progress line while resolving.

    Raises:
        EngineError: as :func:`delta_jars`.
    """
    folder = Path(cache) if cache else default_cache()
    manifest = folder / f"{artifact.name}-{artifact.version}.txt"
    jars = _listed(manifest)
    if jars:
        return jars
    folder.mkdir(parents=True, exist_ok=True)
    with flocked(folder / ".resolving.lock"):
        # a process that resolved while this one waited has listed the jars
        return _listed(manifest) or _resolve(artifact, folder, manifest, what=what, quiet=quiet)


def _listed(manifest: Path) -> list[str]:
    """The jars ``manifest`` lists, if it exists and every one of them is there; else ``[]``."""
    if not manifest.exists():
        return []
    jars = manifest.read_text(encoding="utf-8").split()
    return jars if jars and all(Path(j).is_file() for j in jars) else []


def _resolve(artifact: Artifact, folder: Path, manifest: Path, *, what: str, quiet: bool) -> list[str]:
    ivy_jars = sorted((pyspark_home() / "jars").glob("ivy-*.jar"))
    if not ivy_jars:
        raise EngineError(f"no Ivy jar in {pyspark_home() / 'jars'} to resolve {artifact} with; run `make install`")
    work = folder / f"{artifact.name}-{artifact.version}"
    work.mkdir(parents=True, exist_ok=True)
    (work / "ivy.xml").write_text(_IVY_XML.format(org=artifact.group, name=artifact.name, rev=artifact.version), encoding="utf-8")
    (work / "ivysettings.xml").write_text(_IVY_SETTINGS.format(root=MAVEN_CENTRAL), encoding="utf-8")
    retrieved = work / "jars"
    command = [_java(), "-jar", str(ivy_jars[-1]), "-settings", str(work / "ivysettings.xml"),
               "-ivy", str(work / "ivy.xml"), "-cache", str(folder / "ivy-cache"),
               "-retrieve", str(retrieved / "[organisation]_[artifact]-[revision](-[classifier]).[ext]"),
               "-types", "jar", "-sync"]
    said: list[str] = []
    status = None if quiet else console.status(f"fetching {what} ({artifact}) from Maven Central, once")
    try:
        if status is not None:
            status.start()
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as ivy:
            assert ivy.stdout is not None
            for line in ivy.stdout:
                said.append(line.rstrip())
                fetching = re.match(r"downloading (\S+)", line)
                if fetching and status is not None:
                    status.update(f"fetching {fetching.group(1).rsplit('/', 1)[-1]} from Maven Central ({artifact})")
            code = ivy.wait()
    except OSError as exc:
        raise EngineError(f"could not run Ivy to fetch {artifact}: {exc}") from None
    finally:
        if status is not None:
            status.stop()
    jars = sorted(str(p.resolve()) for p in retrieved.glob("*.jar")) if retrieved.is_dir() else []
    if code != 0 or not any(Path(j).name.startswith(f"{artifact.group}_{artifact.name}-") for j in jars):
        last = "\n  ".join([line for line in said if line.strip() and not line.startswith("\t\t")][-8:])
        raise EngineError(
            f"could not fetch {what} {artifact} from {MAVEN_CENTRAL} into {folder}: Ivy said\n  {last}\n"
            "Check that Maven Central is reachable (or put the jars there yourself and list them in spark_conf "
            "`spark.jars`), or use the default engine (LAKEHOUSE_ENGINE=sail).")
    tmp = manifest.with_suffix(".tmp")
    tmp.write_text("\n".join(jars) + "\n", encoding="utf-8")
    tmp.replace(manifest)
    if not quiet:
        console.print(f"fetched {len(jars)} jar(s) for {artifact} into {folder}")
    return jars


def _java() -> str:
    """The ``java`` executable: ``$JAVA_HOME/bin/java``, else the one on the PATH.

    Raises:
        EngineError: neither exists.
    """
    import shutil

    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return str(Path(home, "bin", "java"))
    found = shutil.which("java")
    if found is None:
        raise EngineError("Apache Spark needs Java 17 or later, and none was found (JAVA_HOME, PATH). "
                          "Install a JDK, or use the default engine (LAKEHOUSE_ENGINE=sail).")
    return found

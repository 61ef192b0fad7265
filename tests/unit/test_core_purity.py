"""The pure core and the publisher never import the engine (STYLE.md: Spark lives in one place).

Each check runs in a fresh interpreter, so that what other tests imported does not count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("lakehouse.core", "lakehouse.publish")
ENGINE = ("pyspark", "pysail", "delta", "deltalake", "py4j")

PROBE = f"""
import importlib, json, pkgutil, sys
imported = []
for package in sys.argv[1:]:
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        importlib.import_module(info.name)
        imported.append(info.name)
engine = sorted(m for m in sys.modules if m.split(".")[0] in {set(ENGINE)!r})
print(json.dumps({{"imported": imported, "engine": engine}}))
"""


def probe(*packages: str, path: Path | None = None) -> dict[str, list[str]]:
    """Import every module of ``packages`` in a fresh interpreter; what got imported, engine included."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (path, REPO) if p is not None)}
    done = subprocess.run([sys.executable, "-c", PROBE, *packages], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("package", PACKAGES)
def test_importing_every_module_does_not_import_the_engine(package: str) -> None:
    result = probe(package)
    assert f"{package}.messages" in result["imported"] or f"{package}.publisher" in result["imported"]
    assert result["engine"] == [], f"importing {package} pulled in {result['engine']}"


def test_the_probe_sees_an_engine_import(tmp_path: Path) -> None:
    """The check itself works: a module that imports pyspark, however deep, is caught."""
    package = tmp_path / "impure"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "inner" / "__init__.py").write_text("")
    (package / "inner" / "engine.py").write_text("import pyspark.sql\n")
    result = probe("impure", path=tmp_path)
    assert "impure.inner.engine" in result["imported"]
    assert "pyspark" in result["engine"]

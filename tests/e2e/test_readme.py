"""The README's command examples run as written, so that they cannot rot.

The Publishing section's shell block is run by bash from the repository root (where its
``.venv/bin/lakehouse``, ``make`` and ``lenses/`` paths hold), with the lake, landing folder and
key store of a test lake (``LAKEHOUSE_*`` variables, which every command reads).
"""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest

from tests.lakes import REPO, cli_env

pytestmark = pytest.mark.e2e


def shell_block(section: str) -> str:
    """The first ```sh block under the README heading ``## <section>``."""
    text = (REPO / "README.md").read_text()
    start = text.index(f"\n## {section}\n")
    found = re.search(r"```sh\n(.*?)```", text[start:], re.S)
    assert found is not None, f"no sh block under {section}"
    return found.group(1)


def test_the_publishing_example_runs_as_written(lake: Any) -> None:
    script = shell_block("Publishing")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=REPO, env=cli_env(lake),
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "hi again" in done.stdout  # the SELECT shows the update
    assert "Traceback" not in done.stderr

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


def shell_blocks(section: str) -> list[str]:
    """Every ```sh block under the README heading ``## <section>``, up to the next heading."""
    text = (REPO / "README.md").read_text()
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    return re.findall(r"```sh\n(.*?)```", text[start:end if end > 0 else None], re.S)


def test_the_publishing_example_runs_as_written(lake: Any) -> None:
    """Issue: the README's `schema check slothmail lenses/slothmail/003.yaml`, right after its
    Publishing steps, exited 1 (003 removes a field 002 adds, and 002 needs an `attachment` schema
    the README never made). Every block of the section runs, in order, on one lake."""
    publishing, checking = shell_blocks("Publishing")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", publishing], cwd=REPO, env=cli_env(lake),
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "hi again" in done.stdout  # the SELECT shows the update
    assert "Traceback" not in done.stderr
    checked = subprocess.run(["bash", "-euo", "pipefail", "-c", checking], cwd=REPO, env=cli_env(lake),
                             capture_output=True, text=True, timeout=600, check=False)
    assert checked.returncode == 0, f"{checked.stdout}\n{checked.stderr}"
    assert "valid" in checked.stdout and "adds: attachments" in checked.stdout, checked.stdout

"""The layer rules of docs/design.md hold, and the tool that checks them notices a deliberate break.

`make test` runs ``lint-imports`` on the tree. These tests run it too, then once more on a copy of the
packages with one bad import added, to show the contract catches what review would miss: an import inside
a function, in a module nobody opens.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
LINT = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed (pip install -e '.[dev]')")


def lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(cwd))
    return subprocess.run(
        [str(LINT), "--config", str(cwd / "pyproject.toml"), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_tree_keeps_every_contract() -> None:
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_import_inside_a_function_breaks_its_contract(tmp_path: Path) -> None:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    redact = tmp_path / "collectors" / "sources" / "redact.py"
    redact.write_text(
        redact.read_text() + "\n\ndef _probe() -> None:\n    from collectors.models import Cluster  # noqa: F401\n"
    )

    codes = tmp_path / "incidents" / "diagnosis" / "codes.py"
    codes.write_text(codes.read_text() + "\n\ndef _probe() -> None:\n    from incidents import diagnosis_run  # noqa\n")
    tasks = tmp_path / "incidents" / "tasks.py"
    tasks.write_text(tasks.read_text() + "\n\ndef _probe() -> None:\n    from web.incidents import views  # noqa\n")
    collect = tmp_path / "collectors" / "tasks.py"
    collect.write_text(collect.read_text() + "\n\ndef _probe() -> None:\n    from harness import driver  # noqa\n")

    done = lint(tmp_path)

    assert done.returncode != 0
    assert "Sources import no models BROKEN" in done.stdout
    assert "collectors.sources.redact -> collectors.models" in done.stdout
    assert "The diagnosis imports no Django, no database loader, no source and no simulator BROKEN" in done.stdout
    assert "incidents.diagnosis.codes -> incidents.diagnosis_run" in done.stdout
    assert "Nothing below the web app imports a page BROKEN" in done.stdout
    assert "incidents.tasks -> web.incidents.views" in done.stdout
    assert "Nothing of the product imports the driver but its commands BROKEN" in done.stdout
    assert "collectors.tasks -> harness.driver" in done.stdout
    assert "The simulator imports nothing of the product KEPT" in done.stdout

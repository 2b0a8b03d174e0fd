"""The inventory (collectors) imports nothing of the incidents app, and the contract that says so notices a break.

An Xid's alerts are the incidents app's to read (incidents.xid_seen); the inventory records what the sources
say and stops there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.test_import_contracts import LINT, PACKAGES, ROOT, lint, pytestmark  # noqa: F401


def test_an_inventory_module_reading_an_incident_breaks_the_contract(tmp_path: Path) -> None:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    models = tmp_path / "collectors" / "models.py"
    models.write_text(models.read_text() + "\n\ndef _probe() -> None:\n    from incidents.models import Alert  # noqa\n")

    done = lint(tmp_path)

    assert done.returncode != 0
    assert "The inventory imports nothing of the incidents app BROKEN" in done.stdout
    assert "collectors.models -> incidents.models" in done.stdout
    assert "Sources import no models KEPT" in done.stdout  # only the contract broken says so

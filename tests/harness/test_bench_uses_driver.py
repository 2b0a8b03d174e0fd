"""Every bench script that runs the simulated cluster runs it through the simulation driver (``harness``).

The driver starts the simulator's servers or its process, registers the cluster, moves the clock and runs the
sweeps (docs/design.md §3). A bench script that imported ``simulator.server`` or ``simulator.process`` (or
took ``SimServer``, ``SimProcess`` or ``serve_scenario`` from ``simulator``) would be starting a copy of it.
Only the scripts that measure the simulator alone may, and each says why below. The scripts are read, not
run: an import inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

# The benches that measure the simulator alone (no sweep, no intake), and so start its servers themselves.
SIMULATOR_ONLY = {
    # the engine's ticks and the servers' full listings (its --pipeline goes through run_scenario)
    "sim.py",
    # the API server over HTTPS against the same store over plain HTTP
    "kube_tls.py",
    # the simulator's DCGM series scraped by a real Prometheus that evaluates the shipped rules
    "rules_flood.py",
}

SERVING_MODULES = ("simulator.server", "simulator.process")
SERVING_NAMES = {"SimServer", "SimProcess", "SimProcessError", "serve_scenario", "server", "process"}


def _serving_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in SERVING_MODULES)


def simulator_starts(source: str) -> list[str]:
    """Where ``source`` reaches for the simulator's servers or process: ``"line N: what"``, in order."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names if _serving_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [a.name for a in node.names]
            if _serving_module(node.module) or (
                node.module == "simulator" and SERVING_NAMES.intersection(names)
            ):
                found.append((node.lineno, f"from {node.module} import {', '.join(names)}"))
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "simulator"
            and node.attr in SERVING_NAMES
        ):
            found.append((node.lineno, f"simulator.{node.attr}"))
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and _serving_module(node.args[0].value)
        ):
            found.append((node.lineno, f"{ast.unparse(node.func)}({node.args[0].value!r})"))
    return [f"line {n}: {what}" for n, what in sorted(found)]


def offenders(scripts_dir: Path) -> dict[str, list[str]]:
    """The scripts of ``scripts_dir`` off the allow-list that start the simulator themselves, with where."""
    out = {}
    for script in sorted(scripts_dir.glob("*.py")):
        if script.name not in SIMULATOR_ONLY and (starts := simulator_starts(script.read_text())):
            out[script.name] = starts
    return out


def check(bench: Path) -> None:
    found = offenders(bench)
    assert not found, (
        "bench scripts that start the simulator themselves: run the cluster through harness.driver.Harness "
        "instead (or, for a bench that measures the simulator alone, add it to SIMULATOR_ONLY with why): "
        + "; ".join(f"{name} ({', '.join(where)})" for name, where in found.items())
    )


def test_every_bench_runs_the_simulated_cluster_through_the_driver() -> None:
    check(BENCH)


def test_the_allow_list_names_only_scripts_that_start_the_simulator() -> None:
    for name in SIMULATOR_ONLY:
        script = BENCH / name
        assert script.exists(), f"{name} is gone: take it off SIMULATOR_ONLY"
        assert simulator_starts(script.read_text()), f"{name} no longer starts the simulator: take it off"


@pytest.mark.parametrize(
    "probe",
    [
        "def _probe() -> None:\n    from simulator.server import SimServer  # noqa: F401\n",
        "def _probe() -> None:\n    import simulator.process  # noqa: F401\n",
        "def _probe() -> None:\n    from simulator import SimProcess  # noqa: F401\n",
        "import simulator\n\n\ndef _probe() -> object:\n    return simulator.SimServer\n",
        "import importlib\n\n\ndef _probe() -> object:\n    return importlib.import_module('simulator.server')\n",
    ],
)
def test_a_bench_that_starts_the_simulator_itself_fails_by_name(tmp_path: Path, probe: str) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(BENCH, bench, ignore=shutil.ignore_patterns("__pycache__", "*.md"))
    usage = bench / "usage.py"
    usage.write_text(usage.read_text() + "\n\n" + probe)

    with pytest.raises(AssertionError) as failed:
        check(bench)

    assert "usage.py (line " in str(failed.value)
    assert list(offenders(bench)) == ["usage.py"]

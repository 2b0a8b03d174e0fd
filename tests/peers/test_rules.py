"""promtool on what rcaweb ships and simulates: the exporters' expositions parse, deploy/prometheusrules.yaml
passes `promtool check rules`, and `promtool test rules` runs a unit test for every rule (firing and not)."""

from __future__ import annotations

import re
import shutil
import subprocess
import urllib.request
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from simulator import rules as sim_rules
from simulator.engine.world import World
from simulator.scenario import load_scenario
from simulator.server import SimServer
from tests.peers.promtools import need

pytestmark = pytest.mark.peers

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheusrules.yaml"
UNIT_TESTS = Path(__file__).resolve().parent / "rules" / "rcaweb-gpu.test.yaml"
SCENARIOS = ROOT / "simulator" / "scenarios"
# What promtool's linter says about dcgm-exporter's own names (UUID, modelName, *_TOTAL counters): the real
# exporter's exposition gets the same findings, and the simulator must keep those names.
DCGM_NAMING = re.compile(
    r"""^DCGM_FI_\w+ (label names should be written in 'snake_case' not 'camelCase'|counter metrics should have "_total" suffix)$"""
)


class _Literal(yaml.SafeDumper):
    pass


_Literal.add_representer(
    str, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)
)


def rule_groups() -> list[dict[str, Any]]:
    crd = yaml.safe_load(RULES.read_text())
    assert crd["kind"] == "PrometheusRule" and crd["apiVersion"] == "monitoring.coreos.com/v1"
    return crd["spec"]["groups"]


def extract(tmp: Path) -> Path:
    """The PrometheusRule's groups as a plain Prometheus rules file (what the operator hands Prometheus)."""
    path = tmp / "rcaweb-gpu.rules.yaml"
    path.write_text(yaml.dump({"groups": rule_groups()}, Dumper=_Literal, sort_keys=False))
    return path


def promtool(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([need("promtool"), *args], input=stdin, capture_output=True, cwd=cwd, timeout=120)


def test_promtool_check_rules_accepts_the_shipped_rules(tmp_path: Path) -> None:
    done = promtool("check", "rules", str(extract(tmp_path)))
    out = (done.stdout + done.stderr).decode()
    assert done.returncode == 0, out
    count = sum(len(g["rules"]) for g in rule_groups())
    assert f"SUCCESS: {count} rules found" in out


def test_promtool_unit_tests_pass_for_the_shipped_rules(tmp_path: Path) -> None:
    extract(tmp_path)
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    done = promtool("test", "rules", UNIT_TESTS.name, cwd=tmp_path)
    out = (done.stdout + done.stderr).decode()
    assert done.returncode == 0, out
    assert "SUCCESS" in out and "FAILED" not in out


def test_promtool_unit_tests_fail_for_the_old_flooding_idle_rule(tmp_path: Path) -> None:
    """The unit tests can fail: with the old `{pod!=""}` selector the exporter's own pod label alerts."""
    path = extract(tmp_path)
    text = path.read_text()
    assert 'DCGM_FI_PROF_SM_ACTIVE{exported_pod!=""}' in text
    path.write_text(
        text.replace('DCGM_FI_PROF_SM_ACTIVE{exported_pod!=""}', 'DCGM_FI_PROF_SM_ACTIVE{pod!=""}')
    )
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    done = promtool("test", "rules", UNIT_TESTS.name, cwd=tmp_path)
    out = (done.stdout + done.stderr).decode()
    assert done.returncode != 0 and "GPUIdleAllocated" in out


def _static_labels(rule: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in (rule.get("labels") or {}).items() if "{{" not in str(v)}


def test_every_shipped_rule_has_a_firing_and_a_not_firing_unit_test() -> None:
    tests = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    checks = [c for t in tests for c in t.get("alert_rule_test", [])]
    for group in rule_groups():
        for rule in group["rules"]:
            name, static = rule["alert"], _static_labels(rule)
            firing = [
                a
                for c in checks
                if c["alertname"] == name
                for a in c.get("exp_alerts") or []
                if static.items() <= {k: str(v) for k, v in a["exp_labels"].items()}.items()
            ]
            quiet = [c for c in checks if c["alertname"] == name and not c.get("exp_alerts")]
            assert firing, f"no unit test where {name} {static} fires"
            assert quiet, f"no unit test where {name} does not fire"


def test_no_expected_alert_names_the_exporter_pod() -> None:
    tests = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    for t in tests:
        for c in t.get("alert_rule_test", []):
            for a in c.get("exp_alerts") or []:
                labels = a["exp_labels"]
                for key in ("pod", "exported_pod"):
                    assert "dcgm-exporter" not in str(labels.get(key, "")), (t["name"], labels)
                assert labels.get("namespace") != "gpu-operator", (t["name"], labels)


def test_the_shipped_rules_are_the_alerts_rcaweb_and_its_simulator_know() -> None:
    shipped = {r["alert"]: r["labels"]["severity"] for g in rule_groups() for r in g["rules"]}
    assert shipped == sim_rules.SEVERITY


def _exposition(path: str) -> bytes:
    text = (SCENARIOS / "xid79-gpu-missing.yaml").read_text()
    world = World.from_scenario(load_scenario(text))
    world.advance_to(world.end - timedelta(minutes=1))
    with SimServer(world) as sim, urllib.request.urlopen(sim.prometheus_url + path) as resp:
        return resp.read()


@pytest.mark.parametrize("node", [0, 1])
def test_promtool_check_metrics_parses_the_dcgm_exposition(node: int) -> None:
    text = (SCENARIOS / "xid79-gpu-missing.yaml").read_text()
    world = World.from_scenario(load_scenario(text))
    world.advance_to(world.end - timedelta(minutes=1))
    name = sorted(world.nodes)[node]
    with (
        SimServer(world) as sim,
        urllib.request.urlopen(f"{sim.prometheus_url}/nodes/{name}/metrics") as resp,
    ):
        body = resp.read()
    assert b"DCGM_FI_DEV_GPU_TEMP{" in body
    done = promtool("check", "metrics", stdin=body)
    findings = [line for line in (done.stdout + done.stderr).decode().splitlines() if line.strip()]
    assert done.returncode in (0, 3), findings  # 3: lint findings only, 1 would be a parse error
    assert not [f for f in findings if not DCGM_NAMING.match(f)], findings


def test_promtool_check_metrics_passes_the_kube_state_metrics_exposition() -> None:
    body = _exposition("/kube-state-metrics/metrics")
    assert b"kube_node_status_capacity{" in body and b"kube_pod_status_phase{" in body
    done = promtool("check", "metrics", stdin=body)
    assert done.returncode == 0, (done.stdout + done.stderr).decode()


def test_promtool_check_metrics_does_reject_a_broken_exposition() -> None:
    done = promtool("check", "metrics", stdin=b'DCGM_FI_DEV_GPU_TEMP{gpu="0"} warm\n')
    assert done.returncode == 1 and b"error" in done.stdout + done.stderr


def test_a_missing_tool_skips_with_its_package_or_fails_when_peers_are_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.peers import promtools

    monkeypatch.setattr(promtools.shutil, "which", lambda _: None)
    monkeypatch.setattr(promtools.os, "access", lambda *_: False)
    monkeypatch.delenv("RCAWEB_REQUIRE_PEERS", raising=False)
    with pytest.raises(
        pytest.skip.Exception, match="promtool is not installed \\(Debian package prometheus\\)"
    ):
        promtools.need("promtool")
    monkeypatch.setenv("RCAWEB_REQUIRE_PEERS", "1")
    with pytest.raises(pytest.fail.Exception, match="RCAWEB_REQUIRE_PEERS=1 requires"):
        promtools.need("promtool")

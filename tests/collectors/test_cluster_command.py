"""``manage.py cluster add|list|remove|check`` against the simulator (real HTTPS, real HTTP) and dead URLs."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from collectors.models import Cluster
from tests.collectors.faultserver import fault_server, kubeconfig_for, refused_url
from tests.collectors.simhelpers import served, small_world

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("cluster", *args, stdout=out)
    return out.getvalue()


def rows(text: str) -> dict[str, str]:
    """CALL -> the rest of its line, from the check table."""
    out = {}
    for line in text.splitlines()[1:]:
        for call in (
            "list nodes",
            "list namespaces",
            "list pods",
            "list events",
            "list jobs",
            "read pod log",
        ):
            if f"  {call}  " in line:
                out[call] = line
        if line.startswith(("prometheus", "runai")):
            out[line.split()[0]] = line
    return out


@pytest.mark.parametrize("scheduler", ["kai", "kueue"])
def test_it_adds_lists_and_checks_a_cluster_served_by_the_simulator(scheduler: str) -> None:
    world = small_world(scheduler)
    with (
        served(world) as sim,
        override_settings(RCAWEB_RUNAI_ENABLED=True, RCAWEB_RUNAI_TOKEN=sim.runai_token),
    ):
        sim.advance_to(world.start + timedelta(hours=1))
        text = run(
            "add",
            "sim-prod",
            "--kubeconfig",
            sim.kubeconfig_path,
            "--prometheus",
            sim.prometheus_url,
            "--scheduler",
            scheduler,
            "--runai",
            sim.runai_url,
        )
        assert "added cluster sim-prod" in text
        cluster = Cluster.objects.get(name="sim-prod")
        assert (cluster.kubeconfig, cluster.prometheus_url, cluster.scheduler) == (
            sim.kubeconfig_path,
            sim.prometheus_url,
            scheduler,
        )
        listing = run("list")
        assert "sim-prod" in listing and sim.prometheus_url in listing and scheduler in listing
        text = run("check", "sim-prod")
    table = rows(text)
    calls = ["list nodes", "list namespaces", "list pods", "list events", "list jobs", "read pod log"]
    if scheduler == "kai":
        calls += ["list queues.scheduling.run.ai/v2", "list podgroups.scheduling.run.ai/v2alpha2"]
    else:
        calls += [
            f"list {k}.kueue.x-k8s.io/v1beta1"
            for k in ("clusterqueues", "localqueues", "workloads", "resourceflavors")
        ]
    lines = text.splitlines()
    for call in calls:
        line = next((ln for ln in lines if f"  {call}  " in ln), None)
        assert line is not None and line.startswith("kubernetes") and "  ok  " in line, (call, text)
    assert "  ok  " in table["prometheus"] and "24 GPU(s) report DCGM_FI_DEV_GPU_UTIL" in table["prometheus"]
    assert "  ok  " in table["runai"] and "read project" in table["runai"]
    assert "read h100-01" in table["list nodes"] and " ms " in table["list nodes"]
    assert "read pod log" in table and "(1 line, not shown)" in table["read pod log"]
    assert f"all {len(calls) + 2} checks passed for cluster sim-prod" in text


def test_check_fails_naming_the_dead_source_and_why(tmp_path: Path) -> None:
    dead_kube = kubeconfig_for(refused_url(), str(tmp_path / "kc"))
    run("add", "dead", "--kubeconfig", dead_kube, "--prometheus", refused_url(), "--scheduler", "default")
    out = StringIO()
    with pytest.raises(CommandError) as exc:
        call_command("cluster", "check", "dead", "--timeout", "2", stdout=out)
    assert exc.value.returncode == 1
    table = rows(out.getvalue())
    assert "  error  " in table["list nodes"] and "cannot connect to http://127.0.0.1:" in table["list nodes"]
    assert "  error  " in table["prometheus"] and "cannot connect to http://127.0.0.1:" in table["prometheus"]
    assert "checks failed for cluster dead" in str(exc.value) and "prometheus query" in str(exc.value)


def test_check_names_a_forbidden_kind_and_a_prometheus_without_dcgm(tmp_path: Path) -> None:
    world = small_world("kai")
    with served(world) as sim:
        sim.advance_to(world.start + timedelta(minutes=30))
        with (
            fault_server(
                upstream=sim.kube_url, upstream_ca=sim.kube_ca_path, faults={"podgroups": "403"}
            ) as kube,
            fault_server(
                bodies={"/api/v1/query": b'{"status":"success","data":{"resultType":"vector","result":[]}}'}
            ) as prom,
        ):
            run(
                "add",
                "rbac",
                "--kubeconfig",
                kubeconfig_for(kube.url, str(tmp_path / "kc")),
                "--prometheus",
                prom.url,
            )
            out = StringIO()
            with pytest.raises(CommandError):
                call_command("cluster", "check", "rbac", stdout=out)
    text = out.getvalue()
    podgroups = next(line for line in text.splitlines() if "podgroups" in line)
    assert "  error  " in podgroups and "forbidden" in podgroups
    queues = next(
        line for line in text.splitlines() if "queues.scheduling" in line and "podgroups" not in line
    )
    assert "  ok  " in queues
    assert "holds no DCGM_FI_DEV_GPU_UTIL series" in rows(text)["prometheus"]


def test_add_refuses_bad_input_naming_it(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no such file"):
        run("add", "x", "--kubeconfig", str(tmp_path / "nope"), "--prometheus", "http://p:9090")
    bad = tmp_path / "bad"
    bad.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    with pytest.raises(CommandError, match="the kubernetes client cannot use it"):
        run("add", "x", "--kubeconfig", str(bad), "--prometheus", "http://p:9090")
    with pytest.raises(CommandError, match="not an http"):
        run("add", "x", "--in-cluster", "--prometheus", "prometheus:9090")
    with pytest.raises(CommandError, match="letters, digits"):
        run("add", "x y", "--in-cluster", "--prometheus", "http://p:9090")
    assert "added cluster x" in run("add", "x", "--in-cluster", "--prometheus", "http://p:9090")
    assert Cluster.objects.get(name="x").kubeconfig == ""
    with pytest.raises(CommandError, match="exists"):
        run("add", "x", "--in-cluster", "--prometheus", "http://q:9090")
    assert "updated cluster x" in run(
        "add", "x", "--in-cluster", "--prometheus", "http://q:9090", "--replace"
    )
    assert Cluster.objects.get(name="x").prometheus_url == "http://q:9090"


def test_remove_needs_confirmation_then_deletes() -> None:
    run("add", "gone", "--in-cluster", "--prometheus", "http://p:9090")
    with pytest.raises(CommandError, match="--yes"):
        run("remove", "gone")
    assert Cluster.objects.filter(name="gone").exists()
    assert "removed cluster gone" in run("remove", "gone", "--yes")
    assert not Cluster.objects.filter(name="gone").exists()
    with pytest.raises(CommandError, match="unknown cluster 'gone'"):
        run("check", "gone")

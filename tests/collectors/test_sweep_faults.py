"""Faults are evidence: a source that answers 500, 401, garbage or nothing in time becomes a recorded
collection error, the other sources are still collected, nothing is deleted or half-written."""

from __future__ import annotations

from datetime import timedelta

import pytest

from collectors.models import EntityVersion, SourceRun
from collectors.sweep import sweep_cluster
from tests.collectors.faultserver import fault_server, kubeconfig_for, refused_url
from tests.collectors.simhelpers import register, served, small_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def sim(settings):
    settings.RCAWEB_SOURCE_TIMEOUT_S = 1
    world = small_world("kai")
    with served(world) as server:
        server.advance_to(world.start + timedelta(minutes=30))
        yield server


def _open(kind: str) -> set[str]:
    return set(
        EntityVersion.objects.filter(kind=kind, valid_to__isnull=True).values_list("entity__name", flat=True)
    )


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ("500", "server error 500"),
        ("hang", "did not answer within 1 s"),
        ("401", "unauthorized"),
        ("garbage", "not JSON"),
    ],
)
def test_a_failing_prometheus_is_recorded_and_kubernetes_is_still_collected(sim, fault, words):
    with fault_server(upstream=sim.prometheus_url, faults={"/api/v1/query": fault}, hang_s=2.5) as prom:
        cluster = register(sim, prometheus_url=prom.url)
        summary = sweep_cluster(cluster.name, sim.world.now)
    assert summary.errors and all(e.startswith("prometheus: ") for e in summary.errors)
    assert any(words in e for e in summary.errors)
    assert summary.skipped_kinds == ["gpu"]
    assert len(_open("node")) == 3 and _open("job") and _open("pod") and _open("project") == {"vision", "nlp"}
    err = SourceRun.objects.filter(cluster=cluster, ok=False, source="prometheus").first()
    assert err is not None and words in err.error and err.time == sim.world.now
    assert SourceRun.objects.filter(cluster=cluster, ok=True, call="list pods").exists()


def test_a_failing_scheduler_listing_keeps_jobs_as_they_were(sim, tmp_path):
    cluster = register(sim)
    sweep_cluster(cluster.name, sim.world.now)
    jobs_before = _open("job")
    sim.advance_to(sim.world.now + timedelta(minutes=30))
    with fault_server(
        upstream=sim.kube_url, upstream_ca=sim.kube_ca_path, faults={"podgroups": "500"}
    ) as proxy:
        register(sim, kubeconfig=kubeconfig_for(proxy.url, str(tmp_path / "kc")))
        summary = sweep_cluster(cluster.name, sim.world.now)
    assert [e.split(":")[0:2] for e in summary.errors] == [
        ["k8s", " list podgroups.scheduling.run.ai/v2alpha2"]
    ]
    assert "job" in summary.skipped_kinds and "pod" not in summary.skipped_kinds
    assert _open("job") >= jobs_before  # not deleted, not rewritten without their scheduling state
    assert not EntityVersion.objects.filter(kind="job", valid_from=sim.world.now).exists()
    assert EntityVersion.objects.filter(kind="gpu").exists()


def test_an_unreachable_api_server_deletes_nothing_and_prometheus_still_runs(sim, tmp_path):
    cluster = register(sim)
    sweep_cluster(cluster.name, sim.world.now)
    before = {k: _open(k) for k in ("node", "pod", "job", "project", "gpu")}
    register(sim, kubeconfig=kubeconfig_for(refused_url(), str(tmp_path / "kc")))
    summary = sweep_cluster(cluster.name, sim.world.now + timedelta(minutes=1))
    assert summary.errors and summary.closed == 0
    assert {k: _open(k) for k in before} == before
    assert SourceRun.objects.filter(
        cluster=cluster, source="prometheus", ok=True, time=sim.world.now + timedelta(minutes=1)
    ).exists()


def test_a_401_from_kubernetes_is_named_as_such(sim, tmp_path):
    cluster = register(
        sim,
        kubeconfig=kubeconfig_for(
            sim.kube_url, str(tmp_path / "kc"), token="wrong", ca_file=sim.kube_ca_path
        ),
    )
    summary = sweep_cluster(cluster.name, sim.world.now)
    assert any(e.startswith("k8s: list nodes: unauthorized") for e in summary.errors)
    assert not EntityVersion.objects.filter(kind="node").exists()


def test_two_sweeps_of_one_cluster_never_overlap(sim):
    from collectors.sweep import cluster_lock

    cluster = register(sim)
    with cluster_lock(cluster.name, "inventory") as got:
        assert got
        summary = sweep_cluster(cluster.name, sim.world.now)
    assert summary.skipped and summary.opened == 0
    assert not EntityVersion.objects.exists()


def test_a_pod_listing_failing_part_way_keeps_what_it_recorded_and_closes_nothing(sim, monkeypatch):
    """Pods are recorded as they are listed (LISTED_BATCH at a time): a listing that fails part way leaves the
    pods recorded so far, each whole, and deletes nothing; the jobs, which need every pod, are skipped."""
    from collectors.sources.errors import SourceError
    from collectors.sources.kubernetes import KubeSource
    from collectors.sweep import listing_memo, listing_recorder

    monkeypatch.setattr(listing_memo, "memos", {})  # (other tests' clusters leave theirs)
    cluster = register(sim)
    sweep_cluster(cluster.name, sim.world.now)
    before = _open("pod")
    sim.advance_to(sim.world.now + timedelta(hours=2))
    later = sim.world.now
    monkeypatch.setattr(listing_recorder, "LISTED_BATCH", 2)
    real = KubeSource.iter_pods

    def failing(self, reuse=None):  # type: ignore[no-untyped-def]
        for n, item in enumerate(real(self, reuse)):
            if n == 2:
                raise SourceError("k8s", "list pods", "connection reset by peer")
            yield item

    monkeypatch.setattr(KubeSource, "iter_pods", failing)
    summary = sweep_cluster(cluster.name, later)
    assert any("list pods" in e and "connection reset" in e for e in summary.errors), summary.errors
    assert {"pod", "job"} <= set(summary.skipped_kinds)
    assert _open("pod") >= before  # nothing deleted
    opened = EntityVersion.objects.filter(kind="pod", valid_from=later)
    assert 0 < opened.count() <= 2 and not opened.filter(deleted=True).exists()  # the first batch, whole
    assert EntityVersion.objects.filter(kind="pod", valid_to=later).count() <= opened.count()  # replaced only
    assert SourceRun.objects.filter(cluster=cluster, ok=False, call="list pods", time=later).exists()
    assert [m.objects for key, m in listing_memo.memos.items() if key[0] == "pods"] == [{}]

"""incidents.diagnosis_run: inventory + observations -> persisted, cited, ranked hypotheses and actions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from collectors.inventory import Observed, record_states
from collectors.models import Cluster, Entity, SourceRun
from incidents.diagnosis_run import NoEvidence, diagnose_incident, save_hypothesis
from incidents.job_explanation import explain_job_at
from incidents.models import Citation, Hypothesis, Incident, IncidentSubject, Observation, ProposedAction

T0 = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)
ONSET = T0 + timedelta(hours=2, minutes=30)


def _node(name: str, allocatable: int = 8) -> Observed:
    return Observed(
        "node",
        name,
        state={
            "ready": True,
            "unschedulable": False,
            "taints": [],
            "nodepool": "h100",
            "labels": {"nvidia.com/gpu.count": "8", "kubernetes.io/hostname": name},
            "gpu_product": "NVIDIA-H100-80GB-HBM3",
            "capacity": {"nvidia.com/gpu": 8},
            "allocatable": {"nvidia.com/gpu": allocatable},
        },
        hot={"phase": "Ready", "ready": True, "gpus": 8, "gpus_allocatable": allocatable},
    )


def _queue(quota: int, limit: int) -> list[Observed]:
    st = {
        "project": "vision",
        "priority": 0,
        "quota_gpus": quota,
        "limit_gpus": limit,
        "over_quota_weight": 1,
    }
    return [
        Observed("queue", "vision", state=st, actor="platform-admin"),
        Observed(
            "project",
            "vision",
            state={**st, "queue": "vision", "namespace": "vision"},
            actor="platform-admin",
        ),
    ]


def _job(pods: int = 2) -> Observed:
    return Observed(
        "job",
        "resnet-train",
        namespace="vision",
        state={
            "phase": "Pending",
            "queue": "vision",
            "project": "vision",
            "pods": pods,
            "gpus_per_pod": 8,
            "gpus_total": pods * 8,
            "priority_class": "train",
            "preemptible": True,
            "node_selector": {},
            "tolerations": [],
            "submitted": "2026-11-29T00:30:00Z",
            "active": 0,
        },
        hot={"phase": "Pending", "queue": "vision", "project": "vision", "gpus": pods * 8},
    )


@pytest.fixture
def world(db):
    cluster = Cluster.objects.create(name="gpu-prod", scheduler="kai")
    record_states(
        cluster, [_node("h100-01"), _node("h100-02"), _node("h100-03"), *_queue(16, 24), _job()], T0
    )
    record_states(cluster, _queue(8, 8), T0 + timedelta(hours=2))  # platform-admin cuts the quota
    SourceRun.objects.create(
        cluster=cluster, source="k8s", call="list pods", time=ONSET + timedelta(minutes=5), ok=True
    )
    incident = Incident.objects.create(
        title="GPUJobPendingTooLong", cluster=cluster, onset=ONSET, window_start=ONSET - timedelta(hours=1)
    )
    job = Entity.objects.get(kind="job", name="resnet-train")
    IncidentSubject.objects.create(incident=incident, entity=job, role="subject")
    return cluster, incident, job


def test_it_persists_ranked_cited_hypotheses_and_actions(world):
    _, incident, _ = world
    saved = diagnose_incident(incident.pk)
    assert saved[0].code == "project_quota_exhausted"
    assert saved[0].status == "supported"
    assert "uses 0 of 8" in saved[0].statement and "platform-admin" in saved[0].statement
    codes = {h.code: h for h in saved}
    assert codes["gpu_capacity_shortage"].status == "refuted"
    assert codes["recent_change"].status == "supported"
    for h in Hypothesis.objects.filter(incident=incident):
        assert Citation.objects.filter(hypothesis=h).exists(), h.code
    # Computed facts are stored as inventory observations so citations resolve.
    assert Observation.objects.filter(incident=incident, source="inventory", kind="quota_usage").exists()
    assert ProposedAction.objects.filter(
        incident=incident, hypothesis__code="project_quota_exhausted"
    ).exists()
    first = list(Hypothesis.objects.filter(incident=incident).values_list("id", flat=True))
    diagnose_incident(incident.pk)  # a rerun replaces, never duplicates
    assert not Hypothesis.objects.filter(pk__in=first).exists()
    assert Hypothesis.objects.filter(incident=incident, code="project_quota_exhausted").count() == 1


def test_it_refuses_a_hypothesis_without_evidence(world):
    _, incident, _ = world
    with pytest.raises(NoEvidence):
        save_hypothesis(
            incident,
            code="gpu_capacity_shortage",
            statement="s",
            status="supported",
            confidence=0.5,
            rank=1,
            evidence=[],
        )
    other = Incident.objects.create(title="other", onset=ONSET, window_start=ONSET)
    foreign = Observation.objects.create(
        incident=other,
        source="k8s",
        kind="event",
        locator="x",
        observed_at=ONSET,
        collected_at=ONSET,
        dedup_key="x",
    )
    with pytest.raises(NoEvidence):
        save_hypothesis(
            incident,
            code="gpu_capacity_shortage",
            statement="s",
            status="supported",
            confidence=0.5,
            rank=1,
            evidence=[(foreign.pk, "supports")],
        )
    assert not Hypothesis.objects.filter(incident=incident).exists()


def test_it_lowers_confidence_when_a_source_failed(world):
    cluster, incident, _ = world
    before = {h.code: h.confidence for h in diagnose_incident(incident.pk)}
    Observation.objects.create(
        incident=incident,
        source="kai",
        kind="queue_state",
        locator="/apis/scheduling.run.ai",
        observed_at=ONSET,
        collected_at=ONSET,
        content={"source": "kai"},
        dedup_key="err:kai",
        error="KAI API: 503 Service Unavailable",
    )
    after = {h.code: h for h in diagnose_incident(incident.pk)}
    assert after["project_quota_exhausted"].confidence < before["project_quota_exhausted"]
    assert "kai" in after["project_quota_exhausted"].why


def test_it_explains_the_same_job_differently_when_the_cluster_changed(world):
    _, _, job = world
    before = explain_job_at(job, T0 + timedelta(hours=1))
    after = explain_job_at(job, T0 + timedelta(hours=2, minutes=10))
    assert before.quota.quota == 16 and after.quota.quota == 8
    assert not before.quota.blocks and after.quota.blocks
    assert before.to_dict() != after.to_dict()


def test_it_shows_ranked_and_ruled_out_hypotheses_and_never_executed_actions(world, admin_client):
    _, incident, job = world
    diagnose_incident(incident.pk)
    html = admin_client.get(incident.get_absolute_url()).content.decode()
    assert "project_quota_exhausted" in html and "Ruled out" in html
    assert "never executed by rcaweb" in html
    assert (
        html.index("project_quota_exhausted") < html.index("Ruled out") < html.index("gpu_capacity_shortage")
    )
    page = admin_client.get(job.get_absolute_url() + "why/?t=2026-11-29T02:10:00Z").content.decode()
    assert "over limit" in page and "h100-01" in page

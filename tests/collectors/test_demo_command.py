"""``manage.py demo``: the demo runs the simulator through the real collectors (here without serving)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from collectors.models import Cluster, EntityVersion, TelemetrySample
from incidents.models import Alert, Incident

pytestmark = pytest.mark.django_db

SCENARIO = """
format: 1
name: demo-test
summary: a tiny demo
duration: 30m
seed: 3
cluster:
  name: demo-c
  scheduler: kueue
  nodepools:
    - {name: a100, nodes: 2, gpus_per_node: 4, gpu_product: NVIDIA-A100-SXM4-80GB}
projects:
  - {name: vision, quota: {gpu: 4}}
jobs:
  - {name: train, project: vision, submit: 5m, pods: 1, gpus_per_pod: 4, runtime: 2h}
"""


def _incident(cluster: Cluster | None, label: str) -> Incident:
    """An open incident of an earlier timeline, with its alert."""
    from django.utils import timezone

    now = timezone.now()
    incident = Incident.objects.create(title="old", cluster=cluster, onset=now, window_start=now)
    Alert.objects.create(
        fingerprint=f"fp-{label}-{incident.pk}",
        name="GPUXidError",
        cluster_name=label,
        labels={"cluster": label},
        starts_at=now,
        received_at=now,
        updated_at=now,
        incident=incident,
    )
    return incident


def test_it_fast_forwards_the_scenario_to_now_and_prints_the_login(tmp_path):
    path = tmp_path / "demo.yaml"
    path.write_text(SCENARIO)
    old = Cluster.objects.create(name="demo-c")  # old demo data is dropped, not mixed with the new timeline
    other = Cluster.objects.create(name="prod")
    stale = [_incident(old, "demo-c"), _incident(None, "demo-c"), _incident(other, "prod")]
    out = StringIO()
    call_command("demo", "--scenario", str(path), "--no-serve", "--sweep-every", "30", stdout=out)
    text = out.getvalue()
    assert "dropping the previous demo data" in text and "ready in" in text
    # The old timeline's incidents and alerts went with it (one left without its cluster by an older run
    # too); another cluster's stayed.
    assert [i.pk for i in Incident.objects.filter(pk__in=[i.pk for i in stale])] == [stale[2].pk]
    assert not Alert.objects.filter(cluster_name="demo-c", incident__in=stale[:2]).exists()
    assert Alert.objects.filter(cluster_name="prod").count() == 1
    cluster = Cluster.objects.get(name="demo-c")
    assert cluster.kubeconfig and cluster.prometheus_url.startswith("http://127.0.0.1:")
    assert EntityVersion.objects.filter(cluster=cluster, kind="node").count() == 2
    assert EntityVersion.objects.filter(cluster=cluster, kind="job", phase="Running").exists()
    assert EntityVersion.objects.filter(cluster=cluster, kind="gpu").values("entity").distinct().count() == 8
    assert TelemetrySample.objects.filter(cluster=cluster).exists()
    assert User.objects.get(username="demo").groups.filter(name="responder").exists()


def test_the_demo_login_gets_a_fresh_password_each_run():
    from harness.demo import create_login

    user, first = create_login("demo")
    _, second = create_login("demo")
    assert user == "demo" and first != second
    assert authenticate(username="demo", password=second) is not None
    assert authenticate(username="demo", password=first) is None


def test_it_refuses_bad_arguments(tmp_path):
    with pytest.raises(CommandError, match="--speed must be positive"):
        call_command("demo", "--no-serve", "--speed", "0")
    with pytest.raises(CommandError, match="demo.yaml"):
        call_command("demo", "--no-serve", "--scenario", str(tmp_path / "demo.yaml"))

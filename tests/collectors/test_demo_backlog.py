"""The demo prints its login only once the fast-forward's alerts are grouped and its incidents diagnosed."""

from __future__ import annotations

import threading

import pytest
from django.utils import timezone

from collectors.models import Cluster
from harness import demo
from harness.demo import Demo, DemoOptions, backlog, progress_line
from incidents.models import Alert, Incident

pytestmark = pytest.mark.django_db


class Poster:
    """The harness' AlertPoster as the backlog wait reads it: how many notifications went out."""

    def __init__(self) -> None:
        self.posted = self.failed = 0


class Harness:
    def __init__(self, cluster: Cluster, queued: int) -> None:
        self.cluster, self.poster, self.queued = cluster, Poster(), queued
        self.released = False

    def release_alerts(self) -> int:
        self.released = True
        return self.queued


def _alert_and_incident(cluster: Cluster) -> tuple[Alert, Incident]:
    now = timezone.now()
    incident = Incident.objects.create(title="x", cluster=cluster, onset=now, window_start=now)
    alert = Alert.objects.create(
        fingerprint="fp",
        name="GPUMissing",
        cluster_name=cluster.name,
        starts_at=now,
        received_at=now,
        updated_at=now,
    )
    return alert, incident


def test_it_waits_until_every_alert_is_grouped_and_every_incident_diagnosed(monkeypatch) -> None:
    monkeypatch.setattr(demo, "PROGRESS_EVERY_S", 0.0)
    cluster = Cluster.objects.create(name="demo-c")
    alert, incident = _alert_and_incident(cluster)
    harness = Harness(cluster, queued=2)
    lines: list[str] = []

    def out(line: str) -> None:
        lines.append(line)
        if line.startswith("  …") and len(lines) == 2:  # the intake gets through the backlog meanwhile
            harness.poster.posted = 2
            Alert.objects.filter(pk=alert.pk).update(processed_at=timezone.now(), incident=incident)
        elif line.startswith("  …") and len(lines) == 3:
            Incident.objects.filter(pk=incident.pk).update(
                collection_state="done", diagnosed_at=timezone.now()
            )

    summary = Demo(DemoOptions(), out=out)._answer_backlog(harness, timezone.now())  # type: ignore[arg-type]
    assert harness.released
    assert lines[0] == "answering the backlog: 2 alert notification(s) for the intake…"
    assert lines[1] == "  … 0 of 2 notifications posted, 0 of 1 alerts grouped, 0 of 1 incidents diagnosed"
    assert lines[-1].endswith(
        "2 of 2 notifications posted, 1 of 1 alerts grouped, 1 of 1 incidents diagnosed"
    )
    assert lines[-1].startswith("backlog answered in")
    assert summary["alerts_posted"] == 2 and not backlog("demo-c")
    assert "  … bringing the open incidents' answers up to now" in lines


def test_it_brings_the_answers_up_to_now_before_the_login(monkeypatch) -> None:
    """Each incident was diagnosed at its onset during the fast-forward: the console opens with what holds now."""
    from incidents import diagnosis_run

    cluster = Cluster.objects.create(name="demo-r")
    calls: list[tuple[object, object]] = []
    monkeypatch.setattr(diagnosis_run, "rediagnose_changed", lambda now, cluster_id: calls.append((now, cluster_id)) or 3)
    at = timezone.now()
    summary = Demo(DemoOptions(), out=lambda line: None)._answer_backlog(Harness(cluster, 0), at)  # type: ignore[arg-type]
    assert calls == [(at, cluster.pk)] and summary["rechecked_at_start"] == 3


def test_it_serves_anyway_when_the_intake_takes_too_long(monkeypatch) -> None:
    monkeypatch.setattr(demo, "BACKLOG_WAIT_S", 0.0)
    cluster = Cluster.objects.create(name="demo-c")
    _alert_and_incident(cluster)
    lines: list[str] = []
    Demo(DemoOptions(), out=lines.append)._answer_backlog(Harness(cluster, 1), timezone.now())  # type: ignore[arg-type]
    assert any("the intake is still busy after 0 s" in line for line in lines)
    assert backlog("demo-c")


def test_a_stop_ends_the_wait() -> None:
    cluster = Cluster.objects.create(name="demo-c")
    _alert_and_incident(cluster)
    run = Demo(DemoOptions(), out=lambda line: None)
    threading.Timer(0.2, run.stop.set).start()
    run._answer_backlog(Harness(cluster, 1), timezone.now())  # type: ignore[arg-type]
    assert run.stop.is_set()


def test_the_backlog_counts_only_its_own_cluster() -> None:
    mine, other = Cluster.objects.create(name="demo-c"), Cluster.objects.create(name="prod")
    _alert_and_incident(other)
    assert not backlog("demo-c") and backlog("prod")
    assert progress_line("demo-c", 0, 0).endswith("0 of 0 alerts grouped, 0 of 0 incidents diagnosed")
    Incident.objects.create(
        title="y", cluster=mine, onset=timezone.now(), window_start=timezone.now(), collection_state="failed"
    )
    assert not backlog("demo-c")  # a failed collection is finished: the incident says why

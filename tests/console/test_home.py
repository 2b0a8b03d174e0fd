from __future__ import annotations

import re
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from collectors.inventory import Observed, record_states
from collectors.models import Cluster, SourceRun
from incidents.models import Alert, Hypothesis, Incident
from tests.collectors.factories import T0, PageTestCase, iso
from tests.console.factories import build_fleet
from web.console.home import pending_jobs


def alert(
    name: str, starts, *, incident=None, status: str = "firing", ends=None, cluster: str = "gpu-prod"
) -> Alert:
    now = timezone.now()
    return Alert.objects.create(
        fingerprint=f"fp-{name}",
        name=name,
        status=status,
        severity="warning",
        cluster_name=cluster,
        labels={"alertname": name},
        annotations={"summary": f"{name} summary"},
        starts_at=starts,
        ends_at=ends,
        received_at=now,
        updated_at=now,
        incident=incident,
    )


class HomeTest(PageTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.t = self.times["end"]
        self.incident = Incident.objects.create(
            title="vit-large pending",
            severity="critical",
            cluster=self.cluster,
            onset=T0 + timedelta(minutes=40),
            window_start=T0,
            owner="alice",
        )
        Hypothesis.objects.create(
            incident=self.incident,
            code="project_quota_exhausted",
            statement="quota",
            status="supported",
            confidence=0.8,
            rank=0,
        )
        Hypothesis.objects.create(
            incident=self.incident,
            code="recent_change",
            statement="cut",
            status="supported",
            confidence=0.6,
            rank=1,
        )
        Incident.objects.create(
            title="old and resolved",
            cluster=self.cluster,
            onset=T0,
            window_start=T0,
            status="resolved",
            resolved_at=T0 + timedelta(minutes=30),
        )
        alert("GPUJobPendingTooLong", T0 + timedelta(minutes=40), incident=self.incident)
        alert("NodeNotReady", T0 + timedelta(minutes=150))
        alert("GPUXidError", T0 + timedelta(minutes=10), status="resolved", ends=T0 + timedelta(minutes=20))

    def html(self, t=None, client=None) -> str:
        r = self.get("/", t or self.t, client=client)
        assert r.status_code == 200
        return r.content.decode()

    def panel(self, html: str, pid: str) -> str:
        m = re.search(rf'<section class="panel" id="{pid}">(.*?)</section>', html, re.S)
        assert m, pid
        return m.group(1)

    def test_it_lists_open_incidents_with_severity_age_owner_and_top_hypothesis(self) -> None:
        p = self.panel(self.html(), "panel-incidents")
        assert "vit-large pending" in p and "old and resolved" not in p
        assert (
            "critical" in p and "alice" in p and "project_quota_exhausted" in p and "recent_change" not in p
        )
        assert ">2h40m<" in p  # onset T0+40m, t = T0+200m
        assert f'href="/incidents/{self.incident.pk}/?t=' in p

    def test_an_incident_resolved_after_t_is_still_open_at_t(self) -> None:
        Incident.objects.filter(title="old and resolved").update(resolved_at=self.t + timedelta(minutes=5))
        panel = self.panel(self.html(), "panel-incidents")
        assert "old and resolved" in panel
        # its status now is "resolved"; at t it was not: the row says it was resolved later, and when
        row = panel[panel.index("old and resolved") :].split("</tr>")[0]
        assert ">resolved later</span>" in row and ">resolved</span>" not in row
        assert iso(self.t + timedelta(minutes=5)).replace("+00:00", "Z")[:16] in row

    def test_it_lists_firing_alerts_that_no_incident_has_taken(self) -> None:
        p = self.panel(self.html(), "panel-alerts")
        assert "NodeNotReady" in p
        assert "GPUJobPendingTooLong" not in p  # in an incident
        assert "GPUXidError" not in p  # resolved before t
        assert "NodeNotReady" not in self.panel(
            self.html(T0 + timedelta(minutes=100)), "panel-alerts"
        )  # not yet

    def test_it_lists_gpu_jobs_pending_longer_than_the_threshold_with_a_one_line_reason(self) -> None:
        p = self.panel(self.html(), "panel-pending")
        assert "vision/vit-large" in p and "nlp/bert-eval" in p
        assert "resnet-train" not in p  # running
        assert "NonPreemptibleOverQuota: Non-preemptible workload is over quota in queue vision" in p
        assert "preemption:" not in p  # the one-line reason drops the preemption tail
        # At T0+30m vit-large has waited 10 minutes only (threshold 15m).
        assert "vit-large" not in self.panel(self.html(T0 + timedelta(minutes=30)), "panel-pending")

    def test_it_shows_unhealthy_nodes_and_sources_with_errors(self) -> None:
        html = self.html()
        health = self.panel(html, "panel-health")
        assert "h100-04" in health and "0/8 GPUs allocatable" in health and "h100-01" not in health
        sources = self.panel(html, "panel-sources")
        assert "prometheus" in sources and "timeout after 10s" in sources
        # Two hours later the error is outside the window.
        later = self.html(self.t + timedelta(hours=3))
        assert "timeout after 10s" not in self.panel(later, "panel-sources")

    def test_a_source_error_never_shows_a_urls_credentials(self) -> None:
        """Issue 42, item 3: a row stored with the URL's password (as before the fix) is redacted on the way out."""
        SourceRun.objects.create(
            cluster=self.cluster,
            source="prometheus",
            call="query up",
            time=self.t - timedelta(minutes=1),
            ok=False,
            error="cannot connect to http://user:PA55@prom:9090?token=T0KEN: connection refused",
        )
        sources = self.panel(self.html(), "panel-sources")
        assert "http://user:[redacted]@prom:9090?token=[redacted]" in sources
        assert "PA55" not in sources and "T0KEN" not in sources

    def test_every_link_keeps_the_cursor(self) -> None:
        html = re.sub(r'<nav class="cursor-bar".*?</nav>', "", self.html(), flags=re.S)
        hrefs = [h for h in re.findall(r'href="(/[^"]*)"', html) if not h.startswith("/static/")]
        assert len(hrefs) > 8
        stamp = iso(self.t).replace(":", "%3A")
        for h in hrefs:
            assert f"t={stamp}" in h and "w=2h" in h, h

    def test_it_polls_only_when_live(self) -> None:
        assert 'hx-trigger="every 30s"' not in self.html()
        live = self.client.get("/").content.decode()
        assert 'hx-trigger="every 30s"' in live and 'hx-get="/"' in live

    def test_the_poll_gets_only_the_panels(self) -> None:
        r = self.client.get("/", headers={"HX-Request": "true", "HX-Target": "console-panels"})
        body = r.content.decode()
        assert body.lstrip().startswith('<div id="console-panels"') and "<html" not in body
        assert "HX-Request" in r["Vary"]

    def test_anonymous_is_redirected_and_bob_reads_without_write_buttons(self) -> None:
        assert self.get("/", self.t, client=self.anon).status_code == 302
        html = self.html(client=self.login_as(self.bob))
        assert "vit-large pending" in html and "<button" not in html.split('<main class="page">')[1]

    def test_the_query_count_does_not_grow_with_the_cluster(self) -> None:
        big = Cluster.objects.create(name="big")
        build_fleet(big, range(4), self.t, window=timedelta(minutes=15))
        with CaptureQueriesContext(connection) as small:
            self.html()
        build_fleet(big, range(4, 60), self.t, window=timedelta(minutes=15))
        with CaptureQueriesContext(connection) as large:
            html = self.html()
        assert "gpu-013" in self.panel(html, "panel-health")  # a NotReady node of the big cluster
        assert len(small) == len(large) <= 12, [q["sql"][:100] for q in large.captured_queries]

    def test_it_counts_a_wait_from_the_start_of_the_current_pending_spell(self) -> None:
        # Submitted at T0, ran from T0+1h, preempted at T0+3h: at T0+3h30m it has waited 30 min, not 3h30m.
        submitted = iso(T0)

        def job(phase: str) -> Observed:
            state = {"phase": phase, "submitted": submitted, "scheduling": {"reason": "Unschedulable"}}
            return Observed("job", "requeued", state, namespace="vision", hot={"phase": phase, "gpus": 8})

        for at, phase in (
            (T0, "Pending"),
            (T0 + timedelta(hours=1), "Running"),
            (T0 + timedelta(hours=3), "Pending"),
        ):
            record_states(self.cluster, [job(phase)], at)
        (row,) = [
            p
            for p in pending_jobs(T0 + timedelta(hours=3, minutes=30))
            if p.version.entity.name == "requeued"
        ]
        assert row.waiting == timedelta(minutes=30) and row.since == T0 + timedelta(hours=3)
        assert row.waiting_label == "30m"
        # Before it ran, its wait counts from its submission.
        (first,) = [
            p for p in pending_jobs(T0 + timedelta(minutes=50)) if p.version.entity.name == "requeued"
        ]
        assert first.waiting == timedelta(minutes=50)

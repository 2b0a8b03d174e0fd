"""Links both ways: every entity page lists the incidents about it at t, with status and top cause at t.

And from an incident of a pending or a running job, job → node → GPU is reachable in at most 4 clicks from
the home page (home → incident → job → node → GPU), every link keeping the cursor.
"""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

from django.utils import timezone

from incidents.models import DiagnosisRun, Incident, IncidentSubject
from tests.collectors.factories import T0, PageTestCase, gpu_uuid, iso

PAGES = {
    "job": "/c/gpu-prod/jobs/vision/vit-large/",
    "pod": "/c/gpu-prod/pods/vision/resnet-train-0/",
    "node": "/c/gpu-prod/nodes/h100-04/",
    "gpu": f"/c/gpu-prod/gpus/{gpu_uuid('h100-01', 0)}/",
    "queue": "/c/gpu-prod/queues/vision/",
    "project": "/c/gpu-prod/projects/vision/",
}


def panel(html: str) -> str:
    m = re.search(r'<section class="panel incidents-about" id="incidents-about">(.*?)</section>', html, re.S)
    return m.group(1) if m else ""


class IncidentsAboutTests(PageTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.t = self.times["end"]

    def incident(self, title: str, subjects: dict[str, str], *, onset, resolved=None, **kw) -> Incident:
        inc = Incident.objects.create(
            title=title,
            cluster=self.cluster,
            onset=onset,
            window_start=onset - timedelta(hours=1),
            window_end=resolved,
            resolved_at=resolved,
            status="resolved" if resolved else "open",
            **kw,
        )
        for ref, role in subjects.items():
            kind, _, rest = ref.partition(" ")
            ns, _, name = rest.rpartition("/")
            IncidentSubject.objects.create(incident=inc, entity=self.story.entity(kind, name, ns), role=role)
        return inc

    def add_run(self, inc: Incident, at, code: str, statement: str = "") -> None:
        DiagnosisRun.objects.create(
            incident=inc, at=at, made_at=timezone.now(), top_code=code, top_statement=statement
        )

    def test_every_entity_page_lists_its_incidents_at_t_with_status_and_top_cause(self) -> None:
        subjects = {
            f"{kind} {ref}": "subject"
            for kind, ref in (
                ("job", "vision/vit-large"),
                ("pod", "vision/resnet-train-0"),
                ("node", "h100-04"),
                ("gpu", gpu_uuid("h100-01", 0)),
                ("queue", "vision"),
                ("project", "vision"),
            )
        }
        inc = self.incident(
            "everything <b>wrong</b>", subjects, onset=T0 + timedelta(minutes=100), severity="critical"
        )
        self.add_run(
            inc, T0 + timedelta(minutes=100), "project_quota_exhausted", "project vision uses 12 of 12"
        )
        self.add_run(
            inc, self.t + timedelta(minutes=5), "gpu_node_unavailable", "later"
        )  # after t: not shown
        for kind, path in PAGES.items():
            with self.subTest(kind):
                html = self.get(path, self.t).content.decode()
                p = panel(html)
                assert f"Incidents about this {kind} at t" in p, html[:3000]
                assert "everything &lt;b&gt;wrong&lt;/b&gt;" in p and "<b>wrong" not in p  # escaped
                assert f'href="/incidents/{inc.pk}/?t={iso(self.t).replace(":", "%3A")}&amp;w=2h"' in p
                assert "project_quota_exhausted" in p and "gpu_node_unavailable" not in p
                assert "critical" in p and ">open<" in p

    def test_it_shows_open_at_t_or_window_covering_t_and_not_the_others(self) -> None:
        node = {"node h100-04": "subject"}
        self.incident("over before t", node, onset=T0, resolved=T0 + timedelta(minutes=30))
        self.incident(
            "resolved after t", node, onset=T0 + timedelta(minutes=150), resolved=self.t + timedelta(hours=1)
        )
        self.incident("begins soon", node, onset=self.t + timedelta(minutes=20))
        self.incident("much later", node, onset=self.t + timedelta(hours=3))
        self.incident("pending job", {"node h100-04": "related"}, onset=T0 + timedelta(minutes=160))
        p = panel(self.get(PAGES["node"], self.t).content.decode())
        titles = re.findall(r'<a href="/incidents/\d+/[^"]*">([^<]*)</a>', p)
        assert titles == ["resolved after t", "begins soon", "pending job"], titles  # subject first
        assert "begins" in p and "not diagnosed yet" in p
        assert '<span class="count">2</span>' in p  # about the node itself
        # the incident that only relates it (a pending job that could use the node) is folded under a count
        related = p.split('<details class="incidents-related">', 1)[1]
        assert "Related to 1 more incident at t" in related and "pending job" in related
        assert "resolved after t" not in related

    def test_a_page_with_no_incident_says_so_in_one_line(self) -> None:
        html = self.get(PAGES["queue"], self.t).content.decode()
        assert "No incident about this queue at t." in html and not panel(html)

    def test_many_incidents_cost_no_more_queries_and_are_capped(self) -> None:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        self.incident("one", {"node h100-04": "subject"}, onset=T0 + timedelta(minutes=150))
        with CaptureQueriesContext(connection) as few:
            self.get(PAGES["node"], self.t)
        for i in range(25):
            inc = self.incident(f"n{i}", {"node h100-04": "related"}, onset=T0 + timedelta(minutes=150))
            self.add_run(inc, T0 + timedelta(minutes=150), "gpu_capacity_shortage")
        with CaptureQueriesContext(connection) as many:
            html = self.get(PAGES["node"], self.t).content.decode()
        assert len(few) == len(many), [q["sql"][:100] for q in many.captured_queries]
        p = panel(html)
        assert '<span class="count">1</span>' in p
        assert "Related to 25 more incidents at t" in p and "(the first 9 shown)" in p
        assert len(re.findall(r'<a href="/incidents/', p)) == 10


def links(html: str) -> list[str]:
    return [unescape(h) for h in re.findall(r'href="(/[^"]*)"', html) if not h.startswith("/static/")]


class ClicksToGpuTests(PageTestCase):
    """home → incident → job → node → GPU: four clicks, for a pending and for a running job."""

    def walk(self, job: str, *, pending: bool) -> list[str]:
        t = self.times["end"]
        ns, name = job.split("/")
        inc = Incident.objects.create(
            title=f"{job} trouble",
            cluster=self.cluster,
            onset=t - timedelta(minutes=30),
            window_start=t - timedelta(minutes=90),
            severity="critical",
        )
        IncidentSubject.objects.create(incident=inc, entity=self.story.entity("job", name, ns))
        home = self.get("/", t).content.decode()
        trail = [next(h for h in links(home) if h.startswith(f"/incidents/{inc.pk}/"))]  # click 1
        page = self.client.get(trail[-1]).content.decode()
        trail.append(next(h for h in links(page) if h.startswith(f"/c/gpu-prod/jobs/{job}/")))  # click 2
        page = self.client.get(trail[-1]).content.decode()
        if pending:  # the why-pending panel loads by itself into the job page (htmx), no click
            why = next(h for h in links(page) if h.startswith(f"/c/gpu-prod/jobs/{job}/why/"))
            page = self.client.get(why, headers={"HX-Request": "true"}).content.decode()
        trail.append(next(h for h in links(page) if h.startswith("/c/gpu-prod/nodes/")))  # click 3
        page = self.client.get(trail[-1]).content.decode()
        trail.append(next(h for h in links(page) if h.startswith("/c/gpu-prod/gpus/")))  # click 4
        r = self.client.get(trail[-1])
        assert r.status_code == 200 and "gpu" in r.content.decode()
        stamp = f"t={iso(t)}"
        for h in trail[2:]:
            assert stamp in h or stamp.replace(":", "%3A") in h, (h, trail)
        return trail

    def test_from_a_running_jobs_incident(self) -> None:
        assert len(self.walk("vision/resnet-train", pending=False)) == 4

    def test_from_a_pending_jobs_incident(self) -> None:
        assert len(self.walk("vision/vit-large", pending=True)) == 4

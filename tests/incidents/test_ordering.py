"""Home and /incidents/ order by severity, then impact (inference first, then GPUs lost or blocked), then age.

The home panel counts every open incident, not only the 50 rows it shows; neither page's query count grows
with the number of incidents (impact is annotated in SQL, not looked up per row).
"""

from __future__ import annotations

import re
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors.inventory import Observed, record_states
from incidents.grouping import group_alert
from incidents.intake import ingest_alertmanager
from incidents.models import Alert, Incident
from incidents.ordering import by_urgency
from incidents.titles import title_parts
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import alert, gpu_uuid, payload, small_world


def _job(name: str, gpus: int, priority_class: str = "train") -> Observed:
    return Observed(
        "job",
        name,
        {
            "phase": "Pending",
            "queue": "vision",
            "project": "vision",
            "pods": 1,
            "gpus_per_pod": gpus,
            "priority_class": priority_class,
        },
        namespace="vision",
        hot={"phase": "Pending", "queue": "vision", "project": "vision", "gpus": gpus},
    )


def _fire(name: str, labels: dict[str, str], starts, severity: str = "warning") -> Incident:
    body = alert(name, {"cluster": "gpu-prod", **labels}, starts, severity=severity)
    ingest_alertmanager(payload([body]))
    return group_alert(Alert.objects.get(fingerprint=body["fingerprint"]))


class OrderingTests(BaseTestCase):
    EXPECTED = [
        "h100-02 not Ready",  # critical, a node: its 8 GPUs
        "h100-01 GPU 3 Xid error",  # critical, one GPU
        "vision/serve pending",  # warning, production inference (1 GPU)
        "vision/resnet-train pending",  # warning, 16 GPUs blocked
        "vision/tiny-old pending",  # warning, 2 GPUs, the older
        "vision/tiny pending",  # warning, 2 GPUs
        "gpu-99: DiskFull — DiskFull fired",  # info, names nothing known
    ]

    def setUp(self) -> None:
        super().setUp()
        small_world(self.cluster, T0)
        record_states(
            self.cluster,
            [_job("serve", 1, "inference"), _job("tiny", 2), _job("tiny-old", 2)],
            T0 - timedelta(hours=2),
        )
        pending = "GPUJobPendingTooLong"
        _fire(pending, {"namespace": "vision", "job_name": "tiny"}, T0 - timedelta(minutes=30))
        _fire(pending, {"namespace": "vision", "job_name": "resnet-train"}, T0 + timedelta(minutes=15))
        _fire("DiskFull", {"node": "gpu-99"}, T0 - timedelta(hours=1), severity="info")
        _fire(pending, {"namespace": "vision", "job_name": "serve"}, T0 + timedelta(minutes=10))
        _fire(pending, {"namespace": "vision", "job_name": "tiny-old"}, T0 - timedelta(minutes=60))
        _fire(
            "GPUXidError",
            {"Hostname": "h100-01", "gpu": "3", "UUID": gpu_uuid("h100-01", 3)},
            T0 + timedelta(minutes=30),
            severity="critical",
        )
        _fire("NodeNotReady", {"node": "h100-02"}, T0 + timedelta(minutes=20), severity="critical")
        self.t = T0 + timedelta(hours=1)

    def test_incidents_are_ordered_by_severity_impact_then_age(self) -> None:
        newest_first = [i.title for i in Incident.objects.order_by("-onset")]
        self.assertNotEqual(newest_first, self.EXPECTED)  # the order is not the onset's
        got = list(by_urgency(Incident.objects.all(), self.t))
        self.assertEqual([i.title for i in got], self.EXPECTED)
        impact = {i.title: (i.impact_gpus, i.inference) for i in got}
        self.assertEqual(impact["h100-02 not Ready"], (8, False))
        self.assertEqual(impact["h100-01 GPU 3 Xid error"], (1, False))
        self.assertEqual(impact["vision/serve pending"], (1, True))
        self.assertEqual(impact["vision/resnet-train pending"], (16, False))
        self.assertEqual(impact["gpu-99: DiskFull — DiskFull fired"], (0, False))

    def test_the_list_and_the_home_page_show_that_order(self) -> None:
        r = self.client.get(f"/incidents/?t={self.t:%Y-%m-%dT%H:%M:%SZ}")
        self.assertEqual([i.title for i in r.context["page"]], self.EXPECTED)
        # a resolved incident goes after every unresolved one, whatever its severity
        Incident.objects.filter(title="h100-02 not Ready").update(status="resolved", resolved_at=self.t)
        r = self.client.get(f"/incidents/?t={self.t:%Y-%m-%dT%H:%M:%SZ}")
        self.assertEqual([i.title for i in r.context["page"]][-1], "h100-02 not Ready")
        home = self.client.get(f"/?t={(self.t - timedelta(minutes=1)):%Y-%m-%dT%H:%M:%SZ}").content.decode()
        panel = re.search(r'id="panel-incidents">(.*?)</section>', home, re.S).group(1)
        shown = re.findall(r'<a href="/incidents/\d+/[^"]*">([^<]*)</a>', panel)
        # the link is the title's short part; its cause (here an unknown alert's summary) is a line under it
        self.assertEqual(shown, [title_parts(t)[0] for t in self.EXPECTED])
        self.assertIn('<span class="cause-line">DiskFull fired</span>', panel)
        self.assertIn("16 GPUs", panel)
        self.assertIn('1 GPU<br><span class="pill warn">inference</span>', panel)

    def test_home_counts_every_open_incident_and_its_queries_do_not_grow(self) -> None:
        url = f"/?t={self.t:%Y-%m-%dT%H:%M:%SZ}"
        with CaptureQueriesContext(connection) as few:
            html = self.client.get(url).content.decode()
        self.assertIn('Open incidents <span class="count">7</span></h2>', html)
        for i in range(60):
            _fire("GPUJobPendingTooLong", {"namespace": "vision", "job_name": f"gone-{i}"}, T0)
        with CaptureQueriesContext(connection) as many:
            html = self.client.get(url).content.decode()
        panel = re.search(r'id="panel-incidents">(.*?)</section>', html, re.S).group(1)
        self.assertIn('Open incidents <span class="count">67</span>', panel)
        self.assertIn("the first 50 problems by severity, impact and age", panel)
        self.assertEqual(len(re.findall(r'<a href="/incidents/\d+/', panel)), 50)
        self.assertEqual(len(few), len(many), [q["sql"][:120] for q in many.captured_queries])
        with CaptureQueriesContext(connection) as listing:
            self.client.get("/incidents/")
        self.assertEqual(len(listing), 5)  # the two bounded counts, the rows of each part, the session

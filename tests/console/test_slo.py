from __future__ import annotations

import re
import statistics
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors import inventory
from collectors.models import Cluster, Entity, KubeEvent
from incidents.models import Hypothesis, Incident
from rcaweb.cursor import Cursor
from tests.base import T0, BaseTestCase
from tests.collectors.factories import job_obs, pod_obs
from tests.console.factories import build_fleet
from web.console import slo

T = T0 + timedelta(hours=4)
Q = "t=2026-11-29T07:00:00Z&w=4h"
CURSOR = Cursor(at=T, window=timedelta(hours=4), window_given=True)

# (namespace, name, submitted minute, running minute or None); minutes from T0, window = [T0, T0+4h].
JOBS = [
    ("vision", "a", 0, 3),
    ("vision", "b", 10, 40),
    ("vision", "c", 20, 95),
    ("vision", "d", 30, 31),
    ("vision", "e", 50, 170),
    ("nlp", "f", 5, 9),
    ("nlp", "g", 60, 62),
    ("nlp", "h", 70, 200),
    ("nlp", "late", 120, None),  # still pending at t: not in the percentiles
]


def record_job(
    cluster: Cluster, ns: str, name: str, sub: int, run: int | None, *, pods_on: str = "n1"
) -> None:
    submitted = T0 + timedelta(minutes=sub)
    msg = (
        "Non-preemptible workload is over quota"
        if ns == "vision"
        else "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    )
    inventory.record_states(
        cluster,
        [
            job_obs(
                ns, name, queue=ns, phase="Pending", pods=1, gpus_per_pod=2, submitted=submitted, message=msg
            )
        ],
        submitted,
    )
    if run is not None:
        at = T0 + timedelta(minutes=run)
        inventory.record_states(
            cluster,
            [
                job_obs(
                    ns, name, queue=ns, phase="Running", pods=1, gpus_per_pod=2, submitted=submitted, active=1
                )
            ],
            at,
        )


class SloTest(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        for ns, name, sub, run in JOBS:
            record_job(self.cluster, ns, name, sub, run)
        # A job that first ran before the window and runs again inside it is not a new queue time.
        inventory.record_states(
            self.cluster,
            [
                job_obs(
                    "nlp",
                    "old",
                    queue="nlp",
                    phase="Running",
                    pods=1,
                    gpus_per_pod=1,
                    submitted=T0 - timedelta(hours=2),
                    active=1,
                )
            ],
            T0 - timedelta(minutes=30),
        )
        inventory.record_states(
            self.cluster,
            [
                job_obs(
                    "nlp",
                    "old",
                    queue="nlp",
                    phase="Pending",
                    pods=1,
                    gpus_per_pod=1,
                    submitted=T0 - timedelta(hours=2),
                )
            ],
            T0 + timedelta(minutes=20),
        )
        inventory.record_states(
            self.cluster,
            [
                job_obs(
                    "nlp",
                    "old",
                    queue="nlp",
                    phase="Running",
                    pods=1,
                    gpus_per_pod=1,
                    submitted=T0 - timedelta(hours=2),
                    active=1,
                )
            ],
            T0 + timedelta(minutes=80),
        )

    def direct_waits(self, ns: str | None = None) -> list[float]:
        return [
            float((run - sub) * 60)
            for n, _name, sub, run in JOBS
            if run is not None and (ns is None or n == ns)
        ]

    def test_queue_time_percentiles_equal_a_direct_computation(self) -> None:
        got = slo.compute(CURSOR, target=timedelta(minutes=30))
        want = self.direct_waits()
        assert sorted(got.overall.waits) == sorted(want)
        q = statistics.quantiles(want, n=100, method="inclusive")
        assert (
            (got.overall.p50, got.overall.p90, got.overall.p99)
            == (statistics.median(want), q[89], q[98])
            == (got.overall.p(50), q[89], q[98])
        )
        for st in got.by_project:
            ws = self.direct_waits(st.key)
            qs = statistics.quantiles(ws, n=100, method="inclusive")
            assert (st.p50, st.p90, st.p99) == (statistics.median(ws), qs[89], qs[98]), st.key

    def test_it_counts_the_share_over_target_and_the_jobs_still_waiting(self) -> None:
        got = slo.compute(CURSOR, target=timedelta(minutes=30))
        assert got.overall.over == sum(w > 1800 for w in self.direct_waits())
        assert [v.entity.name for v, _w in got.still_waiting] == ["late"]
        assert sum(c for _l, c, _s in got.histogram) == len(self.direct_waits())

    def test_it_breaks_allocation_failure_reasons_down_per_project(self) -> None:
        job = Entity.objects.get(kind="job", name="e")
        inc = Incident.objects.create(
            title="e waits", cluster=self.cluster, onset=T0 + timedelta(minutes=70), window_start=T0
        )
        Hypothesis.objects.create(
            incident=inc,
            code="project_quota_exhausted",
            statement="s",
            status="supported",
            confidence=0.8,
            subject=job,
        )
        Hypothesis.objects.create(
            incident=inc,
            code="gpu_capacity_shortage",
            statement="s",
            status="refuted",
            confidence=0.1,
            subject=job,
        )
        got = slo.compute(CURSOR)
        assert got.diag_codes == {"vision": {"project_quota_exhausted": 1}}
        assert got.sched_reasons["vision"]["NonPreemptibleOverQuota"] == 5
        assert got.sched_reasons["nlp"]["Unschedulable"] == 5  # f, g, h, late, old

    def test_it_fills_diagnosed_from_scheduling_causes_of_incidents_open_in_the_window(self) -> None:
        job, node = (
            Entity.objects.get(kind="job", name="e"),
            Entity.objects.create(
                cluster=self.cluster, kind="node", name="h100-09", first_seen=T0, last_seen=T0
            ),
        )
        # Opened before the window and still open; its cause is about a node: it counts for its job's project.
        early = Incident.objects.create(
            title="e waits", cluster=self.cluster, onset=T0 - timedelta(hours=2), window_start=T0
        )
        early.subjects.add(job)
        for code, subject in (
            ("gpu_node_unavailable", node),
            ("over_requested", job),
            ("idle_gpu_allocation", None),
        ):
            Hypothesis.objects.create(
                incident=early, code=code, statement="s", status="supported", confidence=0.8, subject=subject
            )
        # Resolved before the window: not counted.
        gone = Incident.objects.create(
            title="old",
            cluster=self.cluster,
            onset=T0 - timedelta(hours=3),
            window_start=T0,
            status="resolved",
            resolved_at=T0 - timedelta(minutes=1),
        )
        Hypothesis.objects.create(
            incident=gone,
            code="queue_priority",
            statement="s",
            status="supported",
            confidence=0.8,
            subject=job,
        )
        # A fault blamed by a waiting job's incident is shown apart; a node's own incident is no allocation failure.
        Hypothesis.objects.create(
            incident=early,
            code="gpu_missing",
            statement="s",
            status="supported",
            confidence=0.7,
            subject=node,
        )
        node_inc = Incident.objects.create(title="h100-09", cluster=self.cluster, onset=T0, window_start=T0)
        node_inc.subjects.add(node)
        Hypothesis.objects.create(
            incident=node_inc,
            code="gpu_xid_fault",
            statement="s",
            status="supported",
            confidence=0.9,
            subject=node,
        )
        got = slo.compute(CURSOR)
        assert got.diag_codes == {"vision": {"gpu_node_unavailable": 1}}
        assert got.diag_faults == {"vision": {"gpu_missing": 1}}
        html = self.client.get(f"/slo/?{Q}").content.decode()
        assert "<code>gpu_node_unavailable</code> 1" in html and "over_requested" not in html
        assert "fault: <code>gpu_missing</code> 1" in html and "gpu_xid_fault" not in html
        assert "no scheduling cause diagnosed" in html  # nlp: jobs waited, nothing diagnosed

    def test_it_counts_restarts_and_preemptions_per_project(self) -> None:
        c = self.cluster
        rec = inventory.record_states
        rec(
            c,
            [pod_obs("nlp", "h-0", job="h", queue="nlp", gpus=2, phase="Running", node="n1", restarts=2)],
            T0 - timedelta(minutes=5),
        )
        rec(
            c,
            [pod_obs("nlp", "h-0", job="h", queue="nlp", gpus=2, phase="Running", node="n1", restarts=5)],
            T0 + timedelta(minutes=60),
        )
        rec(
            c,
            [
                pod_obs(
                    "vision", "a-0", job="a", queue="vision", gpus=2, phase="Running", node="n1", restarts=1
                )
            ],
            T0 + timedelta(minutes=10),
        )
        KubeEvent.objects.create(
            cluster=c,
            uid="p1",
            involved_kind="Pod",
            involved_namespace="vision",
            involved_name="a-0",
            reason="Preempted",
            message="Preempted by nlp/h-0 on node n1",
            first_time=T0 + timedelta(minutes=50),
            last_time=T0 + timedelta(minutes=50),
        )
        # KAI reports a preemption as "Evict" on the victim's PodGroup, naming the pod in the message.
        KubeEvent.objects.create(
            cluster=c,
            uid="p2",
            involved_kind="PodGroup",
            involved_namespace="nlp",
            involved_name="pg-h-1234",
            reason="Evict",
            message="Pod nlp/h-0 was preempted by workload vision/pg-a-99.\nnlp uses <GPU: 9>",
            first_time=T0 + timedelta(minutes=70),
            last_time=T0 + timedelta(minutes=70),
        )
        got = slo.compute(CURSOR)
        assert got.restarts == {"nlp": 3, "vision": 1}
        assert got.preemptions == {"vision": 1, "nlp": 1}
        page = self.client.get(f"/slo/jobs/?metric=preemptions&project=nlp&{Q}").content.decode()
        assert "/c/gpu-prod/pods/nlp/h-0/?t=" in page

    def test_each_number_links_to_the_jobs_behind_it(self) -> None:
        html = self.client.get(f"/slo/?target=30m&{Q}").content.decode()
        link = re.search(r'href="(/slo/jobs/\?metric=over&amp;project=vision[^"]*)"', html)
        assert link, html
        url = link.group(1).replace("&amp;", "&")
        assert "t=2026-11-29T07%3A00%3A00Z" in url and "w=4h" in url and "target=30m" in url
        page = self.client.get(url).content.decode()
        names = set(re.findall(r"/c/gpu-prod/jobs/vision/(\w+)/", page))
        assert names == {
            n for ns, n, sub, run in JOBS if ns == "vision" and run is not None and (run - sub) > 30
        }

    def test_it_rejects_a_bad_target(self) -> None:
        r = self.client.get(f"/slo/?target=soon&{Q}")
        assert r.status_code == 400 and b"target" in r.content
        assert self.client.get(f"/slo/jobs/?metric=nope&{Q}").status_code == 400

    def test_personas_and_fragments(self) -> None:
        assert self.anon.get("/slo/").status_code == 302
        bob = self.login_as(self.bob).get(f"/slo/?{Q}")
        main = bob.content.decode().split('<main class="page">')[1]
        assert bob.status_code == 200 and 'method="post"' not in main  # read-only page: no write forms at all
        r = self.client.get(f"/slo/?{Q}", headers={"HX-Request": "true", "HX-Target": "slo-body"})
        assert r.content.decode().lstrip().startswith('<div id="slo-body">')

    def test_the_query_count_does_not_grow_with_the_cluster(self) -> None:
        big = Cluster.objects.create(name="big")
        build_fleet(big, range(4), T, window=timedelta(minutes=15))
        with CaptureQueriesContext(connection) as small:
            assert self.client.get(f"/slo/?{Q}").status_code == 200
        build_fleet(big, range(4, 60), T, window=timedelta(minutes=15))
        with CaptureQueriesContext(connection) as large:
            assert self.client.get(f"/slo/?{Q}").status_code == 200
        assert len(small) == len(large) <= 14, [q["sql"][:100] for q in large.captured_queries]

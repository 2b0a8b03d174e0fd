"""Evidence collection: every kind of fact with provenance, idempotent reruns, failures recorded as evidence."""

from __future__ import annotations

from datetime import datetime, timedelta
from unittest import mock

from collectors.inventory import Observed, record_states
from collectors.models import Change, Entity, KubeEvent, TelemetrySample
from collectors.sources.errors import SourceError
from collectors.sources.prometheus import Series
from incidents.evidence import collect_evidence
from incidents.grouping import group_alert
from incidents.intake import ingest_alertmanager
from incidents.models import Alert, Incident, IncidentSubject, Observation
from incidents.telemetry import METRICS
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import alert, gpu_uuid, payload, small_world

NOW = T0 + timedelta(minutes=30)
# What evidence collection wrote (the diagnosis adds derived facts under "dx:" keys, some of the same kinds).
OBS = Observation.objects.exclude(dedup_key__startswith="dx:")


class EvidenceTestCase(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        small_world(self.cluster, T0)
        self.uuid = gpu_uuid("h100-01", 3)
        # The world changes inside the window: quota cut, the pod's condition, an event, telemetry.
        record_states(
            self.cluster,
            [
                Observed(
                    "queue",
                    "vision",
                    {"project": "vision", "quota_gpus": 8, "limit_gpus": 8},
                    hot={"project": "vision", "gpus": 8, "gpus_allocatable": 8},
                    actor="platform-admin",
                )
            ],
            T0 - timedelta(minutes=20),
        )
        KubeEvent.objects.create(
            cluster=self.cluster,
            uid="ev-1",
            count=3,
            namespace="vision",
            involved_kind="Pod",
            involved_name="resnet-train-0",
            involved_namespace="vision",
            reason="FailedScheduling",
            message="0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
            type="Warning",
            component="kai-scheduler",
            first_time=T0 - timedelta(minutes=10),
            last_time=T0 - timedelta(minutes=2),
        )
        KubeEvent.objects.create(
            cluster=self.cluster,
            uid="ev-old",
            count=1,
            namespace="vision",
            involved_kind="Pod",
            involved_name="resnet-train-0",
            involved_namespace="vision",
            reason="Ancient",
            message="before the window",
            first_time=T0 - timedelta(hours=5),
            last_time=T0 - timedelta(hours=4),
        )
        gpu = Entity.objects.get(kind="gpu", name=self.uuid)
        for i in range(6):
            TelemetrySample.objects.create(
                cluster=self.cluster,
                gpu=gpu,
                metric="DCGM_FI_DEV_GPU_TEMP",
                time=T0 - timedelta(minutes=25 - 5 * i),
                value=70 + 5 * i,
            )
        self.incident = self.fire(
            alert(
                "GPUJobPendingTooLong",
                {"cluster": "gpu-prod", "namespace": "vision", "job_name": "resnet-train"},
                T0,
            )
        )
        self.gpu_incident = self.fire(
            alert(
                "GPUXidError",
                {"cluster": "gpu-prod", "UUID": self.uuid, "Hostname": "h100-01", "xid": "79"},
                T0,
                severity="critical",
            )
        )

    def fire(self, body: dict) -> Incident:
        ingest_alertmanager(payload([body]))
        return group_alert(Alert.objects.get(fingerprint=body["fingerprint"]))

    def kinds(self, incident: Incident) -> set[str]:
        return set(incident.observations.values_list("kind", flat=True))


class CollectTests(EvidenceTestCase):
    def test_it_writes_states_events_changes_alerts_and_telemetry_with_provenance(self) -> None:
        written = collect_evidence(self.incident.pk, now=NOW)
        self.assertGreater(written, 0)
        self.assertTrue(
            {
                "alert",
                "job_state",
                "pod_state",
                "node_state",
                "queue_state",
                "project_state",
                "event",
                "change",
            }
            <= self.kinds(self.incident)
        )
        # The candidate nodes' GPUs are healthy: their states say nothing about why the job waits.
        self.assertNotIn("gpu_state", self.kinds(self.incident))
        # A pending job has no GPU telemetry of its own: its candidate nodes' GPUs get no series;
        # a GPU incident gets them.
        self.assertNotIn("dcgm_series", self.kinds(self.incident))
        collect_evidence(self.gpu_incident.pk, now=NOW)
        self.assertIn("dcgm_series", self.kinds(self.gpu_incident))
        pod = OBS.get(
            incident=self.incident, kind="pod_state", locator="/api/v1/namespaces/vision/pods/resnet-train-0"
        )
        self.assertEqual(pod.content["state"]["phase"], "Pending")
        self.assertEqual(set(pod.content), {"state", "valid_from", "valid_to"})
        self.assertEqual(pod.source, "k8s")
        self.assertEqual(pod.collected_at, NOW)
        ev = OBS.get(incident=self.incident, kind="event")
        self.assertEqual(ev.content["reason"], "FailedScheduling")
        self.assertEqual(
            ev.content["involved"], {"kind": "Pod", "namespace": "vision", "name": "resnet-train-0"}
        )
        self.assertEqual(ev.observed_at, T0 - timedelta(minutes=2))
        ch = OBS.filter(incident=self.incident, kind="change", content__field="quota_gpus").get()
        self.assertEqual(
            (ch.content["old"], ch.content["new"], ch.content["actor"]), (16, 8, "platform-admin")
        )
        self.assertEqual(ch.content["entity"], {"kind": "queue", "namespace": "", "name": "vision"})
        queue_versions = OBS.filter(incident=self.incident, kind="queue_state").order_by("observed_at")
        self.assertEqual([o.content["state"]["quota_gpus"] for o in queue_versions], [16, 8])
        self.assertEqual(queue_versions[0].source, "kai")
        al = OBS.get(incident=self.incident, kind="alert")
        self.assertEqual(al.content["name"], "GPUJobPendingTooLong")
        self.assertFalse(OBS.filter(content__reason="Ancient").exists())  # outside the window
        self.incident.refresh_from_db()
        self.assertEqual((self.incident.collection_state, self.incident.collected_at), ("done", NOW))

    def test_it_freezes_only_the_unhealthy_states_of_a_pending_jobs_candidate_gpus(self) -> None:
        faulty = gpu_uuid("h100-02", 5)
        record_states(
            self.cluster,
            [
                Observed(
                    "gpu",
                    faulty,
                    {
                        "node": "h100-02",
                        "index": 5,
                        "uuid": faulty,
                        "present": True,
                        "pod": "",
                        "xid_last": 79,
                    },
                    hot={"node": "h100-02", "phase": "faulty", "pod": ""},
                )
            ],
            T0 - timedelta(minutes=5),
        )
        collect_evidence(self.incident.pk, now=NOW)
        gpu_states = OBS.filter(incident=self.incident, kind="gpu_state")
        self.assertEqual(set(gpu_states.values_list("entity__name", flat=True)), {faulty})
        self.assertEqual([o.content["state"].get("xid_last") for o in gpu_states], [79])
        # a GPU incident keeps every state of its own GPUs
        collect_evidence(self.gpu_incident.pk, now=NOW)
        self.assertIn(
            self.uuid,
            OBS.filter(incident=self.gpu_incident, kind="gpu_state").values_list("entity__name", flat=True),
        )

    def test_a_gpu_counts_on_the_node_of_its_newest_version_open_or_not(self) -> None:
        from collectors.models import EntityVersion
        from incidents.telemetry import pick_gpus

        moved = gpu_uuid("h100-09", 0)
        for minutes, node in ((60, "h100-09"), (30, "h100-01")):
            state = {"node": node, "index": 0, "uuid": moved, "present": True, "pod": ""}
            record_states(
                self.cluster,
                [Observed("gpu", moved, state, hot={"node": node, "phase": "ok", "pod": ""})],
                T0 - timedelta(minutes=minutes),
            )
        gpu = Entity.objects.get(cluster=self.cluster, kind="gpu", name=moved)
        node = Entity.objects.get(cluster=self.cluster, kind="node", name="h100-01")
        links = [
            IncidentSubject(incident=self.incident, entity=node, role="subject"),
            IncidentSubject(incident=self.incident, entity=gpu, role="related"),
        ]
        self.assertEqual([name for name, _ in pick_gpus(links)], [moved])  # on the subject node now
        EntityVersion.objects.filter(entity=gpu, valid_to__isnull=True).update(valid_to=T0)
        self.assertEqual(
            [name for name, _ in pick_gpus(links)], [moved]
        )  # closed: its last version still says

    def test_it_ends_the_window_at_the_clusters_own_present(self) -> None:
        from collectors.models import SourceRun

        SourceRun.objects.create(cluster=self.cluster, source="k8s", call="list pods", time=NOW, ok=True)
        with mock.patch("incidents.evidence.telemetry.collect_dcgm") as dcgm:
            collect_evidence(
                self.gpu_incident.pk, now=NOW + timedelta(days=1)
            )  # the wall clock is a day ahead
        self.assertEqual(dcgm.call_args.args[4], NOW + timedelta(minutes=10))  # end = last sweep + slack

    def test_it_is_idempotent(self) -> None:
        collect_evidence(self.incident.pk, now=NOW)
        count = self.incident.observations.count()
        self.assertEqual(collect_evidence(self.incident.pk, now=NOW), 0)
        self.assertEqual(self.incident.observations.count(), count)

    def test_it_refreshes_a_version_that_closed_since_the_last_run(self) -> None:
        collect_evidence(self.incident.pk, now=NOW)
        record_states(
            self.cluster,
            [
                Observed(
                    "pod",
                    "resnet-train-0",
                    {"phase": "Running", "node": "h100-01"},
                    namespace="vision",
                    hot={"phase": "Running", "node": "h100-01"},
                )
            ],
            T0 + timedelta(minutes=20),
        )
        collect_evidence(self.incident.pk, now=NOW)
        pods = self.incident.observations.filter(kind="pod_state", entity__name="resnet-train-0").order_by(
            "observed_at"
        )
        self.assertEqual([o.content["valid_to"] for o in pods], ["2026-11-29T03:20:00Z", None])

    def test_it_falls_back_to_inventory_samples_without_prometheus(self) -> None:
        collect_evidence(self.gpu_incident.pk, now=NOW)
        series = OBS.get(incident=self.gpu_incident, kind="dcgm_series", content__uuid=self.uuid)
        self.assertEqual(series.source, "inventory")
        self.assertEqual(series.content["metric"], "DCGM_FI_DEV_GPU_TEMP")
        self.assertEqual(len(series.content["points"]), 6)
        anomaly = OBS.get(incident=self.gpu_incident, kind="telemetry_anomaly")
        self.assertIn("temperature 85", anomaly.summary)

    def test_it_calls_the_diagnosis(self) -> None:
        with mock.patch("incidents.diagnosis_run.diagnose_incident") as diagnose:
            collect_evidence(self.incident.pk, now=NOW)
        diagnose.assert_called_once_with(self.incident.pk)

    def test_it_marks_the_collection_failed_when_it_breaks(self) -> None:
        with mock.patch("incidents.evidence.collect_events", side_effect=RuntimeError("boom")):
            with self.assertRaises(RuntimeError):
                collect_evidence(self.incident.pk, now=NOW)
        self.assertEqual(Incident.objects.get(pk=self.incident.pk).collection_state, "failed")


class PrometheusTests(EvidenceTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.cluster.prometheus_url = "http://prometheus.test:9090"
        self.cluster.save()

    def series(self, minutes: range) -> list[Series]:
        pts = [(T0 + timedelta(minutes=m), 79.0 if m >= 0 else 0.0) for m in minutes]
        return [Series({"__name__": "DCGM_FI_DEV_XID_ERRORS", "UUID": self.uuid, "Hostname": "h100-01"}, pts)]

    def test_it_freezes_live_series_and_keeps_them_when_prometheus_later_fails(self) -> None:
        def answer(promql, start, end, step):  # type: ignore[no-untyped-def]
            return self.series(range(-30, 10)) if promql.startswith("DCGM_FI_DEV_XID_ERRORS") else []

        with mock.patch(
            "collectors.sources.prometheus.PrometheusSource.query_range", side_effect=answer
        ) as q:
            collect_evidence(self.gpu_incident.pk, now=NOW)
        first = q.call_args_list[0].args[0]
        # One query per metric for all the incident's GPUs (the node's 8) and only those, in sorted order
        # (incidents about the same GPUs ask the same query).
        node_gpus = sorted(gpu_uuid("h100-01", i) for i in range(8))
        self.assertEqual(first, f'DCGM_FI_DEV_XID_ERRORS{{UUID=~"{"|".join(node_gpus)}"}}')
        self.assertEqual(first.count("GPU-"), 8)
        obs = OBS.get(
            incident=self.gpu_incident, kind="dcgm_series", content__uuid=self.uuid, source="prometheus"
        )
        self.assertEqual(
            obs.locator, f'DCGM_FI_DEV_XID_ERRORS{{UUID=~"{self.uuid}"}}'
        )  # reproduces this series
        self.assertEqual(obs.content["query"], first)  # the batched query that fetched it
        self.assertEqual(len(obs.content["points"]), 40)
        self.assertTrue(
            OBS.filter(
                incident=self.gpu_incident, kind="telemetry_anomaly", summary__contains="Xid 79"
            ).exists()
        )

        failure = SourceError(
            "prometheus", "query_range", "did not answer within 10 s (http://prometheus.test:9090)"
        )
        with mock.patch("collectors.sources.prometheus.PrometheusSource.query_range", side_effect=failure):
            collect_evidence(self.gpu_incident.pk, now=NOW + timedelta(minutes=5))
        obs.refresh_from_db()
        self.assertEqual(len(obs.content["points"]), 40)  # what was frozen stays
        err = OBS.filter(incident=self.gpu_incident, kind="dcgm_series").exclude(error="").first()
        self.assertIn("Prometheus did not answer: did not answer within 10 s", err.error)
        self.assertEqual(err.content["source"], "prometheus")

    def test_it_asks_for_series_from_before_the_window_so_an_hour_long_spell_shows_where_it_began(
        self,
    ) -> None:
        # The idle alert fires after an hour idle, the window starts an hour before onset: were the series
        # cut there, the spell would measure a step or two short of the hour it lasted.
        from incidents.evidence import SERIES_LEAD

        with mock.patch("collectors.sources.prometheus.PrometheusSource.query_range", return_value=[]) as q:
            collect_evidence(self.gpu_incident.pk, now=NOW)
        self.gpu_incident.refresh_from_db()
        starts = {call.args[1] for call in q.call_args_list}
        self.assertEqual(len(starts), 1)
        lead = self.gpu_incident.window_start - starts.pop()
        step = timedelta(seconds=q.call_args_list[0].args[3])
        self.assertGreater(lead, SERIES_LEAD - step)  # on the step grid, at most a step later
        self.assertLessEqual(lead, SERIES_LEAD)

    def test_it_merges_points_when_retention_dropped_the_oldest(self) -> None:
        with mock.patch(
            "collectors.sources.prometheus.PrometheusSource.query_range",
            side_effect=lambda q, *a: self.series(range(-30, 0)) if "XID" in q else [],
        ):
            collect_evidence(self.gpu_incident.pk, now=NOW)
        with mock.patch(
            "collectors.sources.prometheus.PrometheusSource.query_range",
            side_effect=lambda q, *a: self.series(range(-5, 10)) if "XID" in q else [],
        ):
            collect_evidence(self.gpu_incident.pk, now=NOW)
        obs = OBS.get(
            incident=self.gpu_incident, kind="dcgm_series", source="prometheus", content__uuid=self.uuid
        )
        self.assertEqual(len(obs.content["points"]), 40)

    def test_it_asks_a_rerun_only_for_points_after_those_it_froze(self) -> None:
        starts: list[datetime] = []

        def answer(promql, start, end, step):  # type: ignore[no-untyped-def]
            if not promql.startswith("DCGM_FI_DEV_XID_ERRORS"):
                return []
            starts.append(start)
            (whole,) = self.series(range(-30, 40))
            return [Series(whole.labels, [p for p in whole.points if start <= p[0] <= end])]

        source = "collectors.sources.prometheus.PrometheusSource.query_range"
        with mock.patch(source, side_effect=answer):
            collect_evidence(self.gpu_incident.pk, now=NOW)
        obs = OBS.get(
            incident=self.gpu_incident, kind="dcgm_series", source="prometheus", content__uuid=self.uuid
        )
        before = len(obs.content["points"])
        anomalies = OBS.filter(incident=self.gpu_incident, kind="telemetry_anomaly").count()
        with mock.patch(source, side_effect=answer):
            collect_evidence(self.gpu_incident.pk, now=NOW + timedelta(minutes=5))
        first, rerun = starts
        self.assertGreater(rerun, first)  # not the whole window again
        obs.refresh_from_db()
        times = [p[0] for p in obs.content["points"]]
        self.assertEqual(times, sorted(set(times)))
        self.assertGreater(len(times), before)  # the frozen points and the new ones
        self.assertEqual(times[0], f"{(T0 - timedelta(minutes=30)):%Y-%m-%dT%H:%M:%SZ}")
        # the frozen points were merged first, so Xid 79 is not "raised" again where the rerun's range starts
        self.assertEqual(OBS.filter(incident=self.gpu_incident, kind="telemetry_anomaly").count(), anomalies)


class LogTests(EvidenceTestCase):
    def setUp(self) -> None:
        super().setUp()
        record_states(
            self.cluster,
            [
                Observed(
                    "pod",
                    "resnet-train-0",
                    {
                        "phase": "Running",
                        "node": "h100-01",
                        "containers": [
                            {
                                "name": "main",
                                "restart_count": 4,
                                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                                "last_state": {"terminated": {"reason": "Error", "exitCode": 1}},
                            }
                        ],
                    },
                    namespace="vision",
                    hot={"phase": "Running", "node": "h100-01", "job": "resnet-train"},
                )
            ],
            T0 + timedelta(minutes=1),
        )

    def test_it_keeps_the_previous_log_of_a_crashing_pod(self) -> None:
        log = "epoch 1\nFileNotFoundError: [Errno 2] No such file or directory: '/config/train.yaml'\n"
        with (
            mock.patch("collectors.sources.kubernetes.api_client"),
            mock.patch("collectors.sources.kubernetes.KubeSource.pod_log", return_value=log) as pod_log,
        ):
            collect_evidence(self.incident.pk, now=NOW)
        pod_log.assert_called_once_with(
            "vision", "resnet-train-0", container="main", previous=True, tail_lines=200
        )
        obs = OBS.get(incident=self.incident, kind="log")
        self.assertEqual(obs.content, {"container": "main", "previous": True, "lines": log.splitlines()})
        self.assertEqual(obs.source, "log")

    def test_incidents_about_one_pod_read_its_log_once_within_the_share_time(self) -> None:
        from incidents import pod_logs

        pod_logs.shared.clear()
        self.addCleanup(pod_logs.shared.clear)
        other = Incident.objects.create(
            title="PodCrashLooping", cluster=self.cluster, onset=T0, window_start=T0 - timedelta(hours=1)
        )
        pod = Entity.objects.get(kind="pod", name="resnet-train-0")
        IncidentSubject.objects.create(incident=other, entity=pod, role="subject")
        log = "epoch 1\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
        with (
            mock.patch("collectors.sources.kubernetes.api_client"),
            mock.patch("collectors.sources.kubernetes.KubeSource.pod_log", return_value=log) as pod_log,
        ):
            with self.settings(RCAWEB_EVIDENCE_SHARE_S=60):
                collect_evidence(self.incident.pk, now=NOW)
                collect_evidence(other.pk, now=NOW)
                self.assertEqual(pod_log.call_count, 1)  # the second incident reuses the answer
                for incident in (self.incident, other):
                    obs = OBS.get(incident=incident, kind="log")
                    self.assertEqual(obs.content["lines"], log.splitlines())
                record_states(  # it crashed again: a new previous log
                    self.cluster,
                    [
                        Observed(
                            "pod",
                            "resnet-train-0",
                            {
                                "phase": "Running",
                                "node": "h100-01",
                                "containers": [{"name": "main", "restart_count": 5}],
                            },
                            namespace="vision",
                            hot={"phase": "Running", "node": "h100-01", "job": "resnet-train"},
                        )
                    ],
                    T0 + timedelta(minutes=2),
                )
                collect_evidence(other.pk, now=NOW)
                self.assertEqual(pod_log.call_count, 2)
            with self.settings(RCAWEB_EVIDENCE_SHARE_S=0):
                collect_evidence(other.pk, now=NOW)
                collect_evidence(other.pk, now=NOW)
            self.assertEqual(pod_log.call_count, 4)

    def test_it_records_a_log_that_could_not_be_read_as_an_error(self) -> None:
        collect_evidence(
            self.incident.pk, now=NOW
        )  # no kubeconfig in tests: the client cannot load credentials
        obs = OBS.get(incident=self.incident, kind="log")
        self.assertTrue(obs.error.startswith("Kubernetes:"))
        self.assertEqual(obs.content["call"], "log vision/resnet-train-0 previous")


class SurvivalTests(EvidenceTestCase):
    def test_it_shows_events_and_telemetry_after_the_sources_forgot_them(self) -> None:
        collect_evidence(self.gpu_incident.pk, now=NOW)
        collect_evidence(self.incident.pk, now=NOW)
        KubeEvent.objects.all().delete()  # event TTL, and our own pruning
        TelemetrySample.objects.all().delete()  # retention
        Change.objects.all().delete()
        self.cluster.prometheus_url = "http://prometheus.test:9090"
        self.cluster.save()
        with mock.patch(
            "collectors.sources.prometheus.PrometheusSource.query_range",
            side_effect=SourceError("prometheus", "query_range", "cannot connect"),
        ):
            collect_evidence(self.gpu_incident.pk, now=NOW + timedelta(hours=1))
            collect_evidence(self.incident.pk, now=NOW + timedelta(hours=1))
        html = self.client.get(self.incident.get_absolute_url() + "?kind=event").content.decode()
        self.assertIn("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", html)
        html = self.client.get(self.gpu_incident.get_absolute_url()).content.decode()
        self.assertIn("temperature 85", html)
        self.assertIn(f"DCGM_FI_DEV_GPU_TEMP on {self.uuid}: 6 points", html)
        self.assertIn("Prometheus did not answer", html)  # the failure is shown as evidence too


class BoundedTimeTests(EvidenceTestCase):
    def test_it_stops_querying_a_prometheus_that_does_not_answer(self) -> None:
        self.cluster.prometheus_url = "http://prometheus.test:9090"
        self.cluster.save()
        hang = SourceError(
            "prometheus", "query_range", "did not answer within 10 s (http://prometheus.test:9090)"
        )
        with mock.patch("collectors.sources.prometheus.PrometheusSource.query_range", side_effect=hang) as q:
            collect_evidence(self.gpu_incident.pk, now=NOW)
        self.assertEqual(q.call_count, 1)
        errors = OBS.filter(incident=self.gpu_incident, kind="dcgm_series").exclude(error="")
        # one per metric: the first failed, the others were not asked
        self.assertEqual(errors.count(), len(METRICS))
        self.assertEqual(len(METRICS), 10)
        self.assertTrue(errors.filter(error__startswith="Prometheus not queried").exists())
        # and the inventory's samples still stand in for the live series
        self.assertTrue(
            OBS.filter(incident=self.gpu_incident, kind="dcgm_series", source="inventory").exists()
        )


class AnomalyTests(BaseTestCase):
    def test_it_flags_a_gpu_that_stopped_reporting_while_its_siblings_did_not(self) -> None:
        from incidents.telemetry import anomalies

        pts = [[f"2026-11-29T03:{m:02d}:00Z", 50.0] for m in range(0, 30)]
        fresh = T0 + timedelta(minutes=29)
        self.assertEqual(anomalies("DCGM_FI_DEV_GPU_UTIL", pts, fresh, 60, live=True), [])
        gone = anomalies("DCGM_FI_DEV_GPU_UTIL", pts[:10], fresh, 60, live=True)
        self.assertEqual(
            [(w.isoformat(), what) for w, what, _ in gone],
            [("2026-11-29T03:09:00+00:00", "stopped reporting (last sample)")],
        )

    def test_it_flags_xid_temperature_and_ecc(self) -> None:
        from incidents.telemetry import anomalies

        xid = anomalies(
            "DCGM_FI_DEV_XID_ERRORS",
            [["2026-11-29T03:00:00Z", 0], ["2026-11-29T03:01:00Z", 79]],
            T0,
            60,
            live=False,
        )
        self.assertEqual(xid[0][1], "Xid 79 reported")
        temp = anomalies(
            "DCGM_FI_DEV_GPU_TEMP",
            [["2026-11-29T03:00:00Z", 80], ["2026-11-29T03:01:00Z", 93]],
            T0,
            60,
            live=False,
        )
        self.assertIn("temperature 93", temp[0][1])
        ecc = anomalies(
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            [["2026-11-29T03:00:00Z", 0], ["2026-11-29T03:01:00Z", 2]],
            T0,
            60,
            live=False,
        )
        self.assertEqual(ecc[0][1], "double-bit ECC errors: 2")


class SharedQueryTests(BaseTestCase):
    """Collections of one problem within a short time ask Prometheus once (RCAWEB_EVIDENCE_SHARE_S)."""

    class Source:
        url = "http://prometheus.test:9090"

        def __init__(self) -> None:
            self.calls: list[tuple] = []
            self.fail = False

        def query_range(self, promql, start, end, step):  # type: ignore[no-untyped-def]
            self.calls.append((promql, start, end, step))
            if self.fail:
                raise SourceError("prometheus", "query_range", "did not answer")
            return [Series({"UUID": "GPU-a"}, [(start, 1.0)])]

    def setUp(self) -> None:
        super().setUp()
        from incidents import telemetry

        telemetry.shared.clear()
        self.addCleanup(telemetry.shared.clear)
        self.range = telemetry.shared_range

    def test_identical_queries_on_the_step_grid_are_asked_once(self) -> None:
        src = self.Source()
        with self.settings(RCAWEB_EVIDENCE_SHARE_S=60):
            a = self.range(src, 'M{UUID=~"GPU-a"}', T0 - timedelta(hours=1), T0 + timedelta(seconds=7), 30)
            b = self.range(src, 'M{UUID=~"GPU-a"}', T0 - timedelta(hours=1), T0 + timedelta(seconds=21), 30)
            self.assertEqual(len(src.calls), 1)  # seconds apart, the same grid range: shared
            self.assertIs(a, b)
            self.assertEqual(src.calls[0][2], T0)  # the end on the grid (Prometheus evaluates there anyway)
            self.range(src, 'M{UUID=~"GPU-b"}', T0 - timedelta(hours=1), T0, 30)  # other GPUs: asked
            self.range(src, 'M{UUID=~"GPU-a"}', T0 - timedelta(hours=1), T0 + timedelta(seconds=31), 30)
            self.assertEqual(len(src.calls), 3)  # one step later: asked again

    def test_failures_are_not_shared_and_zero_turns_it_off(self) -> None:
        src = self.Source()
        src.fail = True
        with self.settings(RCAWEB_EVIDENCE_SHARE_S=60):
            for _ in range(2):
                with self.assertRaises(SourceError):
                    self.range(src, "M", T0 - timedelta(hours=1), T0, 30)
        self.assertEqual(len(src.calls), 2)
        src.fail = False
        with self.settings(RCAWEB_EVIDENCE_SHARE_S=0):
            self.range(src, "M", T0 - timedelta(hours=1), T0, 30)
            self.range(src, "M", T0 - timedelta(hours=1), T0, 30)
        self.assertEqual(len(src.calls), 4)

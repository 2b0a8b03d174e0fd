"""Grouping rules, one test per rule (incidents.grouping.group_alert)."""

from __future__ import annotations

from datetime import datetime, timedelta

from collectors.models import Cluster, Entity
from incidents.grouping import group_alert, resolve_subjects
from incidents.intake import ingest_alertmanager
from incidents.models import Alert, Incident, IncidentSubject
from incidents.services import set_status
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import alert, gpu_uuid, payload, small_world


class GroupingTestCase(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        small_world(self.cluster, T0)

    def fire(self, name: str, labels: dict[str, str], at=T0, **kw) -> Incident:  # type: ignore[no-untyped-def]
        body = alert(name, {"cluster": "gpu-prod", **labels}, at, **kw)
        ingest_alertmanager(payload([body]))
        a = Alert.objects.get(fingerprint=body["fingerprint"], starts_at=at)
        return group_alert(a)

    def subjects(self, incident: Incident, role: str = "subject") -> set[str]:
        return {
            str(s.entity)
            for s in IncidentSubject.objects.filter(incident=incident, role=role).select_related("entity")
        }


class SubjectRuleTests(GroupingTestCase):
    def test_it_resolves_namespace_and_pod_to_the_pod_and_relates_its_job_queue_and_project(self) -> None:
        inc = self.fire("PodCrashLooping", {"namespace": "vision", "pod": "resnet-train-0"})
        self.assertEqual(self.subjects(inc), {"pod vision/resnet-train-0"})
        self.assertTrue(
            {"job vision/resnet-train", "queue vision", "project vision"} <= self.subjects(inc, "related")
        )

    def test_it_resolves_job_name_and_relates_project_queue_pods_candidate_nodes_and_their_gpus(self) -> None:
        inc = self.fire("GPUJobPendingTooLong", {"namespace": "vision", "job_name": "resnet-train"})
        self.assertEqual(self.subjects(inc), {"job vision/resnet-train"})
        related = self.subjects(inc, "related")
        self.assertTrue(
            {
                "project vision",
                "queue vision",
                "pod vision/resnet-train-0",
                "pod vision/resnet-train-1",
                "node h100-01",
                "node h100-02",
            }
            <= related
        )
        self.assertIn(f"gpu {gpu_uuid('h100-02', 7)}", related)

    def test_a_pending_jobs_candidate_nodes_are_those_its_node_selector_matches(self) -> None:
        from collectors.inventory import Observed, record_states
        from incidents.grouping import candidate_nodes

        labels = {"kubernetes.io/hostname": "a100-01", "nodepool": "a100"}
        hot = {"phase": "Ready", "ready": True, "gpus": 8, "gpus_allocatable": 8, "node": "a100-01"}
        record_states(self.cluster, [Observed("node", "a100-01", {**hot, "labels": labels}, hot=hot)], T0)
        names = lambda selector: [e.name for e in candidate_nodes(self.cluster, selector, T0)]  # noqa: E731
        self.assertEqual(names({}), ["a100-01", "h100-01", "h100-02"])
        self.assertEqual(names({"nodepool": "h100"}), ["h100-01", "h100-02"])
        self.assertEqual(names({"nodepool": "a100", "kubernetes.io/hostname": "a100-01"}), ["a100-01"])
        self.assertEqual(names({"nodepool": "b200"}), [])

    def test_it_finds_a_job_by_name_alone_when_the_name_is_unique(self) -> None:
        inc = self.fire("GPUJobPendingTooLong", {"job_name": "resnet-train"})
        self.assertEqual(self.subjects(inc), {"job vision/resnet-train"})

    def test_it_resolves_node_hostname_and_lowercase_hostname_to_the_node(self) -> None:
        for label in ("node", "Hostname", "hostname"):
            with self.subTest(label):
                a = alert("NodeNotReady", {label: "h100-02"}, T0)
                ingest_alertmanager(payload([a]))
                res = resolve_subjects(Alert.objects.get(fingerprint=a["fingerprint"]))
                self.assertEqual([str(e) for e in res.subjects], ["node h100-02"])

    def test_it_names_gpus_by_uuid_and_relates_their_node(self) -> None:
        uuid = gpu_uuid("h100-01", 3)
        inc = self.fire("GPUXidError", {"UUID": uuid, "Hostname": "h100-01", "gpu": "3", "xid": "79"})
        self.assertEqual(self.subjects(inc), {f"gpu {uuid}", "node h100-01"})

    def test_it_reads_a_gpu_label_as_an_index_on_the_node(self) -> None:
        inc = self.fire("GPUHighTemperature", {"Hostname": "h100-02", "gpu": "5"})
        self.assertIn(f"gpu {gpu_uuid('h100-02', 5)}", self.subjects(inc))

    def test_it_resolves_project_and_queue_labels(self) -> None:
        inc = self.fire("ProjectOverQuota", {"project": "vision", "queue": "vision"})
        self.assertEqual(self.subjects(inc), {"project vision", "queue vision"})

    def test_it_prefers_exported_pod_labels_when_prometheus_did_not_honour_the_exporters(self) -> None:
        inc = self.fire(
            "GPUIdleAllocated",
            {
                "namespace": "gpu-operator",
                "pod": "nvidia-dcgm-exporter-x1",
                "exported_namespace": "vision",
                "exported_pod": "resnet-train-1",
            },
        )
        self.assertEqual(self.subjects(inc), {"pod vision/resnet-train-1"})

    def test_it_uses_the_only_cluster_when_the_rule_adds_no_cluster_label(self) -> None:
        a = alert("NodeNotReady", {"node": "h100-01"}, T0)
        ingest_alertmanager(payload([a]))
        self.assertEqual(group_alert(Alert.objects.get()).cluster, self.cluster)

    def test_it_keeps_an_unknown_cluster_unresolved_when_several_are_watched(self) -> None:
        Cluster.objects.create(name="gpu-dev")
        inc = self.fire("NodeNotReady", {"cluster": "gpu-mars", "node": "h100-01"})
        self.assertIsNone(inc.cluster)
        self.assertIn("cluster=gpu-mars", inc.unresolved_subject)


class UnresolvedRuleTests(GroupingTestCase):
    def test_it_opens_an_incident_for_labels_that_name_nothing_known(self) -> None:
        inc = self.fire("NodeNotReady", {"node": "h100-99"})
        self.assertEqual(self.subjects(inc), set())
        self.assertIn("node=h100-99", inc.unresolved_subject)
        self.assertEqual(Alert.objects.get().incident, inc)

    def test_it_opens_an_incident_for_an_alert_with_no_identifying_label_at_all(self) -> None:
        a = alert("Low tick success rate", {"instance": "172.31.5.8:9000", "job": "ec2"}, T0)
        ingest_alertmanager(payload([a]))
        inc = group_alert(Alert.objects.get())
        self.assertIn("alertname=Low tick success rate", inc.unresolved_subject)

    def test_it_joins_the_same_unresolved_labels_to_one_open_incident(self) -> None:
        first = self.fire("NodeNotReady", {"node": "h100-99"})
        second = self.fire("NodeNotReady", {"node": "h100-99"}, at=T0 + timedelta(minutes=20))
        other = self.fire("NodeNotReady", {"node": "h100-98"}, at=T0 + timedelta(minutes=20))
        self.assertEqual(first.pk, second.pk)
        self.assertNotEqual(first.pk, other.pk)


class JoinRuleTests(GroupingTestCase):
    def test_it_joins_alerts_on_the_same_subject_within_an_open_incident(self) -> None:
        first = self.fire("GPUJobPendingTooLong", {"namespace": "vision", "job_name": "resnet-train"})
        second = self.fire(
            "PodCrashLooping",
            {"namespace": "vision", "job_name": "resnet-train", "pod": "resnet-train-0"},
            at=T0 + timedelta(minutes=10),
            severity="critical",
        )
        self.assertEqual(first.pk, second.pk)
        inc = Incident.objects.get(pk=first.pk)
        self.assertEqual(inc.alerts.count(), 2)
        self.assertEqual(inc.severity, "critical")  # a joining alert escalates
        self.assertIn("pod vision/resnet-train-0", self.subjects(inc))  # promoted from related to subject

    def test_it_opens_a_new_incident_once_the_old_one_is_resolved(self) -> None:
        first = self.fire("NodeNotReady", {"node": "h100-01"})
        set_status(first, "resolved", self.alice)
        second = self.fire("NodeNotReady", {"node": "h100-01"}, at=T0 + timedelta(hours=1))
        self.assertNotEqual(first.pk, second.pk)

    def test_it_opens_a_new_incident_when_the_alert_starts_after_the_old_one_was_over(self) -> None:
        body = alert("NodeNotReady", {"node": "h100-01"}, T0, ends=T0 + timedelta(minutes=5))
        ingest_alertmanager(payload([body]))
        first = group_alert(Alert.objects.get())
        self.assertEqual(first.window_end, T0 + timedelta(minutes=5))
        later = self.fire("NodeNotReady", {"node": "h100-01"}, at=T0 + timedelta(hours=2))
        self.assertNotEqual(first.pk, later.pk)
        first.refresh_from_db()  # over 15 min after its alert ended, as of the new alert's start
        self.assertEqual((first.status, first.resolved_at), ("resolved", T0 + timedelta(minutes=5)))

    def test_it_joins_an_unresolved_incident_however_long_ago_its_alerts_ended(self) -> None:
        body = alert("GPUJobPendingTooLong", {"namespace": "vision", "job_name": "resnet-train"}, T0)
        ingest_alertmanager(payload([{**body, "status": "resolved", "endsAt": "2026-11-29T03:10:00Z"}]))
        first = group_alert(Alert.objects.get())
        set_status(first, "investigating", self.alice)  # held: never resolved by rcaweb
        again = self.fire(
            "GPUJobPendingTooLong",
            {"namespace": "vision", "job_name": "resnet-train"},
            at=T0 + timedelta(hours=3),
        )
        self.assertEqual(first.pk, again.pk)
        self.assertEqual(Incident.objects.count(), 1)

    def test_it_keeps_a_resent_alert_in_its_incident_and_closes_the_window_when_it_resolves(self) -> None:
        body = alert("NodeNotReady", {"node": "h100-01"}, T0)
        ingest_alertmanager(payload([body]))
        inc = group_alert(Alert.objects.get())
        ingest_alertmanager(payload([{**body, "status": "resolved", "endsAt": "2026-11-29T03:40:00Z"}]))
        again = group_alert(Alert.objects.get())
        self.assertEqual(inc.pk, again.pk)
        self.assertEqual(again.window_end.isoformat(), "2026-11-29T03:40:00+00:00")


class RelatedIncidentRuleTests(GroupingTestCase):
    def gpu_fault(self, host: str, index: int, at=T0, phase: str = "missing") -> None:  # type: ignore[no-untyped-def]
        """The inventory sees the GPU gone (``missing``) or ``faulty`` from ``at`` (a sweep after its Xid)."""
        from collectors.inventory import Observed, record_states

        uuid = gpu_uuid(host, index)
        state = {"node": host, "index": index, "uuid": uuid, "present": phase != "missing", "pod": ""}
        if phase == "faulty":
            state["xid_last"] = 48  # a double-bit ECC error: the GPU reports, and is not to be used
        record_states(
            self.cluster,
            [Observed("gpu", uuid, state, hot={"node": host, "phase": phase, "pod": ""})],
            at,
        )

    def test_it_links_a_gpu_fault_and_a_job_pending_on_that_node(self) -> None:
        job = self.fire("GPUJobPendingTooLong", {"namespace": "vision", "job_name": "resnet-train"})
        self.gpu_fault("h100-01", 3, T0 + timedelta(minutes=4))
        gpu = self.fire(
            "GPUXidError",
            {"UUID": gpu_uuid("h100-01", 3), "Hostname": "h100-01"},
            at=T0 + timedelta(minutes=3),
        )
        self.assertNotEqual(job.pk, gpu.pk)
        self.assertEqual(list(job.related.values_list("pk", flat=True)), [gpu.pk])

    def running_pods(self, host: str, gpus: int, at: datetime = T0 - timedelta(hours=1)) -> None:
        """Pods of another project running on ``host``, holding ``gpus`` of its GPUs (one each)."""
        from collectors.inventory import Observed, record_states

        state = {"phase": "Running", "node": host, "job": f"serve-{host}", "gpus": 1}
        pods = [Observed("pod", f"serve-{host}-{i}", state, namespace="nlp", hot=state) for i in range(gpus)]
        record_states(self.cluster, pods, at)

    def resnet(self, phase: str, gpus_per_pod: int, at: datetime) -> None:
        """vision/resnet-train (2 pods) from ``at`` in ``phase``, asking ``gpus_per_pod`` a pod."""
        from collectors.inventory import Observed, record_states

        hot = {"phase": phase, "queue": "vision", "project": "vision", "gpus": 2 * gpus_per_pod}
        state = {**hot, "pods": 2, "gpus_per_pod": gpus_per_pod}
        record_states(self.cluster, [Observed("job", "resnet-train", state, namespace="vision", hot=hot)], at)

    def xid(self, host: str, index: int, minute: int, phase: str = "missing") -> Incident:
        """A GPU fault the inventory sees a minute after its Xid alert fires (``minute`` after T0)."""
        self.gpu_fault(host, index, T0 + timedelta(minutes=minute + 1), phase=phase)
        return self.fire(
            "GPUXidError",
            {"UUID": gpu_uuid(host, index), "Hostname": host},
            at=T0 + timedelta(minutes=minute),
        )

    def related(self, incident: Incident) -> list[int]:
        return list(incident.related.values_list("pk", flat=True))

    def pending_resnet(self) -> Incident:
        return self.fire("GPUJobPendingTooLong", {"namespace": "vision", "job_name": "resnet-train"})

    def test_it_does_not_link_a_pending_job_to_a_fault_on_a_node_it_could_not_use_once_fixed(self) -> None:
        # h100-01's other seven GPUs are held by running pods: with its faulty GPU back it has one free, and
        # resnet-train asks 8 a pod. On a busy cluster every pending job lists every node as a candidate.
        self.running_pods("h100-01", 7)
        job = self.pending_resnet()
        self.xid("h100-01", 3, 3, phase="faulty")
        self.assertEqual(self.related(job), [])
        # The same fault on a node with room for a pod once fixed is linked.
        other = self.xid("h100-02", 5, 5, phase="faulty")
        self.assertEqual(self.related(job), [other.pk])

    def test_a_gpu_off_the_bus_counts_with_its_node_for_the_room_a_fix_would_make(self) -> None:
        from collectors.inventory import Observed, record_states

        job = self.pending_resnet()
        hot = {"phase": "Ready", "ready": True, "gpus": 7, "gpus_allocatable": 7, "node": "h100-01"}
        state = {**hot, "capacity": {"nvidia.com/gpu": 7}, "allocatable": {"nvidia.com/gpu": 7}}
        # the GPU gone, h100-01 advertises 7: resnet-train's 8-GPU pod fits once it is back
        record_states(self.cluster, [Observed("node", "h100-01", state, hot=hot)], T0 + timedelta(minutes=2))
        gpu = self.xid("h100-01", 3, 3)
        self.assertEqual(self.related(job), [gpu.pk])

    def test_it_does_not_link_a_job_placed_before_the_fault_by_capacity_alone(self) -> None:
        job = self.pending_resnet()
        self.resnet("Running", 8, T0 + timedelta(minutes=1))  # placed: capacity lost later is nothing to it
        self.xid("h100-01", 3, 3)
        self.assertEqual(self.related(job), [])

    def test_a_jobs_request_is_what_its_state_says_at_that_moment(self) -> None:
        import math

        from incidents.grouping.room import waiting_asks as _requests

        job = Entity.objects.get(kind="job", name="resnet-train")
        asks = {7: {job.pk: ("subject", "job")}}
        self.assertEqual(_requests(asks, T0), {7: 8})  # pending, 8 GPUs a pod
        self.assertEqual(_requests(asks, T0 - timedelta(hours=3)), {})  # not swept yet: not known
        self.resnet("Running", 8, T0 + timedelta(minutes=1))
        self.assertEqual(
            _requests(asks, T0 + timedelta(minutes=2)), {7: math.inf}
        )  # placed: waits for nothing

    def test_a_fault_on_a_node_with_room_for_a_smaller_pod_is_linked_to_the_job_asking_for_it(self) -> None:
        self.running_pods("h100-01", 6)
        self.resnet("Pending", 2, T0 - timedelta(minutes=30))  # h100-01 has 2 free once its GPU is back
        job = self.pending_resnet()
        gpu = self.xid("h100-01", 3, 3, phase="faulty")
        self.assertEqual(self.related(job), [gpu.pk])

    def test_a_fault_is_not_linked_to_a_job_whose_pod_fits_beside_it(self) -> None:
        """A GPU gone from a node with seven others free keeps nobody asking one GPU out: on a busy cluster
        every such job lists the node as a candidate, and linking each would bury the jobs it does keep out."""
        from collectors.inventory import Observed, record_states

        self.resnet("Pending", 1, T0 - timedelta(minutes=30))
        job = self.pending_resnet()
        self.xid("h100-01", 3, 3)  # missing: h100-01 has 7 free while it is gone
        self.assertEqual(self.related(job), [])
        # A node that is not Ready has no room while faulty: the job may be waiting for it.
        hot = {"phase": "NotReady", "ready": False, "gpus": 8, "gpus_allocatable": 8, "node": "h100-02"}
        record_states(
            self.cluster,
            [Observed("node", "h100-02", {**hot, "capacity": {"nvidia.com/gpu": 8}}, hot=hot)],
            T0 + timedelta(minutes=6),
        )
        node = self.fire("NodeNotReady", {"node": "h100-02"}, at=T0 + timedelta(minutes=5))
        self.assertEqual(self.related(job), [node.pk])

    def test_a_fault_is_linked_to_a_small_job_when_the_node_is_otherwise_full(self) -> None:
        self.running_pods("h100-01", 7)  # the faulty GPU was the one free: none while faulty, one once fixed
        self.resnet("Pending", 1, T0 - timedelta(minutes=30))
        job = self.pending_resnet()
        gpu = self.xid("h100-01", 3, 3, phase="faulty")
        self.assertEqual(self.related(job), [gpu.pk])

    def test_the_room_while_faulty_is_the_least_a_node_advertised_around_the_fault(self) -> None:
        from collectors.inventory import Observed, record_states
        from incidents.grouping import Room
        from incidents.grouping.room import node_room as _room

        node = Entity.objects.get(kind="node", name="h100-01")
        gpu = Entity.objects.get(kind="gpu", name=gpu_uuid("h100-01", 3))
        self.running_pods("h100-01", 2)
        self.gpu_fault("h100-01", 3, T0)
        at = T0 + timedelta(minutes=1)
        # the GPU faulty, the device plugin not yet told: 8 advertised, 7 usable, 2 held
        self.assertEqual(
            _room({gpu.pk, node.pk}, {gpu.pk}, at), {gpu.pk: Room(5, 6), node.pk: Room(5, 6, True)}
        )
        self.assertEqual(_room({gpu.pk, node.pk}, set(), at), {gpu.pk: Room(6, 6), node.pk: Room(6, 6)})
        hot = {"phase": "Ready", "ready": True, "gpus": 8, "gpus_allocatable": 6, "node": "h100-01"}
        record_states(self.cluster, [Observed("node", "h100-01", hot, hot=hot)], T0 + timedelta(minutes=2))
        self.assertEqual(
            _room({gpu.pk, node.pk}, {gpu.pk}, at), {gpu.pk: Room(4, 6), node.pk: Room(4, 6, True)}
        )
        cordoned = {**hot, "unschedulable": True, "gpus_allocatable": 8}
        record_states(
            self.cluster, [Observed("node", "h100-01", cordoned, hot=hot)], T0 + timedelta(minutes=3)
        )
        self.assertEqual(_room({node.pk}, set(), at)[node.pk].now, 0)
        self.assertEqual(_room({node.pk}, set(), T0 + timedelta(hours=2))[node.pk].now, 0)  # still cordoned

    def test_a_gpu_the_kubelet_withdrew_counts_before_the_inventory_sees_it_missing(self) -> None:
        """A GPU that fell off the bus leaves the node's capacity at once (the kubelet), while the GPU poll
        sees it missing a sweep or more later: the node is short from the first, and the 8-GPU job pending
        since before the Xid is linked to it; a 1-GPU job, with room left beside it, is not."""
        from collectors.inventory import Observed, record_states

        job = self.pending_resnet()  # 8 GPUs a pod
        hot = {"phase": "Ready", "ready": True, "gpus": 7, "gpus_allocatable": 7, "node": "h100-01"}
        state = {**hot, "capacity": {"nvidia.com/gpu": 7}, "allocatable": {"nvidia.com/gpu": 7}}
        record_states(self.cluster, [Observed("node", "h100-01", state, hot=hot)], T0 + timedelta(minutes=3))
        gpu = self.fire(
            "GPUXidError",
            {"UUID": gpu_uuid("h100-01", 3), "Hostname": "h100-01"},
            at=T0 + timedelta(minutes=3),
        )
        self.assertEqual(self.related(job), [gpu.pk])
        self.resnet("Pending", 1, T0 + timedelta(minutes=4))
        job.related.clear()
        from incidents.grouping import link_related_incidents

        self.assertEqual(link_related_incidents(gpu, at=T0 + timedelta(minutes=5)), [])

    def test_a_fault_is_weighed_however_many_pending_jobs_share_candidate_nodes(self) -> None:
        """Only incidents that can share a fault are candidates: on a busy cluster the pending jobs that share
        candidate nodes with a new one are many, and the oldest of them filled the candidates before, so that
        a job pending after an Xid on a node with room for it was not linked to it (the demo's #83 and #78)."""
        from unittest import mock

        from collectors.inventory import Observed, record_states

        others = [f"bert-{i}" for i in range(4)]
        state = {"phase": "Pending", "node_selector": {}}
        record_states(
            self.cluster,
            [Observed("job", name, state, namespace="nlp", hot={"phase": "Pending"}) for name in others],
            T0 - timedelta(hours=1),
        )
        with mock.patch("incidents.grouping.linking.MAX_RELATED_CANDIDATES", 3):
            for name in others:  # older incidents, sharing every candidate node with resnet-train
                self.fire("GPUJobPendingTooLong", {"namespace": "nlp", "job_name": name})
            fault = self.xid("h100-02", 5, 5, phase="faulty")
            job = self.fire(
                "GPUJobPendingTooLong",
                {"namespace": "vision", "job_name": "resnet-train"},
                at=T0 + timedelta(minutes=10),
            )
        self.assertEqual(self.related(job), [fault.pk])

    def test_it_links_a_node_incident_and_a_pod_running_on_that_node(self) -> None:
        from collectors.inventory import Observed, record_states

        record_states(
            self.cluster,
            [
                Observed(
                    "pod",
                    "serve-0",
                    {"phase": "Running", "node": "h100-02"},
                    namespace="nlp",
                    hot={"phase": "Running", "node": "h100-02"},
                )
            ],
            T0 - timedelta(hours=1),
        )
        node = self.fire("NodeNotReady", {"node": "h100-02"})
        pod = self.fire(
            "PodCrashLooping", {"namespace": "nlp", "pod": "serve-0"}, at=T0 + timedelta(minutes=1)
        )
        self.assertIn(pod.pk, list(node.related.values_list("pk", flat=True)))

    def test_it_does_not_link_two_pending_jobs_only_because_they_share_candidate_nodes(self) -> None:
        from collectors.inventory import Observed, record_states

        record_states(
            self.cluster,
            [
                Observed(
                    "job",
                    "bert",
                    {"phase": "Pending", "node_selector": {}},
                    namespace="nlp",
                    hot={"phase": "Pending"},
                )
            ],
            T0 - timedelta(hours=1),
        )
        a = self.fire("GPUJobPendingTooLong", {"namespace": "vision", "job_name": "resnet-train"})
        b = self.fire("GPUJobPendingTooLong", {"namespace": "nlp", "job_name": "bert"})
        self.assertNotEqual(a.pk, b.pk)
        self.assertEqual(a.related.count(), 0)
        self.assertTrue(Entity.objects.filter(kind="job", name="bert").exists())

    def test_it_does_not_link_a_job_pending_elsewhere_to_a_gpu_that_kept_its_capacity(self) -> None:
        # An idle or hot GPU takes nothing from a job that waits for its quota: every node is one of its
        # candidates, and linking it to each would bury the incidents that matter.
        job = self.fire("GPUJobPendingTooLong", {"namespace": "vision", "job_name": "resnet-train"})
        idle = self.fire(
            "GPUIdleAllocated",
            {"UUID": gpu_uuid("h100-01", 3), "Hostname": "h100-01", "gpu": "3"},
            at=T0 + timedelta(minutes=3),
        )
        self.assertNotEqual(job.pk, idle.pk)
        self.assertEqual(job.related.count(), 0)
        # The same GPU falling off the bus later takes capacity the job may be waiting for.
        self.gpu_fault("h100-01", 3, T0 + timedelta(minutes=20))
        gone = self.fire(
            "GPUXidError",
            {"UUID": gpu_uuid("h100-01", 5), "Hostname": "h100-01"},
            at=T0 + timedelta(minutes=21),
        )
        self.assertIn(gone.pk, set(job.related.values_list("pk", flat=True)))

    def test_it_links_an_idle_gpu_to_the_incident_of_the_job_holding_it(self) -> None:
        from collectors.inventory import Observed, record_states

        uuid = gpu_uuid("h100-02", 1)
        record_states(
            self.cluster,
            [
                Observed(
                    "pod",
                    "serve-0",
                    {"phase": "Running", "node": "h100-02", "job": "serve"},
                    namespace="nlp",
                    hot={"phase": "Running", "node": "h100-02", "job": "serve"},
                ),
                Observed(
                    "gpu",
                    uuid,
                    {"node": "h100-02", "index": 1, "uuid": uuid, "present": True, "pod": "nlp/serve-0"},
                    hot={"node": "h100-02", "phase": "ok", "pod": "nlp/serve-0"},
                ),
            ],
            T0 - timedelta(hours=1),
        )
        pod = self.fire("PodCrashLooping", {"namespace": "nlp", "pod": "serve-0"})
        idle = self.fire(
            "GPUIdleAllocated",
            {
                "UUID": uuid,
                "Hostname": "h100-02",
                "gpu": "1",
                "exported_namespace": "nlp",
                "exported_pod": "serve-0",
            },
            at=T0 + timedelta(minutes=2),
        )
        self.assertNotEqual(pod.pk, idle.pk)
        self.assertEqual(list(idle.related.values_list("pk", flat=True)), [pod.pk])

    def test_it_weighs_every_open_incident_sharing_an_entity_in_a_fixed_number_of_queries(self) -> None:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from incidents.grouping import link_related_incidents

        small_world(self.cluster, T0, nodes=6)
        job = self.fire("GPUJobPendingTooLong", {"namespace": "vision", "job_name": "resnet-train"})
        counts, gpus = [], []
        for i in range(1, 7):  # a GPU fault on each node the job may run on: each is related to the job
            host = f"h100-{i:02d}"
            self.gpu_fault(host, 3, T0 + timedelta(minutes=i), phase="faulty")
            gpus.append(
                self.fire(
                    "GPUXidError", {"UUID": gpu_uuid(host, 3), "Hostname": host}, at=T0 + timedelta(minutes=i)
                ).pk
            )
            job.related.clear()
            with CaptureQueriesContext(connection) as queries:
                linked = link_related_incidents(job)
            counts.append(len(queries))
            self.assertEqual(sorted(linked), sorted(gpus))
        self.assertEqual(sorted(job.related.values_list("pk", flat=True)), sorted(gpus))
        self.assertEqual(len(set(counts)), 1, f"queries grew with the open incidents: {counts}")

    def test_another_incidents_related_gpus_are_read_only_where_asked(self) -> None:
        from incidents.grouping import attached, attached_to

        job = self.fire("GPUJobPendingTooLong", {"namespace": "vision", "job_name": "resnet-train"})
        everything = attached(job)
        gpus = {e for e, (role, kind) in everything.items() if kind == "gpu" and role == "related"}
        self.assertGreater(len(gpus), 1)  # every GPU of its candidate nodes
        one = min(gpus)
        read = attached_to([job.pk], related_gpus={one})[job.pk]
        self.assertEqual(read, {e: v for e, v in everything.items() if e == one or e not in gpus})


class SpecificityRuleTests(GroupingTestCase):
    def test_it_keeps_project_and_queue_labels_as_context_of_a_job_alert(self) -> None:
        from collectors.inventory import Observed, record_states

        record_states(
            self.cluster,
            [
                Observed(
                    "job",
                    "other",
                    {"phase": "Pending"},
                    namespace="vision",
                    hot={"phase": "Pending", "project": "vision", "queue": "vision"},
                )
            ],
            T0 - timedelta(hours=1),
        )
        labels = {"namespace": "vision", "project": "vision", "queue": "vision"}
        a = self.fire("GPUJobPendingTooLong", {**labels, "job_name": "resnet-train"})
        b = self.fire("GPUJobPendingTooLong", {**labels, "job_name": "other"}, at=T0 + timedelta(minutes=1))
        self.assertNotEqual(a.pk, b.pk)  # two jobs of one project are two incidents
        self.assertEqual(self.subjects(a), {"job vision/resnet-train"})
        self.assertTrue({"project vision", "queue vision"} <= self.subjects(a, "related"))

    def test_it_makes_a_gpu_alert_about_the_gpu_even_when_a_pod_holds_it(self) -> None:
        uuid = gpu_uuid("h100-01", 2)
        inc = self.fire(
            "GPUXidError",
            {"UUID": uuid, "Hostname": "h100-01", "gpu": "2", "namespace": "vision", "pod": "resnet-train-0"},
        )
        self.assertEqual(self.subjects(inc), {f"gpu {uuid}", "node h100-01"})
        self.assertIn("pod vision/resnet-train-0", self.subjects(inc, "related"))

    def test_an_idle_allocation_is_about_the_workload_holding_the_gpu_too(self) -> None:
        """How a workload uses its GPUs is the workload's problem: its pod and job are subjects beside the GPU
        (its job page lists the incident, handoffs file it under it)."""
        uuid = gpu_uuid("h100-01", 2)
        inc = self.fire(
            "GPUIdleAllocated",
            {"UUID": uuid, "Hostname": "h100-01", "gpu": "2", "namespace": "vision", "pod": "resnet-train-0"},
        )
        subjects = self.subjects(inc)
        self.assertTrue({f"gpu {uuid}", "node h100-01", "pod vision/resnet-train-0"} <= subjects, subjects)

    def test_it_makes_a_pod_alert_about_the_pod_not_the_node_it_ran_on(self) -> None:
        inc = self.fire(
            "PodCrashLooping", {"namespace": "vision", "pod": "resnet-train-1", "node": "h100-02"}
        )
        self.assertEqual(self.subjects(inc), {"pod vision/resnet-train-1"})
        self.assertIn("node h100-02", self.subjects(inc, "related"))


class GpuAlertJoinTest(GroupingTestCase):
    def test_idle_gpus_of_two_pods_on_one_node_are_two_incidents_and_one_pods_gpus_one(self) -> None:
        def idle(index: int, pod: str, minutes: int) -> Incident:
            return self.fire(
                "GPUIdleAllocated",
                {
                    "UUID": gpu_uuid("h100-01", index),
                    "Hostname": "h100-01",
                    "gpu": str(index),
                    "namespace": "vision",
                    "pod": pod,
                },
                at=T0 + timedelta(minutes=minutes),
            )

        first = idle(0, "resnet-train-0", 0)
        same_pod = idle(1, "resnet-train-0", 5)
        other_pod = idle(2, "resnet-train-1", 6)
        assert same_pod.pk == first.pk
        assert other_pod.pk != first.pk
        assert {f"gpu {gpu_uuid('h100-01', 2)}", "node h100-01"} <= self.subjects(other_pod)
        assert "pod vision/resnet-train-0" not in self.subjects(other_pod)

    def test_a_gpu_fault_joins_its_nodes_fault_incident_not_a_pods_problem_on_another_gpu(self) -> None:
        # GPU 2's pod is idle (it cannot pull its image); an Xid on GPU 6 of the same node, no pod on it, is
        # another problem with another answer. A second fault on the node (GPU 7) is the node's, with GPU 6's
        idle = self.fire(
            "GPUIdleAllocated",
            {
                "UUID": gpu_uuid("h100-01", 2),
                "Hostname": "h100-01",
                "gpu": "2",
                "namespace": "vision",
                "pod": "resnet-train-0",
            },
        )
        xid = self.fire(
            "GPUXidError",
            {"UUID": gpu_uuid("h100-01", 6), "Hostname": "h100-01", "gpu": "6"},
            at=T0 + timedelta(minutes=5),
        )
        again = self.fire(
            "GPUXidError",
            {"UUID": gpu_uuid("h100-01", 7), "Hostname": "h100-01", "gpu": "7"},
            at=T0 + timedelta(minutes=6),
        )
        assert xid.pk != idle.pk
        assert again.pk == xid.pk
        assert f"gpu {gpu_uuid('h100-01', 6)}" not in self.subjects(idle)

    def test_a_pod_idle_on_a_gpu_and_a_fault_of_that_gpu_are_two_incidents_linked(self) -> None:
        labels = {
            "UUID": gpu_uuid("h100-01", 3),
            "Hostname": "h100-01",
            "gpu": "3",
            "namespace": "vision",
            "pod": "resnet-train-0",
        }
        idle = self.fire("GPUIdleAllocated", labels)
        xid = self.fire("GPUXidError", labels, at=T0 + timedelta(minutes=5))
        assert xid.pk != idle.pk
        assert idle.pk in set(xid.related.values_list("pk", flat=True))
        assert (
            self.fire("GPUIdleAllocated", {**labels, "gpu": "4", "UUID": gpu_uuid("h100-01", 4)}).pk
            == idle.pk
        )
        assert self.fire("GPUXidError", {**labels, "gpu": "5", "UUID": gpu_uuid("h100-01", 5)}).pk == xid.pk

"""Alerts with the labels a real Prometheus produces (ServiceMonitor scrape: exported_pod, instance, job and the
exporter's own pod label): the workload is the subject, never the dcgm-exporter pod."""

from __future__ import annotations

from datetime import timedelta

from collectors.inventory import Observed, record_states
from collectors.sources.dcgm import alert_workload
from incidents.models import Incident
from tests.base import T0
from tests.incidents.fixtures.alertmanager import gpu_uuid
from tests.incidents.test_grouping import GroupingTestCase

EXPORTER = {
    "instance": "10.0.1.5:9400",
    "job": "dcgm-exporter",
    "namespace": "gpu-operator",
    "pod": "nvidia-dcgm-exporter-x1b2c",
    "container": "nvidia-dcgm-exporter",
    "service": "nvidia-dcgm-exporter",
    "endpoint": "gpu-metrics",
}


def gpu_labels(node: str, index: int) -> dict[str, str]:
    return {
        "Hostname": node,
        "gpu": str(index),
        "UUID": gpu_uuid(node, index),
        "modelName": "NVIDIA H100 80GB HBM3",
        "DCGM_FI_DRIVER_VERSION": "550.127.08",
    }


class ScrapedLabelTests(GroupingTestCase):
    def setUp(self) -> None:
        super().setUp()
        # On a real cluster the exporter's DaemonSet pods are in the inventory too: a label naming one resolves.
        exporter = Observed(
            "pod",
            EXPORTER["pod"],
            {"phase": "Running", "node": "h100-01", "job": "", "containers": []},
            namespace="gpu-operator",
            hot={"phase": "Running", "node": "h100-01", "job": "", "gpus": 0},
        )
        record_states(self.cluster, [exporter], T0 - timedelta(hours=2))

    def assert_no_exporter(self, inc: Incident) -> None:
        """Not a subject, not in the title (as a pod running on the GPU's node it may be related context)."""
        inc.refresh_from_db()
        for text in (
            inc.title,
            inc.unresolved_subject,
            " ".join(self.subjects(inc)),
        ):
            self.assertNotIn("dcgm-exporter", text)
            self.assertNotIn("gpu-operator", text)

    def test_a_raw_scraped_series_alert_is_about_the_exported_pod(self) -> None:
        labels = {
            **gpu_labels("h100-01", 3),
            **EXPORTER,
            "exported_namespace": "vision",
            "exported_pod": "resnet-train-0",
            "exported_container": "main",
        }
        inc = self.fire("GPUIdleAllocated", labels)
        self.assertIn("pod vision/resnet-train-0", self.subjects(inc) | self.subjects(inc, "related"))
        self.assertIn(f"gpu {gpu_uuid('h100-01', 3)}", self.subjects(inc))
        self.assert_no_exporter(inc)

    def test_a_free_gpus_alert_names_the_gpu_not_the_exporter_pod(self) -> None:
        inc = self.fire("GPUXidError", {**gpu_labels("h100-02", 5), **EXPORTER, "xid": "79"})
        self.assertEqual(self.subjects(inc), {f"gpu {gpu_uuid('h100-02', 5)}", "node h100-02"})
        self.assertEqual(inc.unresolved_subject, "")
        self.assert_no_exporter(inc)

    def test_a_gpu_the_inventory_does_not_know_yet_does_not_make_the_exporter_pod_the_subject(self) -> None:
        labels = {
            **gpu_labels("h100-01", 3),
            **EXPORTER,
            "UUID": "GPU-00000000-new0-0000-0000-000000000000",
            "gpu": "11",
        }
        inc = self.fire("GPUXidError", {**labels, "xid": "79"})
        self.assertEqual(self.subjects(inc), {"node h100-01"})
        self.assert_no_exporter(inc)

    def test_an_unknown_node_is_named_by_its_gpu_not_by_the_exporter_pod(self) -> None:
        labels = {**gpu_labels("h100-77", 3), **EXPORTER}
        inc = self.fire("GPUHighTemperature", labels)
        self.assertEqual(self.subjects(inc), set())
        self.assertIn("node=h100-77", inc.unresolved_subject)
        self.assert_no_exporter(inc)
        self.assertIn("h100-77 GPU 3", inc.title)

    def test_the_shipped_rules_aggregated_labels_name_the_workload(self) -> None:
        labels = {
            **gpu_labels("h100-01", 2),
            "exported_namespace": "vision",
            "exported_pod": "resnet-train-1",
        }
        del labels["DCGM_FI_DRIVER_VERSION"]
        inc = self.fire("GPUIdleAllocated", labels, severity="info")
        self.assertIn("pod vision/resnet-train-1", self.subjects(inc) | self.subjects(inc, "related"))
        self.assert_no_exporter(inc)

    def test_honor_labels_scrapes_name_the_workload_in_the_plain_pod_label(self) -> None:
        labels = {**gpu_labels("h100-01", 4), "instance": "10.0.1.5:9400", "job": "dcgm-exporter"}
        labels.update({"namespace": "vision", "pod": "resnet-train-0", "container": "main"})
        inc = self.fire("GPUHighTemperature", labels)
        self.assertIn("pod vision/resnet-train-0", self.subjects(inc) | self.subjects(inc, "related"))

    def test_a_kube_state_metrics_alert_about_the_exporter_pod_itself_still_names_it(self) -> None:
        labels = {
            "namespace": "gpu-operator",
            "pod": "nvidia-dcgm-exporter-x1b2c",
            "container": "nvidia-dcgm-exporter",
        }
        inc = self.fire(
            "PodCrashLooping", {**labels, "job": "kube-state-metrics", "instance": "10.0.0.2:8080"}
        )
        self.assertEqual(self.subjects(inc), {"pod gpu-operator/nvidia-dcgm-exporter-x1b2c"})


def test_alert_workload_reads_exported_labels_first_and_never_the_exporter_on_dcgm_series() -> None:
    assert alert_workload({"exported_namespace": "a", "exported_pod": "p", "namespace": "gpu-operator"}) == (
        "a",
        "p",
    )
    assert alert_workload({"exported_pod": "p", "namespace": "gpu-operator"}) == ("", "p")
    assert alert_workload({"UUID": "GPU-1", **EXPORTER}) == ("", "")
    assert alert_workload({"gpu": "0", "namespace": "gpu-operator", "pod": "dcgm-exporter-abc12"}) == ("", "")
    assert alert_workload({"namespace": "vision", "pod": "bert-0", "UUID": "GPU-1"}) == ("vision", "bert-0")
    assert alert_workload({"namespace": "vision", "job_name": "bert"}) == ("vision", "")
    assert alert_workload({**EXPORTER}) == ("gpu-operator", "nvidia-dcgm-exporter-x1b2c")  # no DCGM label

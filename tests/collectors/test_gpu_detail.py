from __future__ import annotations

from datetime import timedelta

from collectors import inventory
from tests.collectors.factories import T0, PageTestCase, gpu_obs, gpu_uuid


def path(node: str, index: int) -> str:
    return f"/c/gpu-prod/gpus/{gpu_uuid(node, index)}/"


class GpuDetailTest(PageTestCase):
    def test_it_requires_login_lets_bob_read_and_swaps_only_the_page_for_htmx(self):
        self.assert_page_basics(path("h100-01", 0), self.times["end"])

    def test_it_shows_node_index_uuid_model_and_the_pod_using_it(self):
        html = self.get(path("h100-01", 3), self.times["end"]).content.decode()
        assert "/c/gpu-prod/nodes/h100-01/" in html and "index 3" in html
        assert gpu_uuid("h100-01", 3) in html and "NVIDIA H100 80GB HBM3" in html
        assert "/c/gpu-prod/pods/vision/resnet-train-0/" in html

    def test_it_shows_who_used_it_as_of_t(self):
        free = self.get(path("h100-01", 0), self.times["resnet_start"] - timedelta(minutes=1))
        used = self.get(path("h100-01", 0), self.times["resnet_start"] + timedelta(minutes=1))
        assert free.context["pod_ref"] is None
        assert str(used.context["pod_ref"]) == "vision/resnet-train-0"

    def test_it_shows_xid_facts(self):
        inventory.record_states(self.cluster, [gpu_obs("h100-02", 5, xid=79)], self.times["end"])
        html = self.get(path("h100-02", 5), self.times["end"] + timedelta(minutes=1)).content.decode()
        assert "Xid 79" in html and "faulty" in html

    def test_it_says_plainly_when_the_gpu_did_not_exist(self):
        self.assert_absent_before_first_version(path("h100-02", 1), T0)

    def test_the_last_xid_carries_one_first_seen_time_on_the_gpu_and_node_pages(self):
        at = self.times["end"]
        inventory.record_states(self.cluster, [gpu_obs("h100-02", 5, xid=79)], at)
        later = at + timedelta(minutes=10)
        gpu = self.get(path("h100-02", 5), later).content.decode()
        node = self.get("/c/gpu-prod/nodes/h100-02/", later).content.decode()
        stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert "Xid 79</span> first seen" in gpu and stamp in gpu.split("Last Xid")[1][:600]
        assert f'title="first seen {stamp} (dcgm)">79</span>' in node

    def test_a_gpu_that_fell_off_the_bus_takes_its_xid_from_the_alert_about_it(self):
        from django.utils import timezone

        from incidents.models import Alert

        at = self.times["end"]
        inventory.record_states(self.cluster, [gpu_obs("h100-02", 6, present=False)], at)
        now = timezone.now()
        Alert.objects.create(
            fingerprint="fp-xid",
            name="GPUXidError",
            cluster_name="gpu-prod",
            labels={"alertname": "GPUXidError", "UUID": gpu_uuid("h100-02", 6), "xid": "79"},
            starts_at=at - timedelta(minutes=2),
            received_at=now,
            updated_at=now,
        )
        html = self.get(path("h100-02", 6), at + timedelta(minutes=5)).content.decode()
        assert "Xid 79</span> first seen" in html and "alert GPUXidError" in html

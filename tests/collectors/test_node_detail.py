from __future__ import annotations

from datetime import timedelta

from collectors import queries
from collectors.models import SourceRun
from tests.collectors.factories import T0, PageTestCase, crowd_node, gpu_uuid, iso

PATH = "/c/gpu-prod/nodes/h100-01/"


class NodeDetailTest(PageTestCase):
    def test_it_requires_login_lets_bob_read_and_swaps_only_the_page_for_htmx(self):
        self.assert_page_basics(PATH, self.times["end"])

    def test_it_lists_each_gpu_with_the_pod_using_it(self):
        html = self.get(PATH, self.times["end"]).content.decode()
        assert html.count('class="ent ent-gpu"') == 8
        assert f"/c/gpu-prod/gpus/{gpu_uuid('h100-01', 0)}/" in html
        # the pod using GPU 0 is a link to its page, and so is its job
        assert "/c/gpu-prod/pods/vision/resnet-train-0/" in html
        assert "/c/gpu-prod/jobs/vision/resnet-train/" in html
        assert "Pods on this node (1)" in html

    def test_it_shows_the_state_as_of_t(self):
        before = self.get(
            "/c/gpu-prod/nodes/h100-04/", self.times["cordon"] - timedelta(minutes=1)
        ).content.decode()
        after = self.get(
            "/c/gpu-prod/nodes/h100-04/", self.times["plugin_down"] + timedelta(minutes=1)
        ).content.decode()
        assert "capacity 8 · allocatable 8" in before and "cordoned" not in before
        assert "capacity 8 · allocatable 0" in after and "cordoned" in after
        assert "device plugin reports fewer GPUs" in after
        assert "node.kubernetes.io/unschedulable:NoSchedule" in after

    def test_it_shows_labels_that_matter_and_taints(self):
        html = self.get("/c/gpu-prod/nodes/h100-03/", self.times["end"]).content.decode()
        assert "NVIDIA-H100-80GB-HBM3" in html and "run.ai/node-pool" in html
        assert "nvidia.com/gpu=true:NoSchedule" in html

    def test_it_links_the_pod_count_to_the_filtered_job_list(self):
        html = self.get(PATH, self.times["end"]).content.decode()
        assert "/c/gpu-prod/jobs/?node=h100-01&amp;t=" in html

    def test_it_lists_changes_around_t_with_links_that_move_the_cursor(self):
        r = self.get("/c/gpu-prod/nodes/h100-04/", self.times["cordon"] + timedelta(minutes=5))
        html = r.content.decode()
        assert "unschedulable" in html and "false → true" in html
        jump = iso(self.times["cordon"]).replace(":", "%3A")
        assert f'href="/c/gpu-prod/nodes/h100-04/?t={jump}&amp;w=2h"' in html
        assert r.context["cursor_prev_change"] == self.times["cordon"]
        assert r.context["cursor_next_change"] == self.times["plugin_down"]
        assert 'id="cursor-prev-change"' in html and 'id="cursor-next-change"' in html

    def test_it_reads_its_gpus_and_pods_in_one_query_in_the_orders_of_the_separate_ones(self):
        at = self.times["end"]
        crowd_node(self.cluster, "h100-01", 30, at)
        t = at + timedelta(minutes=1)
        with self.assertNumQueries(1):
            gpus, pods = queries.gpus_and_pods_on_node(self.cluster, "h100-01", t)
        assert [g.pk for g in gpus] == [g.pk for g in queries.gpus_of_node(self.cluster, "h100-01", t)]
        assert [p.pk for p in pods] == [p.pk for p in queries.pods_on_node(self.cluster, "h100-01", t)]
        assert len(gpus) == 8 and len(pods) == 31

    def test_it_reads_the_node_with_its_version_at_t_in_one_query(self):
        t = self.times["end"]
        with self.assertNumQueries(1):
            node, version = queries.entity_at("gpu-prod", "node", "h100-01", "", t)
            assert node.cluster.name == "gpu-prod"  # selected with it
        assert node == queries.get_entity("gpu-prod", "node", "h100-01")
        assert version == queries.version_at(node, t) and version.entity is node
        assert queries.entity_at("gpu-prod", "node", "h100-01", "", T0 - timedelta(minutes=1)) == (node, None)
        assert queries.entity_at("gpu-prod", "node", "nowhere", "", t) == (None, None)

    def test_it_says_plainly_when_the_node_did_not_exist(self):
        self.assert_absent_before_first_version(PATH, T0)

    def test_it_shows_a_calm_notice_when_prometheus_did_not_answer(self):
        html = self.get(PATH, self.times["end"]).content.decode()
        assert "Prometheus did not answer at 03:12; GPU telemetry missing for this window" in html
        SourceRun.objects.all().delete()
        assert "did not answer" not in self.get(PATH, self.times["end"]).content.decode()

    def test_it_is_a_404_for_an_unknown_node_or_cluster(self):
        assert self.get("/c/gpu-prod/nodes/nope/").status_code == 404
        assert self.get("/c/other/nodes/h100-01/").status_code == 404


class NodeLiveTest(PageTestCase):
    def test_it_renders_live_without_t_and_links_without_a_cursor(self):
        r = self.client.get(PATH)
        assert r.status_code == 200
        html = r.content.decode()
        assert "live ·" in html
        assert r.context["version"] is not None  # the story's last versions are still open
        assert 'href="/c/gpu-prod/pods/vision/resnet-train-0/"' in html

"""Shares and MIG on the job, pod, node, GPU and project pages (issue 45 item 1): a shared GPU lists the pods
sharing it with their fraction and GPU memory, KAI's reservation pod under them and named as such; a
fractional job reads its share, not "× ? = 0"; a MIG pod its instance by profile. Recorded states as
collectors.mapping writes them (a GPU's ``shares``/``reservation``/``mig``, a pod's ``gpu_share``/``mig``)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors import gpu_slices, inventory
from collectors.inventory import Observed
from tests.collectors.factories import T0, PageTestCase, gpu_obs, gpu_uuid, job_obs, node_obs, pod_obs

AT = T0 + timedelta(minutes=205)  # after the small cluster's story (tests/collectors/factories.py)
T = AT + timedelta(minutes=1)
RESERVATION = "runai-reservation/gpu-reservation-l40s-01-x7k2p"
MIG_MODEL = "NVIDIA A100 SXM4 80GB"


def _with(obs: Observed, **state: Any) -> Observed:
    obs.state.update(state)
    return obs


def _shared_world() -> list[Observed]:
    """l40s-01: GPU 0 shared by a 0.5 notebook and a 20 GiB embedding service, held by KAI's reservation pod;
    GPU 1 whole. a100-01: one GPU in MIG instances, one of them used by an eval pod."""
    l40s = _with(
        node_obs("l40s-01", gpus=2, nodepool="l40s"), gpu_product="NVIDIA-L40S", gpu_memory_mib=46068
    )
    a100 = _with(node_obs("a100-01", gpus=0, nodepool="a100-mig"), gpu_product="NVIDIA-A100-SXM4-80GB")
    half = {"fraction": 0.5, "memory_mib": None, "gpu_index": 0, "group": "g-1"}
    mem = {"fraction": None, "memory_mib": 20480, "gpu_index": 0, "group": "g-1"}
    ana = pod_obs(
        "vision",
        "notebook-ana-0",
        job="notebook-ana",
        queue="vision",
        gpus=0,
        phase="Running",
        node="l40s-01",
    )
    embed = pod_obs(
        "serving", "embed-svc-0", job="embed-svc", queue="serving", gpus=0, phase="Running", node="l40s-01"
    )
    whole = pod_obs("llm", "big-0", job="big", queue="llm", gpus=1, phase="Running", node="l40s-01")
    rns, _, rname = RESERVATION.partition("/")
    reservation = pod_obs(rns, rname, job="", queue="", gpus=1, phase="Running", node="l40s-01")
    reservation.state.update(
        labels={"app": "runai-reservation", "runai-gpu-group": "g-1"}, reservation_for=gpu_uuid("l40s-01", 0)
    )
    eval0 = pod_obs("nlp", "eval-0", job="eval", queue="nlp", gpus=0, phase="Running", node="a100-01")
    _with(ana, gpu_share=half, mig={}, gpu_units=0.5)
    _with(embed, gpu_share=mem, mig={}, gpu_units=0.4446)
    _with(eval0, gpu_share=None, mig={"1g.10gb": 1}, gpu_units=1.0)
    jobs = [
        job_obs("llm", "big", queue="llm", phase="Running", pods=1, gpus_per_pod=1, submitted=AT),
        _with(
            job_obs(
                "vision",
                "notebook-ana",
                queue="vision",
                phase="Running",
                pods=1,
                gpus_per_pod=0,
                submitted=AT,
            ),
            gpu_share=half,
            mig={},
            gpu_units=0.5,
        ),
        _with(
            job_obs("nlp", "eval", queue="nlp", phase="Running", pods=1, gpus_per_pod=0, submitted=AT),
            gpu_share=None,
            mig={"1g.10gb": 1},
            gpu_units=1.0,
        ),
    ]
    shared = _with(
        gpu_obs("l40s-01", 0, pod=RESERVATION),
        model="NVIDIA L40S",
        reservation=RESERVATION,
        shares=[
            {"pod": "serving/embed-svc-0", "fraction": 0.4446, "memory_mib": 20480},
            {"pod": "vision/notebook-ana-0", "fraction": 0.5, "memory_mib": 23034},
        ],
    )
    mig = _with(
        gpu_obs("a100-01", 0, pod="nlp/eval-0"),
        model=MIG_MODEL,
        mig=[
            {"gi_id": 1, "profile": "3g.40gb", "pod": None, "memory_mib": 40960},
            {"gi_id": 3, "profile": "1g.10gb", "pod": "nlp/eval-0", "memory_mib": 10240},
        ],
    )
    gpus = [shared, _with(gpu_obs("l40s-01", 1, pod="llm/big-0"), model="NVIDIA L40S"), mig]
    return [l40s, a100, ana, embed, whole, reservation, eval0, *jobs, *gpus]


def _panel(html: str, panel_id: str) -> str:
    return html.split(f'id="{panel_id}"', 1)[1].split("</section>", 1)[0]


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


class ShareDisplaysTest(PageTestCase):
    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        world = _shared_world()
        inventory.record_states(cls.cluster, world, AT)
        gpu_slices.record_slices(cls.cluster, [o for o in world if o.kind == "gpu"], AT)

    def test_it_requires_login_on_the_shared_node_and_job(self):
        self.assert_page_basics("/c/gpu-prod/nodes/l40s-01/", T)
        self.assert_page_basics("/c/gpu-prod/jobs/vision/notebook-ana/", T)

    def test_a_shared_gpu_on_the_node_page_lists_its_shares_then_the_reservation_pod(self):
        html = self.get("/c/gpu-prod/nodes/l40s-01/", T).content.decode()
        gpus = _panel(html, "node-gpus")
        text = _text(gpus)
        assert "serving/embed-svc-0 0.445 of an L40S, 20 GiB" in text
        assert "vision/notebook-ana-0 0.5 of an L40S, 22.5 GiB" in text
        assert "device held for KAI by its reservation pod gpu-reservation-l40s-01-x7k2p" in text
        # the users are links, and come before the reservation pod, which is never given as the user
        assert gpus.index("/c/gpu-prod/pods/vision/notebook-ana-0/") < gpus.index(
            f"/c/gpu-prod/pods/{RESERVATION}/"
        )
        assert "0.055 of the GPU free" in text
        assert "llm/big-0" in text  # the whole GPU still names its pod
        hrefs = re.findall(r'href="([^"]+)"', gpus)
        assert hrefs and all("t=" in h and "w=2h" in h for h in hrefs), hrefs  # the cursor is kept

    def test_the_node_page_counts_shares_and_puts_reservation_pods_last(self):
        html = self.get("/c/gpu-prod/nodes/l40s-01/", T).content.decode()
        assert "1 GPU shared by 2 pods" in _text(_panel(html, "node-state"))
        pods = _text(_panel(html, "node-pods"))
        assert "0.5 of an L40S, 22.5 GiB" in pods and "20 GiB of GPU memory (0.445 of an L40S)" in pods, pods
        assert pods.rindex("KAI reservation pod") > pods.index("vision/notebook-ana-0")
        assert pods.count("KAI reservation pod") == 1
        assert "45 GiB each" in _text(_panel(html, "node-state"))

    def test_the_gpu_page_names_the_sharing_pods_not_the_reservation_pod_as_users(self):
        html = self.get(f"/c/gpu-prod/gpus/{gpu_uuid('l40s-01', 0)}/", T).content.decode()
        state = _text(_panel(html, "gpu-state"))
        used = state.split("Used by at t", 1)[1]
        assert used.index("serving/embed-svc-0") < used.index("held for KAI by its reservation pod")
        assert "0.5 of an L40S, 22.5 GiB" in used
        assert "say otherwise" not in state

    def test_a_fractional_job_reads_its_share_and_the_pods_sharing_its_gpu(self):
        html = self.get("/c/gpu-prod/jobs/vision/notebook-ana/", T).content.decode()
        state = _text(_panel(html, "job-state"))
        assert "1 pod × 0.5 of an L40S, 22.5 GiB = 0.5 GPU" in state
        assert "?" not in state.split("GPUs requested", 1)[1].split("Priority", 1)[0]
        pods = _panel(html, "job-pods")
        assert "shared with" in pods and "/c/gpu-prod/pods/serving/embed-svc-0/" in pods
        assert f"/c/gpu-prod/gpus/{gpu_uuid('l40s-01', 0)}/" in pods and "GPU 0 · l40s-01" in pods
        assert "device held for KAI by its reservation pod" in pods

    def test_a_mig_job_and_its_pod_read_instances_by_profile(self):
        job = _text(self.get("/c/gpu-prod/jobs/nlp/eval/", T).content.decode())
        assert "1 pod × 1g.10gb = 1 × 1g.10gb · its queue counts 1 GPU" in job
        assert "1g.10gb (GI 3) on GPU 0 · a100-01" in job
        pod = _text(self.get("/c/gpu-prod/pods/nlp/eval-0/", T).content.decode())
        assert "GPUs requested 1 × 1g.10gb" in pod and "1g.10gb (GI 3) on GPU 0 · a100-01" in pod
        node = _text(self.get("/c/gpu-prod/nodes/a100-01/", T).content.decode())
        assert "1 of 2 MIG instances in use on 1 GPU" in node

    def test_the_pod_page_shows_its_share_and_the_reservation_pod_says_what_it_holds(self):
        pod = _text(self.get("/c/gpu-prod/pods/vision/notebook-ana-0/", T).content.decode())
        assert "GPUs requested 0.5 of a GPU" in pod
        assert "0.5 of an L40S, 22.5 GiB on GPU 0 · l40s-01 , shared with serving/embed-svc-0" in pod
        res = self.get(f"/c/gpu-prod/pods/{RESERVATION}/", T).content.decode()
        assert "KAI reservation pod" in res and f"/c/gpu-prod/gpus/{gpu_uuid('l40s-01', 0)}/" in res

    def test_project_and_job_list_count_the_share_as_a_fraction(self):
        project = _text(_panel(self.get("/c/gpu-prod/projects/vision/", T).content.decode(), "jobs-running"))
        assert "vision/notebook-ana" in project and "notebook-ana Running vision 0.5 share" in project
        jobs = _text(self.get("/c/gpu-prod/jobs/", T).content.decode())
        assert "1 × 0.5 of a GPU" in jobs and "1 × 1g.10gb" in jobs

    def test_shares_cost_the_node_page_no_query_and_the_job_page_two(self):
        def count(path: str) -> int:
            with CaptureQueriesContext(connection) as ctx:
                assert self.get(path, T).status_code == 200
            return len(ctx.captured_queries)

        assert count("/c/gpu-prod/nodes/l40s-01/") == count("/c/gpu-prod/nodes/h100-01/")
        # the GPUs of its node and the pods there (their shares, fresher than the GPUs' between sweeps)
        assert count("/c/gpu-prod/jobs/vision/notebook-ana/") == count("/c/gpu-prod/jobs/llm/big/") + 2
        assert count("/c/gpu-prod/jobs/nlp/eval/") == count("/c/gpu-prod/jobs/llm/big/") + 1  # MIG: the GPUs

    def test_a_gpu_model_is_escaped(self):
        bad = _with(
            gpu_obs("l40s-01", 0, pod=RESERVATION),
            model="<script>x</script>",
            reservation=RESERVATION,
            shares=[{"pod": "vision/notebook-ana-0", "fraction": 0.5, "memory_mib": 23034}],
        )
        inventory.record_states(self.cluster, [bad], AT + timedelta(minutes=2))
        html = self.get("/c/gpu-prod/nodes/l40s-01/", AT + timedelta(minutes=3)).content.decode()
        assert "<script>x" not in html and "&lt;script&gt;" in html

    def test_the_node_page_reads_shares_from_its_pods_between_gpu_sweeps(self):
        """A GPU's shares are recorded when DCGM is swept; the pods KAI placed since, or that ended, say so first."""
        later = AT + timedelta(minutes=2)
        half = {"fraction": 0.5, "memory_mib": None, "gpu_index": 0, "group": "g-1"}
        ended = pod_obs(
            "vision",
            "notebook-ana-0",
            job="notebook-ana",
            queue="vision",
            gpus=0,
            phase="Succeeded",
            node="l40s-01",
        )
        late = pod_obs(
            "vision", "late-0", job="late", queue="vision", gpus=0, phase="Running", node="l40s-01"
        )
        inventory.record_states(
            self.cluster,
            [
                _with(ended, gpu_share=half, mig={}, gpu_units=0.5),
                _with(late, gpu_share=half, mig={}, gpu_units=0.5),
            ],
            later,
        )
        html = self.get("/c/gpu-prod/nodes/l40s-01/", later + timedelta(minutes=1)).content.decode()
        row = _text(_panel(html, "node-gpus")).split(gpu_uuid("l40s-01", 1)[:12], 1)[0]
        assert "vision/late-0 0.5 of an L40S, 22.5 GiB" in row and "notebook-ana" not in row, row
        assert "serving/embed-svc-0 0.445 of an L40S, 20 GiB" in row
        gpu = _text(
            self.get(
                f"/c/gpu-prod/gpus/{gpu_uuid('l40s-01', 0)}/", later + timedelta(minutes=1)
            ).content.decode()
        )
        used = gpu.split("Used by at t", 1)[1].split("Errors", 1)[0]
        assert "vision/late-0" in used and "notebook-ana" not in used, used
        assert "the pods on its node at t say otherwise" in gpu  # its recorded shares are the sweep's
        job = _text(
            self.get("/c/gpu-prod/pods/vision/late-0/", later + timedelta(minutes=1)).content.decode()
        )
        assert "0.5 of an L40S, 22.5 GiB on GPU 0 · l40s-01 , shared with serving/embed-svc-0" in job, job[
            :3000
        ]

    def test_the_gpu_page_lists_the_pods_on_its_shares_in_the_window(self):
        html = self.get(f"/c/gpu-prod/gpus/{gpu_uuid('l40s-01', 0)}/", T).content.decode()
        users = _text(_panel(html, "gpu-users"))
        assert "Pods using it within 2h of t (3)" in users
        assert "vision/notebook-ana-0 0.5 of an L40S, 22.5 GiB" in users and "serving/embed-svc-0" in users
        assert users.index("notebook-ana") < users.index("KAI reservation pod")
        mig = _text(
            _panel(self.get(f"/c/gpu-prod/gpus/{gpu_uuid('a100-01', 0)}/", T).content.decode(), "gpu-users")
        )
        assert "nlp/eval-0 1g.10gb (GI 3)" in mig and "(1)" in mig

    def test_the_reservation_pod_holding_a_gpu_through_its_share_changes_is_one_row(self):
        later = AT + timedelta(minutes=4)
        again = _with(
            gpu_obs("l40s-01", 0, pod=RESERVATION),
            model="NVIDIA L40S",
            reservation=RESERVATION,
            shares=[{"pod": "serving/embed-svc-0", "fraction": 0.4446, "memory_mib": 20480}],
        )
        inventory.record_states(self.cluster, [again], later)
        users = _text(
            _panel(
                self.get(f"/c/gpu-prod/gpus/{gpu_uuid('l40s-01', 0)}/", later).content.decode(), "gpu-users"
            )
        )
        assert users.count("KAI reservation pod") == 1, users
        assert "0.5 of an L40S, 22.5 GiB" in users  # its slices' words name the product

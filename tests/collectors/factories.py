"""A small, realistic GPU cluster with a few hours of history, recorded through the one write path.

Everything here goes through ``collectors.inventory.record_states`` with states shaped exactly as
docs/inventory.md fixes them, so the pages are tested against what the collectors will write.

The story (times relative to ``T0`` = 2026-11-29T00:00:00Z):

- projects/queues ``vision`` (quota 16, limit 24, priority 50) and ``nlp`` (quota 8, limit 16);
  at T0+90m alice lowers vision's quota to 12 through Run:ai.
- nodes ``h100-01`` … ``h100-04``, 8 GPUs each; ``h100-03`` carries a taint, ``h100-04`` is cordoned at
  T0+2h and its device plugin drops allocatable to 0 at T0+2h30m.
- ``vision/resnet-train``: 2 pods × 8 GPUs, Running on h100-01/h100-02 from T0+10m.
- ``vision/vit-large``: 1 pod × 8 GPUs, Pending (quota) from T0+20m.
- ``nlp/llama-ft``: 1 pod × 4 GPUs, Running on h100-03 from T0+15m; the pod crash-loops from T0+2h.
- ``nlp/bert-eval``: submitted at T0+30m with 4 GPUs per pod, resubmitted with 8 at T0+1h (request history),
  Pending with a FailedScheduling event.
- ``nlp/old-sweep``: existed T0 … T0+40m and was deleted (the "did not exist at t" page).
- a Prometheus query failed at T0+3h12m (a collection error pages must show).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from collectors import inventory
from collectors.inventory import Observed
from collectors.models import Cluster, Entity, KubeEvent, SourceRun
from collectors.version_rows import HOT_FIELDS
from tests.base import BaseTestCase

T0 = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)
PRODUCT = "NVIDIA-H100-80GB-HBM3"
MODEL = "NVIDIA H100 80GB HBM3"


def iso(t: datetime | None) -> str | None:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if t else None


def gpu_uuid(node: str, index: int) -> str:
    """A stable, real-looking GPU UUID (``GPU-`` + a UUID) derived from node and index."""
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}/{index}')}"


#
# Observed states per kind (docs/inventory.md)
#


def project_obs(name: str, *, quota: int, limit: int | None, priority: int = 50, weight: int = 1) -> Observed:
    state = {
        "namespace": name,
        "queue": name,
        "quota_gpus": quota,
        "limit_gpus": limit,
        "over_quota_weight": weight,
        "priority": priority,
    }
    hot = {"project": name, "gpus": quota, "gpus_allocatable": limit, "queue": name}
    return Observed(kind="project", name=name, state=state, hot=hot)


def queue_obs(
    name: str, *, project: str, quota: int, limit: int | None, priority: int = 50, weight: int = 1
) -> Observed:
    state = {
        "project": project,
        "priority": priority,
        "quota_gpus": quota,
        "limit_gpus": limit,
        "over_quota_weight": weight,
        "cohort": None,
        "parent": None,
        "scheduler": "kai",
        "flavors": ["default-flavor"],
    }
    hot = {"project": project, "gpus": quota, "gpus_allocatable": limit}
    return Observed(kind="queue", name=name, state=state, hot=hot)


def node_obs(
    name: str,
    *,
    ready: bool = True,
    unschedulable: bool = False,
    taints: list[dict] | None = None,
    gpus: int = 8,
    allocatable: int | None = None,
    nodepool: str = "h100",
    revision: int = 0,
) -> Observed:
    alloc = gpus if allocatable is None else allocatable
    labels = {
        "nvidia.com/gpu.product": PRODUCT,
        "nvidia.com/gpu.count": str(gpus),
        "kubernetes.io/hostname": name,
        "run.ai/node-pool": nodepool,
        "topology.kubernetes.io/zone": "eu-west-1a",
    }
    if revision:
        labels["rcaweb.test/revision"] = str(revision)  # only to build long histories
    state = {
        "ready": ready,
        "ready_reason": "KubeletReady" if ready else "KubeletNotReady",
        "unschedulable": unschedulable,
        "taints": taints or [],
        "labels": labels,
        "gpu_product": PRODUCT,
        "gpu_memory_mib": 81559,
        "nodepool": nodepool,
        "capacity": {"nvidia.com/gpu": gpus, "cpu": "96", "memory": "1056Gi"},
        "allocatable": {"nvidia.com/gpu": alloc, "cpu": "95", "memory": "1040Gi"},
        "conditions": {
            "Ready": {
                "status": "True" if ready else "False",
                "reason": "KubeletReady" if ready else "KubeletNotReady",
                "since": iso(T0),
            }
        },
    }
    hot = {
        "phase": "Ready" if ready else "NotReady",
        "ready": ready,
        "gpus": gpus,
        "gpus_allocatable": alloc,
        "node": name,
    }
    return Observed(kind="node", name=name, state=state, hot=hot)


def gpu_obs(
    node: str, index: int, *, pod: str = "", xid: int = 0, present: bool = True, revision: int = 0
) -> Observed:
    u = gpu_uuid(node, index)
    phase = "missing" if not present else ("faulty" if xid in (48, 79) else "ok")
    state = {
        "node": node,
        "index": index,
        "uuid": u,
        "model": MODEL,
        "pci_bus_id": f"00000000:{0x1A + index:02X}:00.0",
        "present": present,
        "pod": pod or None,
        "namespace": pod.split("/")[0] if pod else None,
        "xid_last": xid,
        "ecc_dbe_total": 0,
        "ecc_sbe_total": 0,
    }
    if revision:
        state["revision"] = revision
    return Observed(kind="gpu", name=u, state=state, hot={"node": node, "pod": pod, "phase": phase})


def job_obs(
    ns: str,
    name: str,
    *,
    queue: str,
    phase: str,
    pods: int,
    gpus_per_pod: int,
    submitted: datetime,
    message: str = "",
    priority_class: str = "train",
    active: int = 0,
    revision: int = 0,
) -> Observed:
    scheduling: dict[str, Any] = {
        "source": "kai",
        "type": "PodScheduled",
        "status": "True",
        "reason": "",
        "message": "",
        "since": iso(submitted),
    }
    if phase == "Pending":
        scheduling = {
            "source": "kai",
            "type": "UnschedulableOnNodePool",
            "status": "False",
            "reason": "NonPreemptibleOverQuota" if "quota" in message else "Unschedulable",
            "message": message,
            "since": iso(submitted),
        }
    state = {
        "phase": phase,
        "queue": queue,
        "project": queue,
        "pods": pods,
        "gpus_per_pod": gpus_per_pod,
        "gpus_total": pods * gpus_per_pod,
        "image": f"registry.local/{ns}/{name}:1.4",
        "priority_class": priority_class,
        "preemptible": priority_class == "train",
        "node_selector": {},
        "tolerations": [],
        "submitted": iso(submitted),
        "active": active,
        "succeeded": 0,
        "failed": 0,
        "generation": 1,
        "scheduling": scheduling,
        "admitted": phase != "Pending",
    }
    if revision:
        state["revision"] = revision
    hot = {"phase": phase, "queue": queue, "project": queue, "gpus": pods * gpus_per_pod, "namespace": ns}
    return Observed(kind="job", name=name, namespace=ns, state=state, hot=hot)


def pod_obs(
    ns: str,
    name: str,
    *,
    job: str,
    queue: str,
    gpus: int,
    phase: str,
    node: str = "",
    created: datetime = T0,
    message: str = "",
    waiting: str = "",
    restarts: int = 0,
    revision: int = 0,
) -> Observed:
    if phase == "Pending":
        conditions = {
            "PodScheduled": {
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "since": iso(created),
            }
        }
        cstate: dict[str, Any] = {"waiting": {"reason": "ContainerCreating", "message": ""}} if node else {}
    else:
        conditions = {
            "PodScheduled": {"status": "True", "reason": "", "message": "", "since": iso(created)},
            "Ready": {
                "status": "False" if waiting else "True",
                "reason": "ContainersNotReady" if waiting else "",
                "message": "",
                "since": iso(created),
            },
        }
        cstate = (
            {"waiting": {"reason": waiting, "message": "back-off 5m0s restarting failed container"}}
            if waiting
            else {"running": {"startedAt": iso(created)}}
        )
    container = {
        "name": "main",
        "image": f"registry.local/{ns}/{job}:1.4",
        "gpus": gpus,
        "env": {"WANDB_API_KEY": "[redacted]", "EPOCHS": "90"},
        "state": cstate,
        "last_state": {"terminated": {"reason": "Error", "exitCode": 1, "finishedAt": iso(created)}}
        if restarts
        else {},
        "restart_count": restarts,
        "ready": phase == "Running" and not waiting,
    }
    state = {
        "phase": phase,
        "node": node or None,
        "job": job,
        "queue": queue,
        "project": queue,
        "gpus": gpus,
        "scheduler": "kai-scheduler",
        "priority_class": "train",
        "owner": {"kind": "Job", "name": job},
        "node_selector": {},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "labels": {"job-name": job},
        "created": iso(created),
        "started": iso(created) if phase == "Running" else None,
        "conditions": conditions,
        "containers": [container],
    }
    if revision:
        state["revision"] = revision
    hot = {
        "phase": phase,
        "node": node,
        "job": job,
        "queue": queue,
        "project": queue,
        "gpus": gpus,
        "namespace": ns,
    }
    return Observed(kind="pod", name=name, namespace=ns, state=state, hot=hot)


#
# The small cluster
#

NODES = ["h100-01", "h100-02", "h100-03", "h100-04"]
TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
PENDING_MSG = "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable, 1 node(s) had untolerated taint {nvidia.com/gpu: true}. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod."
QUOTA_MSG = (
    "Non-preemptible workload is over quota in queue vision: requested 8 GPUs, deserved 12, allocated 16"
)


@dataclass
class SmallCluster:
    cluster: Cluster
    t0: datetime = T0
    times: dict[str, datetime] = field(default_factory=dict)

    def entity(self, kind: str, name: str, namespace: str = "") -> Entity:
        return Entity.objects.get(cluster=self.cluster, kind=kind, namespace=namespace, name=name)


def _gpus_for(node: str, pod_by_index: dict[int, str], **kw: Any) -> list[Observed]:
    return [gpu_obs(node, i, pod=pod_by_index.get(i, ""), **kw) for i in range(8)]


def build_small_cluster(cluster: Cluster) -> SmallCluster:
    """Record the story in the module docstring; returns handy times in ``.times``."""
    m = lambda minutes: T0 + timedelta(minutes=minutes)  # noqa: E731
    rec = inventory.record_states
    resnet_pods = {"h100-01": "vision/resnet-train-0", "h100-02": "vision/resnet-train-1"}

    def nodes(cordon: bool = False, alloc4: int = 8) -> list[Observed]:
        out = [node_obs("h100-01"), node_obs("h100-02"), node_obs("h100-03", taints=[TAINT])]
        out.append(
            node_obs(
                "h100-04",
                unschedulable=cordon,
                allocatable=alloc4,
                taints=[{"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"}]
                if cordon
                else [],
            )
        )
        return out

    # T0: policy, nodes, idle GPUs, a job that will be deleted.
    rec(
        cluster,
        [project_obs("vision", quota=16, limit=24), project_obs("nlp", quota=8, limit=16, priority=40)],
        T0,
        source="runai",
    )
    rec(
        cluster,
        [
            queue_obs("vision", project="vision", quota=16, limit=24),
            queue_obs("nlp", project="nlp", quota=8, limit=16, priority=40),
        ],
        T0,
        source="kai",
    )
    rec(cluster, nodes() + [g for n in NODES for g in _gpus_for(n, {})], T0)
    rec(
        cluster,
        [
            job_obs(
                "nlp",
                "old-sweep",
                queue="nlp",
                phase="Running",
                pods=1,
                gpus_per_pod=1,
                submitted=T0,
                active=1,
            ),
            pod_obs(
                "nlp", "old-sweep-0", job="old-sweep", queue="nlp", gpus=1, phase="Running", node="h100-04"
            ),
        ],
        T0,
    )
    # T0+10m: resnet-train runs on h100-01 and h100-02.
    rec(
        cluster,
        [
            job_obs(
                "vision",
                "resnet-train",
                queue="vision",
                phase="Running",
                pods=2,
                gpus_per_pod=8,
                submitted=m(5),
                active=2,
            )
        ]
        + [
            pod_obs(
                "vision",
                f"resnet-train-{i}",
                job="resnet-train",
                queue="vision",
                gpus=8,
                phase="Running",
                node=n,
                created=m(10),
            )
            for i, n in enumerate(resnet_pods)
        ]
        + [g for n, p in resnet_pods.items() for g in _gpus_for(n, dict.fromkeys(range(8), p))],
        m(10),
    )
    # T0+15m: llama-ft on the tainted node (it tolerates it), 4 GPUs.
    llama_gpus = dict.fromkeys(range(4), "nlp/llama-ft-0")
    rec(
        cluster,
        [
            job_obs(
                "nlp",
                "llama-ft",
                queue="nlp",
                phase="Running",
                pods=1,
                gpus_per_pod=4,
                submitted=m(12),
                active=1,
            ),
            pod_obs(
                "nlp",
                "llama-ft-0",
                job="llama-ft",
                queue="nlp",
                gpus=4,
                phase="Running",
                node="h100-03",
                created=m(15),
            ),
        ]
        + _gpus_for("h100-03", llama_gpus),
        m(15),
    )
    # T0+20m: vit-large waits on quota.
    rec(
        cluster,
        [
            job_obs(
                "vision",
                "vit-large",
                queue="vision",
                phase="Pending",
                pods=1,
                gpus_per_pod=8,
                submitted=m(20),
                message=QUOTA_MSG,
            ),
            pod_obs(
                "vision",
                "vit-large-0",
                job="vit-large",
                queue="vision",
                gpus=8,
                phase="Pending",
                created=m(20),
                message=QUOTA_MSG,
            ),
        ],
        m(20),
    )
    # T0+30m: bert-eval asks for 4 GPUs.
    rec(
        cluster,
        [
            job_obs(
                "nlp",
                "bert-eval",
                queue="nlp",
                phase="Pending",
                pods=1,
                gpus_per_pod=4,
                submitted=m(30),
                message=PENDING_MSG,
            ),
            pod_obs(
                "nlp",
                "bert-eval-0",
                job="bert-eval",
                queue="nlp",
                gpus=4,
                phase="Pending",
                created=m(30),
                message=PENDING_MSG,
            ),
        ],
        m(30),
    )
    # T0+40m: old-sweep is gone.
    _delete(cluster, "job", "nlp", "old-sweep", m(40))
    _delete(cluster, "pod", "nlp", "old-sweep-0", m(40))
    # T0+60m: bert-eval resubmitted with 8 GPUs per pod.
    rec(
        cluster,
        [
            job_obs(
                "nlp",
                "bert-eval",
                queue="nlp",
                phase="Pending",
                pods=1,
                gpus_per_pod=8,
                submitted=m(30),
                message=PENDING_MSG,
            ),
            pod_obs(
                "nlp",
                "bert-eval-0",
                job="bert-eval",
                queue="nlp",
                gpus=8,
                phase="Pending",
                created=m(30),
                message=PENDING_MSG,
            ),
        ],
        m(60),
    )
    # T0+90m: alice lowers vision's quota.
    quota_cut = [
        project_obs("vision", quota=12, limit=24),
        queue_obs("vision", project="vision", quota=12, limit=24),
    ]
    for o in quota_cut:
        o.actor = "alice@example.org"
    rec(cluster, quota_cut, m(90), source="runai")
    # T0+2h: h100-04 cordoned; llama-ft crash-loops.
    rec(
        cluster,
        nodes(cordon=True)
        + [
            pod_obs(
                "nlp",
                "llama-ft-0",
                job="llama-ft",
                queue="nlp",
                gpus=4,
                phase="Running",
                node="h100-03",
                created=m(15),
                waiting="CrashLoopBackOff",
                restarts=3,
            )
        ],
        m(120),
    )
    # T0+2h30m: h100-04's device plugin fails.
    rec(cluster, nodes(cordon=True, alloc4=0), m(150))

    ev = dict(cluster=cluster, count=1, type="Warning", component="kai-scheduler")
    KubeEvent.objects.bulk_create(
        [
            KubeEvent(
                uid="ev-bert-1",
                namespace="nlp",
                involved_kind="Pod",
                involved_namespace="nlp",
                involved_name="bert-eval-0",
                reason="FailedScheduling",
                message=PENDING_MSG,
                first_time=m(30),
                last_time=m(61),
                **ev,
            ),
            KubeEvent(
                uid="ev-vit-1",
                namespace="vision",
                involved_kind="Pod",
                involved_namespace="vision",
                involved_name="vit-large-0",
                reason="FailedScheduling",
                message=QUOTA_MSG,
                first_time=m(20),
                last_time=m(95),
                **ev,
            ),
            KubeEvent(
                uid="ev-llama-1",
                namespace="nlp",
                involved_kind="Pod",
                involved_namespace="nlp",
                involved_name="llama-ft-0",
                reason="BackOff",
                message="Back-off restarting failed container main in pod llama-ft-0_nlp(…)",
                first_time=m(118),
                last_time=m(125),
                cluster=cluster,
                count=3,
                type="Warning",
                component="kubelet",
            ),
        ]
    )
    SourceRun.objects.create(
        cluster=cluster,
        source="prometheus",
        call="GET /api/v1/query_range DCGM_FI_PROF_SM_ACTIVE",
        time=m(192),
        ok=False,
        error="timeout after 10s",
    )
    SourceRun.objects.create(cluster=cluster, source="k8s", call="list pods", time=m(192), ok=True)
    return SmallCluster(
        cluster=cluster,
        times={
            "resnet_start": m(10),
            "vit_pending": m(20),
            "bert_4": m(30),
            "sweep_gone": m(40),
            "bert_8": m(60),
            "quota_cut": m(90),
            "cordon": m(120),
            "plugin_down": m(150),
            "prom_error": m(192),
            "end": m(200),
        },
    )


def _delete(cluster: Cluster, kind: str, ns: str, name: str, at: datetime) -> None:
    """Delete one object the way a complete listing of its namespace would (record_absent keeps the others)."""
    others = (
        Entity.objects.filter(cluster=cluster, kind=kind, namespace=ns)
        .exclude(name=name)
        .values_list("namespace", "name")
    )
    inventory.record_absent(cluster, kind, list(others), at, namespace=ns)


#
# Scale helpers for query budgets
#


def crowd_node(cluster: Cluster, node: str, pods: int, at: datetime, *, gpus_per_pod: int = 1) -> None:
    """Put ``pods`` running pods (one job each) on ``node`` at ``at``: the "node with 500 pods" case."""
    obs: list[Observed] = []
    for i in range(pods):
        job = f"crowd-{node}-{i}"
        obs.append(
            job_obs(
                "crowd",
                job,
                queue="nlp",
                phase="Running",
                pods=1,
                gpus_per_pod=gpus_per_pod,
                submitted=at,
                active=1,
            )
        )
        obs.append(
            pod_obs(
                "crowd",
                f"{job}-0",
                job=job,
                queue="nlp",
                gpus=gpus_per_pod,
                phase="Running",
                node=node,
                created=at,
            )
        )
    inventory.record_states(cluster, obs, at)


def deepen_history(
    cluster: Cluster, start: datetime, versions: int = 50, step: timedelta = timedelta(seconds=30)
) -> None:
    """Give every existing entity ``versions`` more versions (one harmless field changing), before ``start`` ends.

    The states are re-recorded with a ``revision`` key, so each entity gets one version per step, and the
    last step restores nothing else: pages at later t still see the story's values.
    """
    from collectors.models import EntityVersion

    for r in range(1, versions + 1):
        at = start + r * step
        obs: list[Observed] = []
        for v in EntityVersion.objects.as_of(at).filter(cluster=cluster).select_related("entity"):
            state = dict(v.state)
            state["revision"] = r
            hot = {k: getattr(v, k) for k in HOT_FIELDS}
            obs.append(
                Observed(kind=v.kind, name=v.entity.name, namespace=v.entity.namespace, state=state, hot=hot)
            )
        inventory.record_states(cluster, obs, at)


#
# A test case with the story recorded
#


def at(t: datetime, w: str = "2h") -> str:
    """The cursor query string for ``t``."""
    return f"t={iso(t)}&w={w}"


class PageTestCase(BaseTestCase):
    """BaseTestCase personas plus the small cluster; ``get(path, t)`` fetches a page as alice at t."""

    story: SmallCluster

    @classmethod
    def setUpTestData(cls) -> None:
        """The story is recorded once per class (about 300 lines of history); each test's changes to it are
        rolled back with the test's transaction."""
        super().setUpTestData()
        cls.story = build_small_cluster(cls.cluster)

    def setUp(self) -> None:
        super().setUp()
        self.times = self.story.times

    def get(self, path: str, t: datetime | None = None, client: Any = None, **kw: Any) -> Any:
        sep = "&" if "?" in path else "?"
        return (client or self.client).get(path + (sep + at(t) if t else ""), **kw)

    def assert_page_basics(self, path: str, t: datetime) -> None:
        """What every entity page owes (docs/conventions.md §20): login, bob may read, htmx gets only #page."""
        anon = self.get(path, t, client=self.anon)
        assert anon.status_code == 302 and anon["Location"].startswith("/accounts/login/"), anon
        bob = self.get(path, t, client=self.login_as(self.bob))
        assert bob.status_code == 200
        full = bob.content.decode()
        assert "<html" in full and 'id="page"' in full
        frag = self.get(path, t, headers={"HX-Request": "true"})
        assert frag.status_code == 200
        body = frag.content.decode()
        assert body.lstrip().startswith('<div id="page">'), body[:200]
        assert "<html" not in body and 'class="top"' not in body and "cursor-bar" in body
        assert "HX-Request" in frag.get("Vary", "")
        # An htmx history restore (cache miss) needs the whole page again.
        restore = self.get(path, t, headers={"HX-Request": "true", "HX-History-Restore-Request": "true"})
        assert "<html" in restore.content.decode()

    def assert_absent_before_first_version(self, path: str, first: datetime) -> None:
        """Before it existed, the page says so and links to when it first existed."""
        r = self.get(path, first - timedelta(hours=1))
        assert r.status_code == 200
        html = r.content.decode()
        assert "did not exist at" in html and 'id="absent"' in html
        assert f"t={iso(first).replace(':', '%3A')}" in html or f"t={iso(first)}" in html

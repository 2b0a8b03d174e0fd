"""A GPU fleet of any size at one moment, recorded through the inventory write path, with its own truth.

``build_fleet`` records nodes, GPUs, jobs, pods and SM-activity samples following a fixed pattern per
node index, and returns the pattern itself (``FleetSpec.gpus``): what each GPU *is* (healthy, allocated,
SM activity). Tests count the funnel straight from that spec and compare it with the page.

Per node i (pattern repeats every 10 nodes): i%10==3 NotReady; i%10==5 device plugin down (allocatable 0);
i%10==7 cordoned (still healthy); i%10==1 GPU 7 faulty (Xid 79); i%10==2 GPU 6 missing. Every node runs
job ``job-<i>`` (one pod, GPUs 0-3: SM 0.8, 0.8, 0.3, 0.02, an over-requester) and ``idle-<i>`` (GPUs 4-5,
SM 0.01: allocated but idle). Even nodes are H100 pool ``h100``, odd ones A100 pool ``a100``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from collectors import inventory
from collectors.inventory import Observed
from collectors.models import Cluster, Entity, TelemetrySample
from tests.collectors.factories import gpu_obs, gpu_uuid, job_obs, node_obs, pod_obs, project_obs, queue_obs

SM = "DCGM_FI_PROF_SM_ACTIVE"
POOLS = {
    0: ("h100", "NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3"),
    1: ("a100", "NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
}
JOB_SM = {0: 0.8, 1: 0.8, 2: 0.3, 3: 0.02}
IDLE_SM = 0.01


@dataclass
class GpuTruth:
    node: str
    index: int
    pool: str
    model: str
    healthy: bool
    allocated: bool
    sm: float | None


@dataclass
class FleetSpec:
    t: datetime
    gpus: list[GpuTruth] = field(default_factory=list)

    def funnel(self, pool: str | None = None) -> dict[str, int]:
        g = [x for x in self.gpus if pool is None or x.pool == pool]
        alloc = [x for x in g if x.healthy and x.allocated]
        return {
            "total": len(g),
            "healthy": sum(x.healthy for x in g),
            "allocated": len(alloc),
            "active": sum(1 for x in alloc if x.sm is not None and x.sm > 0.1),
            "well_used": sum(1 for x in alloc if x.sm is not None and x.sm > 0.5),
        }


def node_name(i: int) -> str:
    return f"gpu-{i:03d}"


def build_fleet(
    cluster: Cluster, nodes: range, t: datetime, *, window: timedelta = timedelta(hours=2)
) -> FleetSpec:
    """Record ``nodes`` (a range of node indexes) at ``t - window`` with SM samples through ``t``."""
    at = t - window
    spec = FleetSpec(t=t)
    obs: list[Observed] = []
    sm_by_uuid: dict[str, float] = {}
    for i in nodes:
        name = node_name(i)
        pool, product, model = POOLS[i % 2]
        ready = i % 10 != 3
        plugin = i % 10 != 5
        n = node_obs(
            name, ready=ready, unschedulable=i % 10 == 7, allocatable=8 if plugin else 0, nodepool=pool
        )
        n.state["gpu_product"] = product
        n.state["labels"]["nvidia.com/gpu.product"] = product
        obs.append(n)
        job_pod, idle_pod = f"team{i % 3}/job-{i}-0", f"team{i % 3}/idle-{i}-0"
        ns = f"team{i % 3}"
        obs += [
            job_obs(
                ns, f"job-{i}", queue=ns, phase="Running", pods=1, gpus_per_pod=4, submitted=at, active=1
            ),
            pod_obs(
                ns, f"job-{i}-0", job=f"job-{i}", queue=ns, gpus=4, phase="Running", node=name, created=at
            ),
            job_obs(
                ns, f"idle-{i}", queue=ns, phase="Running", pods=1, gpus_per_pod=2, submitted=at, active=1
            ),
            pod_obs(
                ns, f"idle-{i}-0", job=f"idle-{i}", queue=ns, gpus=2, phase="Running", node=name, created=at
            ),
        ]
        for k in range(8):
            pod = job_pod if k < 4 else idle_pod if k < 6 else ""
            faulty = i % 10 == 1 and k == 7
            missing = i % 10 == 2 and k == 6
            g = gpu_obs(name, k, pod=pod, xid=79 if faulty else 0, present=not missing)
            g.state["model"] = model
            obs.append(g)
            sm = JOB_SM[k] if k < 4 else IDLE_SM if k < 6 else 0.0
            if not missing:
                sm_by_uuid[gpu_uuid(name, k)] = sm
            spec.gpus.append(
                GpuTruth(
                    name,
                    k,
                    pool,
                    model,
                    healthy=ready and plugin and not faulty and not missing,
                    allocated=bool(pod),
                    sm=None if missing else sm,
                )
            )
    teams = sorted({f"team{i % 3}" for i in nodes})
    obs += [project_obs(tm, quota=16, limit=24) for tm in teams]
    obs += [queue_obs(tm, project=tm, quota=16, limit=24) for tm in teams]
    inventory.record_states(cluster, obs, at)
    add_samples(cluster, sm_by_uuid, at, t)
    return spec


def add_samples(
    cluster: Cluster, values: dict[str, float], start: datetime, end: datetime, metric: str = SM
) -> None:
    """One 5-minute point per GPU in (start, end], at the given constant value."""
    ids = dict(
        Entity.objects.filter(cluster=cluster, kind="gpu", name__in=list(values)).values_list("name", "pk")
    )
    rows = []
    t = start + timedelta(minutes=5)
    while t <= end:
        rows += [
            TelemetrySample(cluster=cluster, gpu_id=ids[u], metric=metric, time=t, value=v)
            for u, v in values.items()
        ]
        t += timedelta(minutes=5)
    TelemetrySample.objects.bulk_create(rows, batch_size=5000)

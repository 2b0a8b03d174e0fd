"""GPU sharing (KAI gpu-fraction / gpu-memory), MIG partitions (mixed strategy) and CPU/memory requests.

KAI GPU sharing as KAI does it: a share is placed on one GPU; the first share on a GPU makes KAI's binder
create a *reservation pod* in ``runai-reservation`` that requests the whole ``nvidia.com/gpu`` (so the
device plugin and every other scheduler see the GPU as taken), labelled ``runai-gpu-group`` with the GPU
group id and annotated ``run.ai/reserve_for_gpu_index`` with the GPU's UUID; each shared pod is labelled
with the same group and annotated ``runai-gpu`` with the GPU index KAI chose. The reservation pod goes when
the last share on the GPU leaves. Shares on one GPU never sum over 1 (a gpu-memory share counts as its
part of the GPU's memory).

MIG (GPU Operator, mig-manager): a partitioned GPU is advertised as ``nvidia.com/mig-<profile>`` instances,
not as ``nvidia.com/gpu``. A repartition (``mig`` event) sets ``nvidia.com/mig.config``, mig-manager marks the
node ``nvidia.com/mig.config.state=pending``, evicts the pods using the node's GPUs first (it stops GPU
clients before applying the layout), and two minutes later the new instances appear with state
``success``.

CPU and memory: a pod requests ``cpu_per_pod`` / ``memory_per_pod`` or the default (8 cores and 64 GiB per
GPU it asks for, at least one GPU's worth); a node's allocatable is its pool's ``cpu`` / ``memory`` or, when
absent, the large default the node renders (never binding: the fit does not count it).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..scenario.gpus import gpu_model, mig_config_name
from ..state import SimMigInstance, SimPod
from .ids import name_suffix, uid

if TYPE_CHECKING:
    from ..scenario import JobSpec
    from ..state import SimGPU, SimJob, SimNode
    from .world import World

RESERVATION_NAMESPACE = "runai-reservation"
MIG_REPARTITION_S = 120  # mig-manager: stop GPU clients, apply the layout, restart the device plugin
DEFAULT_CPU_PER_GPU_MILLIS = 8000
DEFAULT_MEMORY_PER_GPU_BYTES = 64 * 2**30


def round_gpus(x: float) -> int | float:
    """GPU amounts as queues show them: whole numbers stay ints, fractions keep 4 decimals."""
    r = round(x, 4)
    return int(r) if float(r).is_integer() else r


#
# Jobs: what one pod asks for
#


def default_cpu_memory(units: float) -> tuple[int, int]:
    n = max(1, math.ceil(units))
    return DEFAULT_CPU_PER_GPU_MILLIS * n, DEFAULT_MEMORY_PER_GPU_BYTES * n


def apply_job_spec(world: World, job: SimJob, spec: JobSpec) -> None:
    """Fill the job's request fields from its spec (shares, MIG, CPU/memory) and its queue units per pod."""
    job.gpu_fraction = float(spec.gpus_per_pod) if 0 < spec.gpus_per_pod < 1 else None
    job.gpu_memory_mib = spec.gpu_memory_mib
    job.mig_profile = spec.mig_profile
    job.mig_count = int(spec.gpus_per_pod) if spec.mig_profile else 0
    units = queue_units(world, job, spec.gpus_per_pod)
    job.gpus_per_pod = units
    job.cpu_millis = spec.cpu_millis or 0  # 0: the default, which follows the GPUs asked for
    job.memory_bytes = spec.memory_bytes or 0


def cpu_memory_request(job: SimJob) -> tuple[int, int]:
    """CPU millicores and memory bytes one pod of the job requests (the pod spec shows the same)."""
    dc, dm = default_cpu_memory(job.mig_count or (1 if job.shared else job.gpus_per_pod))
    return job.cpu_millis or dc, job.memory_bytes or dm


def resize(world: World, job: SimJob, gpus_per_pod: int | float) -> None:
    """A ``request`` event's new gpus_per_pod: MIG instances for a MIG job, else GPUs (a fraction stays a share)."""
    if job.mig_profile:
        job.mig_count = int(gpus_per_pod)
    else:
        job.gpu_memory_mib = None
        job.gpu_fraction = float(gpus_per_pod) if 0 < gpus_per_pod < 1 else None
    job.gpus_per_pod = queue_units(world, job, gpus_per_pod)


def queue_units(world: World, job: SimJob, gpus_per_pod: float) -> int | float:
    """What one pod counts in its queue.

    A fraction counts as itself; a gpu-memory share as its part of the memory of the sharing pools' GPU
    (the smallest, before it is placed); a MIG instance ``<n>g.<m>gb`` counts ``n`` GPUs under KAI (KAI's
    ``ExtractGpuAndMemoryFromMigResourceName``) and nothing against ``nvidia.com/gpu`` under Kueue.
    """
    if job.mig_profile:
        if world.scheduler == "kueue":
            return 0
        return int(job.mig_profile.split("g.", 1)[0]) * int(gpus_per_pod)
    if job.gpu_memory_mib is not None:
        mems = [p.gpu_memory_mib for p in world.scenario.cluster.nodepools if p.sharing]
        return round_gpus(min(1.0, job.gpu_memory_mib / min(mems))) if mems else 1
    return round_gpus(gpus_per_pod) if job.gpu_fraction is not None else int(gpus_per_pod)


def share_fraction(job_or_pod: SimJob | SimPod, node: SimNode) -> float:
    """The part of one of ``node``'s GPUs a share takes."""
    if job_or_pod.gpu_memory_mib is not None:
        return job_or_pod.gpu_memory_mib / node.gpu_memory_mib
    return float(job_or_pod.gpu_fraction or 0.0)


#
# MIG layouts
#


def apply_layout(
    world: World, node: SimNode, layout: dict[str, int] | None, at: datetime | None = None
) -> None:
    """Partition every GPU of the node so (GPU instance ids as nvidia-smi numbers them: from 1 up)."""
    model = gpu_model(node.gpu_product)
    node.mig_layout = dict(layout) if layout else None
    for g in node.gpus:
        g.mig = []
        if not layout or model is None:
            continue
        gi = 0
        for name, count in sorted(layout.items(), key=lambda kv: (-int(kv[0].split("g.", 1)[0]), kv[0])):
            prof = model.profile(name)
            assert prof is not None  # the loader checked the layout against the catalog
            for _ in range(count):
                gi += 1
                g.mig.append(SimMigInstance(name, gi, prof.memory_mib, prof.compute_slices))
                gkey = (g.index, gi)
                if (node.name, gkey) not in world.telemetry.gpus:
                    world.telemetry.add_gpu(
                        node.name, gkey, g.uuid, node.gpu_product, prof.memory_mib, at or world.now
                    )
    if model is not None and model.mig_profiles:
        node.mig_config = mig_config_name(model, layout or {})
        node.labels["nvidia.com/mig.config"] = node.mig_config
        node.labels["nvidia.com/mig.config.state"] = node.mig_state or "success"
        node.labels["nvidia.com/mig.strategy"] = "mixed"
        node.labels["nvidia.com/mig.capable"] = "true"
        for key in [k for k in node.labels if k.startswith("nvidia.com/mig-")]:
            del node.labels[key]
        for name, count in (layout or {}).items():
            prof = model.profile(name)
            assert prof is not None
            base = f"nvidia.com/mig-{name}"
            node.labels[f"{base}.count"] = str(count * len(node.gpus))
            node.labels[f"{base}.memory"] = str(prof.memory_mib)
            node.labels[f"{base}.slices.gi"] = str(prof.compute_slices)
            node.labels[f"{base}.slices.ci"] = str(prof.compute_slices)
            node.labels[f"{base}.multiprocessors"] = str(prof.compute_slices * 14)


def repartition(world: World, node: SimNode, layout: dict[str, int], actor: str | None) -> None:
    """A ``mig`` event: mig-manager evicts the node's GPU pods, then applies the layout after a pause."""
    from . import lifecycle

    old = dict(node.mig_layout or {})
    world.change("node", node.name, "mig.config", old, dict(layout), actor)
    node.mig_state = "pending"
    node.labels["nvidia.com/mig.config.state"] = "pending"
    victims = sorted(
        {
            p.job
            for p in world.pods.values()
            if p.node == node.name
            and p.deleted_at is None
            and p.phase in ("Pending", "Running")
            and (p.gpu_indices or p.mig_instances or p.shared)
        }
    )
    for job_name in victims:
        job = world.jobs[job_name]
        for p in world.pods_of(job):
            if p.node == node.name:
                world.emit(
                    world.involved_pod(p),
                    "Killing",
                    "Stopping container main",
                    component="kubelet",
                )
        lifecycle.restart_job(
            world,
            job,
            "mig-repartition",
            status_reason="Evicted",
            message=f"mig-manager is repartitioning the GPUs of node {node.name}",
        )
    world.ledger.mig_pending[node.name] = layout
    node.mig_ready_at = world.now + timedelta(seconds=MIG_REPARTITION_S)
    # While pending no instance is allocatable (mig_allocatable), and the old layout's instances are gone.
    for g in node.gpus:
        g.mig = []
    node.mig_layout = dict(layout) if layout else (old or None)
    world.touch(node)


def finish_repartitions(world: World) -> None:
    for name, layout in list(world.ledger.mig_pending.items()):
        node = world.nodes[name]
        if node.mig_ready_at is not None and world.now >= node.mig_ready_at:
            del world.ledger.mig_pending[name]
            node.mig_state = "success"
            node.mig_ready_at = None
            apply_layout(world, node, layout)
            world.touch(node)


#
# Binding and releasing shares and MIG instances
#


def reservation_name(world: World, node: str, gpu: SimGPU) -> str:
    return f"gpu-reservation-{node}-{name_suffix(world.seed, 'reservation', gpu.uuid, world.now.isoformat())}"


def gpu_group(gpu: SimGPU) -> str:
    """The GPU group id KAI gives a shared GPU (runai-gpu-group): stable per GPU here."""
    return uid(0, "gpu-group", gpu.uuid)


def bind_share(world: World, pod: SimPod, node: SimNode, index: int) -> None:
    key = f"{pod.namespace}/{pod.name}"
    gpu = node.gpus[index]
    frac = share_fraction(pod, node)
    if gpu.reservation is None:
        name = reservation_name(world, node.name, gpu)
        res = SimPod(
            name=name,
            namespace=RESERVATION_NAMESPACE,
            job="",
            index=0,
            uid=uid(world.seed, "pod", RESERVATION_NAMESPACE, name),
            created_at=world.now,
            gpus_requested=1,
            image="ghcr.io/nvidia/kai-scheduler/resource-reservation:v0.9.3",
            node=node.name,
            gpu_indices=[index],
            phase="Running",
            started_at=world.now,
            container_state={"running": {}},
            ready=True,
            scheduled_at=world.now,
            reservation_for=gpu.uuid,
            cpu_millis=2,
            memory_bytes=20 * 2**20,
        )
        res.container_state = {"running": {"startedAt": world.now.strftime("%Y-%m-%dT%H:%M:%SZ")}}
        world.reservations[f"{RESERVATION_NAMESPACE}/{name}"] = res
        gpu.reservation = f"{RESERVATION_NAMESPACE}/{name}"
        world.touch(res)  # created with spec.nodeName set by KAI's binder: no scheduler involved
        world.telemetry.set_activity(node.name, index, world.now, gpu.reservation, 0.0, 0)
    gpu.shares[key] = round(frac, 6)
    pod.gpus_requested = round_gpus(frac)


def release_share(world: World, pod: SimPod, node: SimNode, at: datetime) -> None:
    key = f"{pod.namespace}/{pod.name}"
    for i in pod.gpu_indices:
        gpu = node.gpus[i]
        if gpu.shares.pop(key, None) is None:
            continue
        if not gpu.shares and gpu.reservation:
            res = world.reservations.pop(gpu.reservation, None)
            if res is not None:
                res.deleted_at = at
                res.phase = "Succeeded"
                world.touch(res)
            gpu.reservation = None
            world.telemetry.set_activity(node.name, i, at, None, 0.0, 0)
        else:
            share_activity(world, node, i, at)


def share_activity(world: World, node: SimNode, index: int, at: datetime) -> None:
    """The GPU's load is the sum of its running shares' work; DCGM attributes it to the reservation pod
    (the pod that holds the device in the kubelet's pod-resources API)."""
    gpu = node.gpus[index]
    level = fb = 0.0
    for key, frac in gpu.shares.items():
        p = world.pods.get(key)
        if p is None or p.phase != "Running" or not p.ready:
            continue
        job = world.jobs[p.job]
        level += job.sm_activity * min(1.0, frac * 2)
        fb += node.gpu_memory_mib * frac * 0.8
    world.telemetry.set_activity(node.name, index, at, gpu.reservation, min(1.0, level), int(fb))


def bind_mig(world: World, pod: SimPod, node: SimNode, instances: list[tuple[int, int]]) -> None:
    key = f"{pod.namespace}/{pod.name}"
    pod.mig_instances = list(instances)
    for gi, gid in instances:
        for inst in node.gpus[gi].mig:
            if inst.gi_id == gid:
                inst.pod = key
                world.telemetry.set_activity(node.name, (gi, gid), world.now, key, 0.0, 0)


def release_mig(world: World, pod: SimPod, node: SimNode, at: datetime) -> None:
    key = f"{pod.namespace}/{pod.name}"
    for gi, gid in pod.mig_instances:
        for inst in node.gpus[gi].mig:
            if inst.gi_id == gid and inst.pod == key:
                inst.pod = None
                world.telemetry.set_activity(node.name, (gi, gid), at, None, 0.0, 0)


def mig_activity(world: World, pod: SimPod, node: SimNode, level: float, at: datetime) -> None:
    key = f"{pod.namespace}/{pod.name}"
    for gi, gid in pod.mig_instances:
        for inst in node.gpus[gi].mig:
            if inst.gi_id == gid:
                fb = int(inst.memory_mib * (0.35 + 0.55 * level)) if level > 0 else 0
                world.telemetry.set_activity(node.name, (gi, gid), at, key, level, fb)


#
# CPU and memory held on a node
#


def node_requests(world: World) -> dict[str, tuple[int, int]]:
    """CPU millicores and memory bytes requested by the live pods bound to each node."""
    out: dict[str, list[int]] = {}
    for p in (*world.pods.values(), *world.reservations.values()):
        if p.node is None or p.deleted_at is not None or p.phase not in ("Pending", "Running"):
            continue
        acc = out.setdefault(p.node, [0, 0])
        acc[0] += p.cpu_millis
        acc[1] += p.memory_bytes
    return {n: (c, m) for n, (c, m) in out.items()}

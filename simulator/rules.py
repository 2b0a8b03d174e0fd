"""The scenario's alert rules, evaluated each tick as Prometheus evaluates alerting rules.

A condition that becomes true makes the alert *pending*; once it has held for
the rule's ``for`` it is *firing* (startsAt = that moment, as Prometheus sends
FiredAt); when it clears, a firing alert is *resolved* (endsAt = that moment)
and stays listed for an hour so the Alertmanager sender can send it resolved.
Each instance is one label set; its fingerprint is Alertmanager's (FNV-1a 64
over the sorted label names and values, 0xff separated).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .scenario import AlertRuleSpec
    from .state import SimGPU, SimJob, SimNode, SimPod

HIGH_TEMP_C = 85.0
IDLE_SM_ACTIVE = 0.1
RESOLVED_KEEP_S = 3600
STALE_S = 300  # the shipped rules read 5-minute windows: last_over_time(XID[5m]), max_over_time(CrashLoopBackOff[5m])

SEVERITY = {
    "GPUJobPendingTooLong": "warning",
    "GPUXidError": "critical",
    "GPUMissing": "critical",
    "NodeNotReady": "critical",
    "PodCrashLooping": "warning",
    "GPUIdleAllocated": "info",
    "GPUHighTemperature": "warning",
    "GPUECCDoubleBitError": "critical",
}


def fingerprint(labels: dict[str, str]) -> str:
    """Alertmanager's model.LabelSet.Fingerprint(), as 16 hex digits."""
    h = 14695981039346656037
    for name in sorted(labels):
        for part in (name, labels[name]):
            for b in part.encode():
                h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
            h = ((h ^ 0xFF) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


@dataclass
class _Instance:
    labels: dict[str, str]
    annotations: dict[str, str]
    active_since: datetime
    fired_at: datetime | None = None
    resolved_at: datetime | None = None
    fp: str | None = None  # fingerprint(labels), computed once: labels never change for an instance


class AlertRules:
    def __init__(self, world: Any, specs: tuple[AlertRuleSpec, ...]) -> None:
        self.world = world
        self.specs = specs
        self.active: dict[tuple[str, str], _Instance] = {}
        # The same instances per rule name, in the same order: clearing one rule walks only its own.
        self._by_rule: dict[str, dict[str, _Instance]] = {}
        # GPUJobPendingTooLong per job: (what its text depends on, labels, annotations), so that
        # 10,000 waiting jobs do not re-format their dates every tick.
        self._pending_text: dict[str, tuple[tuple, dict[str, str], dict[str, str]]] = {}
        self.resolved: list[_Instance] = []

    def evaluate(self) -> None:
        w = self.world
        now = w.now
        for spec in self.specs:
            current = dict(self._conditions(spec.name))
            mine = self._by_rule.setdefault(spec.name, {})
            for key, (labels, ann) in current.items():
                inst = mine.get(key)
                if inst is None:
                    inst = _Instance(labels, ann, now)
                    self.active[(spec.name, key)] = inst
                    mine[key] = inst
                else:
                    inst.annotations = ann
                if inst.fired_at is None and (now - inst.active_since).total_seconds() >= spec.for_s:
                    inst.fired_at = now
            if len(mine) > len(current):
                for key in [k for k in mine if k not in current]:
                    inst = mine.pop(key)
                    del self.active[(spec.name, key)]
                    if inst.fired_at is not None:
                        inst.resolved_at = now
                        self.resolved.append(inst)
        cutoff = now - timedelta(seconds=RESOLVED_KEEP_S)
        self.resolved = [i for i in self.resolved if i.resolved_at and i.resolved_at > cutoff]

    def alerts(self, include_pending: bool = False) -> list[dict[str, Any]]:
        out = []
        for inst in self.active.values():
            if inst.fired_at is None and not include_pending:
                continue
            out.append(_render(inst, "firing" if inst.fired_at else "pending"))
        out.extend(_render(i, "resolved") for i in self.resolved)
        out.sort(key=lambda a: (a["startsAt"] or "", a["fingerprint"]))
        return out

    #
    # Conditions: (key, (labels, annotations)) per instance that holds now
    #

    def _base(self, name: str) -> dict[str, str]:
        return {"alertname": name, "severity": SEVERITY[name], "cluster": self.world.cluster_name}

    def _job_labels(self, job: SimJob) -> dict[str, str]:
        return {
            "namespace": job.namespace,
            "job_name": job.name,
            "project": job.project,
            "queue": job.project,
        }

    def _gpu_labels(self, node: SimNode, gpu: SimGPU) -> dict[str, str]:
        return {
            "node": node.name,
            "Hostname": node.name,
            "gpu": str(gpu.index),
            "UUID": gpu.uuid,
            "modelName": node.gpu_product.replace("-", " "),
        }

    def _conditions(self, name: str):  # noqa: C901 - one branch per rule reads best
        w = self.world
        now = w.now
        if name == "GPUJobPendingTooLong":
            cache = self._pending_text
            for job in w.jobs.values():
                if job.state == "Pending":
                    since = job.pending_since or now
                    sig = (since, job.pods, job.gpus_per_pod, job.namespace, job.project)
                    hit = cache.get(job.name)
                    if hit is None or hit[0] != sig:
                        labels = {**self._base(name), **self._job_labels(job)}
                        ann = {
                            "summary": "GPU job pending too long",
                            "description": f"Job {job.namespace}/{job.name} ({job.pods} x {job.gpus_per_pod} GPU) has been "
                            f"pending since {since:%Y-%m-%dT%H:%M:%SZ}.",
                        }
                        hit = cache[job.name] = (sig, labels, ann)
                    yield job.name, (dict(hit[1]), dict(hit[2]))
        elif name == "NodeNotReady":
            for node in w.nodes.values():
                if not node.ready:
                    yield (
                        node.name,
                        (
                            {**self._base(name), "node": node.name},
                            {
                                "summary": "Kubernetes node not ready",
                                "description": f"Node {node.name} has been NotReady.",
                            },
                        ),
                    )
        elif name == "PodCrashLooping":
            for pod in w.pods.values():
                if pod.deleted_at is None and _crashlooping(pod, now):
                    job = w.jobs[pod.job]
                    labels = {
                        **self._base(name),
                        **self._job_labels(job),
                        "pod": pod.name,
                        "node": pod.node or "",
                    }
                    yield (
                        f"{pod.namespace}/{pod.name}",
                        (
                            labels,
                            {
                                "summary": "Pod is crash looping",
                                "description": f"Pod {pod.namespace}/{pod.name} (container main) restarted {pod.restart_count} times.",
                            },
                        ),
                    )
        else:
            yield from self._gpu_conditions(name)

    def _gpu_conditions(self, name: str):
        w = self.world
        now = w.now
        for node in w.nodes.values():
            for gpu in node.gpus:
                # Cheap state checks first; the metric is read only where the rule could hold.
                if name == "GPUMissing":
                    if not gpu.present:
                        yield self._gpu_hit(name, node, gpu, "GPU missing", "is no longer visible to DCGM.")
                elif name == "GPUXidError":
                    visible = gpu.present or (gpu.xid_at and (now - gpu.xid_at).total_seconds() <= STALE_S)
                    if gpu.xid_last and visible and node.ready:
                        key, (labels, ann) = self._gpu_hit(
                            name, node, gpu, "GPU Xid error", f"reported Xid {gpu.xid_last}."
                        )
                        yield f"{key}/{gpu.xid_last}", ({**labels, "xid": str(gpu.xid_last)}, ann)
                elif name == "GPUIdleAllocated":
                    if not gpu.pod or gpu.pod not in w.pods:
                        continue
                    value = w.gpu_metric(node.name, gpu.index, "DCGM_FI_PROF_SM_ACTIVE")
                    if value is not None and value < IDLE_SM_ACTIVE:
                        pod = w.pods[gpu.pod]
                        job = w.jobs[pod.job]
                        key, (labels, ann) = self._gpu_hit(
                            name,
                            node,
                            gpu,
                            "Allocated GPU is idle",
                            f"is held by {gpu.pod} with SM activity {value:.2f}.",
                        )
                        yield f"{key}/{gpu.pod}", ({**labels, **self._job_labels(job), "pod": pod.name}, ann)
                elif name == "GPUHighTemperature":
                    # Without an override the load model stays below 75 C (telemetry.py).
                    if gpu.temp_override_c is None:
                        continue
                    value = w.gpu_metric(node.name, gpu.index, "DCGM_FI_DEV_GPU_TEMP")
                    if value is not None and value >= HIGH_TEMP_C:
                        yield self._gpu_hit(name, node, gpu, "GPU temperature high", f"is at {value:.0f} C.")
                elif name == "GPUECCDoubleBitError":
                    if not gpu.ecc_dbe_total:
                        continue
                    value = w.gpu_metric(node.name, gpu.index, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
                    if value:
                        yield self._gpu_hit(
                            name,
                            node,
                            gpu,
                            "GPU double-bit ECC errors",
                            f"has {value:.0f} volatile DBE errors.",
                        )

    def _gpu_hit(
        self, name: str, node: SimNode, gpu: SimGPU, summary: str, what: str
    ) -> tuple[str, tuple[dict[str, str], dict[str, str]]]:
        labels = {**self._base(name), **self._gpu_labels(node, gpu)}
        where = f"GPU {gpu.index} ({gpu.uuid}) on {node.name}"
        return f"{node.name}/{gpu.index}", (labels, {"summary": summary, "description": f"{where} {what}"})


def _crashlooping(pod: SimPod, now: datetime) -> bool:
    waiting = pod.container_state.get("waiting", {})
    if waiting.get("reason") == "CrashLoopBackOff":
        return True
    if not pod.restart_count:
        return False
    # kube-prometheus uses max_over_time(...[5m]): a short run between two crashes does not clear it.
    for stamp in (
        pod.last_state.get("terminated", {}).get("finishedAt"),
        pod.container_state.get("running", {}).get("startedAt"),
    ):
        if stamp and (now - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds() <= STALE_S:
            return True
    return False


@lru_cache(maxsize=4096)
def _stamp(t: datetime) -> str:
    """Alert times are tick times: few distinct values shared by thousands of alerts."""
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _render(inst: _Instance, status: str) -> dict[str, Any]:
    if inst.fp is None:
        inst.fp = fingerprint(inst.labels)
    return {
        "labels": dict(inst.labels),
        "annotations": dict(inst.annotations),
        "startsAt": _stamp(inst.fired_at or inst.active_since),
        "endsAt": _stamp(inst.resolved_at) if inst.resolved_at else None,
        "activeAt": _stamp(inst.active_since),
        "status": status,
        "fingerprint": inst.fp,
    }

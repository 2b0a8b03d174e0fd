"""``World``: the simulated cluster at ``now``, advanced tick by tick from a scenario.

The world owns the state objects of ``state.py`` and mutates them in a fixed
order each tick (scenario events, arrivals, pod lifecycle, scheduling, project
status, alert rules), so that the same scenario and seed give the same run,
byte for byte. Servers read it between ticks; they never write to it.
"""
# size: the world's construction, bookkeeping and reads: the object every part of the engine shares

from __future__ import annotations

import gc
import logging
from datetime import datetime, timedelta
from typing import Any

from ..scenario import EventSpec, JobSpec, NodePoolSpec, Scenario, node_name
from ..scenario.model import INFERENCE_PRIORITY, TRAIN_PRIORITY
from ..state import SimChange, SimDepartment, SimEvent, SimGPU, SimJob, SimNode, SimPod, SimProject
from ..telemetry import GpuKey, Telemetry
from . import actions, lifecycle, scheduler, sharing
from .ids import event_name, gpu_uuid, name_suffix, pci_bus_id, rfc3339, uid
from .ledger import Ledger
from .snapshot import snapshot as _snapshot

logger = logging.getLogger(__name__)

EVENT_TTL_S = 3600  # kube-apiserver --event-ttl default
NODEPOOL_LABELS = ("run.ai/node-pool", "rcaweb.sim/nodepool")


class World:
    """One simulated cluster. Build with ``World.from_scenario``; move with ``advance_to``."""

    def __init__(self, scenario: Scenario, *, tick_seconds: int = 60, retention_s: int = 86400) -> None:
        self.scenario = scenario
        self.seed = scenario.seed
        self.cluster_name = scenario.cluster.name
        self.scheduler = scenario.cluster.scheduler
        self.dcgm_labels = scenario.cluster.dcgm_labels
        self.start = scenario.start
        self.end = scenario.end
        self.now = scenario.start
        self.tick_seconds = tick_seconds
        self._opened = False  # the scheduling pass at ``start`` has run
        self.resource_version = 0
        self.nodes: dict[str, SimNode] = {}
        self.projects: dict[str, SimProject] = {}
        self.departments: dict[str, SimDepartment] = {}
        self.reservations: dict[str, SimPod] = {}  # KAI reservation pods ("runai-reservation/<name>")
        self.jobs: dict[str, SimJob] = {}
        self.pods: dict[str, SimPod] = {}  # live pods ("namespace/name"), incl. finished ones kept by the Job
        self.deleted_pods: list[SimPod] = []  # gone from the API; kept for history and watchers
        self.events: list[SimEvent] = []
        self.changes: list[SimChange] = []
        self.preemptions: list[dict[str, Any]] = []  # every eviction by the scheduler, with its numbers
        self.telemetry = Telemetry(self.seed, retention_s=retention_s)
        self._pool_counts: dict[str, int] = {}
        self._pool_width: dict[str, int] = {}
        self._pools: dict[str, NodePoolSpec] = {p.name: p for p in scenario.cluster.nodepools}
        self._job_specs: dict[str, JobSpec] = {j.name: j for j in scenario.jobs}
        # The order the scenario lists its jobs: which of two jobs submitted at one moment was created first
        # (KAI's job age, which picks among equally valid victims).
        self.creation_order: dict[str, int] = {j.name: i for i, j in enumerate(scenario.jobs)}
        self._pending_events: list[EventSpec] = list(scenario.events)
        self._arrivals = sorted(scenario.jobs, key=lambda j: (j.submit_s, j.name))
        self._event_index: dict[tuple[str, str, str, str], SimEvent] = {}
        self._event_seq = 0
        # The engine's own bookkeeping, handed to its modules; a job's failure starts with its first image
        # event when it has one (the bump broke it).
        self.ledger = Ledger(
            failure_from_image_event={e.args["job"] for e in scenario.events if e.action == "image"}
        )
        from ..rules import AlertRules

        self.rules = AlertRules(self, scenario.alerts)
        self._build()

    @classmethod
    def from_scenario(cls, scenario: Scenario, **kwargs: Any) -> World:
        return cls(scenario, **kwargs)

    #
    # Construction
    #

    def _build(self) -> None:
        for pool in self.scenario.cluster.nodepools:
            self._pool_width[pool.name] = max(pool.nodes, 1)
            self.add_nodes(pool.name, pool.nodes, at=self.start - timedelta(days=30))
        for d in self.scenario.departments:
            dept = SimDepartment(
                name=d.name,
                quota_gpus=d.quota_gpus,
                limit_gpus=d.limit_gpus,
                created_at=self.start - timedelta(days=7),
                uid=uid(self.seed, "department", d.name),
                over_quota_weight=d.over_quota_weight,
                limit_cpu_millis=d.limit_cpu_millis,
                limit_memory_bytes=d.limit_memory_bytes,
                quota_cpu_millis=d.quota_cpu_millis,
                quota_memory_bytes=d.quota_memory_bytes,
            )
            self.departments[d.name] = dept
            self.touch(dept)
        for p in self.scenario.projects:
            proj = SimProject(
                name=p.name,
                namespace=p.namespace,
                quota_gpus=p.quota_gpus,
                limit_gpus=p.limit_gpus,
                over_quota_weight=p.over_quota_weight,
                priority=p.priority,
                created_at=self.start - timedelta(days=7),
                uid=uid(self.seed, "project", p.name),
                department=p.department,
                limit_cpu_millis=p.limit_cpu_millis,
                limit_memory_bytes=p.limit_memory_bytes,
                quota_cpu_millis=p.quota_cpu_millis,
                quota_memory_bytes=p.quota_memory_bytes,
            )
            self.projects[p.name] = proj
            self.touch(proj)
        for spec in self.scenario.jobs:
            proj = self.projects[spec.project]
            job = SimJob(
                name=spec.name,
                project=spec.project,
                namespace=proj.namespace,
                uid=uid(self.seed, "job", spec.name),
                submit_at=self.start + timedelta(seconds=spec.submit_s),
                pods=spec.pods,
                gpus_per_pod=spec.gpus_per_pod,
                priority_class=spec.priority,
                priority_value=spec.priority_value
                if spec.priority_value is not None
                else (INFERENCE_PRIORITY if spec.priority == "inference" else TRAIN_PRIORITY),
                running_on=list(spec.running_on),
                runtime_s=spec.runtime_s,
                image=spec.image,
                node_selector=dict(spec.node_selector),
                tolerations=[dict(t) for t in spec.tolerations],
                sm_activity=spec.sm_activity,
                failure=None
                if spec.failure is None
                else {
                    "kind": spec.failure.kind,
                    "log": spec.failure.log,
                    "exit_code": spec.failure.exit_code,
                },
            )
            sharing.apply_job_spec(self, job, spec)
            if self.scheduler == "kai":
                job.podgroup = f"pg-{spec.name}-{job.uid}"
            else:
                job.podgroup = f"job-{spec.name}-{name_suffix(self.seed, 'workload', spec.name, length=5)}"
            job.submitted_by = "generator" if spec.generated_by else None
            if (
                spec.failure
                and spec.failure.kind == "image_pull"
                and spec.name not in self.ledger.failure_from_image_event
            ):
                job.image_missing = True
            self.jobs[spec.name] = job

    def add_nodes(self, pool_name: str, count: int, *, at: datetime) -> list[SimNode]:
        pool = self._pools[pool_name]
        out = []
        for _ in range(count):
            n = self._pool_counts.get(pool_name, 0) + 1
            self._pool_counts[pool_name] = n
            name = node_name(pool_name, n, self._pool_width[pool_name])
            labels = {
                **pool.labels,
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.product": pool.gpu_product,
                "nvidia.com/gpu.count": str(pool.gpus_per_node),
                "nvidia.com/gpu.memory": str(pool.gpu_memory_mib),
            }
            for key in NODEPOOL_LABELS:
                labels[key] = pool_name
            gpus = [
                SimGPU(index=i, uuid=gpu_uuid(self.seed, name, i), pci_bus_id=pci_bus_id(i))
                for i in range(pool.gpus_per_node)
            ]
            node = SimNode(
                name=name,
                nodepool=pool_name,
                gpu_product=pool.gpu_product,
                gpu_memory_mib=pool.gpu_memory_mib,
                labels=labels,
                taints=[dict(t) for t in pool.taints],
                gpus=gpus,
                created_at=at,
                uid=uid(self.seed, "node", name),
                index=n,
                sharing=pool.sharing,
                cpu_millis=pool.cpu_millis,
                memory_bytes=pool.memory_bytes,
            )
            self.nodes[name] = node
            for g in gpus:
                self.telemetry.add_gpu(name, g.index, g.uuid, pool.gpu_product, pool.gpu_memory_mib, at)
            if pool.mig is not None:  # the GPU Operator's mig-manager applied the pool's layout
                node.mig_state = "success"
                sharing.apply_layout(self, node, pool.mig, at=at)
            self.touch(node)
            out.append(node)
        return out

    #
    # Bookkeeping used by every part of the engine
    #

    def touch(self, obj: Any) -> None:
        """Record a write: bump the global resourceVersion and stamp the object with it."""
        self.resource_version += 1
        obj.resource_version = self.resource_version

    def emit(
        self,
        involved: dict[str, str],
        reason: str,
        message: str,
        *,
        type: str = "Normal",
        component: str,
        at: datetime | None = None,
    ) -> SimEvent:
        """Record a core/v1 Event; an identical one within the TTL is counted, as the event correlator does."""
        when = at or self.now
        key = (involved.get("uid", ""), reason, message, component)
        ev = self._event_index.get(key)
        if ev is not None and (when - ev.last_time).total_seconds() < EVENT_TTL_S:
            ev.count += 1
            ev.last_time = max(ev.last_time, when)
            self.touch(ev)
            return ev
        self._event_seq += 1
        ev = SimEvent(
            uid=uid(self.seed, "event", self._event_seq),
            name=event_name(involved["name"], when, self._event_seq),
            namespace=involved.get("namespace") or "default",
            involved=dict(involved),
            reason=reason,
            message=message,
            type=type,
            component=component,
            first_time=when,
            last_time=when,
        )
        self.events.append(ev)
        self._event_index[key] = ev
        self.touch(ev)
        return ev

    def change(self, kind: str, target: str, field: str, old: Any, new: Any, actor: str | None) -> None:
        self.changes.append(SimChange(self.now, kind, target, field, old, new, actor))

    def live_events(self) -> list[SimEvent]:
        """Events the API server still holds: last seen within the 1 h TTL."""
        cutoff = self.now - timedelta(seconds=EVENT_TTL_S)
        return [e for e in self.events if e.last_time > cutoff and e.first_time <= self.now]

    def next_attempt(self, job: str) -> int:
        self.ledger.attempts[job] = self.ledger.attempts.get(job, 0) + 1
        return self.ledger.attempts[job]

    def involved_pod(self, pod: SimPod) -> dict[str, str]:
        return {
            "kind": "Pod",
            "namespace": pod.namespace,
            "name": pod.name,
            "uid": pod.uid,
            "apiVersion": "v1",
        }

    def involved_job(self, job: SimJob) -> dict[str, str]:
        return {
            "kind": "Job",
            "namespace": job.namespace,
            "name": job.name,
            "uid": job.uid,
            "apiVersion": "batch/v1",
        }

    def involved_node(self, node: SimNode) -> dict[str, str]:
        return {"kind": "Node", "namespace": "", "name": node.name, "uid": node.name, "apiVersion": "v1"}

    def involved_group(self, job: SimJob) -> dict[str, str]:
        """The KAI PodGroup or Kueue Workload of a job."""
        if self.scheduler == "kai":
            kind, api = "PodGroup", "scheduling.run.ai/v2alpha2"
        else:
            kind, api = "Workload", "kueue.x-k8s.io/v1beta1"
        return {
            "kind": kind,
            "namespace": job.namespace,
            "name": job.podgroup,
            "uid": uid(self.seed, kind, job.name),
            "apiVersion": api,
        }

    def pods_of(self, job: SimJob) -> list[SimPod]:
        """The job's pods that are not being deleted (including finished ones the Job keeps)."""
        return [p for p in self.ledger.pods_by_job.get(job.name, ()) if p.deleted_at is None]

    def log(self, pod: SimPod, at: datetime, line: str) -> None:
        pod.logs.append(f"{rfc3339(at)} {line}")

    #
    # Time
    #

    def advance_to(self, t: datetime) -> None:
        """Step ticks of ``tick_seconds`` until ``now`` reaches ``t`` (never beyond the scenario's end)."""
        t = min(t, self.end)
        if not self._opened:
            # What is submitted at ``start`` meets the scheduler at start, before anything submitted during the
            # first tick: KAI's sessions, a second apart, would have placed it first.
            self._opened = True
            self._tick(self.start)
        step = timedelta(seconds=self.tick_seconds)
        while self.now + step <= t:
            self._tick(self.now + step)
        if self.now < t:
            self._tick(t)

    def step(self) -> None:
        self.advance_to(self.now + timedelta(seconds=self.tick_seconds))

    def _tick(self, t: datetime) -> None:
        # A tick allocates many short-lived objects over a large live heap (20,000 pods, 100,000 events):
        # the cyclic collector's full passes would cost more than the tick. Nothing here makes cycles
        # that outlive it; collection resumes after.
        enabled = gc.isenabled()
        gc.disable()
        try:
            self._tick_body(t)
        finally:
            if enabled:
                gc.enable()

    def _tick_body(self, t: datetime) -> None:
        prev = self.now
        self.now = t
        while self._pending_events and self.start + timedelta(seconds=self._pending_events[0].at_s) <= t:
            ev = self._pending_events.pop(0)
            actions.apply(self, ev)
        while self._arrivals and self.start + timedelta(seconds=self._arrivals[0].submit_s) <= t:
            spec = self._arrivals.pop(0)
            lifecycle.submit(self, self.jobs[spec.name])
        lifecycle.progress(self, prev, t)
        sharing.finish_repartitions(self)
        scheduler.schedule(self)
        scheduler.update_projects(self)
        self.rules.evaluate()
        self.telemetry.prune(t)

    #
    # Reading
    #

    def gpu(self, node: str, index: int) -> SimGPU:
        return self.nodes[node].gpus[index]

    def gpu_metric(self, node: str, index: GpuKey, metric: str, t: datetime | None = None) -> float | None:
        """The DCGM value of ``metric`` for a GPU at ``t`` (default now); None where no series exists."""
        when = t or self.now
        if when > self.now:
            return None
        return self.telemetry.value(node, index, metric, when)

    def gpu_metric_series(
        self, node: str, index: GpuKey, metric: str, times: list[float]
    ) -> list[float | None]:
        """``gpu_metric`` at each of ``times`` (epoch seconds, ascending), in one read (range queries)."""
        now = self.now.timestamp()
        cut = len(times)
        while cut and times[cut - 1] > now:
            cut -= 1
        head = times if cut == len(times) else times[:cut]
        return self.telemetry.values(node, index, metric, head) + [None] * (len(times) - cut)

    def gpu_pods_at(self, node: str, index: GpuKey, times: list[float]) -> list[str | None]:
        """``gpu_pod_at`` at each of ``times`` (epoch seconds, ascending)."""
        now = self.now.timestamp()
        cut = len(times)
        while cut and times[cut - 1] > now:
            cut -= 1
        head = times if cut == len(times) else times[:cut]
        return self.telemetry.pods(node, index, head) + [None] * (len(times) - cut)

    def exporter_up(self, node: str, t: datetime | None = None) -> bool | None:
        """Whether the node's dcgm-exporter answers a scrape at ``t`` (False while the node is down or
        unreachable: NotReady); None before the node existed or after ``now``."""
        when = t or self.now
        steps = self.telemetry.node_up.get(node)
        if when > self.now or steps is None:
            return None
        up = steps.at(when.timestamp())
        return None if up is None else bool(up)

    def gpu_pod_at(self, node: str, index: GpuKey, t: datetime | None = None) -> str | None:
        """``namespace/name`` of the pod holding the GPU at ``t``, None when free."""
        when = t or self.now
        if when > self.now:
            return None
        return self.telemetry.pod_at(node, index, when)

    def alerts(self, include_pending: bool = False) -> list[dict[str, Any]]:
        return self.rules.alerts(include_pending=include_pending)

    def snapshot(self) -> dict[str, Any]:
        """The whole state as JSON-able data: two runs of one scenario give equal snapshots."""
        return _snapshot(self)

"""Who a pass's leftovers would evict: after one scheduling pass (``scheduling_pass.cluster_pass``), the waiting
jobs the free room does not start that KAI would start by reclaiming GPUs from queues over their share, or by
preempting lower-priority jobs of their own queue (``incidents.diagnosis.reclaim.victims``).

The what-if page runs it on the state at t and on the edited state: an edit that raises a queue's quota can make
that queue's waiting job a reclaimer, and the jobs it would evict are the edit's cost to others.

Each reclaimer is weighed on the state left by the ones before it, in the pass's order: the pass's starts and the
earlier reclaimers are bound where they go, their victims' pods are gone. Bounded: the first ``MAX_TRIED``
waiting jobs the pass leaves without room, at most ``MAX_RECLAIMERS`` of them evicting. KAI only (Kueue's
preemption is not weighed here); whole GPUs only (a share or MIG reclaimer is not bound). Pure: no database, no
simulator.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import datetime

from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.queue_order import QueueOrder
from incidents.diagnosis.reclaim import Victim, carry_over, victims, without
from incidents.diagnosis.request import Request, job_request
from incidents.diagnosis.scheduling_pass import NO_ROOM, ClusterPass, Considered
from incidents.diagnosis.types import DiagnosisInput, EntityState

MAX_TRIED = 24  # waiting jobs without room weighed for an eviction, in the pass's order
MAX_RECLAIMERS = 8  # reclaimers one answer names


@dataclass
class Reclaim:
    """A waiting job that would start by evicting others, where it would go, and whom it would evict."""

    job: Considered
    victims: list[Victim]
    nodes: dict[str, int]  # node -> its pods

    @property
    def label(self) -> str:
        return self.job.label

    @property
    def victims_words(self) -> str:
        return ", ".join(f"{v.label} ({v.action}, {sum(v.gpus.values())} GPUs)" for v in self.victims)


def reclaims(di: DiagnosisInput, cp: ClusterPass) -> list[Reclaim]:
    """The reclaimers after the pass ``cp`` over ``di`` (module doc), in order; [] for a scheduler other than
    KAI."""
    if di.scheduler != "kai":
        return []
    left = [c for c in cp.considered if c.outcome == NO_ROOM and c.whole][:MAX_TRIED]
    if not left:
        return []
    state = di
    for c in cp.starts:
        if c.whole:
            state = _bound(state, c.job, c.nodes)
    out: list[Reclaim] = []
    order: QueueOrder | None = None
    # one index per state: the jobs weighed on it read its fit tables, evictable jobs and standings once; the next
    # state takes its fit tables and evictable jobs over (``carry_over``)
    with ExitStack() as indexed:
        indexed.enter_context(state.indexed())
        carry_over(
            di, state
        )  # what was read on ``di`` (when indexed), but where the pass's starts changed it
        for c in left:
            job = state.find("job", c.job.name, c.job.namespace) or c.job
            if order is None:
                order = QueueOrder(state, [j for j in state.jobs if is_pending(j)])
            ev = victims(state, job, order)
            if ev is None or not ev.victims:
                continue
            out.append(Reclaim(c, ev.victims, ev.nodes))
            if len(out) >= MAX_RECLAIMERS:
                break
            after = _bound(without(state, [v.job for v in ev.victims]), job, ev.nodes)
            # the standings move by what changed hands: the reclaimer holds its GPUs, the victims no longer theirs
            # (each queue's demand, held plus waiting, is the same, so the fair shares divided stay as they were)
            order.charge(job, c.units)
            for v in ev.victims:
                order.charge(v.job, float(sum(v.gpus.values())), release=True)
            following = ExitStack()
            following.enter_context(after.indexed())
            carry_over(state, after)  # its fit tables and evictable jobs, but where the eviction changed them
            indexed.close()
            indexed.enter_context(following.pop_all())
            state = after
    return out


def running_pod(job: EntityState, req: Request, node: str, name: str, when: datetime) -> EntityState:
    """One pod of ``job`` running on ``node`` from ``when``, as a pass or a replay places it (whole GPUs)."""
    return EntityState(
        "pod",
        name,
        job.namespace,
        state={
            "phase": "Running",
            "node": node,
            "job": job.name,
            "project": job.get("project"),
            "queue": job.get("queue") or job.get("project"),
            "gpus": req.gpus_per_pod,
            "priority_class": job.get("priority_class"),
            "node_selector": dict(req.node_selector),
            "tolerations": list(req.tolerations),
            # what it asks of the node's CPU and memory (the fit rules of a later state count it)
            "requests": {
                k: v for k, v in (("cpu", req.cpu_per_pod), ("memory", req.memory_per_pod)) if v is not None
            },
        },
        valid_from=when,
    )


def placed_pods(
    job: EntityState, req: Request, nodes: dict[str, int], when: datetime, tag: str
) -> list[EntityState]:
    """The pods of ``job`` running from ``when`` where a pass, a reclaim or a replay places it (``nodes``: its
    pods per node), named ``<job>-<tag>-<i>``."""
    out: list[EntityState] = []
    for node, n in nodes.items():
        for _ in range(n):
            out.append(running_pod(job, req, node, f"{job.name}-{tag}-{len(out)}", when))
    return out


def _bound(di: DiagnosisInput, job: EntityState, nodes: dict[str, int]) -> DiagnosisInput:
    """A copy of ``di`` with ``job`` running, its pods bound on ``nodes`` (whole GPUs)."""
    req = job_request(di, job)
    pods = [p for p in di.pods if not (p.namespace == job.namespace and p.get("job") == job.name)]
    running = replace(job, state={**job.state, "phase": "Running", "active": req.pods})
    pods += placed_pods(job, req, nodes, di.t, "whatif")
    jobs = [
        running if (j.namespace, j.name, j.kind) == (job.namespace, job.name, job.kind) else j
        for j in di.jobs
    ]
    return replace(di, pods=pods, jobs=jobs)


__all__ = ["MAX_RECLAIMERS", "MAX_TRIED", "Reclaim", "placed_pods", "reclaims"]

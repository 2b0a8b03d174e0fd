"""What if: the state at t with an operator's edits, and the difference they make to one scheduling pass.

The what-if page (``/c/<cluster>/whatif/``) writes its edits in the query string, one parameter per kind:

=================  ==============================  ==============================================================
parameter          value                           edit
=================  ==============================  ==============================================================
``quota``          ``<name>:<gpus>``               the quota of the queue, project or department ``name``
``limit``          ``<name>:<gpus>``               its limit (Kueue: nominal + borrowing limit)
``cpu_quota``      ``<name>:<cores>``              KAI: its deserved CPU quota, in cores (``96``, ``0.5``,
                                                   ``500m``)
``cpu_limit``      ``<name>:<cores>``              KAI: its CPU limit
``memory_quota``   ``<name>:<bytes>``              KAI: its deserved memory quota, in bytes or a Kubernetes
                                                   quantity (``256Gi``, ``500G``)
``memory_limit``   ``<name>:<bytes>``              KAI: its memory limit
``cordon``         ``<node>``                      the node takes no new pods
``uncordon``       ``<node>``                      the node takes pods again (its cordon taint gone too)
``repair``         ``<node>``                      the node is Ready again with every GPU it should have (its
                                                   health taints gone, allocatable = its nominal GPUs)
``add``            ``<node>:<n>``                  ``n`` new empty nodes shaped like ``node`` (labels, taints,
                                                   GPUs, CPU, memory), named ``<node>+1`` …
``remove``         ``<ns>/<job>``                  the job is gone: its pods free their GPUs
``hold``           ``<ns>/<job>``                  the job waits out the pass (a running one is suspended: its
                                                   pods free their GPUs)
``request``        ``<ns>/<job>:<pods>x<gpus>``    the waiting job asks for ``pods`` × ``gpus`` instead; ``x0.5``:
                                                   a share of each GPU (gpu-fraction); ``x1g.10gb``: one MIG
                                                   instance of that profile per pod
``onto``           ``<ns>/<job>:<node>``           the waiting job may go where ``node`` is: its selector takes
                                                   the node's labels, its tolerations the node's taints
=================  ==============================  ==============================================================

The edits are read by ``incidents.diagnosis.whatif_edits`` and applied by ``whatif_apply`` (re-exported here): ``apply_edits``
returns a new input and never changes the one it was given. ``compare`` runs ``scheduling_pass.cluster_pass``
over both and lines up which waiting jobs start, and where, and what each queue and department holds before and
after: GPUs, CPU and memory (``incidents.diagnosis.whatif_allocation``, re-exported here). On a KAI cluster it
then asks who the waiting jobs each pass leaves without room would evict (``incidents.diagnosis.whatif_reclaim``):
the reclaims and preemptions the edits bring are their cost to others. Nothing is ever executed. Pure: no
database, no simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from incidents.diagnosis import fit as F
from incidents.diagnosis.quota import quota_at
from incidents.diagnosis.quota_edits import resource_edits
from incidents.diagnosis.request import Request, job_request
from incidents.diagnosis.scheduling_pass import (
    NO_ROOM,
    QUOTA,
    STARTS,
    ClusterPass,
    Considered,
    Position,
    cluster_pass,
)
from incidents.diagnosis.types import DiagnosisInput, EntityState
from incidents.diagnosis.whatif_allocation import (
    Allocation,
    AllocationTable,
    Amount,
    allocation_sides,
    allocation_table,
    line_up,
)
from incidents.diagnosis.whatif_apply import apply_edits
from incidents.diagnosis.whatif_edits import (
    KINDS,
    MAX_ADD,
    MAX_EDITS,
    MAX_GPUS_PER_POD,
    Edit,
    EditError,
    parse_edit,
    parse_edits,
)
from incidents.diagnosis.whatif_reclaim import Reclaim, reclaims

#
# Before and after
#


@dataclass
class JobDiff:
    """One waiting job in both passes."""

    before: Considered | None
    after: Considered | None

    @property
    def job(self) -> EntityState:
        c = self.after or self.before
        assert c is not None
        return c.job

    @property
    def change(self) -> str:
        """'starts' (newly), 'no longer starts', 'moves' (other nodes), 'same'."""
        b = self.before is not None and self.before.outcome == STARTS
        a = self.after is not None and self.after.outcome == STARTS
        if a and not b:
            return "starts"
        if b and not a:
            return "no longer starts"
        if (
            a
            and b
            and self.before is not None
            and self.after is not None
            and self.before.nodes != self.after.nodes
        ):
            return "moves"
        return "same"


@dataclass
class WhatIf:
    """The edits, both passes, the job rows and the allocations."""

    edits: list[Edit]
    before: ClusterPass
    after: ClusterPass
    jobs: list[JobDiff] = field(default_factory=list)
    allocations: list[Allocation] = field(default_factory=list)
    added_nodes: list[str] = field(default_factory=list)
    # KAI: the waiting jobs each pass leaves without room that would start by evicting others
    reclaims_before: list[Reclaim] = field(default_factory=list)
    reclaims_after: list[Reclaim] = field(default_factory=list)
    reclaim_weighed: bool = False  # the scheduler is KAI: its reclaim and preemption were weighed

    @property
    def reclaims(self) -> list[Reclaim]:
        """The evictions the edits bring: reclaimers after the edits whose victims were not evicted before."""
        before = {(r.label, tuple(v.label for v in r.victims)) for r in self.reclaims_before}
        return [r for r in self.reclaims_after if (r.label, tuple(v.label for v in r.victims)) not in before]

    @property
    def evicted(self) -> list[str]:
        """The running jobs the edits would have evicted (reclaimed or preempted), in order."""
        before = {v.label for r in self.reclaims_before for v in r.victims}
        return list(dict.fromkeys(v.label for r in self.reclaims for v in r.victims if v.label not in before))

    @property
    def changed(self) -> list[JobDiff]:
        return [j for j in self.jobs if j.change != "same"]

    @property
    def starting(self) -> list[JobDiff]:
        return [j for j in self.jobs if j.after is not None and j.after.outcome == STARTS]


def compare(di: DiagnosisInput, edits: list[Edit]) -> WhatIf:
    """Both passes over all waiting jobs (the state at t, and with ``edits``), lined up job by job."""
    edited = apply_edits(di, edits)
    with di.indexed():
        before = cluster_pass(di)
        base_alloc = allocation_sides(di, before)
    with edited.indexed():
        after = cluster_pass(edited)
        after_alloc = allocation_sides(edited, after)
    reclaims_before = reclaims(di, before) if edits else []
    reclaims_after = reclaims(edited, after) if edits else []
    rows: dict[tuple[str, str], JobDiff] = {}
    for c in after.considered:
        rows[(c.job.namespace, c.job.name)] = JobDiff(None, c)
    for c in before.considered:
        key = (c.job.namespace, c.job.name)
        if key in rows:
            rows[key].before = c
        else:
            rows[key] = JobDiff(c, None)
    order = {k: i for i, k in enumerate(rows)}
    jobs = sorted(rows.values(), key=lambda j: (j.change == "same", order[(j.job.namespace, j.job.name)]))
    existing = {n.name for n in di.nodes}
    return WhatIf(
        edits=edits,
        before=before,
        after=after,
        jobs=jobs,
        allocations=line_up(base_alloc, after_alloc),
        added_nodes=[n.name for n in edited.nodes if n.name not in existing],
        reclaims_before=reclaims_before,
        reclaims_after=reclaims_after,
        reclaim_weighed=di.scheduler == "kai",
    )


#
# The edit a pending job's answer links to
#


def suggest_edit(di: DiagnosisInput, job: EntityState, pos: Position | None) -> Edit | None:
    """The edit the why-pending panel's what-if link is prefilled with: the quota or limit it lacks, else the
    first job ahead that takes the room it could use (held), else a cordoned node it could use (uncordoned),
    else more nodes of the shape it could use. None when nothing on the list applies."""
    if pos is None or pos.me is None:
        return None
    me = pos.me
    req = job_request(di, job)
    if me.outcome == QUOTA:
        return _quota_edit(di, job, req)
    first = next((c for c in pos.starting_ahead), None)
    if first is not None:
        return Edit("hold", first.job.name, first.job.namespace)
    if me.outcome == STARTS:
        return None
    rows = F.node_fits(di, req)
    cordoned = [
        r
        for r in rows
        if F.CORDONED in r.blockers
        and set(r.blockers) <= {F.CORDONED, F.INSUFFICIENT}
        and r.free >= req.gpus_per_pod
    ]
    if cordoned:
        return Edit("uncordon", cordoned[0].node)
    shapes = [r for r in rows if r.node in me.usable and r.nominal >= max(req.gpus_per_pod, 1)]
    if shapes and req.gpus_per_pod > 0:
        best = max(shapes, key=lambda r: r.nominal)
        # enough new nodes for it and for the jobs ahead that wait for the same room and would take them first
        need = 0
        for c in [*pos.competitors, me]:
            if c.outcome != NO_ROOM or best.node not in c.usable:
                continue
            other = job_request(di, c.job)
            if other.gpus_per_pod == 0 or other.gpus_per_pod > best.nominal or not c.whole:
                continue
            need += -(-other.pods // (best.nominal // other.gpus_per_pod))
        return Edit("add", best.node, number=min(max(need, 1), MAX_ADD))
    return None


def would_start(di: DiagnosisInput, job: EntityState, edit: Edit) -> Considered | None:
    """The job as one pass over the state with ``edit`` sees it (None: the pass did not reach it)."""
    edited = apply_edits(di, [edit])
    with edited.indexed():
        return cluster_pass(edited).find(job.namespace, job.name)


def _quota_edit(di: DiagnosisInput, job: EntityState, req: Request) -> Edit | None:
    q = quota_at(di, job, req, 0)
    if q is None:
        return None
    need = math.ceil(q.after - 1e-9)
    dept = q.department
    if not q.blocks and not (dept is not None and dept.blocks):
        # its GPUs fit: a CPU or memory bound holds it (KAI), the first one it would pass
        raised = resource_edits(q)
        if raised:
            return raised[0]
    if not q.blocks and dept is not None and dept.blocks:
        return Edit("limit" if dept.over_limit else "quota", dept.name, number=math.ceil(dept.after - 1e-9))
    name = q.policy.name if q.policy is not None else q.queue
    if q.over_limit:
        return Edit("limit", name, number=need)
    return Edit("quota", name, number=need)


__all__ = [
    "KINDS",
    "MAX_EDITS",
    "MAX_GPUS_PER_POD",
    "Allocation",
    "AllocationTable",
    "Amount",
    "Edit",
    "EditError",
    "JobDiff",
    "WhatIf",
    "allocation_table",
    "apply_edits",
    "compare",
    "parse_edit",
    "parse_edits",
    "suggest_edit",
    "would_start",
]

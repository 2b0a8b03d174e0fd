"""What if: the state at t with an operator's edits, and the difference they make to one scheduling pass.

The what-if page (``/c/<cluster>/whatif/``) writes its edits in the query string, one parameter per kind:

=================  ==============================  ==============================================================
parameter          value                           edit
=================  ==============================  ==============================================================
``quota``          ``<name>:<gpus>``               the quota of the queue, project or department ``name``
``limit``          ``<name>:<gpus>``               its limit (Kueue: nominal + borrowing limit)
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

``apply_edits`` returns a new input and never changes the one it was given; ``compare`` runs
``scheduling_pass.cluster_pass`` over both and lines up which waiting jobs start, and where, and what each queue
and department holds before and after. Nothing is ever executed. Pure: no database, no simulator.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from incidents.diagnosis import fit as F
from incidents.diagnosis.quota import ACTIVE_POD_PHASES, is_pending, pod_units, project_allocated, quota_at
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

KINDS = ("quota", "limit", "cordon", "uncordon", "repair", "add", "remove", "hold", "request", "onto")
MAX_EDITS = 20  # edits in one URL
MAX_ADD = 64  # nodes one ``add`` makes
MAX_ADDED = 256  # nodes all ``add`` edits make together
MAX_GPUS = 100_000  # a quota or limit
MAX_PODS = 1024
MAX_GPUS_PER_POD = 64

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}"
_PATTERNS = {
    "quota": re.compile(rf"^(?P<name>{_NAME}):(?P<n>\d{{1,9}}(\.\d{{1,4}})?)$"),
    "limit": re.compile(rf"^(?P<name>{_NAME}):(?P<n>\d{{1,9}}(\.\d{{1,4}})?)$"),
    "cordon": re.compile(rf"^(?P<name>{_NAME})$"),
    "uncordon": re.compile(rf"^(?P<name>{_NAME})$"),
    "repair": re.compile(rf"^(?P<name>{_NAME})$"),
    "add": re.compile(rf"^(?P<name>{_NAME}):(?P<n>\d{{1,6}})$"),
    "remove": re.compile(rf"^(?P<ns>{_NAME})/(?P<name>{_NAME})$"),
    "hold": re.compile(rf"^(?P<ns>{_NAME})/(?P<name>{_NAME})$"),
    "request": re.compile(
        rf"^(?P<ns>{_NAME})/(?P<name>{_NAME}):(?P<pods>\d{{1,6}})x"
        r"(?:(?P<share>0\.\d{1,4})|(?P<profile>\d{1,2}g\.\d{1,4}gb)|(?P<gpus>\d{1,4}))$"
    ),
    "onto": re.compile(rf"^(?P<ns>{_NAME})/(?P<name>{_NAME}):(?P<node>{_NAME})$"),
}
_FORMS = {
    "quota": "<name>:<gpus>",
    "limit": "<name>:<gpus>",
    "cordon": "<node>",
    "uncordon": "<node>",
    "repair": "<node>",
    "add": "<node>:<n>",
    "remove": "<namespace>/<job>",
    "hold": "<namespace>/<job>",
    "request": "<namespace>/<job>:<pods>x<gpus per pod | share 0.x | MIG profile 1g.10gb>",
    "onto": "<namespace>/<job>:<node>",
}


class EditError(ValueError):
    """An edit that cannot be read or applied; ``param`` names the query parameter and its value."""

    def __init__(self, kind: str, raw: str, message: str) -> None:
        super().__init__(f"{kind}={raw}: {message}")
        self.param = kind
        self.raw = raw


@dataclass(frozen=True)
class Edit:
    """One edit of the state at t, as the query string writes it."""

    kind: str
    name: str  # queue/project/department, node or job name
    namespace: str = ""  # a job's
    number: float = 0  # quota/limit GPUs, nodes to add, pods
    gpus: int = 0  # GPUs per pod (request)
    share: float = 0  # a share of one GPU per pod (request), instead of whole GPUs
    profile: str = ""  # a MIG profile per pod (request); the node whose place the job may take (onto)

    @property
    def value(self) -> str:
        """The query value that writes this edit back."""
        n = f"{self.number:g}"
        return {
            "quota": f"{self.name}:{n}",
            "limit": f"{self.name}:{n}",
            "add": f"{self.name}:{n}",
            "remove": f"{self.namespace}/{self.name}",
            "hold": f"{self.namespace}/{self.name}",
            "request": f"{self.namespace}/{self.name}:{n}x{self.per_pod}",
            "onto": f"{self.namespace}/{self.name}:{self.profile}",
        }.get(self.kind, self.name)

    @property
    def per_pod(self) -> str:
        """What each pod of a request edit asks: "8", "0.5" (a share), "1g.10gb" (a MIG instance)."""
        return self.profile or (f"{self.share:g}" if self.share else str(self.gpus))

    @property
    def words(self) -> str:
        n = f"{self.number:g}"
        job = f"{self.namespace}/{self.name}"
        return {
            "quota": f"quota of {self.name} → {n} GPUs",
            "limit": f"limit of {self.name} → {n} GPUs",
            "cordon": f"cordon {self.name}",
            "uncordon": f"uncordon {self.name}",
            "repair": f"repair {self.name}",
            "add": f"add {n} node(s) like {self.name}",
            "remove": f"remove {job}",
            "hold": f"hold {job}",
            "request": f"{job} asks {n} pod(s) × {self._per_pod_words}",
            "onto": f"let {job} onto nodes like {self.profile}",
        }[self.kind]

    @property
    def _per_pod_words(self) -> str:
        if self.profile:
            return f"MIG {self.profile}"
        if self.share:
            return f"{self.share:g} of a GPU"
        return f"{self.gpus} GPUs"


def parse_edit(kind: str, raw: str) -> Edit:
    """One query value as an edit; ``EditError`` names the parameter and the form it expects."""
    pattern = _PATTERNS.get(kind)
    m = pattern.match(raw) if pattern is not None else None
    if m is None:
        raise EditError(kind, raw, f"expected {_FORMS.get(kind, 'a known edit')}")
    g = m.groupdict()
    if kind in ("quota", "limit"):
        n = float(g["n"])
        if not math.isfinite(n) or n > MAX_GPUS:
            raise EditError(kind, raw, f"GPUs must be between 0 and {MAX_GPUS}")
        return Edit(kind, g["name"], number=n)
    if kind == "add":
        n = int(g["n"])
        if not 1 <= n <= MAX_ADD:
            raise EditError(kind, raw, f"add between 1 and {MAX_ADD} nodes")
        return Edit(kind, g["name"], number=n)
    if kind == "request":
        pods, gpus = int(g["pods"]), int(g["gpus"] or 0)
        share = float(g["share"] or 0)
        if g["share"] is not None and not 0 < share < 1:
            raise EditError(kind, raw, "a share is between 0 and 1 of a GPU")
        if not 1 <= pods <= MAX_PODS or not (share or g["profile"] or 1 <= gpus <= MAX_GPUS_PER_POD):
            raise EditError(
                kind, raw, f"pods between 1 and {MAX_PODS}, GPUs per pod between 1 and {MAX_GPUS_PER_POD}"
            )
        return Edit(kind, g["name"], g["ns"], number=pods, gpus=gpus, share=share, profile=g["profile"] or "")
    if kind == "onto":
        return Edit(kind, g["name"], g["ns"], profile=g["node"])
    return Edit(kind, g["name"], g.get("ns") or "")


def parse_edits(params: dict[str, list[str]]) -> list[Edit]:
    """Every edit of a query string ({kind: [values]}), in the order of ``KINDS``; bounded in number."""
    edits = [parse_edit(kind, raw) for kind in KINDS for raw in params.get(kind, [])]
    if len(edits) > MAX_EDITS:
        raise EditError("edits", str(len(edits)), f"at most {MAX_EDITS} edits in one what-if")
    added = sum(int(e.number) for e in edits if e.kind == "add")
    if added > MAX_ADDED:
        raise EditError("add", str(added), f"at most {MAX_ADDED} nodes added in all")
    return edits


#
# Applying edits
#


def apply_edits(di: DiagnosisInput, edits: list[Edit]) -> DiagnosisInput:
    """A copy of ``di`` with ``edits`` applied (``di`` itself is left as it was). Unknown names raise
    ``EditError``."""
    out = replace(
        di,
        nodes=list(di.nodes),
        pods=list(di.pods),
        jobs=list(di.jobs),
        queues=list(di.queues),
        projects=list(di.projects),
        departments=list(di.departments),
        history=dict(di.history),
    )
    for e in edits:
        _apply(out, e)
    return out


def _edited(items: list[EntityState], es: EntityState, state: dict[str, Any]) -> EntityState:
    new = replace(es, state=state)
    items[items.index(es)] = new
    return new


def _apply(di: DiagnosisInput, e: Edit) -> None:
    if e.kind in ("quota", "limit"):
        key = "quota_gpus" if e.kind == "quota" else "limit_gpus"
        found = False
        for items in (di.queues, di.projects, di.departments):
            for es in [x for x in items if x.name == e.name]:
                _edited(items, es, {**es.state, key: e.number})
                found = True
        if not found:
            raise EditError(e.kind, e.value, f"no queue, project or department {e.name} at t")
        return
    if e.kind in ("cordon", "uncordon", "repair", "add"):
        node = di.find("node", e.name)
        if node is None:
            raise EditError(e.kind, e.value, f"no node {e.name} at t")
        if e.kind == "add":
            _add_nodes(di, node, int(e.number))
        elif e.kind == "repair":
            _edited(di.nodes, node, _healthy(di, node, keep_cordon=True))
        else:
            taints = [t for t in node.state.get("taints") or [] if t.get("key") != _UNSCHEDULABLE_TAINT]
            _edited(di.nodes, node, {**node.state, "unschedulable": e.kind == "cordon", "taints": taints})
        return
    job = di.find("job", e.name, e.namespace)
    if job is None or job.namespace != e.namespace:
        raise EditError(e.kind, e.value, f"no job {e.namespace}/{e.name} at t")
    if e.kind in ("request", "onto"):
        if not is_pending(job):
            raise EditError(e.kind, e.value, f"{job.ref.label} is not waiting at t")
        if e.kind == "request":
            _retarget(di, job, _request_state(e))
            return
        node = di.find("node", e.profile)
        if node is None:
            raise EditError(e.kind, e.value, f"no node {e.profile} at t")
        _retarget(di, job, _onto_state(di, job, node))
        return
    # remove / hold: the job's pods free their GPUs; a held job stays listed and waits
    di.pods[:] = [p for p in di.pods if not (p.namespace == job.namespace and p.get("job") == job.name)]
    if e.kind == "remove":
        di.jobs.remove(job)
    else:
        _edited(di.jobs, job, {**job.state, "phase": "Pending", "active": 0, "held": True})


_UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def _request_state(e: Edit) -> dict[str, Any]:
    """The job's request keys as a request edit writes them (whole GPUs, a share, or one MIG instance per pod)."""
    pods = int(e.number)
    if e.profile:
        return {"pods": pods, "gpus_per_pod": 0, "gpus_total": 0, "gpu_share": None, "mig": {e.profile: 1},
                "gpu_units": pods * F.mig_units(e.profile)}  # fmt: skip
    if e.share:
        return {"pods": pods, "gpus_per_pod": 0, "gpus_total": 0, "gpu_share": {"fraction": e.share},
                "mig": {}, "gpu_units": round(pods * e.share, 4)}  # fmt: skip
    return {"pods": pods, "gpus_per_pod": e.gpus, "gpus_total": pods * e.gpus, "gpu_share": None, "mig": {},
            "gpu_units": pods * e.gpus}  # fmt: skip


def _onto_state(di: DiagnosisInput, job: EntityState, node: EntityState) -> dict[str, Any]:
    """The selector and tolerations that let the job where ``node`` is: each selector key the node's labels
    contradict takes the node's value (or goes, when the node has no such label), and each taint of the node the
    job does not tolerate (other than a cordon or a health taint, which an uncordon or a repair lifts) gets a
    toleration."""
    req = F.job_request(di, job)
    labels = node.state.get("labels") or {}
    selector = {k: labels[k] for k in req.node_selector if k in labels}
    tolerations = list(req.tolerations)
    for t in node.state.get("taints") or []:
        key = t.get("key") or ""
        if t.get("effect") not in ("NoSchedule", "NoExecute") or key.startswith("node.kubernetes.io/"):
            continue
        if not F.tolerates(tolerations, t):
            tol = {"key": key, "operator": "Equal", "value": t.get("value"), "effect": t.get("effect")}
            tolerations.append(
                tol if t.get("value") is not None else {**tol, "operator": "Exists", "value": None}
            )
    return {"node_selector": selector, "tolerations": tolerations}


def _retarget(di: DiagnosisInput, job: EntityState, changes: dict[str, Any]) -> None:
    """Write ``changes`` into the job and into its unbound pods (whose spec the fit prefers to the job's)."""
    _edited(di.jobs, job, {**job.state, **changes})
    pod_keys = {k: v for k, v in changes.items() if k in ("node_selector", "tolerations", "gpu_share", "mig")}
    if "gpus_per_pod" in changes:
        pod_keys["gpus"] = changes["gpus_per_pod"]
    for p in [p for p in di.pods_of_job(job) if not p.get("node")]:
        _edited(di.pods, p, {**p.state, **pod_keys})


def _healthy(di: DiagnosisInput, node: EntityState, *, keep_cordon: bool) -> dict[str, Any]:
    """The node's state Ready, with every GPU it should have and no health taint (nor, unless ``keep_cordon``,
    a cordon)."""
    gpus = F.nominal_gpus(di, node)
    state = dict(node.state)
    res = {"nvidia.com/gpu": gpus}
    state["capacity"] = {**(state.get("capacity") or {}), **res}
    state["allocatable"] = {**(state.get("allocatable") or {}), **res}
    state["ready"] = True
    if not keep_cordon:
        state["unschedulable"] = False
    state["taints"] = [
        t
        for t in state.get("taints") or []
        if not (t.get("key") or "").startswith("node.kubernetes.io/")
        or (keep_cordon and t.get("key") == _UNSCHEDULABLE_TAINT)
    ]
    return state


def _add_nodes(di: DiagnosisInput, node: EntityState, n: int) -> None:
    """``n`` empty copies of ``node``, healthy and schedulable, with every GPU it should have."""
    state = _healthy(di, node, keep_cordon=False)
    taken = {x.name for x in di.nodes}
    i = 0
    for _ in range(n):
        i += 1
        while f"{node.name}+{i}" in taken:
            i += 1
        name = f"{node.name}+{i}"
        labels = {**(state.get("labels") or {}), "kubernetes.io/hostname": name}
        di.nodes.append(EntityState("node", name, state={**state, "labels": labels}, valid_from=di.t))


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
class Allocation:
    """A queue's or department's GPU units before and after the pass, with its quota and limit (after edits)."""

    kind: str  # "queue" | "department"
    name: str
    quota: float | None
    limit: float | None
    now: float  # held at t (after the edits: a removed job's pods no longer count)
    before: float  # after the pass on the state as it was
    after: float  # after the pass on the edited state

    @property
    def delta(self) -> float:
        return round(self.after - self.before, 4)

    @property
    def display(self) -> dict[str, str]:
        """The numbers as the pages write them: 16 (not 16.0), ∞ for no quota or limit, +8 for a delta."""
        out = {
            k: "∞" if v is None else f"{round(v, 4):g}"
            for k, v in (
                ("quota", self.quota),
                ("limit", self.limit),
                ("now", self.now),
                ("before", self.before),
                ("after", self.after),
            )
        }
        out["delta"] = f"{self.delta:+g}"
        return out


@dataclass
class WhatIf:
    """The edits, both passes, the job rows and the allocations."""

    edits: list[Edit]
    before: ClusterPass
    after: ClusterPass
    jobs: list[JobDiff] = field(default_factory=list)
    allocations: list[Allocation] = field(default_factory=list)
    added_nodes: list[str] = field(default_factory=list)

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
        base_alloc = _allocations(di, before)
    with edited.indexed():
        after = cluster_pass(edited)
        after_alloc = _allocations(edited, after)
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
    allocations = []
    for key, (quota, limit, now, after_units) in after_alloc.items():
        before_units = base_alloc.get(key, (None, None, 0.0, 0.0))[3]
        allocations.append(Allocation(key[0], key[1], quota, limit, now, before_units, after_units))
    for key, (quota, limit, now, before_units) in base_alloc.items():
        if key not in after_alloc:
            allocations.append(Allocation(key[0], key[1], quota, limit, now, before_units, 0.0))
    existing = {n.name for n in di.nodes}
    return WhatIf(
        edits=edits,
        before=before,
        after=after,
        jobs=jobs,
        allocations=allocations,
        added_nodes=[n.name for n in edited.nodes if n.name not in existing],
    )


def _allocations(
    di: DiagnosisInput, cp: ClusterPass
) -> dict[tuple[str, str], tuple[float | None, float | None, float, float]]:
    """(kind, name) -> (quota, limit, held at t, held after the pass), queues then departments."""
    out: dict[tuple[str, str], tuple[float | None, float | None, float, float]] = {}
    held: dict[str, float] = {}
    for q in sorted(di.queues, key=lambda q: q.name):
        project = q.get("project") or ""
        now = project_allocated(di, project, q.name)
        gained = sum(
            u for (p, qn), u in cp.started_units.items() if qn == q.name or (project and p == project)
        )
        held[q.name] = now + gained
        if project:
            held.setdefault(project, now + gained)
        out[("queue", q.name)] = (
            _num(q.get("quota_gpus")),
            _num(q.get("limit_gpus")),
            now,
            round(now + gained, 4),
        )
    for d in sorted(di.departments, key=lambda d: d.name):
        members = list(dict.fromkeys([*(d.get("projects") or []), *(d.get("queues") or [])]))
        now = sum(_held_by(di, m) for m in members)
        after = sum(held.get(m, _held_by(di, m)) for m in members)
        out[("department", d.name)] = (
            _num(d.get("quota_gpus")),
            _num(d.get("limit_gpus")),
            round(now, 4),
            round(after, 4),
        )
    return out


def _held_by(di: DiagnosisInput, name: str) -> float:
    return sum(
        pod_units(p)
        for p in di.pods
        if p.get("node")
        and p.get("phase") in ACTIVE_POD_PHASES
        and name in (p.get("project"), p.get("queue"))
    )


def _num(value: Any) -> float | None:
    try:
        n = float(value)
    except (TypeError, ValueError):
        return None
    return n if math.isfinite(n) and n >= 0 else None


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
    req = F.job_request(di, job)
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
            other = F.job_request(di, c.job)
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


def _quota_edit(di: DiagnosisInput, job: EntityState, req: F.Request) -> Edit | None:
    q = quota_at(di, job, req, 0)
    if q is None:
        return None
    need = math.ceil(q.after - 1e-9)
    dept = q.department
    if not q.blocks and dept is not None and dept.blocks:
        return Edit("limit" if dept.over_limit else "quota", dept.name, number=math.ceil(dept.after - 1e-9))
    name = q.policy.name if q.policy is not None else q.queue
    if q.over_limit:
        return Edit("limit", name, number=need)
    return Edit("quota", name, number=need)


__all__ = [
    "KINDS",
    "MAX_EDITS",
    "Allocation",
    "Edit",
    "EditError",
    "JobDiff",
    "WhatIf",
    "apply_edits",
    "compare",
    "parse_edit",
    "parse_edits",
    "suggest_edit",
    "would_start",
]

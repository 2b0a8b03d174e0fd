"""recent_change: what someone changed on related objects shortly before the onset.

Only deliberate changes count (policy, request, image, selectors, taints,
cordons, external change events), not what the system itself moves every
sweep (phases, conditions, placements) nor faults (readiness, allocatable,
Xid counters), which have their own checks. A change is context: rank.py puts
it below any mechanism that explains the symptom on its own, and raises its
confidence when it touches what that mechanism is about.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from collectors.changefmt import describe_change
from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.build import refuted
from incidents.diagnosis.change_categories import category, loosens
from incidents.diagnosis.citations import cite_change
from incidents.diagnosis.pending import first_pending_since, is_pending
from incidents.diagnosis.quota import quota_at
from incidents.diagnosis.request import Request, job_request
from incidents.diagnosis.scheduling_pass import whole_gpus
from incidents.diagnosis.types import (
    SUPPORTED,
    ChangeRec,
    Derived,
    DiagnosisInput,
    EntityState,
    Finding,
    Ref,
    hhmm,
    iso,
)

logger = logging.getLogger(__name__)

LOOKBACK = timedelta(hours=3)
ONSET_GRACE = timedelta(minutes=2)  # sweeps see a change and its effect in the same pass


def related_refs(di: DiagnosisInput) -> set[Ref]:
    """The subjects and what they depend on: pods, queue/project, nodes (all GPU nodes for a waiting job)."""
    refs: set[Ref] = set(di.subjects)
    for ref in di.subjects:
        if ref.kind == "job":
            job = di.find("job", ref.name, ref.namespace)
            if job is None:
                continue
            pods = di.pods_of_job(job)
            refs.update(p.ref for p in pods)
            for name in {job.get("queue"), job.get("project")} - {None, ""}:
                refs.update({Ref("queue", name), Ref("project", name)})
            refs.update(_departments_of(di, job))
            nodes = {p.get("node") for p in pods if p.get("node")}
            if not nodes:  # waiting: any node could be where it should have gone
                nodes = {n.name for n in di.nodes}
            refs.update(Ref("node", n) for n in nodes)
        elif ref.kind == "pod":
            pod = di.find("pod", ref.name, ref.namespace)
            if pod is not None:
                if pod.get("job"):
                    refs.add(Ref("job", pod.get("job"), pod.namespace))
                if pod.get("node"):
                    refs.add(Ref("node", pod.get("node")))
                for name in {pod.get("queue"), pod.get("project")} - {None, ""}:
                    refs.update({Ref("queue", name), Ref("project", name)})
        elif ref.kind == "gpu":
            g = di.find("gpu", ref.name)
            if g is not None and g.get("node"):
                refs.add(Ref("node", g.get("node")))
        elif ref.kind == "node":
            refs.update(g.ref for g in di.gpus_of_node(ref.name))
        elif ref.kind == "project":
            refs.add(Ref("queue", ref.name))
    return refs


def _departments_of(di: DiagnosisInput, job: EntityState) -> set[Ref]:
    """The department(s) over the job's queue or project: a cut of a department's quota is a change the job
    depends on, as its quota cause says."""
    names = {job.get("queue"), job.get("project")} - {None, ""}
    out: set[Ref] = set()
    for name in names:
        for kind in ("queue", "project"):
            policy = di.find(kind, name)
            if policy is not None and policy.get("department"):
                out.add(Ref("department", policy.get("department")))
    for d in di.departments:
        if names & set((d.get("projects") or []) + (d.get("queues") or [])):
            out.add(d.ref)
    return out


def unusable_nodes(di: DiagnosisInput) -> dict[str, bool]:
    """Nodes a waiting subject job could never use, whatever was changed on them, each with whether a selector
    or taint change there may still be why it waits.

    related_refs counts every node for a job that waits unplaced; a change on a node that could not hold one of
    its pods even if the change were reverted cannot be why it waits. By the model's fit (``fit.node_fits``):

    - the node offers fewer whole GPUs than one pod asks (a 7-GPU node that lost a GPU, for an 8-GPU pod): no
      cordon, taint or label change there gives it the GPUs, so none counts;
    - the job's node selector or tolerations keep it off the node, or its MIG layout lacks the profile a pod
      asks: a cordon there costs it nothing, but a selector, label or taint change may be what keeps it off,
      so those still count;
    - while its quota holds it, no node is considered at all (selector and taint changes still count).

    Empty unless every subject is such a job (any other subject's nodes stay related); a node is unusable only
    if it is for every subject, and a selector or taint change there counts if it may explain any of them.
    """
    never: dict[str, bool] | None = None
    for ref in di.subjects:
        job = di.find("job", ref.name, ref.namespace) if ref.kind == "job" else None
        if job is None or not is_pending(job) or any(p.get("node") for p in di.pods_of_job(job)):
            return {}
        mine = _unusable_for(di, job)
        never = mine if never is None else {n: never[n] or mine[n] for n in never.keys() & mine.keys()}
    return never or {}


def _unusable_for(di: DiagnosisInput, job: EntityState) -> dict[str, bool]:
    req = job_request(di, job)
    held = quota_at(di, job, req, 0)
    if held is not None and held.holds:
        return {n.name: True for n in di.nodes}  # its quota holds it before any node is considered
    out: dict[str, bool] = {}
    for r in F.node_fits(di, req):
        if whole_gpus(req) and r.allocatable < req.gpus_per_pod:
            out[r.node] = False  # too small for one pod, whatever is reverted
        elif F.SELECTOR in r.blockers or F.TAINT in r.blockers or _lacks_profile(r, req):
            out[r.node] = True
    return out


def _lacks_profile(row: F.NodeFit, req: Request) -> bool:
    """The node's MIG layout has fewer instances of a profile than one pod asks: no cordon or taint change gives
    them (a repartition, a label change, might)."""
    return any(row.mig_layout.get(profile, 0) < n for profile, n in req.mig.items())


def symptom_onset(di: DiagnosisInput) -> datetime:
    """When the symptom began: a waiting job's pending spell start, else the incident onset (whichever is first).

    Alerts fire after their ``for``; a change made after the job already waited cannot be why it waits.
    """
    onset = di.onset
    for ref in di.subjects:
        if ref.kind != "job":
            continue
        job = di.find("job", ref.name, ref.namespace)
        if job is not None and is_pending(job):
            since = first_pending_since(di, job)
            if since is not None and since < onset:
                onset = since
    return onset


def check_changes(di: DiagnosisInput, lookback: timedelta = LOOKBACK) -> list[Finding]:
    refs = related_refs(di)
    onset = symptom_onset(di)
    start = onset - lookback
    picked, late, loosened = _window_changes(di, refs, onset, start)
    subject = di.subjects[0] if di.subjects else None
    if not picked and late:
        return [_late_changes_finding(late, onset, subject)]
    if not picked and loosened:
        return [_loosened_finding(loosened, subject)]
    if not picked:
        return [_no_change_finding(di, refs, start, subject)]
    return [_recent_change_finding(picked, subject)]


def waiting_subjects(di: DiagnosisInput) -> bool:
    """Every subject is a job that waits unplaced (what a change that gives more room cannot explain)."""
    jobs = [di.find("job", r.name, r.namespace) if r.kind == "job" else None for r in di.subjects]
    return bool(jobs) and all(
        j is not None and is_pending(j) and not any(p.get("node") for p in di.pods_of_job(j)) for j in jobs
    )


def _window_changes(
    di: DiagnosisInput, refs: set[Ref], onset: datetime, start: datetime
) -> tuple[list[tuple[ChangeRec, str]], list[ChangeRec], list[ChangeRec]]:
    """The deliberate changes on related objects from start to t: (before the symptom with their category,
    after it, those that only gave a waiting job more room). A change on a node the job could never use
    counts only when it is a selector or taint that may be what keeps the job off (``unusable_nodes``)."""
    never = unusable_nodes(di)  # node -> whether a selector or taint change there still counts
    waiting = waiting_subjects(di)
    picked: list[tuple[ChangeRec, str]] = []
    late: list[ChangeRec] = []
    loosened: list[ChangeRec] = []
    for ch in di.changes:
        if ch.time < start or ch.time > di.t:
            continue
        if ch.entity is not None and ch.entity not in refs:
            continue
        cat = category(ch)
        if cat is None:
            continue
        if ch.entity is not None and ch.entity.kind == "node" and ch.entity.name in never:
            if not (never[ch.entity.name] and cat in ("selector", "taint")):
                continue
        if waiting and loosens(ch):
            loosened.append(ch)
            continue
        if ch.time > onset + ONSET_GRACE:
            late.append(ch)
            continue
        picked.append((ch, cat))
    return picked, late, loosened


def _late_changes_finding(late: list[ChangeRec], onset: datetime, subject: Ref | None) -> Finding:
    """Every related change came after the symptom began: none of them caused it."""
    first = min(late, key=lambda c: c.time)
    who = f" by {first.actor}" if first.actor else ""
    return refuted(
        C.RECENT_CHANGE,
        f"The only change(s) on related objects came after the symptom began at {hhmm(onset)}: "
        f"{describe_change(first.field.rsplit('.', 1)[-1], first.old, first.new)}{who} at "
        f"{hhmm(first.time)}" + (f" (+{len(late) - 1} more)" if len(late) > 1 else "") + ".",
        0.7,
        [cite_change(c) for c in late[:8]],
        subject,
        ("change",),
        f"changed after onset ({hhmm(onset)}): cannot have caused it",
        # rank.link_changes revives it when such a change is what a supported mechanism is about
        # (a quota cut while the job already waited for something else now keeps it waiting).
        facts={
            "late_categories": sorted({c for c in (category(ch) for ch in late) if c}),
            "late_summary": "; ".join(_describe(ch) for ch in sorted(late, key=lambda c: c.time)[:3]),
        },
    )


def _loosened_finding(loosened: list[ChangeRec], subject: Ref | None) -> Finding:
    """Every related change gave the waiting job more room (a raise, a lifted cordon, a removed taint): none
    of them can be why it waits."""
    ordered = sorted(loosened, key=lambda c: c.time, reverse=True)
    more = f" (+{len(ordered) - 3} more)" if len(ordered) > 3 else ""
    return refuted(
        C.RECENT_CHANGE,
        "The only change(s) on related objects gave the job more room, so none can be why it waits: "
        + "; ".join(_describe(ch) for ch in ordered[:3])
        + more
        + ".",
        0.7,
        [cite_change(c) for c in ordered[:8]],
        subject,
        ("change",),
        "only loosened what the job needs (a raise, a lifted cordon or limit, a removed taint)",
    )


def _no_change_finding(di: DiagnosisInput, refs: set[Ref], start: datetime, subject: Ref | None) -> Finding:
    """Nothing deliberate changed on related objects in the window: refuted, citing the empty window."""
    absent = Derived(
        kind="changes_window",
        locator=f"inventory changes of {len(refs)} related object(s) between {iso(start)} and {iso(di.t)}",
        content={
            "objects": sorted(str(r) for r in refs),
            "start": iso(start),
            "end": iso(di.t),
            "changes": [],
        },
        summary=f"no deliberate change on related objects from {hhmm(start)} to {hhmm(di.t)}",
        observed_at=di.t,
    )
    return refuted(
        C.RECENT_CHANGE,
        f"Nothing was changed on the {len(refs)} related object(s) from {hhmm(start)} to {hhmm(di.t)}.",
        0.6,
        [absent],
        subject,
        ("change",),
        "no policy, request, image, selector, taint or cordon change in the window",
    )


def _recent_change_finding(picked: list[tuple[ChangeRec, str]], subject: Ref | None) -> Finding:
    """Changes on related objects shortly before the symptom, newest first (context: rank.py links them)."""
    picked = sorted(picked, key=lambda p: p[0].time, reverse=True)
    more = f" (+{len(picked) - 3} more)" if len(picked) > 3 else ""
    return Finding(
        C.RECENT_CHANGE,
        f"{len(picked)} change(s) on related objects shortly before the symptom began: "
        + "; ".join(_describe(ch) for ch, _cat in picked[:3])
        + more
        + ".",
        SUPPORTED,
        0.5,
        supports=[cite_change(ch) for ch, _ in picked[:8]],
        subject=subject,
        sources=("change",),
        since=picked[-1][0].time,
        facts={
            "categories": sorted({cat for _, cat in picked}),
            "changes": [
                {
                    "time": iso(ch.time),
                    "field": ch.field,
                    "old": ch.old,
                    "new": ch.new,
                    "actor": ch.actor,
                    "entity": str(ch.entity) if ch.entity else None,
                }
                for ch, _ in picked[:8]
            ],
        },
        next_questions=["Was the change intended, and can it be reverted safely?"],
    )


def _describe(ch: ChangeRec) -> str:
    who = f"{ch.actor} " if ch.actor else ""
    target = f"{ch.entity.kind} {ch.entity.label}" if ch.entity else "external"
    what = ch.summary or describe_change(ch.field.rsplit(".", 1)[-1], ch.old, ch.new)
    return f"{who}changed {target} {what} at {hhmm(ch.time)}"

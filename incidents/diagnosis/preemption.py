"""preempted: a subject job or pod the scheduler preempted or evicted, and who took its place."""

from __future__ import annotations

import re

from incidents.diagnosis import codes as C
from incidents.diagnosis.citations import cite_event, cite_state
from incidents.diagnosis.types import SUPPORTED, Cite, DiagnosisInput, EntityState, EventRec, Finding, hhmm

# "was preempted by …", "Preempted to accommodate a workload …", "evicted by …" — not kube-scheduler's
# "preemption: 0/8 nodes are available" tail, which says preemption would NOT help this pod.
PREEMPTED_TEXT = re.compile(
    r"\bwas preempted\b|\bpreempted (?:by|to accommodate|in favou?r)\b|\bevicted by\b", re.I
)
PREEMPT_REASONS = ("Preempted", "Preempting", "Evicted", "Evict", "PreemptedByScheduler", "Eviction")


def preemption_findings(di: DiagnosisInput) -> list[Finding]:
    out: list[Finding] = []
    names: set[tuple[str, str]] = set()
    jobs: list[EntityState] = []
    for ref in di.subjects:
        if ref.kind in ("job", "pod"):
            names.add((ref.namespace, ref.name))
        if ref.kind == "job":
            j = di.find("job", ref.name, ref.namespace)
            if j is not None:
                jobs.append(j)
                names.update((p.namespace, p.name) for p in di.pods_of_job(j))
    evs: list[EventRec] = []
    for e in di.events:
        if e.time > di.t or e.involved is None:
            continue
        hit = (e.involved.namespace, e.involved.name) in names or any(
            e.involved.name.startswith(f"{j.name}-")
            or e.involved.name.endswith(f"-{j.name}")
            or f"-{j.name}-" in e.involved.name
            for j in jobs
        )
        if hit and (e.reason in PREEMPT_REASONS or PREEMPTED_TEXT.search(e.message or "")):
            evs.append(e)
    sched_cites: list[Cite] = []
    for j in jobs:
        s = j.get("scheduling") or {}
        if s.get("reason") in PREEMPT_REASONS or PREEMPTED_TEXT.search(s.get("message") or ""):
            sched_cites.append(cite_state(j, di.t))
    if not evs and not sched_cites:
        return out
    ev = max(evs, key=lambda e: e.time) if evs else None
    by = _preemptor(ev.message if ev else "")
    by_job = _preemptor_job(di, by) if by else None
    if by_job is not None:
        q = by_job.get("queue") or by_job.get("project")
        by = f"{by_job.ref.label} (queue {q}, {by_job.get('priority_class') or 'train'})"
    subject = jobs[0].ref if jobs else (ev.involved if ev else None)
    statement = (
        f"{subject.label if subject else 'the workload'} was preempted"
        + (f" at {hhmm(ev.time)}" if ev else "")
        + (f" by {by}" if by else "")
        + (f": {ev.message[:180]}" if ev and ev.message else ".")
    )
    out.append(
        Finding(
            C.PREEMPTED,
            statement,
            SUPPORTED,
            0.85 if ev else 0.6,
            supports=[*(cite_event(e) for e in evs[-3:]), *sched_cites],
            subject=subject,
            sources=("k8s",),
            since=ev.time if ev else None,
            # A preempted job that waits again waits for the GPUs its preemptor took.
            explains=(C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION, C.QUEUE_PRIORITY),
            facts={"by": by, "job": subject},
            next_questions=["Was the preempting queue under its quota (reclaim) or higher priority?"],
        )
    )
    return out


def _preemptor(message: str) -> str:
    """Who preempted, as the scheduler's message names it (KAI: workload ns/podgroup; Kueue: the workload UID)."""
    m = re.search(
        r"(?:preempted|evicted) by (?:higher[- ]priority )?(?:workload |pod |podgroup )?([\w./:-]+)",
        message or "",
        re.I,
    )
    if m:
        return m.group(1).rstrip(".,;")
    m = re.search(r"to accommodate an? (?:workload|pod) \(UID: ([\w-]+)", message or "", re.I)
    if m:
        return f"workload UID {m.group(1)}"
    m = re.search(r"to accommodate (?:workload |pod )?([\w./-]+)", message or "", re.I)
    return m.group(1).rstrip(".,;") if m else ""


def _preemptor_job(di: DiagnosisInput, token: str) -> EntityState | None:
    """The job a PodGroup/Workload name ("pg-<job>-<uid>", "job-<job>-<hash>") belongs to."""
    name = token.rsplit("/", 1)[-1]
    best = None
    for j in di.jobs:
        if name == j.name or f"-{j.name}-" in f"-{name}-":
            if best is None or len(j.name) > len(best.name):
                best = j
    return best

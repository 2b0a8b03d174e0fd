"""GPU units held at t, as the scheduler charges them: a 0.5 share counts 0.5, a MIG instance its "<n>g".

Computed from the pods bound at t, not read from a status counter.
"""

from __future__ import annotations

from incidents.diagnosis.types import DiagnosisInput, EntityState

ACTIVE_POD_PHASES = ("Running", "Pending")


def units_held(di: DiagnosisInput, project: str, queue: str = "", *, preemptible: bool = False) -> float:
    """GPU units (fractions and MIG counted as the scheduler charges them) held at t by the project's bound pods
    (``preemptible``: those of its preemptible jobs only)."""
    total = 0.0
    for p in di.pods:
        if not p.get("node") or p.get("phase") not in ACTIVE_POD_PHASES:
            continue
        if (project and p.get("project") == project) or (queue and p.get("queue") == queue):
            if preemptible and not pod_preemptible(di, p):
                continue
            total += pod_units(p)
    return round(total, 4)


def pod_preemptible(di: DiagnosisInput, p: EntityState) -> bool:
    """Whether a pod's job may be evicted: its job's ``preemptible`` when recorded, else its priority class (KAI
    preempts train work, not inference or build)."""
    job = di.find("job", p.get("job") or "", p.namespace) if p.get("job") else None
    if job is not None and job.get("preemptible") is not None:
        return bool(job.get("preemptible"))
    return (p.get("priority_class") or "train") not in ("inference", "build")


def project_allocated(di: DiagnosisInput, project: str, queue: str) -> float:
    """GPU units held at t by bound, unfinished pods of the project (or queue): fractions and MIG instances
    as the scheduler charges them (``gpu_units``), whole GPUs for pods recorded without it."""
    held = di.memo("gpus_held_by_project_queue", lambda: held_by_project_queue(di))
    if held is not None:  # indexed (run_checks): sum per (project, queue) once, not a fleet scan per queue
        return round(
            sum(n for (p, q), n in held.items() if (project and p == project) or (queue and q == queue)), 4
        )
    return units_held(di, project, queue)


def pod_units(p: EntityState) -> float:
    units = p.get("gpu_units")
    return float(units) if units is not None else float(p.get("gpus") or 0)


def held_by_project_queue(di: DiagnosisInput) -> dict[tuple[str, str], float]:
    """GPU units held at t per (project, queue) by bound, unfinished pods: ``project_allocated``'s index."""
    out: dict[tuple[str, str], float] = {}
    for p in di.pods:
        if not p.get("node") or p.get("phase") not in ACTIVE_POD_PHASES:
            continue
        key = (p.get("project"), p.get("queue"))
        out[key] = out.get(key, 0.0) + pod_units(p)
    return out


def job_units(job: EntityState) -> float:
    """A job's GPUs as its queue counts them: shares and MIG in units, whole GPUs for jobs recorded without."""
    units = job.get("gpu_units")
    if units is not None:
        return round(float(units), 4)
    return float(job.get("gpus_total") or job.get("gpus") or 0)

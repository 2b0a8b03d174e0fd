"""Project and queue pages: quota, limit, over-quota weight, usage at t, waiting jobs in order, policy changes."""

from __future__ import annotations

import logging
from typing import Any

from django.http import HttpResponse
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from collectors import queries
from collectors.models import Change, EntityVersion
from incidents import waiting_order
from rcaweb import kinds
from rcaweb.http import RcaRequest
from web.inventory.entity_page import entity_page_context, finish, render_page
from web.inventory.podstatus import pods_in_trouble
from web.inventory.rows import JobRow

logger = logging.getLogger(__name__)

# The kinds of these pages in the registry (rcaweb/kinds.py): their name and template.
PROJECT = kinds.get("project")
QUEUE = kinds.get("queue")
DEPARTMENT = kinds.get("department")

SHOWN_JOBS = 200  # longer lists link to the filtered job list


def _troubles(cluster: Any, t: Any, jobs: list[JobRow]) -> None:
    """Each running job's ``trouble`` ({reason: pods}): a crash-looping job reads CrashLoopBackOff, not a green
    Running (kubectl's STATUS of its pods at t, web.inventory.podstatus). One query for the listed jobs."""
    names = {j.entity.name for j in jobs}
    by_job: dict[tuple[str, str], list[Any]] = {}
    if names:
        pods = (
            EntityVersion.objects.as_of(t)
            .filter(cluster=cluster, kind="pod", job__in=names)
            .select_related("entity")
            .only("state", "job", "entity__namespace")
        )
        for p in pods:
            by_job.setdefault((p.entity.namespace, p.job), []).append(p)
    for j in jobs:
        j.trouble = pods_in_trouble(by_job.get((j.entity.namespace, j.entity.name), []))


def _split_jobs(versions: list[EntityVersion], cluster: Any, t: Any) -> dict[str, Any]:
    """Waiting jobs in the scheduling model's order (``incidents.waiting_order``: the order and the positions
    the job pages, the why-pending panel and the incidents give them), running jobs by name, and the rest."""
    jobs = [JobRow(v, queue_ref=queries.ref(v.entity.cluster, "queue", v.queue)) for v in versions]
    waiting = [j for j in jobs if waiting_order.waits(j.version)]
    pending, order_words = waiting_order.in_model_order(cluster, t, waiting)
    for pos, j in enumerate(pending, start=1):
        j.position = pos
    running = sorted(
        (j for j in jobs if j.phase == "Running"), key=lambda j: (j.entity.namespace, j.entity.name)
    )
    other = [j for j in jobs if j.phase != "Running" and not waiting_order.waits(j.version)]
    _troubles(cluster, t, running[:SHOWN_JOBS] + pending[:SHOWN_JOBS])
    return {
        "pending": pending[:SHOWN_JOBS],
        "running": running[:SHOWN_JOBS],
        "pending_count": len(pending),
        "pending_order": order_words,
        "running_count": len(running),
        "other_count": len(other),
        "pending_gpus": _units(sum(_job_units(j) for j in pending)),
        "running_gpus_requested": _units(sum(_job_units(j) for j in running)),
        "shown_limit": SHOWN_JOBS,
    }


def _job_units(j: JobRow) -> float:
    """A job's GPUs as its queue counts them (shares and MIG in units; whole GPUs for rows without units)."""
    return float(j.gpu_units) if j.gpu_units is not None else float(j.gpus or 0)


def _units(value: float) -> float | int:
    """GPUs in use as the queue counts them (a 0.5 share is 0.5): a whole number prints as one."""
    return int(value) if float(value).is_integer() else round(value, 2)


def _policy_changes(cluster: Any, related: queries.Related, t: Any, limit: int = 20) -> list[Change]:
    """The latest quota/limit/priority edits up to t, however old (a quota cut days ago still explains today)."""
    rows = list(
        Change.objects.filter(cluster=cluster, time__lte=t)
        .filter(entity_id__in=list(related))
        .exclude(field__in=("created", "deleted"))
        .select_related("entity")
        .order_by("-time", "-id")[:limit]
    )
    for ch in rows:
        if ch.entity is not None:
            ch.entity.cluster = cluster
    return rows


@require_GET
@vary_on_headers("HX-Request")
def project_detail(request: RcaRequest, cluster: str, name: str) -> HttpResponse:
    ctx = entity_page_context(request, cluster, PROJECT.name, name)
    project = ctx["entity"]
    c, t, state = project.cluster, ctx["t"], ctx["state"]
    queue_name = state.get("queue") or ""
    in_use = _units(queries.running_gpu_units(c, t, project=name))
    quota = state.get("quota_gpus")
    ctx.update(
        queue_ref=queries.ref(c, "queue", queue_name),
        department_ref=queries.ref(c, "department", state.get("department")),
        gpus_in_use=in_use,
        quota=quota,
        limit=state.get("limit_gpus"),
        over_quota=quota is not None and in_use > float(quota) + 1e-9,
        usage_pct=round(100 * in_use / quota) if quota else None,
        **_split_jobs(queries.jobs_where(c, t, project=name), c, t),
    )
    related = queries.related_entities(c, [project], [("queue", "", queue_name)])
    ctx["policy_changes"] = _policy_changes(c, related, t)
    return render_page(request, PROJECT.template, finish(request, ctx, related))


@require_GET
@vary_on_headers("HX-Request")
def queue_detail(request: RcaRequest, cluster: str, name: str) -> HttpResponse:
    ctx = entity_page_context(request, cluster, QUEUE.name, name)
    queue = ctx["entity"]
    c, t, state = queue.cluster, ctx["t"], ctx["state"]
    project_name = state.get("project") or ""
    in_use = _units(queries.running_gpu_units(c, t, queue=name))
    quota = state.get("quota_gpus")
    ctx.update(
        project_ref=queries.ref(c, "project", project_name),
        parent_ref=queries.ref(c, "queue", state.get("parent")),
        department_ref=queries.ref(c, "department", state.get("department")),
        gpus_in_use=in_use,
        quota=quota,
        limit=state.get("limit_gpus"),
        over_quota=quota is not None and in_use > float(quota) + 1e-9,
        **_split_jobs(queries.jobs_where(c, t, queue=name), c, t),
    )
    related = queries.related_entities(c, [queue], [("project", "", project_name)])
    ctx["policy_changes"] = _policy_changes(c, related, t)
    return render_page(request, QUEUE.template, finish(request, ctx, related))


@require_GET
@vary_on_headers("HX-Request")
def department_detail(request: RcaRequest, cluster: str, name: str) -> HttpResponse:
    """A department (KAI parent queue / Kueue Cohort): its quota and limit, and each project's share of it."""
    ctx = entity_page_context(request, cluster, DEPARTMENT.name, name)
    dept = ctx["entity"]
    c, t, state = dept.cluster, ctx["t"], ctx["state"]
    rows: list[dict[str, Any]] = []
    for project in state.get("projects") or []:
        pv = queries.get_entity(c.name, "project", project)
        version = pv.as_of(t) if pv else None
        pstate = (version.state if version else {}) or {}
        rows.append(
            {
                "ref": queries.ref(c, "project", project),
                "quota": pstate.get("quota_gpus"),
                "limit": pstate.get("limit_gpus"),
                "in_use": queries.running_gpu_units(c, t, project=project),
            }
        )
    in_use = round(sum(r["in_use"] for r in rows), 4)
    quota, limit = state.get("quota_gpus"), state.get("limit_gpus")
    ctx.update(
        projects=rows,
        queue_refs=[queries.ref(c, "queue", q) for q in state.get("queues") or []],
        gpus_in_use=in_use,
        quota=quota,
        limit=limit,
        at_limit=limit is not None and in_use >= limit,
        over_quota=quota is not None and in_use > quota,
    )
    related = queries.related_entities(c, [dept], [("project", "", p) for p in state.get("projects") or []])
    ctx["policy_changes"] = _policy_changes(c, related, t)
    return render_page(request, DEPARTMENT.template, finish(request, ctx, related))

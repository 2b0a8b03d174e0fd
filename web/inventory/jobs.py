"""Job page (pods, request history, scheduling condition, queue position) and its lazy why-pending panel."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from collectors import queries
from collectors.models import Entity
from incidents import waiting_order
from incidents.job_explanation import explain_job_at
from rcaweb import kinds
from rcaweb.http import RcaRequest
from web import gpu_amounts as amounts
from web.inventory.entity_page import entity_page_context, finish, not_found, render_page
from web.inventory.podstatus import pod_status, pods_in_trouble
from web.inventory.rows import PodRow
from web.inventory.sharing import PodGpu, entity_resolver, gpus_held, with_links

logger = logging.getLogger(__name__)

# The kinds of these pages in the registry (rcaweb/kinds.py): their name and template.
JOB = kinds.get("job")

REQUEST_FIELDS = ("gpus_per_pod", "pods", "gpus_total", "created")
WHY_PENDING_TEMPLATE = "incidents/_why_pending.html"
NO_WHY_PHASES = ("Running", "Succeeded")


def why_pending(entity: Entity, t: datetime) -> tuple[Any, str]:
    """The diagnosis' explanation of this job at t, and the template to show it."""
    try:
        return explain_job_at(entity, t), WHY_PENDING_TEMPLATE
    except Exception:  # a failing diagnosis must not take the job page down during an outage
        logger.exception("explain_job_at failed for %s at %s", entity, t)
        return {"error": "The diagnosis failed for this job; see the server log."}, ""


@require_GET
@vary_on_headers("HX-Request")
def job_detail(request: RcaRequest, cluster: str, namespace: str, name: str) -> HttpResponse:
    ctx = entity_page_context(request, cluster, JOB.name, name, namespace)
    job = ctx["entity"]
    c, t, version, state = job.cluster, ctx["t"], ctx["version"], ctx["state"]
    versions = queries.pods_of_job(c, namespace, name, t)
    held = gpus_held(c, versions, t, entity_resolver(c, (p.entity for p in versions)))
    pods = []
    for p in versions:
        mine = held.get(f"{namespace}/{p.entity.name}", [])
        for pg in mine:
            with_links(pg.use, request.cursor)
        pods.append(
            PodRow(
                p,
                status=pod_status(p.state or {}, p.phase),
                node_ref=queries.ref(c, "node", p.node),
                gpu_words=", ".join(pg.words for pg in mine) or _asked(p.state),
                held=mine,
            )
        )
    nodes = sorted({p.node for p in pods if p.node})
    queue_name = version.queue if version else ""
    # its place in its queue in the scheduling model's order: the position the why-pending panel and the
    # incidents give it (incidents.waiting_order)
    position = waiting_order.queue_position(c, version, t) if version is not None else None
    trouble = pods_in_trouble(pods)
    # The diagnosis explains jobs that wait or failed (a running or finished job needs no "why"). It reads
    # the whole cluster as of t, so it loads lazily (job_why) and never delays the page itself.
    # A "Running" job whose containers crash or cannot start is explained too.
    explain = version is not None and (version.phase not in NO_WHY_PHASES or bool(trouble))
    ctx.update(
        pods=pods,
        pods_running=sum(1 for p in pods if p.phase == "Running" and p.status == p.phase),
        pods_trouble=sorted(trouble.items()),
        node_refs=[queries.ref(c, "node", n) for n in nodes],
        queue_ref=queries.ref(c, "queue", queue_name),
        project_ref=queries.ref(c, "project", version.project if version else ""),
        scheduling=state.get("scheduling") or {},
        queue_position=position,
        request_words=request_words(state, [pg for p in pods for pg in p.held]),
        request_history=queries.field_history(job, REQUEST_FIELDS),
        events=queries.events_near(
            c,
            [("Job", namespace, name)] + [("Pod", namespace, p.entity.name) for p in pods],
            t,
            request.cursor.window,
        ),
        explain=explain,
    )
    related = queries.related_entities(c, [job] + [p.entity for p in pods], [("queue", "", queue_name)])
    return render_page(request, JOB.template, finish(request, ctx, related))


def _asked(state: dict[str, Any] | None) -> str:
    """A pod's share or MIG request in words ("" for whole GPUs: the number says it)."""
    return amounts.state_request_words(state) if amounts.is_fractional(state) else ""


def request_words(state: dict[str, Any], held: list[PodGpu]) -> dict[str, str]:
    """The job's request as its page writes it: {"pods", "per_pod", "total", "counted"}: "1 pod", "0.5 of an
    L40S, 22.5 GiB", "0.5 GPU"; MIG "2 × 1g.10gb", counted "2 GPUs" (as its queue counts it). A share names the
    GPU its first bound pod was given; a waiting one says "of a GPU"."""
    pods = state.get("pods")
    n = pods if isinstance(pods, int) else 1
    share = state.get("gpu_share") or {}
    mig = {p: c for p, c in (state.get("mig") or {}).items() if c}
    units = state.get("gpu_units")
    shares = [pg for pg in held if pg.use.kind == "shared"]
    per_pod = amounts.state_request_words(state)
    if share and shares:  # what a bound pod was given, on the product it was given
        mine: dict[str, Any] = next(
            (sh for sh in shares[0].gpu.state.get("shares") or [] if sh.get("pod") == shares[0].pod), {}
        )
        fraction, memory = mine.get("fraction"), mine.get("memory_mib")
        gpu_memory = memory / fraction if fraction and memory else None
        model = shares[0].gpu.state.get("model", "")
        per_pod = amounts.share_words(share.get("fraction"), share.get("memory_mib"), model, gpu_memory)
        if units is None and len(shares) == n:  # a gpu-memory share counts its part of the GPU it landed on
            units = sum(
                float(sh.get("fraction") or 0)
                for pg in shares
                for sh in pg.gpu.state.get("shares") or []
                if sh.get("pod") == pg.pod
            )
    elif mig and not state.get("gpus_per_pod") and not share:
        per_pod = amounts.mig_words(mig) if sum(mig.values()) > 1 else next(iter(mig))
    total = state.get("gpus_total") if units is None and not share else units
    counted = "?" if total is None else f"{amounts.amount(total)} GPU{'' if 0 < total <= 1 else 's'}"
    if mig and not share and not state.get("gpus_per_pod"):
        return {
            "pods": _pods_words(pods),
            "per_pod": per_pod,
            "total": amounts.mig_words({p: c * n for p, c in mig.items()}),
            "counted": counted,
        }
    return {"pods": _pods_words(pods), "per_pod": per_pod, "total": counted, "counted": ""}


def _pods_words(pods: Any) -> str:
    return f"{pods} pod{'' if pods == 1 else 's'}" if pods is not None else "? pods"


@require_GET
@vary_on_headers("HX-Request")
def job_why(request: RcaRequest, cluster: str, namespace: str, name: str) -> HttpResponse:
    """The why-pending panel of a job at t: the job page loads it lazily; without JS it is its own page."""
    t = request.cursor.t
    job, version = queries.entity_at(cluster, "job", name, namespace, t)
    if job is None:
        raise not_found(cluster, "job", name, namespace)
    explanation, template = why_pending(job, t) if version is not None else (None, "")
    ctx = {
        "entity": job,
        "cluster": job.cluster,
        "version": version,
        "t": t,
        "why_pending": explanation,
        "why_pending_template": template,
    }
    htmx = getattr(request, "htmx", None)
    if htmx and not htmx.history_restore_request:
        return render(request, "collectors/_why_pending_panel.html", ctx)
    return render(request, "collectors/job_why.html", ctx)

"""Pod page: phase, node, containers (state, last state, restarts, image, env as stored), conditions, events near t."""

from __future__ import annotations

import logging
from typing import Any

from django.http import HttpResponse
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from collectors import queries
from collectors.podstatus import pod_status
from collectors.views.common import entity_page_context, finish, render_page
from rcaweb import kinds
from rcaweb.http import RcaRequest

logger = logging.getLogger(__name__)

# The kinds of these pages in the registry (rcaweb/kinds.py): their name and template.
POD = kinds.get("pod")


def container_state_text(st: dict[str, Any] | None) -> tuple[str, str, str]:
    """(word, reason, detail) of a Kubernetes container state dict: running / waiting / terminated."""
    if not st:
        return ("", "", "")
    if "waiting" in st:
        w = st["waiting"] or {}
        return ("waiting", w.get("reason", ""), w.get("message", ""))
    if "terminated" in st:
        x = st["terminated"] or {}
        detail = f"exit code {x.get('exitCode')}" if x.get("exitCode") is not None else ""
        if x.get("finishedAt"):
            detail += f" at {x['finishedAt']}"
        return ("terminated", x.get("reason", ""), detail.strip())
    if "running" in st:
        r = st["running"] or {}
        return ("running", "", f"since {r['startedAt']}" if r.get("startedAt") else "")
    return ("", "", "")


@require_GET
@vary_on_headers("HX-Request")
def pod_detail(request: RcaRequest, cluster: str, namespace: str, name: str) -> HttpResponse:
    ctx = entity_page_context(request, cluster, POD.name, name, namespace)
    pod = ctx["entity"]
    c, t, version, state = pod.cluster, ctx["t"], ctx["version"], ctx["state"]
    containers = []
    for ct in state.get("containers") or []:
        word, reason, detail = container_state_text(ct.get("state"))
        lword, lreason, ldetail = container_state_text(ct.get("last_state"))
        containers.append(
            {
                **ct,
                "state_word": word,
                "state_reason": reason,
                "state_detail": detail,
                "last_word": lword,
                "last_reason": lreason,
                "last_detail": ldetail,
                "env_items": sorted((ct.get("env") or {}).items()),
            }
        )
    job_name = version.job if version else ""
    node_name = version.node if version else ""
    gpus = queries.gpus_of_pod(c, namespace, name, t)
    objects = [("Pod", namespace, name)]
    if job_name:
        objects.append(("Job", namespace, job_name))
    ctx.update(
        containers=containers,
        pod_status=pod_status(state, version.phase if version else ""),
        conditions=sorted((state.get("conditions") or {}).items()),
        node_ref=queries.ref(c, "node", node_name),
        job_ref=queries.ref(c, "job", job_name, namespace),
        queue_ref=queries.ref(c, "queue", version.queue if version else ""),
        project_ref=queries.ref(c, "project", version.project if version else ""),
        gpus=gpus,
        events=queries.events_near(c, objects, t, request.cursor.window),
        tolerations=state.get("tolerations") or [],
        node_selector=sorted((state.get("node_selector") or {}).items()),
    )
    related = queries.related_entities(
        c, [pod] + [g.entity for g in gpus], [("job", namespace, job_name), ("node", "", node_name)]
    )
    return render_page(request, POD.template, finish(request, ctx, related))

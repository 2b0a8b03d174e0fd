"""Request vs usage pages: ``/c/<cluster>/usage/`` (GPUs allocated but barely used) and the workload fragment
``/c/<cluster>/usage/<job|pod|project>/<ns>/<name>/`` the job, pod and project pages load.

Both read the cluster's Prometheus when asked (``collectors.usage``), for the cursor's window ``(t - w, t]``,
with a fixed number of queries; the database is asked a fixed number of times too (the cluster, the entity,
and one lookup of the pods' jobs), whatever the number of pods or of the page's rows.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.conf import settings
from django.db.models import Q
from django.db.models.fields.json import KeyTextTransform
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from collectors import usage
from collectors.mapping.kai_sharing import RESERVATION_NAMESPACE
from collectors.models import Cluster, Entity, EntityVersion
from rcaweb.cursor import Cursor
from rcaweb.http import RcaRequest
from web.console.gpu_activity import ACTIVE_SM
from web.inventory.entity_page import render_page

logger = logging.getLogger(__name__)

PAGE_SIZE = 25
KINDS = ("job", "pod", "project")


class UsagePageForm(forms.Form):
    page = forms.IntegerField(min_value=1, max_value=10_000, required=False)


def _cluster(name: str) -> Cluster:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise Http404(f"No cluster {name}")
    return cluster


def price_per_gpu_hour() -> float | None:
    return getattr(settings, "RCAWEB_GPU_HOUR_PRICE", None)


#
# The fleet: allocated but barely used
#


@dataclass
class WasteRow:
    """One workload (a job, or a pod no job owns) whose GPUs were barely used over the window."""

    namespace: str
    job: str  # "" when the pods have no job in the inventory
    project: str
    pods: list[str] = field(default_factory=list)
    gpus: int = 0  # distinct GPUs (or MIG instances) held in the window
    gpu_hours: float = 0.0
    active_hours: float = 0.0
    reservation: bool = False  # KAI's reservation pod: a shared GPU, whose sharers are on the GPU's page

    @property
    def activity(self) -> float:
        return self.active_hours / self.gpu_hours if self.gpu_hours else 0.0

    @property
    def wasted_hours(self) -> float:
        return self.gpu_hours - self.active_hours

    def cost(self) -> float | None:
        price = price_per_gpu_hour()
        return None if price is None else self.wasted_hours * price


def _in_window(cursor: Cursor) -> Any:
    """Versions valid at some moment of the window ``(t - w, t]``, t included (a sweep at t opens them at t)."""
    return EntityVersion.objects.filter(valid_from__lte=cursor.t).filter(
        Q(valid_to__isnull=True) | Q(valid_to__gt=cursor.start)
    )


def _jobs_of(
    cluster: Cluster, pods: set[tuple[str, str]], cursor: Cursor
) -> dict[tuple[str, str], tuple[str, str]]:
    """(namespace, pod) -> (job, project) from the pods' versions in the window: one query."""
    if not pods:
        return {}
    names = sorted({name for _, name in pods})
    rows = (
        _in_window(cursor)
        .filter(cluster=cluster, kind="pod", entity__name__in=names)
        .values_list("entity__namespace", "entity__name", "job", "project")
        .distinct()
    )
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for ns, name, job, project in rows:
        if (ns, name) in pods and (job or (ns, name) not in out):
            out[(ns, name)] = (job, project)
    return out


def idle_holdings(read: usage.FleetRead) -> list[usage.Holding]:
    return [h for h in read.holdings if h.activity < ACTIVE_SM]


def waste_rows(read: usage.FleetRead, jobs: dict[tuple[str, str], tuple[str, str]]) -> list[WasteRow]:
    """The workloads whose GPUs' mean activity stayed below ACTIVE_SM, most GPU-hours wasted first."""
    idle = idle_holdings(read)
    rows: dict[tuple[str, str], WasteRow] = {}
    gpus: dict[tuple[str, str], set[str]] = {}
    for h in idle:
        job, project = jobs.get((h.namespace, h.pod), ("", ""))
        key = (h.namespace, job or f"pod:{h.pod}")
        row = rows.get(key)
        if row is None:
            row = rows[key] = WasteRow(
                h.namespace, job, project, reservation=h.namespace == RESERVATION_NAMESPACE
            )
            gpus[key] = set()
        row.pods.append(h.pod)
        row.gpu_hours += h.gpu_hours
        row.active_hours += h.active_hours
        gpus[key] |= h.gpus
    for key, row in rows.items():
        row.gpus = len(gpus[key])
        row.pods.sort()
    return sorted(rows.values(), key=lambda r: (-r.wasted_hours, r.namespace, r.job, r.pods[0]))


@dataclass
class OverRow:
    """A workload (a job, or a pod no job owns) that ran in the window, its CPU and memory asked and used."""

    namespace: str
    job: str
    project: str
    pods: list[str] = field(default_factory=list)
    cpu_requested: float = 0.0
    cpu_used: float = 0.0
    memory_requested: float = 0.0
    memory_used: float = 0.0

    @property
    def unused_cores(self) -> float:
        return max(0.0, self.cpu_requested - self.cpu_used)

    @property
    def cpu_ratio(self) -> float | None:
        return self.cpu_used / self.cpu_requested if self.cpu_requested else None

    @property
    def memory_ratio(self) -> float | None:
        return self.memory_used / self.memory_requested if self.memory_requested else None

    @property
    def memory_words(self) -> str:
        return f"{_bytes(self.memory_used)} of {_bytes(self.memory_requested)}"


def over_rows(uses: usage.PodUses, jobs: dict[tuple[str, str], tuple[str, str]]) -> list[OverRow]:
    """The workloads that ran in the window, most CPU cores requested and not used first (none that used all)."""
    rows: dict[tuple[str, str], OverRow] = {}
    for u in uses.pods:
        job, project = jobs.get((u.namespace, u.pod), ("", ""))
        key = (u.namespace, job or f"pod:{u.pod}")
        row = rows.get(key)
        if row is None:
            row = rows[key] = OverRow(u.namespace, job, project)
        row.pods.append(u.pod)
        row.cpu_requested += u.cpu_requested
        row.cpu_used += u.cpu_used
        row.memory_requested += u.memory_requested
        row.memory_used += u.memory_used
    out = [r for r in rows.values() if r.unused_cores > 0]
    for r in out:
        r.pods.sort()
    return sorted(out, key=lambda r: (-r.unused_cores, r.namespace, r.job, r.pods[0]))


def by_project(rows: list[WasteRow]) -> list[dict[str, Any]]:
    totals: dict[str, dict[str, Any]] = {}
    for r in rows:
        name = r.project or r.namespace
        t = totals.setdefault(
            name, {"project": r.project, "namespace": r.namespace, "wasted": 0.0, "workloads": 0}
        )
        t["wasted"] += r.wasted_hours
        t["workloads"] += 1
    price = price_per_gpu_hour()
    for t in totals.values():
        t["cost"] = None if price is None else t["wasted"] * price
    return sorted(totals.values(), key=lambda t: -t["wasted"])


@require_GET
@vary_on_headers("HX-Request", "HX-Target")
def usage_view(request: RcaRequest, cluster: str) -> HttpResponse:
    form = UsagePageForm(request.GET)
    if not form.is_valid():
        errors = "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items())
        return HttpResponseBadRequest(f"Bad filter: {errors}\n", content_type="text/plain; charset=utf-8")
    c = _cluster(cluster)
    cursor = request.cursor
    read = usage.read_holdings(c, cursor.t, cursor.window)
    uses = usage.read_pod_uses(c, cursor.t, cursor.window) if not read.error else usage.PodUses(pods=[])
    pods = {(h.namespace, h.pod) for h in idle_holdings(read)} | {(u.namespace, u.pod) for u in uses.pods}
    jobs = _jobs_of(c, pods, cursor)  # one query for both tables
    rows = waste_rows(read, jobs)
    over = over_rows(uses, jobs)
    pages = max(1, math.ceil(len(rows) / PAGE_SIZE))
    page = min(form.cleaned_data["page"] or 1, pages)
    shown = rows[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    price = price_per_gpu_hour()
    ctx = {
        "cluster": c,
        "read": read,
        "rows": shown,
        "total_rows": len(rows),
        "page": page,
        "pages": pages,
        "first": (page - 1) * PAGE_SIZE + 1,
        "projects": by_project(rows),
        "wasted": sum(r.wasted_hours for r in rows),
        "held": sum(h.gpu_hours for h in read.holdings),
        "price": price,
        "total_cost": None if price is None else sum(r.wasted_hours for r in rows) * price,
        "active_sm": ACTIVE_SM,
        "step_min": int(read.step.total_seconds() // 60),
        "uses": uses,
        "over": over[:PAGE_SIZE],
        "over_total": len(over),
        "unused_cores": sum(r.unused_cores for r in over),
        "unused_bytes": sum(max(0.0, r.memory_requested - r.memory_used) for r in over),
    }
    return render_page(request, "console/usage.html", ctx)


#
# A workload's requests vs usage (the job, pod and project pages' fragment)
#


def _pods_of(entity: Entity, kind: str, cursor: Cursor) -> tuple[str, list[str], int]:
    """(namespace, pod names, how many of them held a GPU share) the fragment reads: the pod itself, the job's
    pods in the window (one query each), or a project's whole namespace (no names: the selector then takes the
    namespace)."""
    shared = KeyTextTransform("gpu_share", "state")
    if kind in ("pod", "job"):
        pods = _in_window(cursor).filter(
            cluster_id=entity.cluster_id, kind="pod", entity__namespace=entity.namespace
        )
        pods = pods.filter(entity=entity) if kind == "pod" else pods.filter(job=entity.name)
        rows = (
            pods.annotate(s_share=shared)
            .values_list("entity__name", "s_share")
            .distinct()
            .order_by("entity__name")[: 2 * usage.MAX_PODS + 2]
        )
        names = sorted({name for name, _ in rows})[: usage.MAX_PODS + 1]
        sharing = {name for name, share in rows if share not in (None, "", "{}", "null")}
        if kind == "pod":
            names = [entity.name]
        return entity.namespace, names, len(sharing)
    version = (
        EntityVersion.objects.filter(entity=entity)
        .filter(Q(valid_from__lte=cursor.t))
        .order_by("-valid_from")
        .first()
    )
    state = version.state if version else {}
    return str(state.get("namespace") or entity.namespace or ""), [], 0


@require_GET
@vary_on_headers("HX-Request")
def workload_usage_view(
    request: RcaRequest, cluster: str, kind: str, namespace: str, name: str
) -> HttpResponse:
    if kind not in KINDS:
        raise Http404(f"No usage for {kind!r}: one of {', '.join(KINDS)}")
    ns = "" if kind == "project" else namespace
    entity = (
        Entity.objects.select_related("cluster")
        .filter(cluster__name=cluster, kind=kind, namespace=ns, name=name)
        .first()
    )
    if entity is None:
        raise Http404(f"No {kind} {namespace + '/' if ns else ''}{name} in cluster {cluster}")
    cursor = request.cursor
    pod_ns, pods, sharing = _pods_of(entity, kind, cursor)
    ctx: dict[str, Any] = {"entity": entity, "kind": kind, "cluster": entity.cluster, "pods": pods}
    if kind == "job" and not pods:
        ctx["nothing"] = "no pod of this job existed in the window"
    elif not pod_ns:
        ctx["nothing"] = "the project's namespace is not known at t"
    else:
        ctx["usage"] = u = usage.read_usage(entity.cluster, pod_ns, pods, cursor.t, cursor.window)
        if sharing and u.gpus is None:
            # DCGM names a shared GPU's holder as KAI's reservation pod: the sharers report nothing of their own,
            # which is no missing series. Say what is known instead: the share, and where the GPU's activity is.
            u.missing = [m for m in u.missing if usage.UTIL not in m.series]
            ctx["shared_note"] = (
                f"{sharing} of these pods held a GPU share: DCGM reports a shared GPU under KAI's reservation "
                "pod, so a sharer's own SM activity is not measured; the GPU's page shows the whole GPU's."
            )
        ctx["namespace"] = pod_ns
        ctx["lines"] = usage_lines(ctx["usage"])
    template = "console/usage_workload.html"
    if request.htmx:
        template += "#usage"
    return render(request, template, ctx)


def _cores(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} cores" if value < 10 else f"{value:.1f} cores"


def _bytes(value: float | None) -> str:
    if value is None:
        return "—"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _gpus_words(u: usage.Usage) -> str:
    """ "8 requested · 8 held": the devices (and MIG instances) the specs ask for, the GPUs DCGM saw them hold."""
    parts = []
    if u.gpus_requested is not None:
        parts.append(f"{u.gpus_requested:g} requested" if u.gpus_requested else "no device requested")
    if u.gpus is not None:
        parts.append(f"{u.gpus:g} held")
    return " · ".join(parts) or "—"


def usage_lines(u: usage.Usage) -> list[dict[str, str]]:
    """The fragment's rows: resource, requested, used (mean over the window), peak, used / requested."""
    gpu_used = (
        "—"
        if u.gpu_activity is None
        else f"{u.gpu_activity:.0%} {'SM active' if u.gpu_metric == usage.SM else 'utilised'}"
    )
    return [
        {
            "name": "CPU",
            "requested": _cores(u.cpu.requested),
            "used": _cores(u.cpu.used),
            "peak": "",
            "ratio": _pct(u.cpu.ratio),
        },
        {
            "name": "Memory",
            "requested": _bytes(u.memory.requested),
            "used": _bytes(u.memory.used),
            "peak": _bytes(u.memory.peak),
            "ratio": _pct(u.memory.ratio),
        },
        {
            "name": "GPUs",
            "requested": _gpus_words(u),
            "used": gpu_used,
            "peak": "",
            "ratio": _pct(u.gpu_activity),
        },
    ]

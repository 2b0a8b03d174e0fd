"""Node and GPU pages: readiness, cordon, taints, capacity vs allocatable, each GPU and the pod using it."""

from __future__ import annotations

import logging

from django.http import HttpResponse
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from collectors import queries
from collectors.gpu_slices import slices_at
from incidents.xid_seen import last_xids
from rcaweb import kinds
from rcaweb.http import RcaRequest
from web import gpu_amounts as amounts
from web.inventory.entity_page import entity_page_context, finish, render_page
from web.inventory.podstatus import pod_status
from web.inventory.rows import GpuUserRow, NodeGpuRow, PodRow, SliceRow
from web.inventory.sharing import (
    GpuUse,
    entity_resolver,
    gpu_use,
    implied_gpu_memory,
    shares_on_node,
    slice_users_in_window,
    with_links,
)
from web.templatetags.rcaweb import entity_link_html, list_link

logger = logging.getLogger(__name__)

# The kinds of these pages in the registry (rcaweb/kinds.py): their name and template.
NODE = kinds.get("node")
GPU = kinds.get("gpu")

# Labels an operator needs on a GPU node; the rest stays behind "all labels".
LABELS_THAT_MATTER = (
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.memory",
    "nvidia.com/mig.config",
    "run.ai/node-pool",
    "node-pool",
    "nodepool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone",
)


@require_GET
@vary_on_headers("HX-Request")
def node_detail(request: RcaRequest, cluster: str, name: str) -> HttpResponse:
    ctx = entity_page_context(request, cluster, NODE.name, name)
    node = ctx["entity"]
    c, t, state = node.cluster, ctx["t"], ctx["state"]
    gpu_versions, pod_versions = queries.gpus_and_pods_on_node(c, name, t)
    # Row links built once here (the entity_link markup, from its one helper): a node has up to
    # hundreds of pods, and a template tag per cell was most of the table's rendering time.
    cur = request.cursor
    resolve = entity_resolver(c, (p.entity for p in pod_versions))
    product, memory = state.get("gpu_product") or "", state.get("gpu_memory_mib")
    xids = last_xids(gpu_versions, t)
    live = shares_on_node(pod_versions, memory)
    ended = {
        f"{p.entity.namespace}/{p.entity.name}" for p in pod_versions if p.phase not in ("Pending", "Running")
    }
    gpus = []
    for g in gpu_versions:
        use = with_links(gpu_use(g.state or {}, resolve, memory, live, ended), cur)
        pod_ref = resolve(g.pod) if g.pod else None
        gpus.append(
            NodeGpuRow(
                g,
                link=entity_link_html(g.entity, cur),
                xid=xids.get(g.entity_id),
                pod_ref=pod_ref,
                pod_link=entity_link_html(pod_ref, cur) if pod_ref else "",
                use=use,
            )
        )
    pods = []
    for p in pod_versions:
        job_ref = queries.ref(c, "job", p.job, p.entity.namespace)
        pods.append(
            PodRow(
                p,
                status=pod_status(p.state or {}, p.phase),
                link=entity_link_html(p.entity, cur),
                job_ref=job_ref,
                job_link=entity_link_html(job_ref, cur),
                gpu_words=amounts.state_request_words(p.state, product, memory)
                if amounts.is_fractional(p.state)
                else "",
                reservation=amounts.is_reservation(p.entity.namespace, (p.state or {}).get("labels")),
            )
        )
    pods.sort(key=lambda p: p.reservation)  # KAI's reservation pods under the pods they hold GPUs for
    labels = state.get("labels") or {}
    cap_all, alloc_all = state.get("capacity") or {}, state.get("allocatable") or {}
    mig_names = sorted(k for k in {*cap_all, *alloc_all} if str(k).startswith("nvidia.com/mig-"))
    capacity = (state.get("capacity") or {}).get("nvidia.com/gpu")
    allocatable = (state.get("allocatable") or {}).get("nvidia.com/gpu")
    held = sum(p.gpus or 0 for p in pods if p.phase in ("Running", "Pending") and p.node)
    ctx.update(
        gpus=gpus,
        pods=pods,
        pods_running=sum(1 for p in pods if p.phase == "Running" and p.status == p.phase),
        gpus_held=held,
        gpus_free=None if allocatable is None else max(int(allocatable) - held, 0),
        sharing=_sharing_words([g.use for g in gpus if g.use]),
        gpu_models=sorted({str(g.state.get("model")) for g in gpu_versions if g.state.get("model")}),
        capacity=capacity,
        allocatable=allocatable,
        allocatable_short=capacity is not None
        and allocatable is not None
        and int(allocatable) < int(capacity),
        labels_that_matter=[(k, labels[k]) for k in LABELS_THAT_MATTER if k in labels],
        mig=state.get("mig"),  # mig-manager's layout and state (GPU Operator labels), None without MIG
        mig_resources=[(k, cap_all.get(k, "—"), alloc_all.get(k, "—")) for k in mig_names],
        cpu_memory=[
            (k, cap_all.get(k, "—"), alloc_all.get(k, "—")) for k in ("cpu", "memory") if k in cap_all
        ],
        all_labels=sorted(labels.items()),
        conditions=sorted((state.get("conditions") or {}).items()),
        pods_list_url=list_link(cur, kinds.JOB_LIST, c.name, **{NODE.job_filter: name}),
    )
    related = queries.related_entities(
        c, [node] + [g.entity for g in gpu_versions] + [p.entity for p in pod_versions]
    )
    return render_page(request, NODE.template, finish(request, ctx, related))


def _spans(users: list[GpuUserRow]) -> list[GpuUserRow]:
    """Consecutive versions naming the same pod as one row: a shared GPU's state changes with each share, and
    KAI's reservation pod holds it through all of them."""
    out: list[GpuUserRow] = []
    for u in users:
        last = out[-1] if out else None
        if last is not None and last.version.pod == u.version.pod and last.valid_to == u.valid_from:
            out[-1] = GpuUserRow(
                last.version, last.pod_ref, last.reservation, spanned=True, span_end=u.valid_to
            )
        else:
            out.append(u)
    return out


def _sharing_words(uses: list[GpuUse]) -> str:
    """The node's shared and MIG GPUs in one line: "2 GPUs shared by 5 pods · 3 of 16 MIG instances in use"."""
    shared = [u for u in uses if u.kind == "shared"]
    mig = [u for u in uses if u.kind == "mig"]
    parts = []
    if shared:
        n, pods = len(shared), sum(len(u.holders) for u in shared)
        parts.append(f"{n} GPU{'' if n == 1 else 's'} shared by {pods} pod{'' if pods == 1 else 's'}")
    if mig:
        used, total = sum(len(u.holders) for u in mig), sum(u.instances for u in mig)
        parts.append(
            f"{used} of {total} MIG instances in use on {len(mig)} GPU{'' if len(mig) == 1 else 's'}"
        )
    return " · ".join(parts)


@require_GET
@vary_on_headers("HX-Request")
def gpu_detail(request: RcaRequest, cluster: str, name: str) -> HttpResponse:
    ctx = entity_page_context(request, cluster, GPU.name, name)
    gpu = ctx["entity"]
    c, version, cur = gpu.cluster, ctx["version"], request.cursor
    node_name = version.node if version else ""
    users = [
        GpuUserRow(u, queries.ref(c, "pod", u.pod), amounts.is_reservation_key(u.pod))
        for u in queries.gpu_users_in_window(gpu, cur.t - cur.window, cur.t + cur.window)
    ]
    gstate = (version.state or {}) if version else {}
    slice_users = []
    if (
        gstate.get("shares")
        or gstate.get("reservation")
        or gstate.get("mig")
        or any(u.reservation for u in users)
    ):
        # DCGM names KAI's reservation pod (or one instance's pod): the pods on its slices are its users
        slice_users = slice_users_in_window(
            gpu, cur.t - cur.window, cur.t + cur.window, gstate.get("model", "")
        )
        on_slices = {str(u.pod_ref) for u in slice_users}
        users = _spans(
            [u for u in users if u.reservation or u.version.pod not in on_slices]
        )  # whole use stays
    shared = gstate.get("shares") or gstate.get("mig") or gstate.get("reservation")
    slices = []
    for sl in slices_at(gpu, ctx["t"]) if shared else []:  # a whole GPU costs no query
        ns, _, pod = sl.pod.partition("/")
        rns, _, rpod = sl.reservation.partition("/")
        slices.append(
            SliceRow(
                sl,
                pod_ref=queries.ref(c, "pod", pod, ns) if pod else None,
                reservation_ref=queries.ref(c, "pod", rpod, rns) if rpod else None,
            )
        )
    live, ended = None, set()
    if shared and node_name:  # its holders as the node page reads them, from the pods on the node at t
        node_pods = queries.pods_on_node(c, node_name, ctx["t"])
        live = None if gstate.get("mig") else shares_on_node(node_pods, implied_gpu_memory(gstate))
        ended = {
            f"{p.entity.namespace}/{p.entity.name}"
            for p in node_pods
            if p.phase not in ("Pending", "Running")
        }
    use = with_links(gpu_use(gstate, entity_resolver(c), None, live, ended), cur)
    recorded = {sl.slice.pod for sl in slices if sl.kind == "share"}
    ctx.update(
        use=use,
        # the slices are the GPU sweep's record; between sweeps the node's pods may say otherwise
        slices_behind=live is not None and recorded != {h.pod for h in use.holders},
        slices=slices,
        shared_units=round(sum(sl.fraction or 0 for sl in slices if sl.kind == "share"), 3),
        xid=last_xids([version], ctx["t"]).get(gpu.pk) if version else None,
        node_ref=queries.ref(c, "node", node_name),
        pod_ref=queries.ref(c, "pod", version.pod if version else ""),
        users=users,
        slice_users=slice_users,
        users_count=len(slice_users) + len(users),
    )
    related = queries.related_entities(c, [gpu], [("node", "", node_name)])
    return render_page(request, GPU.template, finish(request, ctx, related))

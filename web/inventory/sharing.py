"""Who holds a GPU at t, as the pages show it: the pods sharing it (each with its fraction and memory) or on its
MIG instances, and KAI's reservation pod named as such, under them, never as the user.

DCGM sees only the process holding the device, so a shared GPU's ``pod`` is KAI's reservation pod; the pods
that share it are in the GPU's ``shares`` (``collectors.mapping.gpus.gpu_shares``), its MIG instances' pods in
``mig``. The words come from ``web.gpu_amounts``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Q

from collectors import inventory, queries
from collectors.models import Cluster, Entity, EntityVersion, GpuSlice
from rcaweb.cursor import Cursor
from web import gpu_amounts as amounts
from web.templatetags.rcaweb import entity_link_html

Resolve = Callable[[str], Any]  # "ns/name" → what the page links (an Entity, a Ref, or None)


@dataclass
class Holder:
    """A pod holding (part of) a GPU: its key, what it holds in words, and its link target."""

    pod: str
    words: str = ""
    ref: Any = None
    link: str = ""  # the entity_link markup, when the view builds links once per row


@dataclass
class GpuUse:
    """What a GPU is used by at t: ``kind`` whole | shared | mig, its holders, and KAI's reservation pod."""

    kind: str = "whole"
    holders: list[Holder] = field(default_factory=list)
    reservation: Holder | None = None
    free_words: str = ""  # "0.25 of the GPU free", "2 of 4 instances in use"
    instances: int = 0  # a MIG GPU's instances, used or not

    @property
    def summary(self) -> str:
        """One line: "shared by 2 pods, 0.5 of the GPU free", "MIG, 2 of 4 instances in use"; "" when whole."""
        if self.kind == "shared":
            n = len(self.holders)
            return f"shared by {n} pod{'' if n == 1 else 's'}" + (
                f", {self.free_words}" if self.free_words else ""
            )
        if self.kind == "mig":
            return f"MIG, {self.free_words}" if self.free_words else "MIG"
        return ""


def gpu_use(
    state: dict[str, Any],
    resolve: Resolve,
    gpu_memory_mib: float | None = None,
    live: NodeShares | None = None,
    ended: frozenset[str] | set[str] = frozenset(),
) -> GpuUse:
    """The :class:`GpuUse` of one GPU state (a version's ``state``); ``resolve`` turns a pod key into a link
    target, ``gpu_memory_mib`` (the node's GPU memory) sizes a share that does not say its memory. ``live``:
    the shares the node's pods say at t (:func:`shares_on_node`), which replace the GPU state's; ``ended``:
    pods known to have ended by t (a MIG instance's last pod in DCGM's series may have)."""
    product = state.get("model") or ""
    shares = state.get("shares") or []
    instances = state.get("mig") or []
    reservation = state.get("reservation") or ""
    if live is not None and not instances:
        shares = live.shares.get(state.get("index"), [])
        reservation = live.reservations.get(str(state.get("uuid") or ""), reservation if shares else "")
    pod = state.get("pod") or ""
    if shares or reservation:
        holders = [
            Holder(
                str(sh.get("pod") or ""),
                amounts.share_words(sh.get("fraction"), sh.get("memory_mib"), product, gpu_memory_mib),
                resolve(str(sh.get("pod") or "")),
            )
            for sh in shares
        ]
        given = sum(float(sh.get("fraction") or 0) for sh in shares)
        held = reservation or (pod if amounts.is_reservation_key(pod) else "")
        return GpuUse(
            "shared",
            holders,
            Holder(held, "KAI's reservation pod", resolve(held)) if held else None,
            f"{amounts.amount(max(0.0, 1 - given))} of the GPU free",
        )
    if instances:
        # DCGM's instance series name the pod last seen on each; a pod that had ended by t holds none of them
        gone = [i for i in instances if i.get("pod") and str(i["pod"]) in ended]
        used = [i for i in instances if i.get("pod") and str(i["pod"]) not in ended]
        holders = [
            Holder(str(i["pod"]), f"{i.get('profile') or '?'} (GI {i.get('gi_id')})", resolve(str(i["pod"])))
            for i in used
        ]
        free = amounts.mig_words(Counter(str(i.get("profile") or "?") for i in instances if i not in used))
        words = f"{len(holders)} of {len(instances)} instances in use" + (f", free {free}" if free else "")
        if gone:
            words += f" ({len(gone)} still named by DCGM for a pod that had ended by t)"
        return GpuUse("mig", holders, None, words, len(instances))
    if pod and amounts.is_reservation_key(pod):  # a reservation pod without shares: KAI holds it for none yet
        return GpuUse("shared", [], Holder(pod, "KAI's reservation pod", resolve(pod)), "1 of the GPU free")
    return GpuUse("whole", [Holder(pod, "", resolve(pod))] if pod else [])


@dataclass
class NodeShares:
    """The shares a node's pods say at t: GPU index → [{pod, fraction, memory_mib}], GPU UUID → reservation pod."""

    shares: dict[Any, list[dict[str, Any]]] = field(default_factory=dict)
    reservations: dict[str, str] = field(default_factory=dict)


def shares_on_node(pods: Iterable[EntityVersion], gpu_memory_mib: float | None) -> NodeShares | None:
    """The shares on a node at t from its pods' own states: KAI writes the GPU index it chose on each shared pod
    (``runai-gpu``) and the GPU UUID on its reservation pod. A GPU's ``shares`` are recorded when DCGM is swept
    (every few minutes), its pods at their own times: between two GPU sweeps the pods are the fresher account.
    None when no pod carries the index (a scheduler that does not write it): the GPU states then stand."""
    out = NodeShares()
    said = False
    for p in pods:
        st = p.state or {}
        key = f"{p.entity.namespace}/{p.entity.name}"
        if p.phase not in ("Pending", "Running"):
            continue
        if st.get("reservation_for"):
            out.reservations[str(st["reservation_for"])] = key
        share = st.get("gpu_share") or {}
        if share.get("gpu_index") is None:
            continue
        said = True
        fraction, memory = share.get("fraction"), share.get("memory_mib")
        if fraction is None and memory and gpu_memory_mib:
            fraction = round(min(1.0, memory / gpu_memory_mib), 4)
        if memory is None and fraction is not None and gpu_memory_mib:
            memory = int(gpu_memory_mib * fraction)
        out.shares.setdefault(share["gpu_index"], []).append(
            {"pod": key, "fraction": fraction, "memory_mib": memory}
        )
    for v in out.shares.values():
        v.sort(key=lambda sh: sh["pod"])
    return out if said else None


def implied_gpu_memory(state: dict[str, Any]) -> float | None:
    """A shared GPU's memory as its recorded shares imply it (a share's memory over its fraction); None without."""
    for sh in state.get("shares") or []:
        if sh.get("fraction") and sh.get("memory_mib"):
            return round(float(sh["memory_mib"]) / float(sh["fraction"]))
    return None


@dataclass
class PodGpu:
    """What one pod holds of one GPU at t: the GPU's version, the pod's part in words, and who else is on it."""

    gpu: EntityVersion
    pod: str
    words: str
    use: GpuUse

    @property
    def label(self) -> str:
        """How the page names the GPU: "GPU 1 · l40s-01"."""
        index = self.gpu.state.get("index")
        return f"GPU {'?' if index is None else index} · {self.gpu.node}"

    @property
    def others(self) -> list[Holder]:
        """The other pods on the same GPU (its other shares), without KAI's reservation pod."""
        return [h for h in self.use.holders if h.pod != self.pod]


def gpus_held(
    cluster: Cluster, pods: Iterable[EntityVersion], t: datetime, resolve: Resolve
) -> dict[str, list[PodGpu]]:
    """ "ns/name" → the shares and MIG instances each of ``pods`` holds at t, read from the GPUs of their
    nodes and, for shares, from the pods of those nodes as the node page reads them (:func:`shares_on_node`);
    two queries, only when a pod asks a share or MIG instances and is bound. Whole GPUs are not here:
    ``queries.gpus_of_pod`` finds those by the GPU's pod."""
    wanted = {
        f"{p.entity.namespace}/{p.entity.name}": p for p in pods if p.node and amounts.is_fractional(p.state)
    }
    if not wanted:
        return {}
    nodes = sorted({p.node for p in wanted.values()})
    gpus = list(inventory.as_of(cluster, "gpu", t, node__in=nodes))
    live: dict[str, NodeShares | None] = {}
    if any((p.state or {}).get("gpu_share") for p in wanted.values()):
        on_nodes: dict[str, list[EntityVersion]] = {}
        for p in inventory.as_of(cluster, "pod", t, node__in=nodes):
            on_nodes.setdefault(p.node, []).append(p)
        for node, node_pods in on_nodes.items():
            implied = (implied_gpu_memory(g.state or {}) for g in gpus if g.node == node)
            memory = next((m for m in implied if m), None)
            live[node] = shares_on_node(node_pods, memory)
    out: dict[str, list[PodGpu]] = {}
    for g in sorted(gpus, key=lambda v: (v.node, v.state.get("index") is None, v.state.get("index") or 0)):
        use = gpu_use(g.state or {}, resolve, None, live.get(g.node))
        for h in use.holders:
            if h.pod in wanted:
                out.setdefault(h.pod, []).append(PodGpu(g, h.pod, h.words, use))
    return out


def entity_resolver(cluster: Cluster, known: Iterable[Entity] = ()) -> Resolve:
    """A resolver preferring entities the view already has (no query), else a Ref (also no query)."""
    by_key = {f"{e.namespace}/{e.name}": e for e in known}

    def resolve(pod: str) -> Any:
        if not pod:
            return None
        if pod in by_key:
            return by_key[pod]
        ns, _, name = pod.partition("/")
        return queries.ref(cluster, "pod", name, ns)

    return resolve


def with_links(use: GpuUse, cursor: Cursor) -> GpuUse:
    """``use`` with each holder's link markup built once (``entity_link_html``, keeping the cursor)."""
    for h in use.holders:
        h.link = entity_link_html(h.ref, cursor) if h.ref else ""
    if use.reservation and use.reservation.ref:  # its namespace is in the words around it ("reservation pod")
        r = use.reservation
        r.link = entity_link_html(r.ref, cursor, r.pod.partition("/")[2] or r.pod)
    return use


@dataclass
class SliceUser:
    """A pod on one of a GPU's shares or MIG instances within the window, from when to when (the GPU page)."""

    pod_ref: Any
    words: str
    valid_from: datetime
    valid_to: datetime | None


def slice_users_in_window(
    gpu: Entity, start: datetime, end: datetime, product: str = "", limit: int = 50
) -> list[SliceUser]:
    """The pods on a GPU's shares or MIG instances over [start, end), oldest first (one query on its slices):
    who used a shared or partitioned GPU around t, where its own versions name KAI's reservation pod."""
    rows = (
        GpuSlice.objects.filter(gpu=gpu, valid_from__lt=end)
        .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=start))
        .exclude(pod="")
        .order_by("valid_from", "pod")[:limit]
    )
    out = []
    for sl in rows:
        ns, _, name = sl.pod.partition("/")
        if sl.kind == "mig":
            words = f"{sl.profile or '?'} (GI {sl.gi_id})"
        else:
            words = amounts.share_words(sl.fraction, sl.memory_mib, product)
        out.append(SliceUser(queries.ref(gpu.cluster, "pod", name, ns), words, sl.valid_from, sl.valid_to))
    return out

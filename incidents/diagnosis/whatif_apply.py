"""The what-if page's edits applied to a copy of the state at t (``apply_edits``), as ``whatif_edits`` reads
them from the query string.

Pure: no database, no simulator.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from incidents.diagnosis import fit as F
from incidents.diagnosis.node_resources import nominal_gpus
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.request import job_request
from incidents.diagnosis.types import DiagnosisInput, EntityState
from incidents.diagnosis.whatif_edits import RESOURCE_KEYS, Edit, EditError
from rcaweb.mig import mig_units

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
    if e.kind in ("quota", "limit") or e.kind in RESOURCE_KEYS:
        key = RESOURCE_KEYS.get(e.kind) or ("quota_gpus" if e.kind == "quota" else "limit_gpus")
        found = False
        for items in (di.queues, di.projects, di.departments):
            for es in [x for x in items if x.name == e.name]:
                _edited(items, es, _flavors_edited({**es.state, key: e.number}, key))
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


def _flavors_edited(state: dict[str, Any], key: str) -> dict[str, Any]:
    """A Kueue ClusterQueue's flavors (``flavor_quotas``, what its admission reads: ``kueue_quota``) moved with a
    quota or limit edit of its GPU total: the quota's difference goes to its flavors in the order Kueue tries
    them (the first takes a raise; a cut empties them from the first on), the limit's room over the quota to the
    first flavor's borrowing limit. Any other state is returned as it is."""
    flavors = [dict(f) for f in state.get("flavor_quotas") or []]
    if not flavors or key not in ("quota_gpus", "limit_gpus"):
        return state
    nominal = sum(float(f.get("nominal") or 0) for f in flavors)
    if key == "quota_gpus":
        diff = float(state[key]) - nominal
        for f in flavors:
            took = max(diff, -float(f.get("nominal") or 0))
            f["nominal"] = float(f.get("nominal") or 0) + took
            diff -= took
            if abs(diff) < 1e-9:
                break
    else:
        others = sum(float(f.get("borrowing_limit") or 0) for f in flavors[1:])
        flavors[0]["borrowing_limit"] = max(float(state[key]) - nominal - others, 0.0)
    return {**state, "flavor_quotas": flavors}


def _request_state(e: Edit) -> dict[str, Any]:
    """The job's request keys as a request edit writes them (whole GPUs, a share, or one MIG instance per pod)."""
    pods = int(e.number)
    if e.profile:
        return {"pods": pods, "gpus_per_pod": 0, "gpus_total": 0, "gpu_share": None, "mig": {e.profile: 1},
                "gpu_units": pods * mig_units(e.profile)}  # fmt: skip
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
    req = job_request(di, job)
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
    gpus = nominal_gpus(di, node)
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


__all__ = ["apply_edits"]

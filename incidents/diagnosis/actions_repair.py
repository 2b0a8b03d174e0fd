"""Repairs of missing GPUs for a job that waits on them: the next step an on-call engineer takes on each node
whose GPUs are missing, checked against the state at t.

A node-level ``gpu_missing`` (the GPU or its node is the subject) takes the node out of service first
(``actions_nodes.drain``). A job-level one (the job would fit if the missing GPUs on some nodes came back) has
no faulty node of its own to drain: its action is the repair that gives the GPUs back, least disruptive first:

- the GPU still answers the driver (DCGM reports it) but the node does not advertise it: restart the device
  plugin, which evicts nothing;
- the GPU is gone from the driver too (fell off the bus): cordon (unless it is cordoned already), drain what
  still runs there, reboot, and replace the GPU (RMA) if it stays missing.

A job waiting for a node cordoned for a GPU fault (``gpu_node_unavailable``) gets the same repair, ending with
the uncordon: the node-level builder stays silent there, since the fault's own actions come first, but a job's
incident has no fault finding of its own.

Every number comes from the state: the GPUs the node advertises and has, the pods a drain evicts, the pool's
GPUs that take new pods, and who starts once the GPUs are back (the model's pass in queue order,
``fault_pass.starts_with_room``). Nothing already done is proposed again: no cordon of a cordoned node, no drain
of an empty one, no repair of a node that advertises all its GPUs.
"""

from __future__ import annotations

from dataclasses import replace

from incidents.diagnosis import fit as F
from incidents.diagnosis.actions_nodes import NodeAtFault, drain, node_at_fault, node_unavailable
from incidents.diagnosis.actions_workloads import describe_pods
from incidents.diagnosis.fault_pass import starts_with_room
from incidents.diagnosis.node_resources import node_nominal_gpus
from incidents.diagnosis.types import ActionDraft, DiagnosisInput, Finding, Ref, gpus_of

NODES_REPAIRED = 3  # nodes a job-level action names (the first in the finding's order)


def gpu_missing(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    """A missing-GPU cause: the node's own steps when a node or GPU is at fault, else the repairs of the nodes
    whose missing GPUs keep the job waiting."""
    if f.facts.get("node") or (f.subject is not None and f.subject.kind == "node"):
        return drain(di, f)
    out: list[ActionDraft] = []
    for node in list(f.facts.get("nodes") or [])[:NODES_REPAIRED]:
        out.extend(repairs(di, f, node))
    return out


def gpu_node_unavailable(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    """A NotReady or cordoned node: its own steps (``actions_nodes.node_unavailable``). A node cordoned for a GPU
    fault gets none there (the fault's actions come first), but a job waiting for it has no fault finding of
    its own: its action is that node's repair, which ends with the node uncordoned."""
    drafts = node_unavailable(di, f)
    if drafts or f.subject is None or f.subject.kind != "job":
        return drafts
    out: list[ActionDraft] = []
    for node in list(f.facts.get("nodes") or [])[:NODES_REPAIRED]:
        n = di.find("node", node)
        if n is None or not n.get("unschedulable") or not n.get("ready", True):
            continue
        fixes = repairs(di, f, node)
        if not fixes:  # every GPU is there: one the device plugin withdrew for its fault is the repair
            faulty = [
                g
                for g in di.gpus_of_node(node)
                if int(g.get("xid_last") or 0) or int(g.get("ecc_dbe_total") or 0)
            ]
            if faulty:
                g = faulty[0]
                facts = {"node": node, "gpu": g.name, "index": g.get("index")}
                fixes = drain(di, replace(f, facts={**f.facts, **facts}))
        out.extend(fixes)
    return out


def repairs(di: DiagnosisInput, f: Finding, node: str) -> list[ActionDraft]:
    """The repairs that give a node its missing GPUs back, least disruptive first ([] when none is missing)."""
    n = di.find("node", node)
    if n is None:
        return []
    nominal = node_nominal_gpus(n, di.history.get(n.ref))
    present = gpus_of(n.get("capacity") or {})
    if present >= nominal:
        return []  # every GPU is back: nothing to repair
    lost = [g for g in di.gpus_of_node(node) if g.get("present") is False or g.get("phase") == "missing"]
    what = (
        ", ".join(f"GPU {g.get('index', '?')}" for g in lost)
        if lost
        else f"{nominal - present} missing GPU{'s' if nominal - present > 1 else ''}"
    )
    at = node_at_fault(di, f, node)
    # a cordoned node is uncordoned once repaired: who starts then
    lifted = frozenset({F.CORDONED}) if at.cordoned else frozenset()
    starts = starts_with_room(di, {node: nominal - present}, lifted=lifted)
    back = f"Once {node} has its {nominal} GPUs" + (" and is uncordoned" if at.cordoned else "")
    then = (
        f"{back}, the waiting jobs that would start, in queue order: {', '.join(starts)}"
        if starts
        else f"{back}, no waiting job starts on them before the jobs ahead are served"
    )
    waiting = f.subject.label if f.subject is not None and f.subject.kind == "job" else ""
    if starts and waiting and waiting not in starts:
        then += f" ({waiting} is not among them: the jobs ahead take that room first)"
    reboot = _reboot(f, at, what, nominal, present, then)
    if lost:
        return [reboot]  # gone from the driver: no plugin restart brings it back
    return [_restart_plugin(f, at, nominal, present, then), reboot]


def _restart_plugin(f: Finding, at: NodeAtFault, nominal: int, present: int, then: str) -> ActionDraft:
    node = at.node
    keep = (
        f"its {len(at.pods)} pod(s) keep their {at.gpus_held} GPUs ({describe_pods(at.pods)})"
        if at.pods
        else "nothing runs on it"
    )
    return ActionDraft(
        f.code,
        f"Restart the NVIDIA device plugin on {node} to register its {nominal} GPUs",
        "kubectl -n gpu-operator delete pod -l app=nvidia-device-plugin-daemonset "
        f"--field-selector spec.nodeName={node}",
        f"Evicts nothing: {keep}. {node} advertises {present} of its {nominal} GPUs and the driver still "
        f"reports the rest. {then}.",
        f"kubectl get node {node} -o jsonpath='{{.status.capacity.nvidia\\.com/gpu}}' shows {nominal}.",
        "Nothing to roll back (the DaemonSet recreates the pod); if the GPUs stay missing, reboot the node.",
        Ref("node", node),
    )


def _reboot(f: Finding, at: NodeAtFault, what: str, nominal: int, present: int, then: str) -> ActionDraft:
    node = at.node
    steps = [] if at.cordoned else [f"kubectl cordon {node}"]
    if at.pods:
        steps.append(f"kubectl drain {node} --ignore-daemonsets --delete-emptydir-data")
    steps.append(
        f"# then reboot {node}; on it: nvidia-smi -L"
        + (f"; once it lists {nominal} GPUs: kubectl uncordon {node}" if at.cordoned else "")
    )
    evicts = (
        f"Evicts {len(at.pods)} pod(s) holding {at.gpus_held} GPUs: {describe_pods(at.pods)}"
        if at.pods
        else "Evicts nothing: nothing runs on it"
    )
    where = "pool " + at.pool if at.pool else "the cluster"
    out_of_service = (
        f"{node} is already cordoned: its {at.advertised} advertised GPUs take no new pods"
        if at.cordoned
        else f"the cordon takes its {at.advertised} advertised GPUs out of scheduling in {where} "
        f"({at.pool_total} → {max(at.pool_total - at.advertised, 0)}) until it is back"
    )
    rollback = (
        f"If {what} does not come back, keep {node} cordoned for the RMA, as it was."
        if at.cordoned
        else f"kubectl uncordon {node} once it is back; if {what} does not come back, uncordon it with "
        f"{present} GPUs and replace the GPU (RMA) later."
    )
    return ActionDraft(
        f.code,
        f"Reboot {node} to recover {what}; replace it (RMA) if it stays missing",
        " && ".join(steps[:-1]) + ("; " if len(steps) > 1 else "") + steps[-1],
        f"{evicts}; {out_of_service}. {then}.",
        f"nvidia-smi -L on {node} lists {nominal} GPUs; kubectl shows {node} advertising {nominal} GPUs.",
        rollback,
        Ref("node", node),
    )


__all__ = ["gpu_missing", "repairs"]

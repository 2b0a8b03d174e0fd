"""Actions for a faulty node or GPU, checked against the state at t: never what is already done (a cordoned
node gets its next step), the least disruptive step first, every number read from the state; who would start
once the GPUs are back comes from the model's pass in queue order (``fault_pass.starts_with_room``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from incidents.diagnosis import capacity
from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.actions_workloads import (
    describe_pods,
    pods_on,
)
from incidents.diagnosis.fault_pass import starts_with_room
from incidents.diagnosis.node_resources import node_nominal_gpus
from incidents.diagnosis.types import ActionDraft, DiagnosisInput, EntityState, Finding, Ref, gpus_of


def pending_that_start_after(di: DiagnosisInput, gained: dict[str, int]) -> list[str]:
    """Pending jobs that would start, in queue order, if ``gained`` GPUs (per node) became allocatable."""
    return starts_with_room(di, gained)


@dataclass
class NodeAtFault:
    """What a faulty node or GPU's actions read of the state at t, once: every number of their impacts."""

    node: str
    state: EntityState | None
    pods: list[EntityState]  # bound to the node
    on_gpu: list[EntityState]  # of those, the ones on the faulty GPU itself
    killed: list[str]  # pods the GPU held when it failed that are gone since
    advertised: int  # GPUs the node offers the scheduler now (the model's reading: none while NotReady)
    cordoned: bool
    pool: str
    pool_total: int  # GPUs offered by the pool's nodes that take new pods
    gpu: str | None
    idx: Any
    withdrawn: bool  # the faulty GPU is withdrawn already and holds no pod

    @property
    def gpus_held(self) -> int:
        return sum(int(p.get("gpus") or 0) for p in self.pods)

    @property
    def ended(self) -> str:
        if not self.killed:
            return ""
        return f"The fault already ended {', '.join(self.killed)}, which held the GPU when it failed. "


def node_at_fault(di: DiagnosisInput, f: Finding, node: str) -> NodeAtFault:
    pods = pods_on(di, node)
    n = di.find("node", node)
    state = n.state if n is not None else None
    held = _held_at_fault(di, f.facts.get("gpu"), f.since)
    bound = {f"{x.namespace}/{x.name}" for x in pods}
    pool = (n.get("nodepool") if n else "") or ""
    gpu = f.facts.get("gpu")
    on_gpu = [
        p
        for p in pods
        if gpu and any(g.name == gpu and g.get("pod") == f"{p.namespace}/{p.name}" for g in di.gpus)
    ]
    # what the node advertises now (the kubelet already withdrew a GPU that fell off the bus)
    advertised = capacity.offered_gpus(state)
    return NodeAtFault(
        node=node,
        state=n,
        pods=pods,
        on_gpu=on_gpu,
        killed=[p for p in held if p not in bound],
        advertised=advertised,
        cordoned=bool(n.get("unschedulable")) if n else False,
        pool=pool,
        pool_total=sum(
            capacity.offered_gpus(x.state)
            for x in di.nodes
            if (x.get("nodepool") or "") == pool and not capacity.shut(x.state)
        ),
        gpu=gpu,
        idx=f.facts.get("index"),
        withdrawn=bool(gpu) and n is not None and advertised < node_nominal_gpus(n) and not on_gpu,
    )


def drain(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    """Take a faulty node or GPU out of service, checked against the state at t: never what is already done
    (a cordoned node gets its next step), the least disruptive step first (a GPU the device plugin already
    withdrew needs no drain of the healthy jobs beside it), every number read from the state."""
    node = f.facts.get("node") or (f.subject.name if f.subject and f.subject.kind == "node" else None)
    if not node:
        return []
    at = node_at_fault(di, f, node)
    return [*_take_out(f, at), *_repair(f, at)]


def _take_out(f: Finding, at: NodeAtFault) -> list[ActionDraft]:
    """Keep new work off the node: a cordon that evicts nothing while the faulty GPU holds no pod, else cordon
    and drain; on a node cordoned already, a drain only while pods still hold the faulty hardware."""
    node, pods, gpus_held = at.node, at.pods, at.gpus_held
    if not at.cordoned:
        where = "pool " + at.pool if at.pool else "the cluster"
        removes = (
            f"Removes its {at.advertised} advertised GPUs from scheduling in {where} ({at.pool_total} → "
            f"{max(at.pool_total - at.advertised, 0)}) until it is back."
        )
        if at.withdrawn or not pods:
            # The faulty GPU holds nothing and is already withdrawn: keep new work off, let the jobs finish.
            return [
                ActionDraft(
                    f.code,
                    f"Cordon {node}; let its {len(pods)} running pod(s) finish" if pods else f"Cordon {node}",
                    f"kubectl cordon {node}",
                    "Evicts nothing"
                    + (
                        f": {len(pods)} pod(s) holding {gpus_held} healthy GPUs keep running ({describe_pods(pods)}); "
                        "the faulty GPU is already withdrawn and holds none of them"
                        if pods
                        else ""
                    )
                    + f". {at.ended}{removes}",
                    f"kubectl get node {node} shows SchedulingDisabled; no new pod is bound to it.",
                    f"kubectl uncordon {node}",
                    Ref("node", node),
                )
            ]
        return [
            ActionDraft(
                f.code,
                f"Cordon and drain {node}",
                f"kubectl cordon {node} && kubectl drain {node} --ignore-daemonsets --delete-emptydir-data",
                f"Evicts {len(pods)} pod(s) holding {gpus_held} GPUs: {describe_pods(pods)}. {at.ended}{removes}",
                f"kubectl get node {node} shows SchedulingDisabled; no pods but DaemonSets remain on it; the "
                "evicted jobs are Running elsewhere or queued.",
                f"kubectl uncordon {node} (after the GPU was reset/serviced and `nvidia-smi -q` shows it healthy).",
                Ref("node", node),
            )
        ]
    if at.on_gpu or (pods and not at.gpu):
        victims = at.on_gpu or pods
        return [
            ActionDraft(
                f.code,
                f"Drain {node} (already cordoned)",
                f"kubectl drain {node} --ignore-daemonsets --delete-emptydir-data",
                f"Evicts {len(pods)} pod(s) holding {gpus_held} GPUs: {describe_pods(pods)}; "
                f"{len(victims)} of them on the faulty hardware. {at.ended}The node is already cordoned: its GPUs "
                "take no new pods.",
                f"kubectl get pods -A --field-selector spec.nodeName={node} lists only DaemonSet pods.",
                "None: the evicted jobs are rescheduled by their controllers; uncordon the node once repaired.",
                Ref("node", node),
            )
        ]
    return []


def _repair(f: Finding, at: NodeAtFault) -> list[ActionDraft]:
    """The GPU's own repair: a reset for an Xid a reset clears, else, once the node is cordoned and the GPU holds
    nothing, a reboot and a replacement if it stays missing."""
    node, idx, pods = at.node, at.idx, at.pods
    if f.code == C.GPU_XID_FAULT and idx is not None and f.facts.get("xid") != 79:
        return [
            ActionDraft(
                f.code,
                f"Reset GPU {idx} on {node}" + (" once drained" if at.on_gpu or not at.cordoned else ""),
                f"nvidia-smi -r -i {idx}   # on {node}, with no process on the GPU",
                f"Kills whatever still runs on GPU {idx} ({describe_pods(at.on_gpu)}).",
                f"nvidia-smi -q -i {idx} shows no pending retired pages/row remaps; DCGM_FI_DEV_XID_ERRORS stays 0.",
                "None needed (a reset does not change configuration); uncordon the node when healthy.",
                Ref("node", node),
            )
        ]
    if not (at.cordoned and at.gpu and idx is not None):
        return []
    # Cordoned, nothing left on the faulty GPU: its repair is next (a GPU off the bus needs the node
    # rebooted, and replacing if it does not come back).
    rest = (
        f"{len(pods)} pod(s) on its other GPUs ({at.gpus_held} GPUs) must finish or be drained first"
        if pods
        else "nothing runs on it"
    )
    has = node_nominal_gpus(at.state) if at.state is not None else at.advertised
    return [
        ActionDraft(
            f.code,
            f"Reboot {node} to recover GPU {idx}; replace it (RMA) if it stays missing",
            f"# once {node} is empty: reboot it, then on it: nvidia-smi -q -i {idx}",
            f"The node is cordoned; {rest}. A reboot takes its {at.advertised} advertised GPUs away for its duration.",
            f"nvidia-smi lists GPU {idx} again and DCGM reports it; kubectl shows {node} advertising {has} GPUs.",
            f"kubectl uncordon {node} once healthy; if GPU {idx} does not come back, keep it cordoned for the RMA.",
            Ref("node", node),
        )
    ]


def _held_at_fault(di: DiagnosisInput, gpu: str | None, since: object) -> list[str]:
    """Pods the faulty GPU held when the fault began (``since``), or its last holder before t when the moment
    is unknown: the workload the fault hit, never one that had finished long before."""
    if not gpu:
        return []
    history = di.history.get(Ref("gpu", gpu), [])
    out: list[str] = []
    for v in history:
        pod = v.state.get("pod") or ""
        if not pod:
            continue
        if since is not None and v.valid_from is not None and isinstance(since, type(v.valid_from)):
            ended_before = v.valid_to is not None and v.valid_to < since
            if ended_before or v.valid_from > since:
                continue
        if pod not in out:
            out.append(pod)
    return out[-3:]


def xid(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    if f.facts.get("drain_node"):
        return drain(di, f)
    node = f.facts.get("node", "")
    holders = [
        p
        for p in di.pods
        if any(g.name == f.facts.get("gpu") and g.get("pod") == f"{p.namespace}/{p.name}" for g in di.gpus)
    ]
    return [
        ActionDraft(
            f.code,
            f"Restart the application on GPU {f.facts.get('index')} of {node} (Xid {f.facts.get('xid')} is "
            "application-side)",
            "kubectl delete pod " + " ".join(f"-n {p.namespace} {p.name}" for p in holders[:1]),
            f"Restarts {describe_pods(holders)}; the node stays in service. {f.facts.get('action', '')}",
            "The Xid does not recur after the restart; if it does across different applications, run DCGM diagnostics.",
            "Nothing to roll back (the job controller recreates the pod).",
            Ref("node", node) if node else None,
        )
    ]


def device_plugin(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    node = f.facts.get("node") or next(iter(f.facts.get("nodes", [])), None)
    if not node:
        return []
    pending = pending_that_start_after(di, {node: f.facts.get("capacity", 8)})
    return [
        ActionDraft(
            f.code,
            f"Restart the NVIDIA device plugin on {node}",
            f"kubectl -n gpu-operator delete pod -l app=nvidia-device-plugin-daemonset --field-selector spec.nodeName={node}",
            f"Running pods on {node} keep their GPUs ({describe_pods(pods_on(di, node))}); if the plugin comes back "
            f"healthy, pending jobs that would then fit: {', '.join(pending) or 'none'}.",
            f"kubectl get node {node} -o jsonpath='{{.status.allocatable.nvidia\\.com/gpu}}' equals its capacity.",
            "Nothing to roll back (the DaemonSet recreates the pod); if GPUs stay unhealthy, drain the node.",
            Ref("node", node),
        )
    ]


def _faulty_gpus(di: DiagnosisInput, n: EntityState) -> bool:
    """Whether a GPU of the node is gone or faulted (fell off the bus, ECC, a condemning Xid)."""
    advertised = gpus_of(n.get("capacity") or {})
    return advertised < node_nominal_gpus(n) or any(
        g.get("present") is False or int(g.get("xid_last") or 0) or int(g.get("ecc_dbe_total") or 0)
        for g in di.gpus_of_node(n.name)
    )


def node_unavailable(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    node = f.facts.get("node") or next(iter(f.facts.get("nodes", [])), None)
    if not node:
        return []
    n = di.find("node", node)
    if n is not None and n.get("unschedulable") and n.get("ready", True):
        if _faulty_gpus(di, n):
            return []  # cordoned for a GPU fault: its repair comes first (the fault's own actions)
        pending = starts_with_room(di, {node: 0}, lifted=frozenset({F.CORDONED}))
        return [
            ActionDraft(
                f.code,
                f"Uncordon {node} if its maintenance is over",
                f"kubectl uncordon {node}",
                f"Opens its {gpus_of(n.get('allocatable') or n.get('capacity') or {})} advertised GPUs to new "
                "pods; pending jobs that could land there: "
                f"{', '.join(pending) or 'see the queue'}.",
                f"kubectl get node {node} no longer shows SchedulingDisabled; pending pods bind to it.",
                f"kubectl cordon {node}",
                Ref("node", node),
            )
        ]
    pods = pods_on(di, node)
    return [
        ActionDraft(
            f.code,
            f"Investigate the kubelet on {node}, drain it if it does not recover",
            f"ssh {node} 'systemctl status kubelet; journalctl -u kubelet --since -30m'",
            f"Pods stranded on {node}: {describe_pods(pods)}.",
            f"kubectl get node {node} reports Ready=True.",
            "No change made by the investigation itself.",
            Ref("node", node),
        )
    ]

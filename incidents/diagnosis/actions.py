"""Proposed actions for the top hypotheses, with impact computed from inventory at t. Never executed by rcaweb.

Each action says what to run by hand, who else it touches (the pods, jobs,
projects and queues on the same node or sharing the same quota, as they were
at t), how to verify it worked and how to roll it back.
"""

from __future__ import annotations

import logging
import math

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.actions_workloads import (
    describe_pods,
    idle,
    image,
    over_requested,
    pods_on,
    thermal,
    workload,
)
from incidents.diagnosis.fault_pass import starts_with_room
from incidents.diagnosis.queue_order import QueueOrder
from incidents.diagnosis.quota import is_pending, job_units, project_allocated, units_held
from incidents.diagnosis.types import ActionDraft, DiagnosisInput, EntityState, Finding, Ref, gpus_of

logger = logging.getLogger(__name__)

TOP_N = 3


def propose(di: DiagnosisInput, ranked: list[Finding], top_n: int = TOP_N) -> list[ActionDraft]:
    out: list[ActionDraft] = []
    for f in [f for f in ranked if f.supported][:top_n]:
        builder = BUILDERS.get(f.code)
        if builder is None:
            continue
        try:
            drafts = builder(di, f)
        except (KeyError, TypeError, ValueError) as exc:  # a missing fact must not lose the other actions
            logger.warning("no action for %s: %s", f.code, exc)
            continue
        # Two causes about one fault (an Xid and the GPU it took away) propose the same step once.
        seen = {(a.title, a.command) for a in out}
        out.extend(a for a in drafts if (a.title, a.command) not in seen)
    return out


#
# Impact helpers
#
def _pending_that_fit_after(di: DiagnosisInput, gained: dict[str, int]) -> list[str]:
    """Pending jobs that would start, in queue order, if ``gained`` GPUs (per node) became allocatable."""
    return starts_with_room(di, gained)


#
# Builders, one per code
#
def _drain(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    """Take a faulty node or GPU out of service, checked against the state at t: never what is already done
    (a cordoned node gets its next step), the least disruptive step first (a GPU the device plugin already
    withdrew needs no drain of the healthy jobs beside it), every number read from the state."""
    node = f.facts.get("node") or (f.subject.name if f.subject and f.subject.kind == "node" else None)
    if not node:
        return []
    pods = pods_on(di, node)
    n = di.find("node", node)
    held = _held_at_fault(di, f.facts.get("gpu"), f.since)
    killed = [p for p in held if p not in {f"{x.namespace}/{x.name}" for x in pods}]
    # what the node advertises now (the kubelet already withdrew a GPU that fell off the bus)
    advertised = gpus_of(n.get("allocatable") or n.get("capacity") or {}) if n else 0
    cordoned = bool(n.get("unschedulable")) if n else False
    pool = (n.get("nodepool") if n else "") or ""
    pool_total = sum(
        gpus_of(x.get("allocatable") or x.get("capacity") or {})
        for x in di.nodes
        if (x.get("nodepool") or "") == pool and not x.get("unschedulable")
    )
    idx = f.facts.get("index")
    gpu = f.facts.get("gpu")
    # the pods still on the faulty GPU itself (a GPU-level fault) or on the node (a node-level one)
    on_gpu = [
        p
        for p in pods
        if gpu and any(g.name == gpu and g.get("pod") == f"{p.namespace}/{p.name}" for g in di.gpus)
    ]
    withdrawn = bool(gpu) and n is not None and advertised < F.node_nominal_gpus(n) and not on_gpu
    ended = (
        f"The fault already ended {', '.join(killed)}, which held the GPU when it failed. " if killed else ""
    )
    gpus_held = sum(int(p.get("gpus") or 0) for p in pods)
    where = "pool " + pool if pool else "the cluster"
    actions: list[ActionDraft] = []
    if not cordoned:
        removes = (
            f"Removes its {advertised} advertised GPUs from scheduling in {where} ({pool_total} → "
            f"{max(pool_total - advertised, 0)}) until it is back."
        )
        if withdrawn or not pods:
            # The faulty GPU holds nothing and is already withdrawn: keep new work off, let the jobs finish.
            actions.append(
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
                    + f". {ended}{removes}",
                    f"kubectl get node {node} shows SchedulingDisabled; no new pod is bound to it.",
                    f"kubectl uncordon {node}",
                    Ref("node", node),
                )
            )
        else:
            actions.append(
                ActionDraft(
                    f.code,
                    f"Cordon and drain {node}",
                    f"kubectl cordon {node} && kubectl drain {node} --ignore-daemonsets --delete-emptydir-data",
                    f"Evicts {len(pods)} pod(s) holding {gpus_held} GPUs: {describe_pods(pods)}. {ended}{removes}",
                    f"kubectl get node {node} shows SchedulingDisabled; no pods but DaemonSets remain on it; the "
                    "evicted jobs are Running elsewhere or queued.",
                    f"kubectl uncordon {node} (after the GPU was reset/serviced and `nvidia-smi -q` shows it healthy).",
                    Ref("node", node),
                )
            )
    elif on_gpu or (pods and not gpu):
        victims = on_gpu or pods
        actions.append(
            ActionDraft(
                f.code,
                f"Drain {node} (already cordoned)",
                f"kubectl drain {node} --ignore-daemonsets --delete-emptydir-data",
                f"Evicts {len(pods)} pod(s) holding {gpus_held} GPUs: {describe_pods(pods)}; "
                f"{len(victims)} of them on the faulty hardware. {ended}The node is already cordoned: its GPUs "
                "take no new pods.",
                f"kubectl get pods -A --field-selector spec.nodeName={node} lists only DaemonSet pods.",
                "None: the evicted jobs are rescheduled by their controllers; uncordon the node once repaired.",
                Ref("node", node),
            )
        )
    if f.code == C.GPU_XID_FAULT and idx is not None and f.facts.get("xid") != 79:
        actions.append(
            ActionDraft(
                f.code,
                f"Reset GPU {idx} on {node}" + (" once drained" if on_gpu or not cordoned else ""),
                f"nvidia-smi -r -i {idx}   # on {node}, with no process on the GPU",
                f"Kills whatever still runs on GPU {idx} ({describe_pods(on_gpu)}).",
                f"nvidia-smi -q -i {idx} shows no pending retired pages/row remaps; DCGM_FI_DEV_XID_ERRORS stays 0.",
                "None needed (a reset does not change configuration); uncordon the node when healthy.",
                Ref("node", node),
            )
        )
    elif cordoned and gpu and idx is not None:
        # Cordoned, nothing left on the faulty GPU: its repair is next (a GPU off the bus needs the node
        # rebooted, and replacing if it does not come back).
        rest = (
            f"{len(pods)} pod(s) on its other GPUs ({gpus_held} GPUs) must finish or be drained first"
            if pods
            else "nothing runs on it"
        )
        actions.append(
            ActionDraft(
                f.code,
                f"Reboot {node} to recover GPU {idx}; replace it (RMA) if it stays missing",
                f"# once {node} is empty: reboot it, then on it: nvidia-smi -q -i {idx}",
                f"The node is cordoned; {rest}. A reboot takes its {advertised} advertised GPUs away for its duration.",
                f"nvidia-smi lists GPU {idx} again and DCGM reports it; kubectl shows {node} advertising "
                f"{F.node_nominal_gpus(n) if n else advertised} GPUs.",
                f"kubectl uncordon {node} once healthy; if GPU {idx} does not come back, keep it cordoned for the RMA.",
                Ref("node", node),
            )
        )
    return actions


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


def _xid(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    if f.facts.get("drain_node"):
        return _drain(di, f)
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


def _device_plugin(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    node = f.facts.get("node") or next(iter(f.facts.get("nodes", [])), None)
    if not node:
        return []
    pending = _pending_that_fit_after(di, {node: f.facts.get("capacity", 8)})
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
    return advertised < F.node_nominal_gpus(n) or any(
        g.get("present") is False or int(g.get("xid_last") or 0) or int(g.get("ecc_dbe_total") or 0)
        for g in di.gpus_of_node(n.name)
    )


def _node_unavailable(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
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


def _quota(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    proj, queue = f.facts["project"], f.facts.get("queue") or f.facts["project"]
    quota, limit, alloc, need = (
        f.facts.get("quota"),
        f.facts.get("limit"),
        f.facts["allocated"],
        f.facts["requested"],
    )
    new_quota, new_limit, title = _smallest_quota_edit(f, proj, alloc + need)
    total = sum(F.node_nominal_gpus(n) for n in di.nodes)
    deserved = _g(
        sum(float(q.get("quota_gpus") or 0) for q in di.queues if q.name != queue) + float(new_quota or 0)
    )
    over = [
        f"{q.name} ({_g(project_allocated(di, q.get('project') or q.name, q.name))} of {_g(q.get('quota_gpus'))})"
        for q in di.queues
        if q.name != queue
        and project_allocated(di, q.get("project") or q.name, q.name) > float(q.get("quota_gpus") or 0) + 1e-9
    ]
    quota = _g(quota) if quota is not None else None
    limit = _g(limit) if limit is not None else None
    res = {
        "quota": _g(new_quota) if new_quota is not None else -1,
        "limit": _g(new_limit) if new_limit is not None else -1,
    }
    cmd = (
        f"kubectl patch queue {queue} --type merge -p "
        f'\'{{"spec":{{"resources":{{"gpu":{{"quota":{res["quota"]},"limit":{res["limit"]}}}}}}}}}\''
        if di.scheduler == "kai"
        else f"kubectl edit clusterqueue {queue}   # nvidia.com/gpu: nominalQuota {quota} -> {_g(new_quota)}"
        + (
            f", limit (nominalQuota + borrowingLimit) {limit} -> {_g(new_limit)}"
            if new_limit != f.facts.get("limit")
            else ""
        )
    )
    job = f.facts.get("job")
    ceiling_after = new_limit if new_limit is not None else new_quota
    unblocked = _pending_in_project_within(
        di, proj, queue, int(ceiling_after) if ceiling_after is not None else None, job
    )
    out = [
        ActionDraft(
            f.code,
            title,
            cmd,
            f"Deserved quotas would sum to {deserved} of {total} GPUs in the cluster"
            + (
                f" (over-committed by {_g(float(deserved) - total)}: other projects may be reclaimed)"
                if float(deserved) > total
                else ""
            )
            + (
                f"; projects running over their quota that a reclaim could preempt: {', '.join(over)}"
                if over
                else "; no other project is over its quota, so nothing is preempted by this change"
            )
            + (
                f"; it would also admit {len(unblocked)} other waiting job(s) of {proj}: {', '.join(unblocked[:5])}"
                if unblocked
                else ""
            )
            + ".",
            f"{job.label if job else 'the job'} is admitted/Running; the queue's allocated GPUs rise by {_g(need)}.",
            f"Set quota back to {quota}"
            + (f" and limit to {limit}" if limit is not None else "")
            + " the same way.",
            Ref("queue", queue),
        )
    ]
    # A smaller request only helps when the room left in the quota holds at least one pod of the job:
    # "resubmit with at most 0 GPUs" helps nobody.
    ceiling = f.facts.get("limit") if f.facts.get("limit") is not None else f.facts.get("quota")
    left = max(float(ceiling or 0) - alloc, 0.0)
    per_pod = int(
        f.facts.get("per_pod") or 0
    )  # whole GPUs per pod; a share or MIG job is not resized this way
    if job is not None and per_pod >= 1 and left >= per_pod and left < need:
        pods = int(left // per_pod)
        out.append(
            ActionDraft(
                f.code,
                f"Or resubmit {job.label} with {pods} pod(s) × {per_pod} GPU ({pods * per_pod} GPUs), "
                f"which fits the {_g(left)} GPUs left in {proj}'s {'limit' if limit is not None else 'quota'}",
                f"resubmit {job.label} with {pods} pod(s) of {per_pod} GPUs",
                "Only this job is affected (smaller, longer run); no other project changes.",
                "The job is admitted with the smaller request.",
                "Resubmit with the original size.",
                job,
            )
        )
    return out


def _smallest_quota_edit(f: Finding, proj: str, after: float) -> tuple[float | None, float | None, str]:
    """The smallest quota edit that lets the job in, as (quota, limit, title); None is "no limit"/"no quota".

    In order: revert the cut that made it (every quota field changed at that moment), when that suffices;
    else, for a job that may run over its quota (preemptible), raise only the limit by what is missing; else
    raise the quota (and the limit with it) to what the job needs. The scheduler lets a preemptible job run
    over its quota up to its limit, so a limit is often all that holds it.
    """
    quota, limit = _num_or_none(f.facts.get("quota")), _num_or_none(f.facts.get("limit"))
    preemptible = bool(f.facts.get("preemptible", True))

    def lets_in(q: float | None, lim: float | None) -> bool:
        within = q is None or after <= q + 1e-9
        return within or (preemptible and (lim is None or after <= lim + 1e-9))

    cut = f.facts.get("cut") or {}
    reverted = f.facts.get("reverted") or {}
    if cut and reverted:
        q = _num_or_none(reverted["quota_gpus"]) if "quota_gpus" in reverted else quota
        lim = _num_or_none(reverted["limit_gpus"]) if "limit_gpus" in reverted else limit
        if lets_in(q, lim):
            parts = []
            if "quota_gpus" in reverted:
                parts.append(f"quota to {_g(q) if q is not None else 'none'}")
            if "limit_gpus" in reverted:
                parts.append(f"limit to {_g(lim) if lim is not None else 'none (unlimited)'}")
            return (
                q,
                lim,
                (f"Restore project {proj}'s {' and '.join(parts)} (cut by {cut.get('actor') or 'someone'})"),
            )
    if preemptible and limit is not None and after > limit + 1e-9 and lets_in(quota, _whole(after)):
        new_limit = float(_whole(after))
        return (
            quota,
            new_limit,
            (
                f"Raise project {proj}'s GPU limit from {_g(limit)} to {_g(new_limit)} "
                f"(+{_g(new_limit - limit)}; its quota stays {_g(quota) if quota is not None else 'as it is'})"
            ),
        )
    # Fractions count as the scheduler charges them; a quota is raised to whole GPUs (Kueue's nominalQuota of
    # nvidia.com/gpu is a count; a KAI quota could be fractional, but a whole one is what operators set).
    raised = float(_whole(max(after, quota or 0)))
    raised_limit = float(_whole(max(raised, limit))) if limit is not None else None
    title = f"Raise project {proj}'s GPU quota from {_g(quota)} to {_g(raised)}" + (
        f" and limit to {_g(raised_limit)}" if limit is not None and raised_limit != limit else ""
    )
    return raised, raised_limit, title


def _num_or_none(x: object) -> float | None:
    try:
        return None if x is None or float(x) < 0 else float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _pending_in_project_within(
    di: DiagnosisInput, project: str, queue: str, ceiling: int | None, job: Ref | None
) -> list[str]:
    """Other waiting jobs of the project that a quota (or limit) of ``ceiling`` would have room for, in order."""
    if ceiling is None:
        return []
    room = ceiling - project_allocated(di, project, queue)
    if job is not None:
        mine = di.find("job", job.name, job.namespace)
        room -= job_units(mine) if mine else 0
    out = []
    waiting = [
        other
        for other in di.jobs
        if is_pending(other)
        and (other.get("project") or other.get("queue")) in (project, queue)
        and not (job is not None and other.name == job.name and other.namespace == job.namespace)
    ]
    for other in QueueOrder(di, waiting):  # the scheduler's order, as every "who starts" answer reads it
        want = job_units(other)
        if 0 < want <= room + 1e-9:
            room -= want
            out.append(other.ref.label)
    return out


def _whole(x: float) -> int:
    return math.ceil(x - 1e-9)


def _g(x: object) -> str:
    """A GPU count as the pages write it: 4, 3.5, 0.25 (None stays None for the caller's wording)."""
    if x is None:
        return "None"
    try:
        return f"{round(float(x), 4):g}"  # type: ignore[arg-type]  # any value: what float() refuses is str()
    except (TypeError, ValueError):
        return str(x)


def _capacity(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    job = f.facts.get("job")
    free = int(f.facts.get("free") or 0)
    label = job.label if job else "the job"
    running = [p for p in di.pods if p.get("phase") == "Running" and p.get("project") and p.get("gpus")]
    if free <= 0:
        # Nothing is free: a smaller request would wait as well ("lower it to 0 GPUs" helps nobody).
        return [
            ActionDraft(
                f.code,
                f"Wait for capacity, or add GPU nodes to the pool {label} can use",
                "",
                f"No GPU is free on the nodes {label} can use; {len(running)} running GPU pod(s) keep their GPUs. "
                "Adding nodes affects no one.",
                "The job's pods bind (PodScheduled=True) once GPUs free up or nodes join.",
                "None: nothing is changed.",
                job,
            )
        ]
    return [
        ActionDraft(
            f.code,
            f"Lower {label}'s request to {free} GPUs or wait for capacity",
            "resubmit with fewer GPUs per pod / fewer pods",
            f"Only this job changes; {len(running)} running GPU pods keep their GPUs. Adding nodes to the pool "
            "affects no one.",
            "The job's pods bind (PodScheduled=True).",
            "Resubmit with the original size.",
            job,
        )
    ]


def _move_shares(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    """Make room for a share on the GPU that lacks least: move the fewest shares whose fractions cover the gap."""
    job = f.facts.get("job")
    share = f.facts.get("share")
    gpus = [g for g in f.facts.get("gpus") or [] if g.get("holders")]
    if not share or not gpus:
        return []
    best = None
    for g in gpus:
        gap = share - g["free"]
        movable = sorted((h for h in g["holders"] if h.get("fraction")), key=lambda h: h["fraction"])
        picked, got = [], 0.0
        for h in sorted(movable, key=lambda h: -h["fraction"]) if gap > 0 else []:
            if got >= gap - 1e-9:
                break
            picked.append(h)
            got += h["fraction"]
        if got + 1e-9 < gap:
            continue
        key = (len(picked), got)  # the fewest pods restarted, then the least GPU moved
        if best is None or key < best[2]:
            best = (g, picked, key)
    if best is None:
        return []
    g, picked, _ = best
    names = ", ".join(f"{h['pod']} ({h['fraction']:g})" for h in picked)
    return [
        ActionDraft(
            f.code,
            f"Move {len(picked)} share(s) off GPU {g['index']} on {g['node']} to make room for "
            f"{job.label if job else 'the job'}",
            " && ".join(
                f"kubectl delete pod -n {h['pod'].split('/')[0]} {h['pod'].split('/')[-1]}" for h in picked
            )
            + "   # KAI re-places them on the fullest GPU they fit",
            f"Restarts {names}; GPU {g['index']} then has {g['free'] + sum(h['fraction'] for h in picked):g} free "
            f"for a {share:g} share.",
            f"{job.label if job else 'the job'}'s pod binds with runai-gpu={g['index']} on {g['node']}.",
            "Nothing to roll back: the moved shares run again wherever KAI places them.",
            job,
        )
    ]


def _fragmentation(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    job = f.facts.get("job")
    if f.facts.get("share") or f.facts.get("share_memory_mib"):
        return _move_shares(di, f)
    largest, per_pod = f.facts.get("largest", 0), f.facts.get("per_pod", 0)
    nodes = f.facts.get("nodes", [])
    small = [p for n in nodes for p in pods_on(di, n) if int(p.get("gpus") or 0) < per_pod]
    return [
        ActionDraft(
            f.code,
            f"Resubmit {job.label if job else 'the job'} with pods of at most {largest} GPUs, or consolidate",
            f"# split into pods of {largest} GPUs; or drain the small pods from one of: {', '.join(nodes[:4])}",
            f"Consolidating moves {len(small)} small pod(s): {describe_pods(small[:8])}.",
            "The job's pods bind on one node each.",
            "Resubmit with the original shape; uncordon any node drained.",
            job,
        )
    ]


def _taint(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    job = f.facts.get("job")
    taints = f.facts.get("taints", [])
    nodes = f.facts.get("nodes", [])
    if not taints:
        return []
    t = taints[0]
    spec = f"{t['key']}={t.get('value') or ''}:{t['effect']}"
    # who starts once the taint is gone: the model's pass in queue order over the room on those nodes
    started = starts_with_room(di, dict.fromkeys(nodes[:4], 0), lifted=frozenset({F.TAINT}))
    return [
        ActionDraft(
            f.code,
            f"Remove the taint {spec} from {', '.join(nodes[:4])} if it is no longer needed",
            " && ".join(f"kubectl taint nodes {n} {spec}-" for n in nodes[:4]),
            f"Every pod may land on {len(nodes[:4])} node(s) again; pending jobs that would then start, in "
            f"queue order: {', '.join(started[:6]) or 'none at t'}.",
            "The job's pods bind to those nodes.",
            " && ".join(f"kubectl taint nodes {n} {spec}" for n in nodes[:4]),
            Ref("node", nodes[0]),
        ),
        ActionDraft(
            f.code,
            f"Or add a toleration for {spec} to {job.label if job else 'the job'}",
            f"tolerations: [{{key: {t['key']}, operator: Exists, effect: {t['effect']}}}]",
            "Only this job changes.",
            "The job's pods bind.",
            "Remove the toleration.",
            job,
        ),
    ]


def _selector(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    job = f.facts.get("job")
    return [
        ActionDraft(
            f.code,
            f"Fix {job.label if job else 'the job'}'s node selector to match existing node labels",
            "resubmit with a nodeSelector that some GPU node carries (kubectl get nodes --show-labels)",
            "Only this job changes.",
            "The job's pods bind.",
            "Resubmit with the original selector.",
            job,
        )
    ]


def _request(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    job, old = f.facts.get("job"), f.facts.get("old", {})
    return [
        ActionDraft(
            f.code,
            f"Resubmit {job.label if job else 'the job'} at its previous size "
            f"{old.get('pods')}×{old.get('gpus_per_pod')} GPUs",
            "resubmit with the previous request",
            "Only this job changes (it trains with fewer GPUs).",
            "The job is admitted and Running.",
            "Resubmit with the larger request.",
            job,
        )
    ]


def _queue(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    job = f.facts.get("job")
    ahead = [r.label for r in f.facts.get("ahead", [])]
    return [
        ActionDraft(
            f.code,
            f"Raise {job.label if job else 'the job'}'s priority, or hold the jobs ahead",
            "set a higher priorityClassName / queue priority (scheduler policy)",
            f"Delays the jobs ahead of it: {', '.join(ahead[:6])}.",
            "The job is scheduled before them.",
            "Restore the previous priority.",
            job,
        )
    ]


def _department(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    """Raise the department's limit (who can then borrow less), or have a sibling give back what it borrows."""
    job = f.facts.get("job")
    dept, limit, quota = f.facts["department"], f.facts.get("limit"), f.facts.get("quota")
    after = f.facts["allocated"] + f.facts["requested"]
    members = set(f.facts.get("projects") or {})
    over_limit = limit is not None and after > limit + 1e-9
    field_name = "limit" if over_limit else "quota"
    old = limit if over_limit else quota
    new = math.ceil(after - 1e-9)
    # Who borrows now outside the department: projects over their own quota, whose over-quota work a department
    # allowed {new - old} more GPUs would reclaim first.
    others = []
    for q in di.queues:
        name = q.get("project") or q.name
        if name in members or q.name in members or q.get("quota_gpus") is None:
            continue
        held = units_held(di, name, q.name)
        if held > float(q.get("quota_gpus") or 0) + 1e-9:
            others.append(f"{name} ({held:g} of quota {q.get('quota_gpus')})")
    if f.facts.get("scheduler", di.scheduler) == "kueue":
        cmd = f"kubectl edit cohort {dept}   # nvidia.com/gpu borrowingLimit (or nominalQuota) so that {field_name} = {new}"
    else:
        cmd = (
            f"kubectl patch queue {dept} --type merge -p "
            f'\'{{"spec":{{"resources":{{"gpu":{{"{field_name}":{new}}}}}}}}}\''
        )
    out = [
        ActionDraft(
            f.code,
            f"Raise department {dept}'s GPU {field_name} from {old:g} to {new}",
            cmd,
            (
                f"The department may then hold {new - (old or 0):g} more GPU(s) than now; what its projects take "
                "over their quotas comes from what others borrow"
                + (
                    f": projects outside {dept} running over their quota, the first a reclaim would shrink: "
                    + ", ".join(others[:6])
                    if others
                    else f": no project outside {dept} is over its quota now, so nobody is reclaimed today"
                )
                + "."
            ),
            f"{job.label if job else 'the job'} is admitted; department {dept}'s allocated GPUs rise by "
            f"{f.facts['requested']:g}.",
            f"Set the department's {field_name} back to {old:g} the same way.",
            Ref("department", dept),
        )
    ]
    for b in f.facts.get("borrowing") or []:
        give = b["allocated"] - (b["quota"] or 0)
        if give + 1e-9 < f.facts["requested"] - max((limit or after) - f.facts["allocated"], 0):
            continue
        out.append(
            ActionDraft(
                f.code,
                f"Or ask project {b['project']} to give back the {give:g} GPU(s) it uses over its quota in {dept}",
                f"# stop or shrink over-quota (preemptible) work of project {b['project']}",
                f"Project {b['project']} drops from {b['allocated']:g} to its quota {b['quota']:g} GPUs; "
                f"the department's quota and limit stay.",
                f"{job.label if job else 'the job'} is admitted within the department's limit.",
                f"Resubmit {b['project']}'s stopped work once the department has room.",
                job,
            )
        )
        break
    return out


def _mig(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    """Repartition the MIG-capable node whose repartition evicts the fewest pods (mig-manager evicts them all)."""
    job = f.facts.get("job")
    candidates = f.facts.get("candidates") or []
    if not candidates:
        return []
    c = candidates[0]
    profiles = sorted(f.facts.get("mig") or {})
    config = f"all-{profiles[0]}" if len(profiles) == 1 else "custom-" + "-".join(profiles)
    evicted = [p for p in pods_on(di, c["node"]) if p.ref in set(c["evicts"])]
    return [
        ActionDraft(
            f.code,
            f"Repartition {c['node']} to {config} (now {c['config'] or 'no mig.config'})",
            f"kubectl label node {c['node']} nvidia.com/mig.config={config} --overwrite",
            f"mig-manager evicts every pod using the node's GPUs first: {describe_pods(evicted)}; "
            f"the node advertises no GPUs until nvidia.com/mig.config.state is success again.",
            f"{c['node']} advertises nvidia.com/mig-{profiles[0]}; {job.label if job else 'the job'} binds there.",
            f"kubectl label node {c['node']} nvidia.com/mig.config={c['config'] or 'all-disabled'} --overwrite",
            Ref("node", c["node"]),
        )
    ]


def _cpu_memory(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    """Free CPU/memory on the node with the most free GPUs (the fewest pods to move), or shrink the request."""
    job = f.facts.get("job")
    per_node = [n for n in f.facts.get("per_node", []) if n.get("missing")]
    if not per_node:
        return []
    cpu_per_pod, mem_per_pod = f.facts.get("cpu_per_pod"), f.facts.get("memory_per_pod")
    out: list[ActionDraft] = []
    best = max(per_node, key=lambda n: n["free_gpus"])
    node = best["node"]
    need_cpu = max((cpu_per_pod or 0) - (best["cpu_free"] or 0), 0) if cpu_per_pod else 0
    need_mem = max((mem_per_pod or 0) - (best["memory_free"] or 0), 0) if mem_per_pod else 0
    # The pods to move: the fewest, largest CPU/memory holders without GPUs first (they need no GPU elsewhere).
    pods = sorted(
        pods_on(di, node),
        key=lambda p: (
            int(p.get("gpus") or 0) > 0,
            *[-(x or 0) for x in F.pod_requests(p.get("requests") or {})],
        ),
    )
    moved, got_cpu, got_mem = [], 0.0, 0
    for p in pods:
        if got_cpu >= need_cpu and got_mem >= need_mem:
            break
        c, m = F.pod_requests(p.get("requests") or {})
        if not c and not m:
            continue
        moved.append(p)
        got_cpu += c or 0.0
        got_mem += m or 0
    if moved and got_cpu >= need_cpu and got_mem >= need_mem:
        out.append(
            ActionDraft(
                f.code,
                f"Move {len(moved)} pod(s) off {node} to free its CPU/memory for {job.label if job else 'the job'}",
                f"kubectl cordon {node} && "
                + " && ".join(f"kubectl delete pod -n {p.namespace} {p.name}" for p in moved[:4]),
                f"Restarts {describe_pods(moved[:8])} elsewhere; frees {F.format_cpu(got_cpu)} CPU and "
                f"{F.format_memory(got_mem)} memory on {node}, which has {best['free_gpus']} GPU(s) free.",
                f"A pod of the job binds to {node}.",
                f"kubectl uncordon {node}",
                Ref("node", node),
            )
        )
    fit_cpu = max((n["cpu_free"] or 0 for n in per_node), default=0) if cpu_per_pod else None
    fit_mem = max((n["memory_free"] or 0 for n in per_node), default=0) if mem_per_pod else None
    sizes = ", ".join(
        x
        for x in (
            f"cpu ≤ {F.format_cpu(fit_cpu)}" if fit_cpu else "",
            f"memory ≤ {F.format_memory(fit_mem)}" if fit_mem else "",
        )
        if x
    )
    if sizes and (not cpu_per_pod or fit_cpu) and (not mem_per_pod or fit_mem):
        out.append(
            ActionDraft(
                f.code,
                f"Or lower {job.label if job else 'the job'}'s per-pod CPU/memory requests ({sizes})",
                f"# set resources.requests {sizes} in the job's pod template",
                "Only this job changes; it runs with less CPU/memory per pod (data loaders, host buffers).",
                "The job's pods bind to the nodes with free GPUs.",
                "Resubmit with the previous requests.",
                job,
            )
        )
    return out


BUILDERS = {
    C.GPU_XID_FAULT: _xid,
    C.GPU_ECC_ERRORS: _drain,
    C.GPU_MISSING: _drain,
    C.NVLINK_ERRORS: _drain,
    C.DEVICE_PLUGIN_UNHEALTHY: _device_plugin,
    C.GPU_NODE_UNAVAILABLE: _node_unavailable,
    C.PROJECT_QUOTA_EXHAUSTED: _quota,
    C.GPU_CAPACITY_SHORTAGE: _capacity,
    C.GPU_FRAGMENTATION: _fragmentation,
    C.CPU_MEMORY_SHORTAGE: _cpu_memory,
    C.DEPARTMENT_QUOTA_EXHAUSTED: _department,
    C.MIG_PROFILE_UNAVAILABLE: _mig,
    C.UNTOLERATED_TAINT: _taint,
    C.NODE_SELECTOR_MISMATCH: _selector,
    C.REQUEST_SIZE_CHANGED: _request,
    C.QUEUE_PRIORITY: _queue,
    C.CRASHLOOP_CONFIG_ERROR: workload,
    C.OOM_KILLED: workload,
    C.GPU_OOM: workload,
    C.PREEMPTED: workload,
    C.IMAGE_PULL_ERROR: image,
    C.IDLE_GPU_ALLOCATION: idle,
    C.OVER_REQUESTED: over_requested,
    C.GPU_THERMAL_THROTTLING: thermal,
}

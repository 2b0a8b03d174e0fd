"""Node blockers as causes of a wait: one counterfactual per family of blockers (device plugin, missing GPUs,
a NotReady or cordoned node, an untolerated taint, a selector). A blocker is the cause when removing it alone
lets the job fit, and a contributing factor when it keeps the job off nodes that would otherwise have room.

A fault that takes capacity away is weighed as a scheduling pass (``fault_pass.pass_if_fixed``): the room
its fix gives back goes to the jobs ahead first. A taint a pool has carried since long before the job waited is
the pool's purpose, told as context, never a fault.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis import fit as F
from incidents.diagnosis.citations import cite_state
from incidents.diagnosis.fault_pass import PassResult, pass_if_fixed
from incidents.diagnosis.job_fit import Causes, JobFit
from incidents.diagnosis.nodes import condemned_gpus
from incidents.diagnosis.request import Request
from incidents.diagnosis.types import REFUTED, SUPPORTED, Cite, DiagnosisInput, Finding, Ref, hhmm

# Faults that take capacity away: a cause of a job's wait only if their fix would start that job.
FAULT_CODES = frozenset({C.DEVICE_PLUGIN_UNHEALTHY, C.GPU_MISSING, C.GPU_NODE_UNAVAILABLE})


# Blockers whose removal alone lets the job fit are causes (in the order they are reported).
BLOCKER_GROUPS: tuple[tuple[str, set[str]], ...] = (
    (C.DEVICE_PLUGIN_UNHEALTHY, {F.DEVICE_PLUGIN}),
    (C.GPU_MISSING, {F.MISSING_GPU}),
    (C.GPU_NODE_UNAVAILABLE, {F.NOT_READY, F.CORDONED}),
    (C.UNTOLERATED_TAINT, {F.TAINT}),
    (C.NODE_SELECTOR_MISMATCH, {F.SELECTOR}),
)


def blocker_findings(
    di: DiagnosisInput, jf: JobFit, code: str, blockers: set[str], causes: Causes
) -> list[Finding]:
    """One family of node blockers: a cause when removing it alone lets the job fit, a contributing factor when
    it keeps the job off nodes that would otherwise have room, refuted (taints, selectors) when no node has it."""
    rows, req, ref = jf.rows, jf.req, jf.ref
    out: list[Finding] = []
    hit = [r for r in rows if set(r.blockers) & blockers]
    if code == C.DEVICE_PLUGIN_UNHEALTHY:
        hit = _plugin_rows(di, jf, hit, blockers, causes, out)
    if not hit:
        if code in (C.UNTOLERATED_TAINT, C.NODE_SELECTOR_MISMATCH) and not jf.fits_now:
            out.append(_no_such_blocker(di, jf, code))
        return out
    if jf.quota_holds:
        return out
    alone = not jf.fits_now and F.fits(rows, req, blockers)
    if alone and code == C.NODE_SELECTOR_MISMATCH and selector_satisfiable(rows, req):
        alone = False  # the nodes it selects could hold it: what keeps it off them is the cause
    if alone and code == C.UNTOLERATED_TAINT and jf.tot.eligible_nodes > 0:
        standing = standing_taints(di, hit, jf.since)
        if standing is not None:
            # A pool dedicated to other work since long before the job waited, while the job has nodes of its
            # own: the pool's purpose, not a fault. Context; never "remove the taint".
            out.append(pool_purpose_finding(di, jf, hit, standing))
            return out
    if alone and code in FAULT_CODES:
        # The room the fix gives back goes to the waiting jobs ahead first, in queue order.
        queued = pass_if_fixed(di, jf.job, req, rows, frozenset(blockers), [r.node for r in hit])
        if not queued.starts and (queued.before or queued.blocked_by is not None):
            served = served_first_finding(di, jf, code, hit, queued)
            causes.served_first.append(served.facts["words"])
            out.append(served)
            return out
    # Nodes the job could use but for this blocker: another static blocker (a taint it does not
    # tolerate, a selector it does not match) keeps it off them anyway, so this one costs it nothing.
    others = set(F.STATIC_BLOCKERS) - blockers
    if not alone:
        hit = _with_room([r for r in hit if not set(r.blockers) & others], req, blockers)
    nodes = node_list(hit)
    detail = _detail(code, hit, req) if hit else ""
    if alone:
        statement = f"{ref.label} ({jf.need}) would fit if {detail} on {nodes} were fixed; it does not fit without them."
        conf = 0.85
    elif (
        not jf.fits_now
        and hit
        and code not in (C.UNTOLERATED_TAINT, C.NODE_SELECTOR_MISMATCH)  # constraints, not faults: alone only
    ):
        statement = (
            f"{detail} on {nodes} keep(s) {ref.label} ({jf.need}) off nodes that would otherwise have room."
        )
        conf = 0.55
    else:
        return out  # the blocker exists but costs this job nothing; health checks report it on its own
    found = Finding(
        code,
        statement,
        SUPPORTED,
        conf,
        supports=[*jf.base, *jf.said_support(code)],
        subject=ref,
        sources=("k8s",),
        since=jf.since,
        explains=(C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION) if alone else (),
        facts={
            "nodes": [r.node for r in hit],
            "job": ref,
            "taints": _taints(hit),
            "blockers": sorted(blockers),
        },
        next_questions=_questions(code, hit),
    )
    causes.add(found, alone=alone)
    out.append(found)
    return out


def _plugin_rows(
    di: DiagnosisInput,
    jf: JobFit,
    hit: list[F.NodeFit],
    blockers: set[str],
    causes: Causes,
    out: list[Finding],
) -> list[F.NodeFit]:
    """The rows where the device plugin itself is at fault. A plugin that withdrew faulty GPUs is healthy: those
    nodes' GPU faults are the causes (added to ``out`` when their repair alone lets the job fit)."""
    withdrawn = [r for r in hit if len(condemned_gpus(di, r.node)) >= r.capacity - r.allocatable]
    hit = [r for r in hit if r not in withdrawn]
    if withdrawn and not hit and not jf.quota_holds and not jf.fits_now and F.fits(jf.rows, jf.req, blockers):
        fault = _withdrawn_gpu_finding(di, jf.ref, jf.need, jf.base, withdrawn, jf.since)
        causes.add(fault, alone=True)
        out.append(fault)
    return hit


def _no_such_blocker(di: DiagnosisInput, jf: JobFit, code: str) -> Finding:
    return Finding(
        code,
        f"No GPU node blocks {jf.ref.label} by {_blocker_words(code)}: {len(jf.rows)} node(s) checked at "
        f"{hhmm(di.t)}.",
        REFUTED,
        0.8,
        refutes=jf.base,
        subject=jf.ref,
        sources=("k8s",),
        why=f"the fit table at {hhmm(di.t)} shows no node with this blocker",
    )


def served_first_finding(
    di: DiagnosisInput, jf: JobFit, code: str, hit: list[F.NodeFit], queued: PassResult
) -> Finding:
    """The fault hides room the job could use, but its fix would start the jobs ahead first, or its StrictFIFO
    queue's head would still hold it: not its cause."""
    ref, req = jf.ref, jf.req
    nodes = node_list(hit)
    detail = _detail(code, hit, req)
    head = queued.blocked_by
    if head is not None:
        words = (
            f"fixing {detail} on {nodes} would not start it: its queue {head.queue} is StrictFIFO and its head "
            f"{head.job.ref.label} would still not be admitted ({queued.blocked_why}), which holds every job "
            "behind it"
        )
    else:
        first = queued.before[0]
        more = f" and {len(queued.before) - 1} more job(s)" if len(queued.before) > 1 else ""
        where = ", ".join(sorted(first.nodes))
        words = (
            f"fixing {detail} on {nodes} would start {first.label} first ({first.job.why}, on {where}){more}; "
            f"{ref.label} is {ordinal(queued.position)} in line for that room"
        )
    ahead = [*([head.job.ref] if head is not None else []), *(s.job.job.ref for s in queued.before)]
    return Finding(
        code,
        f"{detail} on {nodes} hide(s) room {ref.label} ({jf.need}) could use, but {words}, so it is not what "
        f"keeps {ref.label} waiting.",
        REFUTED,
        0.7,
        refutes=jf.base,
        subject=ref,
        sources=("k8s",),
        why="in queue order, the room the fix gives back goes to the jobs ahead"
        if head is None
        else "a StrictFIFO queue's head that cannot be admitted holds the jobs behind it",
        facts={
            "nodes": [r.node for r in hit],
            "job": ref,
            "words": words,
            "position": queued.position,
            "served_first": ahead,
        },
    )


# A taint that was there this long before a job began to wait is the pool's standing purpose, not news.
STANDING = timedelta(hours=1)


def standing_taints(di: DiagnosisInput, hit: list[F.NodeFit], since: Any) -> datetime | None:
    """When the untolerated taints on ``hit`` were last put in place (the latest node's), if every one has been
    there since at least ``STANDING`` before the job began to wait; None when one is recent (a cause)."""
    began = since if isinstance(since, datetime) else di.t
    latest: datetime | None = None
    for row in hit:
        for taint in row.untolerated:
            placed = taint_since(di, row.node, taint)
            if placed is None or placed > began - STANDING:
                return None
            latest = placed if latest is None or placed > latest else latest
    return latest


def taint_since(di: DiagnosisInput, node: str, taint: dict[str, Any]) -> datetime | None:
    """The start of the node's latest unbroken run of versions carrying ``taint`` (the oldest version loaded, if
    it carried it already: "at least since"); None when the node's history is not loaded."""
    history = di.history.get(Ref("node", node)) or []
    if not history:
        return None
    key = (taint.get("key"), taint.get("value") or "", taint.get("effect"))
    placed: datetime | None = None
    for version in reversed(history):
        carried = {(t.get("key"), t.get("value") or "", t.get("effect")) for t in version.get("taints") or []}
        if key not in carried:
            break
        placed = version.valid_from
    return placed


def pool_purpose_finding(di: DiagnosisInput, jf: JobFit, hit: list[F.NodeFit], placed: datetime) -> Finding:
    """Nodes kept for other work by a standing taint: context for the job's wait, never its cause."""
    ref = jf.ref
    pools = sorted({r.pool for r in hit if r.pool})
    nodes = node_list(hit)
    taints = ", ".join(f"{t['key']}={t.get('value') or ''}:{t['effect']}" for t in _taints(hit))
    what = f"Pool {', '.join(pools)}" if pools else nodes
    return Finding(
        C.UNTOLERATED_TAINT,
        f"{what} is dedicated to other work (taint {taints} on {nodes}, in place since {hhmm(placed)} or "
        f"earlier, before {ref.label} waited): a standing purpose, not a fault. {ref.label} waits for the "
        f"{jf.tot.eligible_nodes} node(s) it may use.",
        REFUTED,
        0.75,
        refutes=jf.base,
        subject=ref,
        sources=("k8s",),
        why="the taint was in place long before the job waited, and the job has nodes of its own",
        facts={"nodes": [r.node for r in hit], "job": ref, "taints": _taints(hit), "standing_since": placed},
    )


def node_list(rows: list[F.NodeFit], shown: int = 6) -> str:
    """ "h100-01, h100-02 and 3 more": the first ``shown`` nodes of the rows, then how many more."""
    more = f" and {len(rows) - shown} more" if len(rows) > shown else ""
    return ", ".join(r.node for r in rows[:shown]) + more


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _withdrawn_gpu_finding(
    di: DiagnosisInput, ref: Any, need: str, base: list[Cite], rows: list[F.NodeFit], since: Any
) -> Finding:
    """The job would fit but for GPUs the device plugin rightly withdrew (their own fault): that fault is why."""
    faults = [(r.node, g, why) for r in rows for g, why in condemned_gpus(di, r.node)]
    code = C.GPU_ECC_ERRORS if any("ECC" in why for _, _, why in faults) else C.GPU_XID_FAULT
    words = ", ".join(f"GPU {g.get('index', '?')} on {node} ({why})" for node, g, why in faults[:4])
    node, gpu, _ = faults[0]
    return Finding(
        code,
        f"{ref.label} ({need}) would fit if {words} were repaired or replaced: the device plugin withdrew "
        "it, and without it the nodes are one GPU short.",
        SUPPORTED,
        0.85,
        supports=[*base, *[cite_state(g, di.t) for _, g, _ in faults[:2]]],
        subject=ref,
        sources=("k8s", "prometheus"),
        since=since,
        explains=(C.GPU_CAPACITY_SHORTAGE, C.GPU_FRAGMENTATION, C.DEVICE_PLUGIN_UNHEALTHY),
        facts={
            "nodes": [r.node for r in rows],
            "job": ref,
            "node": node,
            "gpu": gpu.name,
            "index": gpu.get("index"),
        },
        next_questions=[f"Can GPU {gpu.get('index', '?')} on {node} be reset, or must it be replaced (RMA)?"],
    )


def selector_satisfiable(rows: list[F.NodeFit], req: Request) -> bool:
    """Whether the nodes the job's selector (and tolerations) admit could hold all its pods, empty and healthy.

    Then the selector does not mismatch the cluster: a 2 x 8 H100 gang whose H100 nodes are busy or faulty
    waits for them, and "it would fit on the A100s without its selector" is not why it waits.
    """
    per_pod = max(req.gpus_per_pod, 1)
    slots = sum(
        max(r.nominal, r.capacity) // per_pod
        for r in rows
        if F.SELECTOR not in r.blockers and F.TAINT not in r.blockers
    )
    return slots >= req.pods


def _with_room(hit: list[F.NodeFit], req: Request, blockers: set[str]) -> list[F.NodeFit]:
    """The rows that would take a pod of the job but for these blockers, by the model's fit: enough GPUs once
    they are lifted, and free CPU, memory and MIG instances of the profile it asks (a node without the MIG
    profile, or with the pod's CPU taken, is no room for it whatever its state)."""
    return [r for r in hit if r.free_if(blockers) >= max(req.gpus_per_pod, 1) and r.resource_pods() != 0]


def _blocker_words(code: str) -> str:
    return {C.UNTOLERATED_TAINT: "an untolerated taint", C.NODE_SELECTOR_MISMATCH: "a selector mismatch"}.get(
        code, code
    )


def _taints(hit: list[F.NodeFit]) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    for r in hit:
        for t in r.untolerated:
            if t not in seen:
                seen.append(t)
    return seen


def _detail(code: str, hit: list[F.NodeFit], req: Request) -> str:
    if code == C.UNTOLERATED_TAINT:
        taints = ", ".join(f"{t['key']}={t.get('value') or ''}:{t['effect']}" for t in _taints(hit))
        return f"the taint {taints} the job does not tolerate"
    if code == C.NODE_SELECTOR_MISMATCH:
        return (
            "the job's node selector ("
            + "; ".join(sorted({m for r in hit for m in r.selector_mismatch}))
            + ")"
        )
    if code == C.DEVICE_PLUGIN_UNHEALTHY:
        return "the device plugin advertising " + ", ".join(
            f"{r.allocatable} of {r.capacity} GPUs" for r in hit[:3]
        )
    if code == C.GPU_MISSING:
        return "missing GPUs (" + ", ".join(f"{r.capacity} of {r.nominal} present" for r in hit[:3]) + ")"
    states = sorted({("NotReady" if F.NOT_READY in r.blockers else "cordoned") for r in hit})
    return "node(s) " + "/".join(states)


def _questions(code: str, hit: list[F.NodeFit]) -> list[str]:
    node = hit[0].node
    return {
        C.UNTOLERATED_TAINT: [f"Who added the taint on {node}, and is it still needed?"],
        C.NODE_SELECTOR_MISMATCH: [
            "Does any node carry the label the job selects, or was the selector mistyped?"
        ],
        C.DEVICE_PLUGIN_UNHEALTHY: [
            f"Is the nvidia-device-plugin pod on {node} running, and what do its logs say?"
        ],
        C.GPU_MISSING: [f"Did {node} log an Xid 79 (GPU fell off the bus) before the GPU vanished?"],
        C.GPU_NODE_UNAVAILABLE: [f"Why is {node} NotReady or cordoned, and when will it be back?"],
    }.get(code, [])

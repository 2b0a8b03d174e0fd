"""Actions for where a job's pods could go: capacity, fragmentation, shares, taints, selectors, a request that
grew, queue order, MIG layouts, CPU and memory."""

from __future__ import annotations

from incidents.diagnosis import fit as F
from incidents.diagnosis.actions_workloads import (
    describe_pods,
    pods_on,
)
from incidents.diagnosis.fault_pass import starts_with_room
from incidents.diagnosis.quantities import format_cpu, format_memory
from incidents.diagnosis.request import pod_requests
from incidents.diagnosis.types import ActionDraft, DiagnosisInput, Finding, Ref


def capacity(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
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
    needed = int(f.facts.get("needed") or 0)
    lower = f"lower {label}'s request{f' from {needed}' if needed > free else ''} to {free} GPU{'s' if free != 1 else ''}"
    # A request cut to less than half is a different job: waiting comes first then.
    title = f"Wait for capacity, or {lower}" if free * 2 < needed else f"{lower[0].upper()}{lower[1:]}, or wait for capacity"
    return [
        ActionDraft(
            f.code,
            title,
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


def fragmentation(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
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


def taint(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
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


def selector(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
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


def request_size(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
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


def queue_order_action(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
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


def mig(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
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


def cpu_memory(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
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
            *[-(x or 0) for x in pod_requests(p.get("requests") or {})],
        ),
    )
    moved, got_cpu, got_mem = [], 0.0, 0
    for p in pods:
        if got_cpu >= need_cpu and got_mem >= need_mem:
            break
        c, m = pod_requests(p.get("requests") or {})
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
                f"Restarts {describe_pods(moved[:8])} elsewhere; frees {format_cpu(got_cpu)} CPU and "
                f"{format_memory(got_mem)} memory on {node}, which has {best['free_gpus']} GPU(s) free.",
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
            f"cpu ≤ {format_cpu(fit_cpu)}" if fit_cpu else "",
            f"memory ≤ {format_memory(fit_mem)}" if fit_mem else "",
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

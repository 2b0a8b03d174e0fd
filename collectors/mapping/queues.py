"""Scheduler policy objects → queue and project states. KAI Scheduler: a ``Queue`` per project (leaf) under
parent queues. Kueue: a ``ClusterQueue`` per project with ``LocalQueue``s pointing at it."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from collectors.mapping.metadata import meta, queue_label
from collectors.mapping.quantities import GPU, int_quantity, limit_or_none
from collectors.mapping.transitions import latest_transition
from collectors.mapping.writers import actor
from collectors.observed import Observed


def _queue_and_project(
    name: str,
    *,
    project: str,
    namespace: str,
    quota: int | None,
    limit: int | None,
    weight: Any,
    priority: Any,
    cohort: str | None,
    parent: str | None,
    scheduler: str,
    flavors: list[str],
    uid: str,
    who: str,
    cpu_memory: dict[str, Any] | None = None,
) -> list[Observed]:
    cpu_memory = cpu_memory or {}
    queue_state = {
        "project": project,
        "priority": priority,
        "quota_gpus": quota,
        "limit_gpus": limit,
        "over_quota_weight": weight,
        "cohort": cohort,
        "parent": parent,
        "scheduler": scheduler,
        "flavors": flavors,
        **cpu_memory,
    }
    queue = Observed(
        kind="queue",
        name=name,
        uid=uid,
        state=queue_state,
        actor=who,
        hot={"project": project, "gpus": quota, "gpus_allocatable": limit, "queue": name},
    )
    out = [queue]
    if project:
        project_state = {
            "namespace": namespace,
            "queue": name,
            "quota_gpus": quota,
            "limit_gpus": limit,
            "over_quota_weight": weight,
            "priority": priority,
            "scheduler": scheduler,
            **cpu_memory,
        }
        out.append(
            Observed(
                kind="project",
                name=project,
                uid=uid,
                state=project_state,
                actor=who,
                hot={
                    "project": project,
                    "gpus": quota,
                    "gpus_allocatable": limit,
                    "queue": name,
                    "namespace": namespace,
                },
            )
        )
    return out


def map_kai_queues(queues: list[dict[str, Any]], namespace_of_queue: dict[str, str]) -> list[Observed]:
    """Leaf queues are projects (Run:ai names the queue after the project); parent queues are queues only."""
    parents = {(q.get("spec") or {}).get("parentQueue") for q in queues} - {None, ""}
    out: list[Observed] = []
    for q in queues:
        m, spec = meta(q), q.get("spec") or {}
        name = m.get("name", "")
        if not name:
            continue
        resources = spec.get("resources") or {}
        gpu = resources.get("gpu") or {}
        is_parent = (
            name in parents
            or bool((q.get("status") or {}).get("childQueues"))
            or ((m.get("labels") or {}).get("kai.scheduler/queue-type") == "parent")
        )
        project = "" if is_parent else ((m.get("labels") or {}).get("runai/project") or name)
        first = len(out)
        out += _queue_and_project(
            name,
            project=project,
            namespace=namespace_of_queue.get(name, project),
            quota=limit_or_none(gpu.get("quota")),
            limit=limit_or_none(gpu.get("limit")),
            weight=gpu.get("overQuotaWeight"),
            priority=spec.get("priority"),
            cohort=None,
            parent=spec.get("parentQueue") or None,
            scheduler="kai",
            flavors=[],
            uid=m.get("uid", ""),
            who=actor(q, spec_only=True),
            cpu_memory=kai_cpu_memory(resources),
        )
        since = latest_transition(q)
        for o in out[first:]:
            o.since = since
    return out


KAI_MB = 10**6  # a KAI Queue's memory is in megabytes: 1 = 10^6 bytes


def _kai_amount(value: Any, scale: float) -> float | None:
    """A KAI Queue resource number (a float in its CRD) times ``scale``; None when absent, unreadable or
    negative (-1: unlimited). 0 stays 0: a quota of 0 deserves nothing, a limit of 0 allows nothing."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        n = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(n) or n < 0:
        return None
    return round(n * scale, 6)


def kai_cpu_memory(resources: dict[str, Any]) -> dict[str, Any]:
    """A KAI Queue's CPU and memory quota, limit and over-quota weight, in the keys the scheduling model reads
    (``incidents.diagnosis.resources``): CPU in cores (the Queue says millicores), memory in bytes (the Queue
    says megabytes, 10^6 bytes). Only the keys set: absent or -1 (unlimited) writes no key, as the model reads
    a missing key, and a weight is written only beside a deserved quota (unlimited, the queue deserves all it
    asks and the weight divides nothing; unset, KAI's 1). A queue without CPU or memory bounds keeps the state
    it had: an upgrade records no change on it."""
    out: dict[str, Any] = {}
    for res, unit_key, scale in (("cpu", "cores", 1 / 1000), ("memory", "bytes", float(KAI_MB))):
        spec = resources.get(res) or {}
        if not isinstance(spec, dict):
            spec = {}
        quota, limit = _kai_amount(spec.get("quota"), scale), _kai_amount(spec.get("limit"), scale)
        if res == "memory":  # whole bytes
            quota = None if quota is None else int(quota)
            limit = None if limit is None else int(limit)
        out[f"quota_{res}_{unit_key}"] = quota
        out[f"limit_{res}_{unit_key}"] = limit
        if quota is not None:  # an unlimited deserved quota gets all it asks: its weight divides nothing
            out[f"over_quota_weight_{res}"] = _kai_amount(spec.get("overQuotaWeight"), 1.0)
    return {k: v for k, v in out.items() if v is not None}


def map_kueue_queues(
    cluster_queues: list[dict[str, Any]], local_queues: list[dict[str, Any]]
) -> list[Observed]:
    """A ClusterQueue is a queue and a project; its namespace is the one of the LocalQueue pointing at it."""
    ns_of: dict[str, str] = {}
    for lq in sorted(local_queues, key=lambda o: (meta(o).get("namespace", ""), meta(o).get("name", ""))):
        cq = (lq.get("spec") or {}).get("clusterQueue")
        if cq and cq not in ns_of:
            ns_of[cq] = meta(lq).get("namespace", "")
    out: list[Observed] = []
    for cq in cluster_queues:
        m, spec = meta(cq), cq.get("spec") or {}
        name = m.get("name", "")
        quota = 0
        borrow: int | None = 0
        flavors: list[str] = []
        found = False
        for group in spec.get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                flavors.append(flavor.get("name", ""))
                for res in flavor.get("resources") or []:
                    if res.get("name") != GPU:
                        continue
                    found = True
                    quota += int_quantity(res.get("nominalQuota")) or 0
                    if res.get("borrowingLimit") is None:
                        borrow = None  # no borrowing limit: may borrow whatever the cohort lends
                    elif borrow is not None:
                        borrow += int_quantity(res.get("borrowingLimit")) or 0
        limit = None if borrow is None or not found else quota + borrow
        first = len(out)
        kueue_policy = cluster_queue_policy(spec)
        out += _queue_and_project(
            name,
            project=name,
            namespace=ns_of.get(name, name),
            quota=quota if found else None,
            limit=limit,
            weight=(spec.get("fairSharing") or {}).get("weight"),
            priority=None,
            cohort=spec.get("cohort") or None,
            parent=None,
            scheduler="kueue",
            flavors=sorted(set(flavors)),
            uid=m.get("uid", ""),
            who=actor(cq, spec_only=True),
        )
        since = latest_transition(cq)
        for o in out[first:]:
            o.since = since
        out[first].state.update(kueue_policy)  # the queue's: what Kueue's admission cycle reads
    return out


def cluster_queue_policy(spec: dict[str, Any]) -> dict[str, Any]:
    """What of a ClusterQueue's spec decides admission beyond its GPU total: each flavor's GPU quota in the
    order Kueue tries them, the queueing strategy, the preemption policies and the flavor fungibility
    (keys as ``incidents.diagnosis.kueue_quota`` reads them)."""
    flavor_quotas = []
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                if res.get("name") == GPU:
                    flavor_quotas.append(
                        {
                            "flavor": flavor.get("name", ""),
                            "nominal": int_quantity(res.get("nominalQuota")) or 0,
                            "borrowing_limit": int_quantity(res.get("borrowingLimit")),
                            "lending_limit": int_quantity(res.get("lendingLimit")),
                        }
                    )
    preemption = spec.get("preemption") or {}
    fungibility = spec.get("flavorFungibility") or {}
    threshold = (preemption.get("borrowWithinCohort") or {}).get("maxPriorityThreshold")
    return {
        "flavor_quotas": flavor_quotas,
        "queueing_strategy": spec.get("queueingStrategy") or "BestEffortFIFO",  # Kueue's default
        "preemption": {
            "within_cluster_queue": preemption.get("withinClusterQueue") or "Never",
            "reclaim_within_cohort": preemption.get("reclaimWithinCohort") or "Never",
            "borrow_within_cohort": (preemption.get("borrowWithinCohort") or {}).get("policy") or "Never",
            "max_priority_threshold": threshold,
        },
        "flavor_fungibility": {
            "when_can_borrow": fungibility.get("whenCanBorrow") or "MayStopSearch",
            "when_can_preempt": fungibility.get("whenCanPreempt") or "TryNextFlavor",
        },
    }


def kai_namespaces(namespaces: list[dict[str, Any]]) -> dict[str, str]:
    """queue → namespace from the ``runai/queue`` namespace label Run:ai/KAI put on project namespaces."""
    out: dict[str, str] = {}
    for ns in namespaces:
        q = queue_label(meta(ns).get("labels") or {})
        if q and q not in out:
            out[q] = meta(ns).get("name", "")
    return out


def kueue_local_queue_map(local_queues: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(namespace, LocalQueue name) → ClusterQueue name: a pod's queue label names a LocalQueue."""
    return {
        (meta(lq).get("namespace", ""), meta(lq).get("name", "")): (lq.get("spec") or {}).get(
            "clusterQueue", ""
        )
        for lq in local_queues
    }


def most_common_namespace(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """queue → the namespace most of its jobs live in (fallback when namespaces carry no queue label)."""
    counts: dict[str, Counter[str]] = {}
    for queue, ns in pairs:
        counts.setdefault(queue, Counter())[ns] += 1
    return {q: c.most_common(1)[0][0] for q, c in counts.items()}

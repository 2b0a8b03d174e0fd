"""What the job and GPU mappers need of a sweep's pods, kept once the pods are recorded (not the pods)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from collectors import mapping
from collectors.observed import Observed, state_hash


@dataclass
class PodIndex:
    """What the job and GPU mappers need of the pods, without the pods."""

    by_job: dict[tuple[str, str], list[Observed]] = field(default_factory=lambda: defaultdict(list))
    # Per job, its pods' (name, digest of the mapped state): what the job memo compares (ListingMemo).
    marks: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=lambda: defaultdict(list))
    on_node: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    shares: dict[str, dict[str, Any]] = field(default_factory=dict)  # GPU uuid -> KAI shares (gpu_shares)

    @classmethod
    def of(cls, pods: list[Observed], nodes: dict[str, dict[str, Any]] | None) -> PodIndex:
        """The index of a sweep's pods (``nodes``: node name -> state, for the GPU memory of shares)."""
        index = cls()
        gpu_memory = {n: (st.get("gpu_memory_mib") or None) for n, st in (nodes or {}).items()}
        index.shares = mapping.gpu_shares(
            [p for p in pods if p.state.get("gpu_share") or p.state.get("reservation_for")], gpu_memory
        )
        for p in pods:
            if p.state.get("job"):
                index.by_job[(p.namespace, p.state["job"])].append(pod_for_jobs(p))
                index.marks[(p.namespace, p.state["job"])].append((p.name, p.digest or state_hash(p.state)))
            if p.state.get("node") and p.state.get("phase") in ("Running", "Pending"):
                index.on_node[p.state["node"]].add(f"{p.namespace}/{p.name}")
        return index


def pod_for_jobs(pod: Observed) -> Observed:
    cond = (pod.state.get("conditions") or {}).get("PodScheduled")
    state = {
        "phase": pod.state.get("phase"),
        "node": pod.state.get("node"),
        "conditions": {"PodScheduled": cond} if cond else {},
    }
    return Observed(kind="pod", name=pod.name, namespace=pod.namespace, state=state, since=pod.since)

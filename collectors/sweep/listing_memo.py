"""What a cluster's last complete listing mapped, by object: a sweep maps again only what changed since."""

from __future__ import annotations

from typing import Any

from collectors.models import Cluster
from collectors.observed import Observed


class ListingMemo:
    """One cluster's objects of one listing as its last complete listing mapped them, by (namespace, name):
    each object's mark and the mapped object with its digest. The API server gives an object a new
    resourceVersion at every change, so an object listed again with the same mark maps to the same state: a
    sweep maps and digests only what changed (most objects of a busy cluster do not change between two sweeps).

    - pods: the mark is (uid, resourceVersion, the node's GPU memory);
    - jobs: (uid, resourceVersion, the PodGroup/Workload's resourceVersion, the pods' (name, digest)): a job's
      state is a function of exactly its object, its scheduling object and its pods' mapped states.

    Valid for one ``context`` (the queue → project maps the objects were mapped with): another empties it."""

    def __init__(self, context: int) -> None:
        self.context = context
        self.objects: dict[tuple[str, str], tuple[tuple[Any, ...], Observed]] = {}


memos: dict[tuple[Any, ...], ListingMemo] = {}


def memo_of(cluster: Cluster, listing: str, context: int) -> ListingMemo:
    """The cluster's memo of ``listing`` ("pods", "jobs"), emptied when its context changed. By the cluster row
    and where it is read from (a cluster registered anew is another cluster). Sweeps of one cluster never run
    at once (``cluster_lock``)."""
    key = (listing, cluster.pk, cluster.name, cluster.kubeconfig, cluster.created)
    memo = memos.get(key)
    if memo is None or memo.context != context:
        for stale in [k for k in memos if k[0] == listing and (k[1] == key[1] or k[2] == key[2])]:
            del memos[stale]
        memo = memos[key] = ListingMemo(context)
    return memo


REMEMBERED_POD_KEYS = ("phase", "node", "job", "gpu_share", "reservation_for")  # what a sweep reads of a pod


def remembered_pod(pod: Observed) -> Observed:
    """A recorded pod as the memo keeps it for the next sweep: its mark's digest and only the part of its state
    a sweep reads (``_kube``: the job's pods, the node's, GPU shares), so 20,000 pods' whole states do not
    outlive their recording (they would sit beside the job listing). A pod that shares a GPU or reserves one
    for others is kept whole (``mapping.gpu_shares`` reads more of it; they are few)."""
    state = pod.state
    if pod.partial or state.get("gpu_share") or state.get("reservation_for"):
        return pod
    kept = {k: state[k] for k in REMEMBERED_POD_KEYS if k in state}
    cond = (state.get("conditions") or {}).get("PodScheduled")
    kept["conditions"] = {"PodScheduled": cond} if cond else {}
    return Observed(
        kind="pod",
        name=pod.name,
        namespace=pod.namespace,
        state=kept,
        since=pod.since,
        digest=pod.digest,
        partial=True,
    )


def remembered_job(job: Observed) -> Observed:
    """A recorded job as the memo keeps it: its digest (nothing of a job is read after it is recorded)."""
    if job.partial:
        return job
    return Observed(
        kind="job",
        name=job.name,
        namespace=job.namespace,
        state={},
        since=job.since,
        digest=job.digest,
        partial=True,
    )

"""The waiting jobs served before a job: one count, one list, for the incident, the why-pending panel, the job page
and the job list.

They all read the cluster's scheduling pass (``scheduling_pass.cluster_pass``): the waiting jobs in the
scheduler's order, each start charged to its queue (and department) before the next choice, a job that does not
start charged nothing. That is how both schedulers walk their queues: KAI's allocate action commits a job's
allocation to its queue's share only when the whole gang is placed (a job that fails is rolled back), and Kueue
adds a workload's usage to its ClusterQueue (and so to the borrowing the next head is compared by) only when it
is admitted. Jobs beyond the jobs the pass considers follow in the model's order, each charged as it is served
(:func:`cluster_order`, the order ``waiting_order.cluster_ranks`` lists).

Pure: reads the ``DiagnosisInput`` only (no database, no simulator).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from incidents.diagnosis.allocation import job_units
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.precedence import QueuedJob, queue_priority_of
from incidents.diagnosis.queue_order import QueueOrder, job_queue, why_before
from incidents.diagnosis.scheduling_pass import MAX_CONSIDERED, ClusterPass, cluster_pass
from incidents.diagnosis.types import DiagnosisInput, EntityState


def the_pass(di: DiagnosisInput) -> ClusterPass:
    """The cluster's pass at t: computed once per indexed block (every subject's count reads the same one)."""
    got = di.memo("cluster_pass", lambda: cluster_pass(di))
    return got if got is not None else cluster_pass(di)


def cluster_order(di: DiagnosisInput, cp: ClusterPass | None = None) -> Iterator[EntityState]:
    """Every waiting job in the cluster's order: the jobs the pass considers, in its order, then the jobs beyond
    it in the model's order (no room is left to read for them: each is charged to its queue as it is served)."""
    cp = cp if cp is not None else the_pass(di)
    seen = set()
    for c in cp.considered:
        seen.add((c.job.namespace, c.job.name))
        yield c.job
    rest = [j for j in di.jobs if is_pending(j) and (j.namespace, j.name) not in seen]
    if not rest:
        return
    # The diagnoses of one batch (every waiting job's incident after a sweep) read the same jobs beyond the same
    # pass: their order is worked out once, by the first, and read by the others (``DiagnosisInput.batch``).
    passed = tuple((c.job.namespace, c.job.name) for c in cp.considered)
    shared: dict[tuple[tuple[str, str], ...], list[tuple[str, str]]] | None = (
        di.batch.setdefault("cluster_order_rest", {}) if di.batch is not None else None
    )
    keys = shared.get(passed) if shared is not None else None
    by_key = {(j.namespace, j.name): j for j in rest}
    if keys is not None and len(keys) == len(by_key) and all(k in by_key for k in keys):
        yield from (by_key[k] for k in keys)
        return
    order = QueueOrder(di, rest)
    served: list[EntityState] = []
    for job in order:
        order.charge(job, job_units(job))
        if shared is None:
            yield job
        else:
            served.append(job)
    if shared is not None:
        shared[passed] = [(j.namespace, j.name) for j in served]
        yield from served


@dataclass
class Ahead:
    """The waiting jobs served before a job: how many, and the first ``limit`` of them in order."""

    count: int
    jobs: list[QueuedJob] = field(default_factory=list)


def jobs_ahead(
    di: DiagnosisInput, job: EntityState, cp: ClusterPass | None = None, limit: int = MAX_CONSIDERED
) -> Ahead:
    """The waiting jobs served before ``job`` in the cluster's order (none when it does not wait): as many as
    its position in the cluster's order less one, the first ``limit`` named with why each goes first."""
    if not is_pending(job):
        return Ahead(0)
    me = (job.namespace, job.name)
    count = 0
    named: list[QueuedJob] = []
    for other in cluster_order(di, cp):
        if (other.namespace, other.name) == me:
            return Ahead(count, named)
        count += 1
        if len(named) < limit:
            q = job_queue(other)
            named.append(
                QueuedJob(
                    other,
                    q,
                    queue_priority_of(di, q),
                    other.get("priority_class") or "",
                    other.get("submitted") or "",
                    job_units(other),
                    why_before(di, other, job),
                )
            )
    return Ahead(count, named)  # a job the input does not list as waiting: every waiting job goes first


__all__ = ["Ahead", "cluster_order", "jobs_ahead", "the_pass"]

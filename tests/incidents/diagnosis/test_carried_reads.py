"""What one indexed input hands another written from it (``DiagnosisInput.inherit``, ``reclaim_fits.carry_over``,
``node_resources.carry_nodes``) against what the other reads afresh: the lookups of the lists both hold, each
node's reads but those of the nodes an eviction touched, and the running jobs the eviction left as they were.
Over every KAI case's state, random small clusters (``test_reclaim_fits``), and the state each of their evictions
leaves."""

from __future__ import annotations

import random
from dataclasses import replace

from incidents.diagnosis import node_resources as NR
from incidents.diagnosis import reclaim as R
from incidents.diagnosis import whatif_reclaim as W
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.reclaim import victims, without
from incidents.diagnosis.types import DiagnosisInput, EntityState

from .test_model_kai_cases import CASES, model_input
from .test_reclaim_fits import _random_state


def _states() -> list[DiagnosisInput]:
    rng = random.Random(11)
    return [model_input(case["scenario"]) for case in CASES] + [_random_state(rng) for _ in range(40)]


def _node_reads(di: DiagnosisInput) -> dict[str, object]:
    """What ``node_resources`` reads of each node, read on ``di`` as it stands (indexed or not)."""
    out: dict[str, object] = {}
    for n in di.nodes:
        base = NR.node_base(di, n)
        out[n.name] = (
            base,
            NR.allocated_on(di, n.name),
            NR.requested_on(di, n.name),
            NR.mig_used_on(di, n.name),
            NR.shared_gpus(di, n.name, base.gpu_memory_mib),
        )
    return out


def _after(di: DiagnosisInput) -> list[tuple[DiagnosisInput, DiagnosisInput]]:
    """Each state an eviction on ``di`` leaves (the victims gone, the job bound, as ``reclaims`` writes it)."""
    out = []
    for job in [j for j in di.jobs if is_pending(j)]:
        with di.indexed():
            ev = victims(di, job)
        if ev is not None and ev.nodes:
            out.append((di, W._bound(without(di, [v.job for v in ev.victims]), job, ev.nodes)))
    return out


def test_it_carries_each_untouched_nodes_reads_and_evictable_jobs() -> None:
    carried = states = 0
    for state in _states():
        for di, after in _after(state):
            with di.indexed():
                _node_reads(di)
                R._evictable(di)
                with after.indexed():
                    R.carry_over(di, after)
                    carried += sum(len(after.memo(name, dict)) for name in NR.PER_NODE)
                    # an input not indexed (a copy) reads every node afresh
                    assert _node_reads(after) == _node_reads(replace(after))
                    assert R._evictable(after) == R._evictable_now(replace(after))
                    states += 1
    assert states > 20 and carried > 100


def test_it_inherits_only_what_reads_the_same_lists() -> None:
    di = next(s for s in _states() if any(not is_pending(j) and s.pods_of_job(j) for j in s.jobs))
    running = [j for j in di.jobs if not is_pending(j) and di.pods_of_job(j)]
    gone = {id(p) for p in di.pods_of_job(running[0])}
    fewer = replace(di, pods=[p for p in di.pods if id(p) not in gone])
    with di.indexed():
        node = di.find("node", di.nodes[0].name)
        di.pods_of_job(running[0])
        di.gpus_of_node(di.nodes[0].name)
        with fewer.indexed():
            fewer.inherit(di)
            index = fewer._index or {}
            assert "find:node" in index and "gpus_by_node" in index  # the same nodes and GPUs
            assert "pods_of_job" not in index  # not the same pods
            assert fewer.find("node", di.nodes[0].name) is node
            assert fewer.pods_of_job(running[0]) == []
            for j in di.jobs:
                assert fewer.pods_of_job(j) == replace(fewer).pods_of_job(j)


def test_it_inherits_nothing_outside_an_indexed_block() -> None:
    di = model_input(CASES[0]["scenario"])
    other = replace(di)
    with di.indexed():
        di.find("node", di.nodes[0].name)
        other.inherit(di)  # ``other`` is not indexed: nothing to take it into
    assert other._index is None
    job: EntityState = di.jobs[0]
    assert other.find("job", job.name, job.namespace) is job

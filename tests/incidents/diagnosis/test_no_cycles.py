"""An answer leaves nothing to the cycle collector: what a why-pending answer builds (the pass, the smallest edits,
reclaim, the ETA's draws and the reasons of a start) is freed by reference counting when the answer is dropped.

rcaweb's processes run the collector rarely (``rcaweb.gc_policy``), so a cycle in a forecast's books kept its
whole state (a fleet's jobs, pods and replay copies) until a collection that then walked and freed half a million
objects at once, in the middle of some later answer: at 1,213 nodes about 0.5 s added to one answer in ten.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

from incidents.diagnosis.durations import Basis
from incidents.diagnosis.explain import explain_job
from incidents.diagnosis.whatif import compare, parse_edits

from .dx_world import T0, T, job, node, pod, queue, world


def _ours(o: object) -> str | None:
    """The qualified name of ``o``'s type (or, a function, of ``o``) where rcaweb's diagnosis defines it."""
    module = getattr(o, "__module__", None) if callable(o) and not isinstance(o, type) else type(o).__module__
    if isinstance(module, str) and module.startswith("incidents."):
        return getattr(o, "__qualname__", None) or type(o).__qualname__
    return None


def _left_to_the_collector(answer: Callable[[], object]) -> Counter[str]:
    """What of ours ``answer()`` leaves in cycles once its result is dropped, by type."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        answer()
        gc.collect()
        return Counter(name for o in gc.garbage if (name := _ours(o)) is not None)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def _running(name, project, node_name, gpus=8):
    j = job(name, project, phase="Running", gpus_per_pod=gpus)
    j.state["started"] = T0.strftime("%Y-%m-%dT%H:%M:%SZ")
    return j, pod(f"{name}-0", name, project, node_name=node_name, gpus=gpus)


def _busy():
    """Four full 8-GPU nodes: nlp holds three (over its quota of 8), vision one; vision's two jobs wait, one of
    them a reclaimer, and their kind's finished jobs ran 3.5 to 8 hours (the ETA draws each end)."""
    running = [_running(f"n{i}", "nlp", f"h100-0{i}") for i in (1, 2, 3)] + [
        _running("v0", "vision", "h100-04")
    ]
    waiting = [
        job("train", "vision", submitted=T0 + timedelta(minutes=5)),
        job("gang", "vision", pods=2, submitted=T0 + timedelta(minutes=6)),
    ]
    di = world(
        subjects=[],
        t=T,
        nodes=[node(f"h100-0{i}") for i in (1, 2, 3, 4)],
        pods=[p for _, p in running],
        jobs=[j for j, _ in running] + waiting,
        queues=[queue("vision", 24, 32), queue("nlp", 8, 32)],
    )
    hours = [3600.0 * h for h in (3.5, 4, 4.5, 5, 5.5, 6, 7, 8)]
    basis = Basis(window=timedelta(hours=24), durations={("vision", 1, "8"): hours, ("nlp", 1, "8"): hours})
    return di, basis


def test_a_why_pending_answer_with_its_eta_and_reasons_leaves_no_cycle():
    def answer() -> None:
        di, basis = _busy()
        for name in ("train", "gang"):
            ex = explain_job(di, di.find("job", name, "vision"), basis=basis)
            assert ex.eta is not None and ex.eta.words  # the ETA's words read the start's reasons
            assert ex.to_dict()["job"] == f"vision/{name}"

    assert _left_to_the_collector(answer) == Counter()


def test_a_what_if_with_its_reclaims_leaves_no_cycle():
    def answer() -> None:
        di, _basis = _busy()
        wi = compare(di, parse_edits({"quota": ["vision:32"], "cordon": ["h100-04"], "add": ["h100-01:1"]}))
        assert wi.reclaims_after  # vision, below its quota, reclaims from nlp, over its own

    assert _left_to_the_collector(answer) == Counter()


def test_the_check_sees_a_cycle_of_ours():
    # the check itself: a cycle through an object of ours is reported (else the test above could not fail)
    def answer() -> None:
        di, _basis = _busy()
        di.jobs[0].state["self"] = di  # EntityState -> state -> DiagnosisInput -> jobs -> EntityState

    assert _left_to_the_collector(answer)["DiagnosisInput"] == 1

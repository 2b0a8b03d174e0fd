"""``reclaim``'s fit table built once per waiting job (``reclaim_fits.Fits``) against the fit rules read over the
whole cluster without the victims (``F.node_fits(without(di, victims))``), row for row; and ``victims``'
answers against ``victims`` reading every trial's whole table and placing over all its rows. Over every KAI
case's states as the model's rounds go (shares, GPU memory, MIG, CPU, selectors, departments), and over random
small clusters (shared GPUs with their reservation pods, some bound off their GPU's node; cordons, NotReady
nodes, taints, selectors, pods bound to no node)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from incidents.diagnosis import fit as F
from incidents.diagnosis import reclaim as R
from incidents.diagnosis import reclaim_fits as RF
from incidents.diagnosis import scheduling_pass as SP
from incidents.diagnosis import whatif_reclaim as W
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.placement import place, share_order
from incidents.diagnosis.queue_order import QueueOrder
from incidents.diagnosis.reclaim import victims, without
from incidents.diagnosis.request import Request, job_request
from incidents.diagnosis.types import DiagnosisInput, EntityState

from .test_model_kai_cases import CASES, MAX_ROUNDS, _bind, _evict, model_input


class _Whole(RF.Fits):
    """Every trial's table read over the whole cluster without its victims, no room bounded first: the
    reference ``Fits`` must answer as."""

    def rows(self, gone: list[R.Victim]) -> list[F.NodeFit]:
        return F.node_fits(_without_all(self.di, [v.job for v in gone]), self.req)

    def taken_rows(self) -> list[F.NodeFit]:
        return F.node_fits(_without_all(self.di, self.taken), self.req)

    def given_back(self, rows: list[F.NodeFit], v: R.Victim, rest: list[R.Victim]) -> list[F.NodeFit]:
        return self.rows(rest)

    def may_fit(self, gone: list[R.Victim]) -> bool:
        return True

    def may_fit_taken(self) -> bool:
        return True


def _without_all(di: DiagnosisInput, jobs: list[EntityState]) -> DiagnosisInput:
    """``reclaim.without`` reading every GPU (as it did before it read only those with shares)."""
    pods = {(p.namespace, p.name) for j in jobs for p in di.pods_of_job(j)}
    if not pods:
        return di
    keys = {f"{ns}/{name}" for ns, name in pods}
    gpus: list[EntityState] = []
    emptied: set[str] = set()
    for g in di.gpus:
        shares = g.get("shares") or []
        if any(x.get("pod") in keys for x in shares):
            left = [x for x in shares if x.get("pod") not in keys]
            state = {**g.state, "shares": left}
            if not left:
                state.pop("reservation", None)
                emptied |= {g.name, str(g.get("uuid") or g.name)}
            g = replace(g, state=state)
        gpus.append(g)
    kept = [
        p for p in di.pods if (p.namespace, p.name) not in pods and p.get("reservation_for") not in emptied
    ]
    return replace(di, pods=kept, gpus=gpus)


def _place_all(rows: list[F.NodeFit], req: Request, usable: list[bool] | None = None) -> dict[str, int]:
    """The placement over every row, none left out first (as ``reclaim`` placed before ``place_rows``)."""
    rows = [r for r in rows if not any(b in F.STATIC_BLOCKERS for b in r.blockers)]
    if not (req.share or req.share_memory_mib or req.mig):
        return place(rows, req, {r.node: r.free for r in rows}, frozenset())
    if not F.fits(rows, req):
        return {}
    out: dict[str, int] = {}
    want = req.pods
    for r in share_order(rows, req):
        if r.fits and want > 0:
            out[r.node] = min(r.pods_fit, want)
            want -= out[r.node]
    return out


def _running(di: DiagnosisInput) -> list[EntityState]:
    return [j for j in di.jobs if not is_pending(j) and R.held_units(di, j)]


def _check_rows(di: DiagnosisInput, rng: random.Random, draws: int = 6) -> int:
    """Rows of ``Fits`` (any set, and the growing trials) equal the whole table's; a room bounded too small
    never hides a placement. Returns the comparisons made."""
    running = _running(di)
    n = 0
    for job in [j for j in di.jobs if is_pending(j)] or di.jobs[:1]:
        req = job_request(di, job)
        with di.indexed():
            fits = RF.Fits(di, req)
            assert fits.rows([]) == F.node_fits(di, req)
            for _ in range(draws):
                gone = rng.sample(running, rng.randint(1, len(running))) if running else []
                vs = [R.Victim(j, R.RECLAIM, R.held_units(di, j)) for j in gone]
                view = _without_all(di, gone)
                got = without(di, gone)
                assert (got.pods, got.gpus) == (view.pods, view.gpus)
                whole = F.node_fits(view, req)
                assert fits.rows(vs) == whole
                assert RF.place_rows(whole, req) == _place_all(whole, req)
                if not fits.may_fit(vs):
                    assert _place_all(whole, req) == {}
                n += 1
            trials = RF.Fits(di, req)
            for j in rng.sample(running, len(running)):
                trials.take(j)
                whole = F.node_fits(_without_all(di, trials.taken), req)
                assert trials.taken_rows() == whole
                if not trials.may_fit_taken():
                    assert _place_all(whole, req) == {}
                given = [R.Victim(x, R.RECLAIM, {}) for x in trials.taken]
                v = rng.choice(given)
                rest = [x for x in given if x is not v]
                back = trials.given_back(trials.taken_rows(), v, rest)
                assert back == F.node_fits(_without_all(di, [x.job for x in rest]), req)
                assert trials.place(back) == _place_all(back, req)
                n += 1
    return n


def _answers(di: DiagnosisInput) -> list[Any]:
    """Every waiting job's eviction, as (victims and why, nodes), on ``di`` as it is."""
    out = []
    waiting = [j for j in di.jobs if is_pending(j)]
    order = QueueOrder(di, waiting)
    for job in waiting:
        ev = victims(di, job, order)
        out.append(None if ev is None else ([(v.label, v.action) for v in ev.victims], ev.nodes))
    return out


def _same_answers(di: DiagnosisInput, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    got = _answers(di)
    with monkeypatch.context() as m:
        m.setattr(R, "Fits", _Whole)
        m.setattr(RF, "place_rows", _place_all)
        m.setattr(RF, "without", _without_all)
        m.setattr(R, "without", _without_all)
        want = _answers(di)
    assert got == want
    return got


def _rounds(di: DiagnosisInput) -> Iterator[DiagnosisInput]:
    """The states of the model's rounds over a case (``test_model_kai_cases.settle``), each yielded before the
    round changes it."""
    start = di.onset
    for _ in range(MAX_ROUNDS):
        yield di
        cp = SP.cluster_pass(di)
        starts = [c for c in cp.considered if c.outcome == SP.STARTS]
        for c in starts:
            _bind(di, c.job, c.nodes, start)
        if starts:
            continue
        waiting = [j for j in di.jobs if is_pending(j)]
        order = QueueOrder(di, waiting)
        for job in QueueOrder(di, waiting):
            ev = victims(di, job, order)
            if ev is not None:
                for v in ev.victims:
                    _evict(di, v.job)
                _bind(di, job, ev.nodes, start)
                break
        else:
            return


def test_the_tables_and_the_answers_of_every_kai_case_state_match_the_whole_tables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(44)
    compared = answered = 0
    for case in CASES:
        for di in _rounds(model_input(case["scenario"])):
            compared += _check_rows(di, rng, draws=3)
            answered += sum(a is not None for a in _same_answers(di, monkeypatch))
    assert compared > 2000 and answered > 80


#
# Random small clusters
#


def _random_state(rng: random.Random) -> DiagnosisInput:
    """A small KAI cluster: nodes of 2-8 GPUs, some cordoned, NotReady, tainted or in another pool; running jobs
    of whole GPUs (some over a node's room), shares holding GPUs with their reservation pods, CPU requests,
    pods of a running job left unbound; waiting jobs of whole GPUs (a gang, a pool selector) and shares."""
    pools: list[dict[str, Any]] = []
    for name in ("a", "b")[: rng.randint(1, 2)]:
        pools.append(
            {
                "name": name,
                "nodes": rng.randint(1, 4),
                "gpus_per_node": rng.choice([2, 4, 8]),
                "gpu_product": "NVIDIA-A100-SXM4-80GB",
                "labels": {"pool": name},
                "cpu": rng.choice([None, "16"]),
            }
        )
    projects = [
        {"name": f"q{i}", "quota": {"gpu": rng.randint(0, 8)}, "priority": rng.randint(0, 2)}
        for i in range(rng.randint(2, 4))
    ]
    scenario: dict[str, Any] = {
        "start": "2026-12-01T00:00:00Z",
        "cluster": {
            "name": "rand",
            "scheduler": "kai",
            "nodepools": [{k: v for k, v in p.items() if v is not None} for p in pools],
        },
        "projects": projects,
        "jobs": [],
    }
    nodes = [f"{p['name']}-{i:02d}" for p in pools for i in range(1, p["nodes"] + 1)]
    size = {f"{p['name']}-{i:02d}": p["gpus_per_node"] for p in pools for i in range(1, p["nodes"] + 1)}
    shares: dict[str, int] = {}
    for i in range(rng.randint(2, 10)):
        spec: dict[str, Any] = {"name": f"r{i}", "project": rng.choice(projects)["name"], "submit": "0s"}
        shape = rng.random()
        if shape < 0.3:
            spec.update(gpus_per_pod=rng.choice([0.25, 0.5]), pods=rng.randint(1, 3))
        else:
            spec.update(gpus_per_pod=rng.choice([1, 2, 4]), pods=rng.randint(1, 3))
        if rng.random() < 0.3:
            spec["cpu_per_pod"] = rng.choice(["2", "6"])
        spec["priority"] = rng.choice(["train", "train", "build", "inference"])
        if spec["gpus_per_pod"] < 1:  # a share: never more shares on a node than GPUs, so one is left for it
            roomy = [n for n in nodes if shares.get(n, 0) < size[n]]
            spec["running_on"] = [rng.choice(roomy) for _ in range(spec["pods"])] if roomy else []
            for n in spec["running_on"]:
                shares[n] = shares.get(n, 0) + 1
            if not spec["running_on"]:
                continue
        else:
            spec["running_on"] = [rng.choice(nodes) for _ in range(spec["pods"])]
        scenario["jobs"].append(spec)
    for i in range(rng.randint(1, 5)):
        spec = {"name": f"w{i}", "project": rng.choice(projects)["name"], "submit": f"{i + 1}m"}
        if rng.random() < 0.25:
            spec.update(gpus_per_pod=rng.choice([0.5, 0.75]), pods=rng.randint(1, 2))
        else:
            spec.update(gpus_per_pod=rng.choice([1, 2, 4, 8]), pods=rng.randint(1, 3))
        if rng.random() < 0.2:
            spec["node_selector"] = {"pool": rng.choice(["a", "b"])}
        if rng.random() < 0.2:
            spec["cpu_per_pod"] = "4"
        spec["priority"] = rng.choice(["train", "inference", "build"])
        scenario["jobs"].append(spec)
    di = model_input(scenario)
    for n in di.nodes:
        roll = rng.random()
        if roll < 0.1:
            n.state["unschedulable"] = True
        elif roll < 0.15:
            n.state["ready"] = False
        elif roll < 0.2:
            n.state["taints"] = [{"key": "reserved", "value": "x", "effect": "NoSchedule"}]
    for p in di.pods:
        if p.get("reservation_for") and rng.random() < 0.2:
            p.state["node"] = rng.choice(nodes)  # a reservation pod the inventory places off its GPU's node
        elif p.get("job") and rng.random() < 0.05:
            p.state["node"] = None  # a pod of a running job the inventory places on no node
        elif p.get("job") and rng.random() < 0.05:
            p.state["phase"] = "Succeeded"
    return di


@pytest.mark.parametrize("seed", range(40))
def test_the_tables_and_the_answers_of_random_clusters_match_the_whole_tables(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    for _ in range(5):
        di = _random_state(rng)
        assert _check_rows(di, rng) > 0
        _same_answers(di, monkeypatch)


def _fleet(selected: int, serving: bool = False) -> DiagnosisInput:
    """12 nodes of 8 GPUs, ``selected`` of them labelled pool=a, each full with a job of queue "a" (over its
    quota of 0; the oldest on the labelled nodes, so the victims tried first are elsewhere; ``serving``: those
    are inference, not preemptible); queue "b" waits with ``big`` (1 pod of 16 GPUs) and ``picky`` (1 pod of 8
    on pool=a)."""
    pools: list[dict[str, Any]] = [{"name": "h", "nodes": 12 - selected, "gpus_per_node": 8}]
    if selected:
        pools.insert(0, {"name": "a", "nodes": selected, "gpus_per_node": 8, "labels": {"pool": "a"}})
    nodes = [f"{p['name']}-{i:02d}" for p in pools for i in range(1, p["nodes"] + 1)]
    scenario = {
        "start": "2026-12-01T00:00:00Z",
        "cluster": {"name": "c", "scheduler": "kai", "nodepools": pools},
        "projects": [{"name": "a", "quota": {"gpu": 0}}, {"name": "b", "quota": {"gpu": 96}}],
        "jobs": [
            *(
                {
                    "name": f"r{i}",
                    "project": "a",
                    "submit": "0s",
                    "pods": 1,
                    "gpus_per_pod": 8,
                    "running_on": [n],
                    "priority": "inference" if serving and n.startswith("a-") else "train",
                }
                for i, n in enumerate(nodes)
            ),
            {"name": "big", "project": "b", "submit": "1m", "pods": 1, "gpus_per_pod": 16},
            {
                "name": "picky",
                "project": "b",
                "submit": "2m",
                "pods": 1,
                "gpus_per_pod": 8,
                "node_selector": {"pool": "a"},
            },
        ],
    }
    return model_input(scenario)


def _counted(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[int]]:
    """Calls of ``Fits._swap`` (rows read again) and of ``Fits.take`` (victims tried), as they happen."""
    read: list[int] = []
    taken: list[int] = []
    swap, take = RF.Fits._swap, RF.Fits.take

    def counted(self: RF.Fits, *args: Any) -> None:
        read.append(1)
        swap(self, *args)

    def took(self: RF.Fits, job: EntityState) -> None:
        taken.append(1)
        take(self, job)

    monkeypatch.setattr(RF.Fits, "_swap", counted)
    monkeypatch.setattr(RF.Fits, "take", took)
    return read, taken


def test_a_gang_no_eviction_can_fit_is_refused_before_any_victim_is_tried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pod of 16 GPUs on nodes of 8: not even every node emptied takes it, so no victim is tried; with 8 GPUs
    a pod, the first victim makes room."""
    di = _fleet(0)
    read, taken = _counted(monkeypatch)
    big = di.find("job", "big", "b")
    assert big is not None
    assert victims(di, big) is None
    assert read == [] and taken == []
    big.state.update(gpus_per_pod=8, gpus_total=8)
    ev = victims(di, big)
    assert ev is not None and len(ev.victims) == 1 and read and len(taken) == 1


def test_victims_that_cannot_make_room_stop_being_tried_after_a_few(monkeypatch: pytest.MonkeyPatch) -> None:
    """``picky`` fits only pool=a's node, whose job is inference (not a candidate): every trial's victims free
    nodes it cannot use, and after ``MISSES`` trials all the candidates together cannot either: the rest are
    not tried, and no table is read again."""
    di = _fleet(1, serving=True)
    read, taken = _counted(monkeypatch)
    picky = di.find("job", "picky", "b")
    assert picky is not None
    assert victims(di, picky) is None
    assert read == [] and len(taken) == R.MISSES


def test_a_gang_placed_only_by_a_late_victim_gets_the_same_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """``picky`` fits only pool=a's node, whose job is the last candidate: more than ``MISSES`` trials without
    room, then the one that makes it; the answer is the whole tables'. With no pool=a node, or its job not
    preemptible, none."""
    for selected, serving, found in ((1, False, True), (0, False, False), (1, True, False)):
        di = _fleet(selected, serving)
        assert (_same_answers(di, monkeypatch)[1] is not None) is found


def _carried(di: DiagnosisInput) -> int:
    """Each eviction on ``di`` written as the next state (the victims gone, the job bound, as ``reclaims`` does):
    the fit tables and evictable jobs carried over from ``di`` equal the next state's own. Returns the tables
    compared."""
    n = 0
    waiting = [j for j in di.jobs if is_pending(j)]
    for job in waiting:
        with di.indexed():
            ev = victims(di, job)
            for other in waiting:  # fill ``di``'s tables with every waiting job's request
                RF.Fits(di, job_request(di, other)).base  # noqa: B018
            R._evictable(di)
            if ev is None or not ev.nodes:
                continue
            after = W._bound(without(di, [v.job for v in ev.victims]), job, ev.nodes)
            with after.indexed():
                R.carry_over(di, after)
                assert R._evictable(after) == R._evictable_now(replace(after))  # an input not indexed: afresh
                tables = after.memo("reclaim_fit_tables", dict)
                for req, rows in tables.values():
                    assert rows == F.node_fits(after, req)
                    n += 1
    return n


def _reclaims_both_ways(di: DiagnosisInput, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    with di.indexed():
        cp = SP.cluster_pass(di)
    got = [(r.label, r.nodes, r.victims_words) for r in W.reclaims(di, cp)]
    with monkeypatch.context() as m:
        m.setattr(W, "carry_over", lambda old, new: None)
        want = [(r.label, r.nodes, r.victims_words) for r in W.reclaims(di, cp)]
    assert got == want
    return got


def test_the_fit_tables_and_evictable_jobs_carried_to_the_next_state_are_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared = reclaimed = 0
    for case in CASES:
        di = model_input(case["scenario"])
        compared += _carried(di)
        reclaimed += len(_reclaims_both_ways(di, monkeypatch))
    rng = random.Random(7)
    for _ in range(60):
        di = _random_state(rng)
        compared += _carried(di)
        reclaimed += len(_reclaims_both_ways(di, monkeypatch))
    assert compared > 200 and reclaimed > 20


#
# A pass's reclaimers in a row: the standings moved by what changed hands, not read again
#


def _reclaims_read_again(di: DiagnosisInput, cp: SP.ClusterPass) -> list[Any]:
    """``whatif_reclaim.reclaims`` with the queue order built afresh on each state (the reference the moved
    standings must match)."""
    left = [c for c in cp.considered if c.outcome == SP.NO_ROOM and c.whole][: W.MAX_TRIED]
    state = di
    for c in cp.starts:
        if c.whole:
            state = W._bound(state, c.job, c.nodes)
    out: list[Any] = []
    for c in left:
        job = state.find("job", c.job.name, c.job.namespace) or c.job
        with state.indexed():
            ev = victims(state, job, QueueOrder(state, [j for j in state.jobs if is_pending(j)]))
        if ev is None or not ev.victims:
            continue
        out.append((c.label, [(v.label, v.action) for v in ev.victims], ev.nodes))
        if len(out) >= W.MAX_RECLAIMERS:
            break
        state = W._bound(without(state, [v.job for v in ev.victims]), job, ev.nodes)
    return out


def _same_reclaimers(di: DiagnosisInput) -> int:
    with di.indexed():
        cp = SP.cluster_pass(di)
    got = [(r.label, [(v.label, v.action) for v in r.victims], r.nodes) for r in W.reclaims(di, cp)]
    assert got == _reclaims_read_again(di, cp)
    return len(got)


def _contended(rng: random.Random) -> DiagnosisInput:
    """A full KAI cluster (nodes of 8 GPUs, each held by jobs of over-quota queues) with several queues below
    their deserved quota waiting: their jobs reclaim one after another, each on the state the one before left."""
    n = rng.randint(3, 8)
    nodes = [f"h-{i:02d}" for i in range(1, n + 1)]
    holders = [{"name": f"o{i}", "quota": {"gpu": rng.choice([0, 4, 8])}} for i in range(rng.randint(1, 3))]
    starved = [
        {"name": f"s{i}", "quota": {"gpu": rng.choice([8, 16, 24])}, "priority": rng.randint(0, 1)}
        for i in range(rng.randint(2, 4))
    ]
    jobs: list[dict[str, Any]] = []
    for i, node in enumerate(nodes):
        left = 8
        while left:
            g = rng.choice([g for g in (2, 4, 8) if g <= left])
            project = rng.choice(holders)["name"]
            jobs.append({"name": f"r{i}-{left}", "project": project, "submit": "0s", "pods": 1,
                         "gpus_per_pod": g, "running_on": [node], "cpu_per_pod": rng.choice(["1", "2"])})  # fmt: skip
            left -= g
    for i in range(rng.randint(3, 8)):
        jobs.append({"name": f"w{i}", "project": rng.choice(starved)["name"], "submit": f"{i + 1}m", "pods": 1,
                     "gpus_per_pod": rng.choice([2, 4, 8]), "priority": rng.choice(["train", "build"])})  # fmt: skip
    scenario = {
        "start": "2026-12-01T00:00:00Z",
        "cluster": {
            "name": "c",
            "scheduler": "kai",
            "nodepools": [{"name": "h", "nodes": n, "gpus_per_node": 8, "cpu": "64"}],
        },  # fmt: skip
        "projects": [*holders, *starved],
        "jobs": jobs,
    }
    return model_input(scenario)


def test_a_pass_s_reclaimers_in_a_row_match_the_order_read_again_on_every_state() -> None:
    rng = random.Random(7)
    reclaimers = in_a_row = 0
    for case in CASES:
        for di in _rounds(model_input(case["scenario"])):
            reclaimers += _same_reclaimers(di)
    for _ in range(100):
        reclaimers += _same_reclaimers(_random_state(rng))
    for _ in range(100):
        got = _same_reclaimers(_contended(rng))
        reclaimers += got
        in_a_row += got >= 2
    assert reclaimers > 150 and in_a_row > 30

"""The smallest edits that would start a waiting job, each checked by one scheduling pass (issue 44, item 2).

A candidate is an edit of the state at t (``whatif.Edit``) a reader could make happen: raise the quota or limit the
job lacks by the least that starts it (its GPUs, and on KAI its queue's or department's CPU or memory quota or
limit, each bound that holds it), uncordon or repair a node it could use, hold the jobs ahead that take its
room, shrink its request to what fits (pods × GPUs, a smaller share, a smaller MIG profile), or let it onto
another pool (its selector and tolerations). Each is kept only when one ``scheduling_pass.cluster_pass`` over the
state with the edit applied starts the job; the answer says where (nodes, and GPU indices where the inventory
names the free ones), who that pass no longer starts (delayed), and whose running pods the edit stops
(evicted). What no edit of the list can fix is said as a refusal ("no node type it selects has 16 GPUs").

Bounded: at most ``MAX_PASSES`` passes and ``MAX_ANSWERS`` answers per job; the base pass is the caller's.
Pure: no database, no simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from incidents.diagnosis import fit as F
from incidents.diagnosis.quota import quota_at
from incidents.diagnosis.quota_edits import (
    gpu_raises,
    is_raise,
    queue_name,
    resource_raises,
    started_resources,
)
from incidents.diagnosis.request import Request, job_request
from incidents.diagnosis.room_edits import MAX_HOLDS, room_candidates, size_refusal, waiting_ahead
from incidents.diagnosis.scheduling_pass import (
    MAX_CONSIDERED,
    NO_ROOM,
    NOT_REACHED,
    PLACED,
    QUOTA,
    STARTS,
    ClusterPass,
    Considered,
    charge_started,
    cluster_pass,
)
from incidents.diagnosis.shrink import shrink_candidates
from incidents.diagnosis.types import DiagnosisInput, EntityState
from incidents.diagnosis.whatif_apply import apply_edits
from incidents.diagnosis.whatif_edits import (
    Edit,
    EditError,
)
from incidents.diagnosis.whatif_reclaim import reclaims

MAX_PASSES = 8  # scheduling passes one job's answers may run
MAX_ANSWERS = 5
TRIAL_SLACK = 100  # a trial pass weighs the jobs up to this many past the job in line


@dataclass
class Answer:
    """One edit (or a few: a room edit with the raise it needs, a GPU and a CPU raise) that starts the job in one
    pass, and what it does to the others."""

    # "quota", "limit", "cpu_quota", "cpu_limit", "memory_quota", "memory_limit", "uncordon", "repair", "hold",
    # "stop", "shrink", "onto"
    kind: str
    edits: list[Edit]
    words: str  # "limit +8 on vision (to 16)", "CPU limit +8 cores on vision (to 48 cores)"
    nodes: dict[str, int] = field(default_factory=dict)  # where its pods go: node -> pods
    gpus: dict[str, list[int]] = field(default_factory=dict)  # node -> GPU indices, where the inventory says
    delayed: list[Considered] = field(
        default_factory=list
    )  # started in the base pass, no longer with the edit
    evicted: list[EntityState] = field(default_factory=list)  # running jobs the edit stops

    @property
    def query(self) -> str:
        """The what-if page's query string with these edits (the cursor is the page's to add)."""
        return urlencode([(e.kind, e.value) for e in self.edits])

    @property
    def where_words(self) -> str:
        """ "starts now on h100-07, GPUs 0–7"."""
        parts = []
        for node, pods in self.nodes.items():
            idx = self.gpus.get(node)
            where = f"{node}, GPUs {_ranges(idx)}" if idx else node
            parts.append(where + (f" ({pods} pods)" if pods > 1 and not idx else ""))
        return "starts now on " + "; ".join(parts)

    @property
    def others_words(self) -> str:
        out = [
            f"evicts {', '.join(j.ref.label for j in self.evicted)}" if self.evicted else "nothing evicted"
        ]
        if self.delayed:
            out.append("delays " + ", ".join(c.label for c in self.delayed))
        return "; ".join(out)

    @property
    def sentence(self) -> str:
        return f"{self.words} → {self.where_words}; {self.others_words}"


@dataclass
class Unblock:
    """The answers for one waiting job, the refusals (what no edit of the list fixes), and the passes run."""

    answers: list[Answer] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    passes: int = 0
    starts_already: bool = False


def _ranges(idx: list[int]) -> str:
    """[0,1,2,3,6] -> "0–3, 6"."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(idx):
        if run and i != run[-1] + 1:
            out.append(f"{run[0]}–{run[-1]}" if len(run) > 1 else str(run[0]))
            run = []
        run.append(i)
    if run:
        out.append(f"{run[0]}–{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def smallest_edits(di: DiagnosisInput, job: EntityState, base: ClusterPass) -> Unblock:
    """The edits that start ``job`` in one pass over the state at t with the edit applied (module doc). ``base``
    is the pass over the state as it is (``cluster_pass(di)``). Call inside ``di.indexed()``."""
    out = Unblock()
    me = base.find(job.namespace, job.name)
    if me is None:
        out.refusals.append(
            f"not weighed: it is beyond the first {len(base.considered)} of the {base.waiting} waiting jobs one "
            "pass considers"
        )
        return out
    if me.outcome == STARTS:
        out.starts_already = True
        return out
    if me.outcome == PLACED:
        return out
    req = job_request(di, job)
    rows = F.node_fits(di, req)
    prefix: list[Edit] = []
    prefix_words = ""
    trials = _Trials(di, job, base, out, me.order)
    if me.outcome == QUOTA:
        quota = _quota_answer(di, job, req, me, base, trials)
        if quota is None:
            return out
        if quota.starts:
            return out
        prefix = quota.edits  # room is short too: each room edit below comes with the quota it needs
        prefix_words = quota.words
    refusal = size_refusal(req, rows)
    if refusal:
        out.refusals.append(refusal)
    else:
        for kind, edits, words in room_candidates(di, job, req, rows, me, base):
            if len(out.answers) >= MAX_ANSWERS:
                break
            trials.run(kind, [*prefix, *edits], f"{prefix_words} and {words}" if prefix else words)
    for kind, edits, words in shrink_candidates(di, job, req, rows, me, base):
        if len(out.answers) >= MAX_ANSWERS:
            break
        trials.run(kind, [*prefix, *edits], f"{prefix_words} and {words}" if prefix else words)
    if not out.answers and not out.refusals:
        ahead = [c for c in waiting_ahead(base, me) if c.usable & me.usable]
        out.refusals.append(
            f"no small edit starts it in one pass: {len(ahead)} waiting job(s) ahead of it want the same GPUs and "
            "would take any room freed first"
            if len(ahead) > MAX_HOLDS
            else "no edit of the list starts it in one pass (quota, nodes, jobs ahead, request, pool)"
        )
    return out


#
# Trying an edit: one pass
#


@dataclass
class _Outcome:
    starts: bool
    edits: list[Edit]
    after: Considered | None
    words: str = ""


class _Trials:
    """Runs one pass per candidate, within ``MAX_PASSES``, and keeps those that start the job."""

    def __init__(
        self, di: DiagnosisInput, job: EntityState, base: ClusterPass, out: Unblock, order: int
    ) -> None:
        self.di, self.job, self.base, self.out = di, job, base, out
        # the jobs after it in line cannot take its room first: a trial pass stops a little past it
        self.limit = min(MAX_CONSIDERED, order + TRIAL_SLACK)

    def run(self, kind: str, edits: list[Edit], words: str) -> _Outcome | None:
        if self.out.passes >= MAX_PASSES:
            return None
        try:
            edited = apply_edits(self.di, edits)
        except EditError:
            return None
        self.out.passes += 1
        with edited.indexed():
            after = cluster_pass(edited, limit=self.limit)
            mine = after.find(self.job.namespace, self.job.name)
            starts = mine is not None and mine.outcome == STARTS
            if starts and mine is not None:
                self.out.answers.append(
                    Answer(
                        kind=kind,
                        edits=edits,
                        words=words,
                        nodes=dict(mine.nodes),
                        gpus=_gpu_indices(edited, mine),
                        delayed=_delayed(self.base, after, self.job, edits, self.limit),
                        evicted=_evicted(self.di, edits),
                    )
                )
            elif is_raise(kind) and mine is not None and mine.outcome == NO_ROOM:
                # a quota raise on a full KAI cluster: the job may start by reclaiming from a queue over its share
                mine_reclaims = [r for r in reclaims(edited, after) if r.label == mine.label]
                if mine_reclaims:
                    starts = True
                    r = mine_reclaims[0]
                    self.out.answers.append(
                        Answer(
                            kind=kind,
                            edits=edits,
                            words=words,
                            nodes=dict(r.nodes),
                            delayed=_delayed(self.base, after, self.job, edits, self.limit),
                            evicted=[v.job for v in r.victims] + _evicted(self.di, edits),
                        )
                    )
        return _Outcome(starts, edits, mine, words)


def _gpu_indices(di: DiagnosisInput, c: Considered) -> dict[str, list[int]]:
    """The free GPUs a whole-GPU start would take on each node, lowest index first, where the inventory lists the
    node's GPUs (a GPU with no pod, present and not faulty). Nothing for shares and MIG."""
    if not c.whole:
        return {}
    req_per = int(c.units // max(sum(c.nodes.values()), 1)) if c.nodes else 0
    out: dict[str, list[int]] = {}
    for node, pods in c.nodes.items():
        free = [
            int(g.get("index"))
            for g in di.gpus_of_node(node)
            if not g.get("pod") and g.get("phase", "ok") == "ok" and g.get("index") is not None
        ]
        want = pods * req_per
        if want and len(free) >= want:
            out[node] = free[:want]
    return out


def _delayed(
    base: ClusterPass, after: ClusterPass, job: EntityState, edits: list[Edit], limit: int
) -> list[Considered]:
    """The jobs the base pass starts and the edited one does not (the job itself and the jobs held are not),
    among the first ``limit`` in line (those the trial pass weighs)."""
    edited = {(e.namespace, e.name) for e in edits if e.kind in ("hold", "remove")}
    edited.add((job.namespace, job.name))
    gone = []
    for c in base.starts:
        if (c.job.namespace, c.job.name) in edited or c.order > limit:
            continue
        a = after.find(c.job.namespace, c.job.name)
        if a is None or a.outcome != STARTS:
            gone.append(c)
    return gone


def _evicted(di: DiagnosisInput, edits: list[Edit]) -> list[EntityState]:
    """Running jobs a hold or remove stops (their pods free their GPUs)."""
    out = []
    for e in edits:
        if e.kind not in ("hold", "remove"):
            continue
        j = di.find("job", e.name, e.namespace)
        if j is not None and any(p.get("node") for p in di.pods_of_job(j)):
            out.append(j)
    return out


#
# Quota and limit: the least raise that starts it
#


def _quota_answer(
    di: DiagnosisInput, job: EntityState, req: Request, me: Considered, base: ClusterPass, trials: _Trials
) -> _Outcome | None:
    """Raise each quota or limit that holds the job (its GPUs', and its CPU or memory bound's) to what it needs
    with what the pass started before it charged (the least that admits it), then each by one more job of its
    size while that is not enough (at most three tries). The outcome that admits it, even when room is then
    short; None when nothing can be raised."""
    q = quota_at(di, job, req, 0)
    if q is None:
        return None
    started: dict[tuple[str, str], float] = {}
    for c in base.starts:
        if c.order < me.order:
            started[(c.project, c.queue)] = started.get((c.project, c.queue), 0.0) + c.units
    charge_started(q, started)  # as the pass read it: what it started before the job is charged
    if q.resources is not None:
        q.resources.charge(*started_resources(di, base, me))
    raises = gpu_raises(q, req)
    if q.resources is not None:
        raises += resource_raises(q.resources, queue_name(q))
    if not raises:  # the pass said quota: the GPU bound it names
        raises = gpu_raises(q, req, fallback=True)
    last: _Outcome | None = None
    for _ in range(3):
        edits = [r.edit for r in raises]
        last = trials.run(raises[0].kind, edits, " and ".join(r.words for r in raises))
        if last is None or last.starts:
            return last
        if last.after is not None and last.after.outcome != QUOTA:
            return last  # admitted: what holds it now is room
        for r in raises:
            r.target += r.step
    return last


__all__ = [
    "MAX_ANSWERS",
    "MAX_PASSES",
    "NOT_REACHED",
    "Answer",
    "Unblock",
    "smallest_edits",
]

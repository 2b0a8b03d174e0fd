"""What each queue and department holds on the what-if page: GPU units, CPU cores and memory (GiB) at t and after
one scheduling pass before and after the edits, with its quota and limit of each (after the edits).

GPUs are counted as the scheduler charges them (``allocation``: a 0.5 share is 0.5); CPU and memory are what the
bound pods request (``resources.held``) plus what each pass started (``ClusterPass.started_resources``). A CPU or
memory quota or limit is a KAI queue's or department's (``resources.dims_of``): Kueue's states carry none, and a
bound left unset is unlimited. ``allocation_table`` lays the rows out for the page, with CPU and memory columns
only when some queue or department sets a bound of them or holds some.

Pure: reads the ``DiagnosisInput`` and the passes only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from incidents.diagnosis.allocation import ACTIVE_POD_PHASES, pod_units, project_allocated
from incidents.diagnosis.fairshare import amount
from incidents.diagnosis.resources import CPU, MEMORY, dims_of, held
from incidents.diagnosis.scheduling_pass import ClusterPass
from incidents.diagnosis.types import DiagnosisInput, EntityState

GPU = "gpu"
RESOURCES = (GPU, CPU, MEMORY)
HEADS = {GPU: "GPUs", CPU: "CPU (cores)", MEMORY: "memory (GiB)"}
# decimals each resource is shown with: GPU units (a 0.5 share), cores (500m is 0.5), GiB
PLACES = {GPU: 4, CPU: 3, MEMORY: 1}
MILLICORES = 1000.0
GIB = float(2**30)

Key = tuple[str, str]  # (kind, name)
# one resource of one queue or department after one pass: (quota, limit, held at t, held after the pass)
Side = tuple[float | None, float | None, float, float]


def figure(value: float, places: int) -> str:
    """16 (not 16.0), 0.5, 1048576 (never 1.04858e+06), rounded to ``places`` decimals."""
    text = f"{round(value, places):.{places}f}".rstrip("0").rstrip(".") if places else f"{round(value)}"
    return "0" if text in ("-0", "") else text


@dataclass
class Amount:
    """One resource of a queue or department, in the unit the page writes it: GPU units, cores or GiB."""

    quota: float | None  # after the edits; None: none set (unlimited)
    limit: float | None
    now: float  # held at t (after the edits: a removed job's pods no longer count)
    before: float  # after the pass on the state as it was
    after: float  # after the pass on the edited state
    places: int = 4

    @property
    def delta(self) -> float:
        return round(self.after - self.before, self.places)

    @property
    def bounded(self) -> bool:
        return self.quota is not None or self.limit is not None

    @property
    def holds(self) -> bool:
        """Whether it holds some of the resource at t or after either pass."""
        return any(abs(v) > 10**-self.places for v in (self.now, self.before, self.after))

    @property
    def display(self) -> dict[str, str]:
        """The numbers as the page writes them: 16 (not 16.0), ∞ for no quota or limit, +8 for a delta, and
        ``bound``: "12 / 24" (quota / limit), "" when neither is set."""
        out = {
            k: "∞" if v is None else figure(v, self.places)
            for k, v in (
                ("quota", self.quota),
                ("limit", self.limit),
                ("now", self.now),
                ("before", self.before),
                ("after", self.after),
            )
        }
        out["delta"] = ("+" if self.delta >= 0 else "-") + figure(abs(self.delta), self.places)
        out["bound"] = f"{out['quota']} / {out['limit']}" if self.bounded else ""
        return out


@dataclass
class Allocation:
    """A queue's or department's GPUs, CPU and memory before and after the pass, each with its quota and limit
    (after the edits). ``quota``, ``limit``, ``now``, ``before``, ``after``, ``delta`` and ``display`` are the
    GPU numbers."""

    kind: str  # "queue" | "department"
    name: str
    gpus: Amount
    cpu: Amount  # cores
    memory: Amount  # GiB

    @property
    def quota(self) -> float | None:
        return self.gpus.quota

    @property
    def limit(self) -> float | None:
        return self.gpus.limit

    @property
    def now(self) -> float:
        return self.gpus.now

    @property
    def before(self) -> float:
        return self.gpus.before

    @property
    def after(self) -> float:
        return self.gpus.after

    @property
    def delta(self) -> float:
        return self.gpus.delta

    @property
    def display(self) -> dict[str, str]:
        return self.gpus.display

    def amount(self, resource: str) -> Amount:
        return {GPU: self.gpus, CPU: self.cpu, MEMORY: self.memory}[resource]


@dataclass
class AllocationTable:
    """The page's allocation table: the resources it has columns for, and each row's amounts of them."""

    resources: list[str]
    rows: list[tuple[Allocation, list[Amount]]]

    @property
    def heads(self) -> list[str]:
        return [HEADS[r] for r in self.resources]

    @property
    def columns(self) -> int:
        """Cells in a row: kind, name, then quota / limit, held at t and after the pass per resource."""
        return 2 + 3 * len(self.resources)


def allocation_table(allocations: list[Allocation]) -> AllocationTable:
    """GPUs always; CPU and memory each when some row sets a quota or limit of it or holds some of it."""
    shown = [
        r for r in RESOURCES if r == GPU or any(a.amount(r).bounded or a.amount(r).holds for a in allocations)
    ]
    return AllocationTable(shown, [(a, [a.amount(r) for r in shown]) for a in allocations])


#
# Building the rows
#


def allocation_sides(di: DiagnosisInput, cp: ClusterPass) -> dict[Key, dict[str, Side]]:
    """(kind, name) -> resource -> (quota, limit, held at t, held after the pass), queues then departments, in
    the page's units. Call it inside ``di.indexed()``: the held CPU and memory are read from its index."""
    out: dict[Key, dict[str, Side]] = {}
    after_by_name: dict[str, tuple[float, float, float]] = {}
    for q in sorted(di.queues, key=lambda q: q.name):
        project = q.get("project") or ""
        gpus = project_allocated(di, project, q.name)
        cpu, memory = held(di, project, q.name)
        gained = sum(u for k, u in cp.started_units.items() if _charged(k, project, q.name))
        started = [v for k, v in cp.started_resources.items() if _charged(k, project, q.name)]
        now = (gpus, cpu, memory)
        after = (gpus + gained, cpu + sum(v[0] for v in started), memory + sum(v[1] for v in started))
        after_by_name[q.name] = after
        if project:
            after_by_name.setdefault(project, after)
        out[("queue", q.name)] = _sides(q, now, after)
    for d in sorted(di.departments, key=lambda d: d.name):
        members = list(dict.fromkeys([*(d.get("projects") or []), *(d.get("queues") or [])]))
        at_t = {m: _held_by(di, m) for m in members}
        now = _sum(at_t[m] for m in members)
        after = _sum(after_by_name.get(m, at_t[m]) for m in members)
        out[("department", d.name)] = _sides(d, now, after)
    return out


def line_up(base: dict[Key, dict[str, Side]], edited: dict[Key, dict[str, Side]]) -> list[Allocation]:
    """One row per queue and department: its quota, limit and held at t as the edits leave them, and what it
    holds after the pass as things are (``base``) and with the edits (``edited``). One the edits removed keeps
    its numbers at t and holds nothing after."""
    out = []
    for key in [*edited, *(k for k in base if k not in edited)]:
        amounts = {}
        for r in RESOURCES:
            was = base[key][r][3] if key in base else 0.0
            if key in edited:
                quota, limit, now, after = edited[key][r]
            else:
                quota, limit, now, _ = base[key][r]
                after = 0.0
            amounts[r] = Amount(quota, limit, now, was, after, PLACES[r])
        out.append(Allocation(key[0], key[1], amounts[GPU], amounts[CPU], amounts[MEMORY]))
    return out


def _sides(
    state: EntityState, now: tuple[float, float, float], after: tuple[float, float, float]
) -> dict[str, Side]:
    """GPU units, millicores and bytes in; GPU units, cores and GiB out, each with its quota and limit."""
    dims = dims_of(state)
    scale = {GPU: 1.0, CPU: MILLICORES, MEMORY: GIB}
    bounds = {
        GPU: (amount(state.get("quota_gpus")), amount(state.get("limit_gpus"))),
        CPU: (dims[CPU].deserved, dims[CPU].limit),
        MEMORY: (dims[MEMORY].deserved, dims[MEMORY].limit),
    }
    out: dict[str, Side] = {}
    for i, r in enumerate(RESOURCES):
        quota, limit = bounds[r]
        out[r] = (
            None if quota is None else quota / scale[r],
            None if limit is None else limit / scale[r],
            round(now[i] / scale[r], 4 if r == GPU else 6),
            round(after[i] / scale[r], 4 if r == GPU else 6),
        )
    return out


def _charged(key: tuple[str, str], project: str, queue: str) -> bool:
    """Whether a start the pass charged to (project, queue) ``key`` counts against the queue."""
    return key[1] == queue or bool(project and key[0] == project)


def _held_by(di: DiagnosisInput, name: str) -> tuple[float, float, float]:
    """GPU units, millicores and bytes the bound pods of the project or queue ``name`` hold at t."""
    gpus = sum(
        pod_units(p)
        for p in di.pods
        if p.get("node")
        and p.get("phase") in ACTIVE_POD_PHASES
        and name in (p.get("project"), p.get("queue"))
    )
    cpu, memory = held(di, name, name)
    return (gpus, cpu, memory)


def _sum(rows: Any) -> tuple[float, float, float]:
    total = [0.0, 0.0, 0.0]
    for row in rows:
        for i, v in enumerate(row):
            total[i] += v
    return (total[0], total[1], total[2])


__all__ = [
    "GPU",
    "HEADS",
    "RESOURCES",
    "Allocation",
    "AllocationTable",
    "Amount",
    "allocation_sides",
    "allocation_table",
    "figure",
    "line_up",
]

"""The product's scheduling model against KAI Scheduler's own test tables, directly (issue [2/6] item 3).

Every case file of ``tests/simulator/kai_cases/`` (``<id>.yaml``: a format-1 scenario with KAI's expected
end state in its ``reference`` section, transcribed from kai-scheduler/KAI-Scheduler's unit tests, see its
README) is read here and its scenario turned into the model's input by this module, never through the
simulator: the model and the simulator are each checked against KAI, not against each other. The jobs KAI's
test starts as running (submitted at ``0s``) are bound where the scenario pins them; the others wait, in the
scenario's order (KAI's age order). The model's rounds (``settle``) run its allocate pass
(``scheduling_pass.cluster_pass``) and, when nothing more fits, the victims KAI would evict for the first
waiting job in order (``reclaim.victims``), until the state is stable, as KAI's integration tests do. The end
state (each job running, and where, or pending) is compared with KAI's expected one.

``CANNOT`` names, exactly, the cases the model does not end as KAI does, and why; they are strict xfails, so
a case that starts agreeing fails until it is taken off the list.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from incidents.diagnosis import scheduling_pass as SP
from incidents.diagnosis.consolidation import consolidation
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.quantities import quantity
from incidents.diagnosis.queue_order import QueueOrder
from incidents.diagnosis.reclaim import victims
from incidents.diagnosis.types import DiagnosisInput, EntityState

CASES_DIR = Path(__file__).resolve().parents[2] / "simulator" / "kai_cases"

# case id -> why the model does not end it as KAI does
CANNOT: dict[str, str] = {}


def _from_yaml(path: Path) -> dict[str, Any]:
    """A case file: a format-1 scenario whose ``reference`` section holds KAI's source and expected end state."""
    scenario = yaml.safe_load(path.read_text(encoding="utf-8"))
    ref = scenario.pop("reference")
    return {
        "id": path.stem,
        "family": ref.get("family", ""),
        "what": ref.get("what", ""),
        "scenario": scenario,
        "expected": ref["end_state"],
    }


def all_cases() -> list[dict[str, Any]]:
    """Every case of the directory: one scenario per ``<id>.yaml``, and any older ``*.json`` list of
    ``{id, scenario, expected}`` entries for the ids no YAML file has."""
    cases = [_from_yaml(p) for p in sorted(CASES_DIR.glob("*.yaml"))]
    seen = {c["id"] for c in cases}
    for path in sorted(CASES_DIR.glob("*.json")):
        cases += [c for c in json.loads(path.read_text(encoding="utf-8")) if c["id"] not in seen]
    return cases


CASES = all_cases()

#
# Scenario -> the model's input
#

_JOB_KEYS = {
    "name",
    "running_on",
    "gpu_memory",
    "project",
    "submit",
    "pods",
    "gpus_per_pod",
    "priority",
    "node_selector",
    "tolerations",
    "mig_profile",
    "cpu_per_pod",
    "memory_per_pod",
    "runtime",
    "image",
}
_POOL_KEYS = {
    "name",
    "nodes",
    "gpus_per_node",
    "gpu_product",
    "labels",
    "taints",
    "mig",
    "sharing",
    "cpu",
    "memory",
}
_PROJECT_KEYS = {"name", "namespace", "quota", "limit", "over_quota_weight", "priority", "department"}
_DEPT_KEYS = {"name", "quota", "limit", "over_quota_weight", "priority"}


class Unexpressed(Exception):
    """A case uses a scenario key this builder does not turn into the model's input."""


def _offset(text: str) -> timedelta:
    total = timedelta()
    for n, unit in re.findall(r"(\d+)([smh])", text):
        total += timedelta(**{{"s": "seconds", "m": "minutes", "h": "hours"}[unit]: int(n)})
    return total


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_keys(where: str, got: dict[str, Any], known: set[str]) -> None:
    extra = set(got) - known
    if extra:
        raise Unexpressed(f"{where}: {sorted(extra)}")


def _nodes(scenario: dict[str, Any], start: datetime) -> tuple[list[EntityState], list[EntityState]]:
    nodes, gpus = [], []
    for pool in scenario["cluster"]["nodepools"]:
        _check_keys(f"nodepool {pool['name']}", pool, _POOL_KEYS)
        per = int(pool["gpus_per_node"])
        mig = pool.get("mig") or {}
        for i in range(1, int(pool["nodes"]) + 1):
            name = f"{pool['name']}-{i:02d}"
            alloc: dict[str, Any] = {"nvidia.com/gpu": 0 if mig else per}
            alloc.update({f"nvidia.com/mig-{p}": n * per for p, n in mig.items()})
            if pool.get("cpu") is not None:
                alloc["cpu"] = pool["cpu"]
            if pool.get("memory") is not None:
                alloc["memory"] = pool["memory"]
            labels = {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.count": str(per),
                **(pool.get("labels") or {}),
            }
            state = {
                "ready": True,
                "unschedulable": False,
                "taints": list(pool.get("taints") or []),
                "labels": labels,
                "gpu_product": pool.get("gpu_product", ""),
                "gpu_memory_mib": _gpu_mib(pool.get("gpu_product", "")),
                "nodepool": pool["name"],
                "capacity": dict(alloc),
                "allocatable": alloc,
                "mig": {"config": "custom", "strategy": "mixed"} if mig else {},
            }
            nodes.append(EntityState("node", name, state=state, valid_from=start))
            for index in range(per):
                gpu = {"node": name, "index": index, "uuid": f"GPU-{name}-{index}", "present": True}
                gpus.append(EntityState("gpu", f"GPU-{name}-{index}", state=gpu, valid_from=start))
    return nodes, gpus


def _cpu_memory(entry: dict[str, Any]) -> dict[str, Any]:
    """A project's or department's CPU and memory quota and limit, as the inventory's queue state carries them
    (cores and bytes; absent: unlimited)."""
    out: dict[str, Any] = {}
    for section in ("quota", "limit"):
        got = entry.get(section) or {}
        out[f"{section}_cpu_cores"] = quantity(got.get("cpu"))
        out[f"{section}_memory_bytes"] = quantity(got.get("memory"))
    return out


def _policies(scenario: dict[str, Any], start: datetime) -> tuple[list[EntityState], list[EntityState]]:
    def gpu(d: dict[str, Any] | None) -> float | None:
        return None if not d or d.get("gpu") is None else d["gpu"]

    queues, depts = [], []
    members: dict[str, list[str]] = {}
    for p in scenario.get("projects") or []:
        _check_keys(f"project {p['name']}", p, _PROJECT_KEYS)
        if p.get("department"):
            members.setdefault(p["department"], []).append(p["name"])
        state = {
            "project": p["name"],
            "priority": p.get("priority", 0),
            "quota_gpus": gpu(p.get("quota")),
            "limit_gpus": gpu(p.get("limit")),
            "over_quota_weight": p.get("over_quota_weight", 1),
            "department": p.get("department"),
            "scheduler": scenario["cluster"]["scheduler"],
            **_cpu_memory(p),
        }
        queues.append(EntityState("queue", p["name"], state=state, valid_from=start))
    for d in scenario.get("departments") or []:
        _check_keys(f"department {d['name']}", d, _DEPT_KEYS)
        state = {
            "scheduler": scenario["cluster"]["scheduler"],
            "quota_gpus": gpu(d.get("quota")),
            "limit_gpus": gpu(d.get("limit")),
            "over_quota_weight": d.get("over_quota_weight"),
            "priority": d.get("priority", 0),
            "projects": members.get(d["name"], []),
            "queues": members.get(d["name"], []),
            **_cpu_memory(d),
        }
        depts.append(EntityState("department", d["name"], state=state, valid_from=start))
    return queues, depts


def _mib(text: str) -> int:
    n, unit = re.fullmatch(r"(\d+)(Mi|Gi)", str(text)).groups()  # type: ignore[union-attr]
    return int(n) * (1024 if unit == "Gi" else 1)


def _gpu_mib(product: str) -> int:
    """A GPU's memory from its product name ("…-80GB"), as GPU feature discovery's gpu.memory label gives it."""
    found = re.search(r"(\d+)GB", product)
    return int(found.group(1)) * 1024 if found else 0


def _job(spec: dict[str, Any], index: int, start: datetime, running: bool, gpu_mib: int = 0) -> EntityState:
    _check_keys(f"job {spec['name']}", spec, _JOB_KEYS)
    per = spec.get("gpus_per_pod", 0)
    pods = int(spec.get("pods", 1))
    priority = spec.get("priority", "train")
    value = priority if isinstance(priority, int) else None
    if value is not None:  # KAI's PriorityClass value: from 100 on not preemptible
        priority = "inference" if value >= 100 else "train"
    state: dict[str, Any] = {
        "phase": "Running" if running else "Pending",
        "active": pods if running else 0,
        "queue": spec["project"],
        "project": spec["project"],
        "pods": pods,
        "priority_class": priority,
        "preemptible": priority != "inference",
        "priority_value": value,
        "node_selector": dict(spec.get("node_selector") or {}),
        "tolerations": list(spec.get("tolerations") or []),
        # the scenario lists jobs submitted together in KAI's age order: a second apart keeps that order
        "submitted": _stamp(start + _offset(spec["submit"]) + timedelta(seconds=index)),
    }
    req: dict[str, Any] = {}
    if spec.get("cpu_per_pod") is not None:
        req["cpu"] = spec["cpu_per_pod"]
    if spec.get("memory_per_pod") is not None:
        req["memory"] = spec["memory_per_pod"]
    state["requests_per_pod"] = req
    if spec.get("mig_profile"):
        n = int(per)
        state.update(gpus_per_pod=0, gpus_total=0, mig={spec["mig_profile"]: n})
        state["gpu_units"] = pods * n * int(spec["mig_profile"].split("g", 1)[0])
    elif spec.get("gpu_memory"):
        mib = _mib(spec["gpu_memory"])
        state.update(gpus_per_pod=0, gpus_total=0, gpu_share={"memory_mib": mib})
        state["gpu_units"] = round(pods * mib / gpu_mib, 4)
    elif 0 < float(per) < 1:
        state.update(gpus_per_pod=0, gpus_total=0, gpu_share={"fraction": float(per)})
        state["gpu_units"] = round(pods * float(per), 4)
    else:
        state.update(gpus_per_pod=int(per), gpus_total=pods * int(per))
    return EntityState("job", spec["name"], spec["project"], state=state, valid_from=start)


def _bind(di: DiagnosisInput, job: EntityState, nodes: dict[str, int], start: datetime) -> None:
    """Bind a job's pods, ``nodes``: node -> pods there, and mark it running."""
    st = job.state
    st.update(phase="Running", active=st["pods"])
    where = [n for n, k in nodes.items() for _ in range(k)]
    for i, node in enumerate(where):
        pod: dict[str, Any] = {
            "phase": "Running",
            "node": node,
            "job": job.name,
            "queue": st["queue"],
            "project": st["project"],
            "gpus": st["gpus_per_pod"],
            "priority_class": st["priority_class"],
            "node_selector": st["node_selector"],
            "tolerations": st["tolerations"],
            "requests": st["requests_per_pod"],
        }
        if st.get("mig"):
            pod.update(mig=st["mig"], gpu_units=st["gpu_units"] / st["pods"])
        if st.get("gpu_share"):
            share = st["gpu_share"]
            mib = int(di.find("node", node).get("gpu_memory_mib") or 0)  # type: ignore[union-attr]
            fraction = share.get("fraction") or (share["memory_mib"] / mib if mib else 0)
            pod.update(gpu_share=share, gpu_units=round(fraction, 4))
            _share_on(di, node, f"{job.namespace}/{job.name}-{i}", fraction, start, share.get("memory_mib"))
        di.pods.append(EntityState("pod", f"{job.name}-{i}", job.namespace, state=pod, valid_from=start))


def _share_on(
    di: DiagnosisInput, node: str, pod: str, fraction: float, start: datetime, mib: int | None = None
) -> None:
    """A running share: on a shared GPU with room left, else on a free GPU that a reservation pod then holds."""
    held = {"pod": pod, "fraction": round(fraction, 4), "memory_mib": mib}
    for g in di.gpus_of_node(node):
        if g.get("reservation") and sum(s["fraction"] for s in g.get("shares") or []) + fraction <= 1 + 1e-9:
            g.state["shares"].append(held)
            return
    # whole-GPU pods are counted from the first GPU up, shared GPUs from the last one down
    reserved = [g for g in di.gpus_of_node(node) if g.get("reservation")]
    g = di.gpus_of_node(node)[-(len(reserved) + 1)]
    g.state.update(reservation=f"runai-reservation/{g.name}", shares=[held])
    di.pods.append(
        EntityState(
            "pod",
            f"reservation-{g.name}",
            "runai-reservation",
            state={"phase": "Running", "node": node, "gpus": 1, "gpu_units": 0, "reservation_for": g.name},
            valid_from=start,
        )
    )


def model_input(scenario: dict[str, Any]) -> DiagnosisInput:
    start = datetime.fromisoformat(scenario["start"].replace("Z", "+00:00"))
    nodes, gpus = _nodes(scenario, start)
    queues, depts = _policies(scenario, start)
    di = DiagnosisInput(
        t=start + timedelta(minutes=2),
        onset=start,
        cluster=scenario["cluster"]["name"],
        scheduler=scenario["cluster"]["scheduler"],
        nodes=nodes,
        gpus=gpus,
        queues=queues,
        departments=depts,
    )
    for index, spec in enumerate(scenario["jobs"]):
        if "generate" in spec:
            raise Unexpressed("jobs: generate")
        running = _offset(spec["submit"]) == timedelta()
        job = _job(spec, index, start, running, int(di.nodes[0].get("gpu_memory_mib") or 0))
        di.jobs.append(job)
        if running and spec.get("running_on"):  # its pods on the nodes listed, one each
            where: dict[str, int] = {}
            for n in spec["running_on"]:
                where[n] = where.get(n, 0) + 1
            _bind(di, job, where, start)
        elif running:  # KAI's test starts it running: on the node its selector pins, else on the first node
            node = (spec.get("node_selector") or {}).get("kubernetes.io/hostname") or di.nodes[0].name
            _bind(di, job, {node: int(spec.get("pods", 1))}, start)
    return di


def _evict(di: DiagnosisInput, job: EntityState) -> None:
    """An evicted job returns to Pending: its pods go, and the shares they held on their GPUs; a GPU left with
    no share loses its reservation pod (KAI releases it)."""
    gone = {f"{p.namespace}/{p.name}" for p in di.pods_of_job(job)}
    emptied = set()
    for g in di.gpus:
        if g.get("shares"):
            g.state["shares"] = [x for x in g.state["shares"] if x["pod"] not in gone]
            if not g.state["shares"]:
                g.state.pop("reservation", None)
                emptied.add(g.name)
    di.pods = [
        p
        for p in di.pods
        if f"{p.namespace}/{p.name}" not in gone and p.get("reservation_for") not in emptied
    ]
    job.state.update(phase="Pending", active=0)


MAX_ROUNDS = 16  # scheduling rounds until the state is stable, as KAI's integration tests run them


def settle(di: DiagnosisInput) -> None:
    """KAI's rounds over the model: the allocate pass (``cluster_pass``) binds what fits; when nothing more
    does, the first waiting job in order that KAI would evict for (``reclaim.victims``) takes its victims'
    room, else the first for which KAI would move running jobs (``consolidation.consolidation``); until nothing
    changes."""
    start = di.onset
    for _ in range(MAX_ROUNDS):
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
            for job in QueueOrder(di, waiting):
                moved = consolidation(di, job)
                if moved is not None:
                    for other, nodes in moved.moves:
                        _evict(di, other)
                        _bind(di, other, nodes, start)
                    _bind(di, job, moved.nodes, start)
                    break
            else:
                return


def model_end_state(case: dict[str, Any]) -> dict[str, tuple[str, list[str]]]:
    """job -> ("running" | "pending", its nodes) once the model's rounds over the case are stable."""
    di = model_input(case["scenario"])
    settle(di)
    out: dict[str, tuple[str, list[str]]] = {}
    for job in di.jobs:
        nodes = sorted({p.get("node") for p in di.pods_of_job(job)})
        out[job.name] = ("pending", []) if is_pending(job) else ("running", nodes)
    return out


def differences(case: dict[str, Any]) -> list[str]:
    got = model_end_state(case)
    out = []
    for name, exp in sorted(case["expected"].items()):
        state, nodes = got.get(name, ("absent", []))
        if state != exp["state"] or (state == "running" and exp.get("node") and nodes != [exp.get("node")]):
            out.append(f"{name}: KAI {exp['state']} on {exp.get('node')}, model {state} on {nodes}")
    return out


def _param(case: dict[str, Any]) -> Any:
    marks = []
    if case["id"] in CANNOT:
        marks.append(pytest.mark.xfail(strict=True, reason=f"{case['id']}: {CANNOT[case['id']]}"))
    return pytest.param(case, id=case["id"], marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_the_model_ends_the_case_as_kai(case: dict[str, Any]) -> None:
    try:
        diff = differences(case)
    except Unexpressed as e:
        pytest.fail(f"{case['id']}: the model's input cannot say {e}; teach {Path(__file__).name} the key")
    assert not diff, f"{case['id']} ({case['what']}):\n" + "\n".join(diff)


def test_every_case_file_is_read_and_every_listed_case_exists() -> None:
    assert CASES, "the KAI case files are where the README says"
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), "case ids are unique across the case files"
    assert set(CANNOT) <= set(ids), f"CANNOT names cases that are gone: {sorted(set(CANNOT) - set(ids))}"

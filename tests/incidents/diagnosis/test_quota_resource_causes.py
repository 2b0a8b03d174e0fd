"""A KAI queue's (or department's) CPU or memory quota or limit named as the cause of a wait: the existing quota
codes with a statement that names the resource, and an action that patches that resource of that Queue by the
smallest sufficient amount (never its GPUs); a job its GPUs hold reads as before."""

from __future__ import annotations

from typing import Any

from incidents.diagnosis import codes as C
from incidents.diagnosis.actions import propose
from incidents.diagnosis.scheduling import check_scheduling
from incidents.diagnosis.types import EntityState, Finding, Ref

from .dx_world import T0, job, node, pod, queue, world

JOB = Ref("job", "ft", "vision")
GB = 10**9


def _node(name: str) -> EntityState:
    n = node(name)
    for key in ("allocatable", "capacity"):
        n.state[key].update({"cpu": "96", "memory": str(1024 * GB)})
    return n


def _running(name: str, project: str, node_name: str, gpus: int, cpu: float, memory: int = 0, **kw: Any):
    p = pod(f"{name}-0", name, project, node_name=node_name, gpus=gpus, **kw)
    p.state["requests"] = {"cpu": str(cpu), "memory": str(memory)}
    j = job(name, project, gpus_per_pod=gpus, phase="Running", **kw)
    j.state["active"] = 1
    return j, p


def _world(q: EntityState, *, gpus: int = 4, cpu: float = 16, memory: int = 0, held=(), departments=(), **kw):
    """vision-ft asks ``gpus`` GPUs, ``cpu`` cores and ``memory`` bytes; ``held`` are running (job, pod) pairs."""
    ft = job("ft", gpus_per_pod=gpus, **kw)
    ft.state["requests_per_pod"] = {"cpu": str(cpu), "memory": str(memory)}
    jobs = [ft, *(j for j, _ in held)]
    pods = [p for _, p in held]
    return world(
        subjects=[JOB],
        nodes=[_node("h100-01"), _node("h100-02")],
        jobs=jobs,
        pods=pods,
        queues=[q],
        departments=list(departments),
    )


def _vision(**cpu_memory: Any) -> EntityState:
    q = queue("vision", 16)
    q.state.update(cpu_memory)
    return q


def _quota_finding(findings: list[Finding], code: str = C.PROJECT_QUOTA_EXHAUSTED) -> Finding:
    (f,) = [f for f in findings if f.code == code]
    return f


def test_a_job_held_by_its_queues_cpu_limit_gets_the_quota_cause_naming_cpu_and_the_cpu_patch():
    di = _world(_vision(limit_cpu_cores=40), held=[_running("prep", "vision", "h100-01", 2, 32)])
    f = _quota_finding(check_scheduling(di))
    assert f.supported and f.facts["resource"] == "cpu" and f.facts["bound"] == "limit"
    assert "CPU limit of queue vision" in f.statement
    assert "32 cores of its CPU limit of 40 cores" in f.statement and "16 cores more" in f.statement
    assert "Its GPUs are within quota (6 of 16)" in f.statement
    (a,) = propose(di, [f])
    assert a.command == "kubectl patch queue vision --type merge -p '{\"spec\":{\"resources\":{\"cpu\":{\"limit\":48000}}}}'"
    assert "gpu" not in a.command
    assert "from 40 cores to 48 cores" in a.title
    assert "48 cores of the 192 cores allocatable" in a.impact and "no other queue's share" in a.impact
    assert "from 32 cores to 48 cores" in a.verify
    assert '{"cpu":{"limit":40000}}' in a.rollback


def test_the_patch_is_the_smallest_sufficient_in_the_queues_own_units():
    # 33.5 cores held + 16 asked = 49.5 cores: 49500 millicores, not a rounded 50 or 64
    di = _world(_vision(limit_cpu_cores=40), held=[_running("prep", "vision", "h100-01", 2, 33.5)])
    (a,) = propose(di, [_quota_finding(check_scheduling(di))])
    assert '"limit":49500' in a.command


def test_a_non_preemptible_job_past_its_memory_limit_and_quota_raises_both_at_once():
    q = _vision(quota_memory_bytes=100 * GB, limit_memory_bytes=100 * GB)
    held = [_running("srv", "vision", "h100-01", 1, 2, 50 * GB, priority_class="inference")]
    di = _world(q, cpu=2, memory=60 * GB, held=held, priority_class="inference")
    f = _quota_finding(check_scheduling(di))
    assert f.supported and f.facts["resource"] == "memory" and f.facts["bound"] == "limit"
    assert "memory limit of queue vision" in f.statement and "memory deserved quota" in f.statement
    assert f.facts["then"] is None  # nothing else once both are raised
    (a,) = propose(di, [f])
    # megabytes of 10^6 bytes: 50 + 60 GB = 110000 MB, the limit and the quota in one patch
    assert '{"memory":{"limit":110000,"quota":110000}}' in a.command
    assert '{"memory":{"limit":100000,"quota":100000}}' in a.rollback
    assert "deserved memory quotas would sum to" in a.impact


def test_a_non_preemptible_job_past_its_cpu_deserved_quota_alone_raises_the_quota():
    q = _vision(quota_cpu_cores=20, limit_cpu_cores=24)
    held = [_running("srv", "vision", "h100-01", 1, 8, priority_class="inference")]
    di = _world(q, cpu=14, held=held, priority_class="inference")  # 8 + 14 = 22: within the limit, past the quota
    f = _quota_finding(check_scheduling(di))
    assert f.facts["bound"] == "quota" and "CPU quota of queue vision" in f.statement
    assert "non-preemptible" in f.statement
    (a,) = propose(di, [f])
    assert a.command.endswith('\'{"spec":{"resources":{"cpu":{"quota":22000}}}}\'')  # the limit 24 leaves room
    assert "deserved CPU quotas would sum to 22 cores of 192 cores" in a.impact
    assert '{"cpu":{"quota":20000}}' in a.rollback


def test_a_preemptible_job_is_not_held_by_a_cpu_deserved_quota():
    q = _vision(quota_cpu_cores=20)
    di = _world(q, cpu=14, held=[_running("srv", "vision", "h100-01", 1, 8)])
    assert not [f for f in check_scheduling(di) if f.supported and f.code == C.PROJECT_QUOTA_EXHAUSTED]


def test_what_would_hold_the_job_next_is_said_beside_the_first_bound():
    q = _vision(limit_cpu_cores=40, limit_memory_bytes=200 * GB)
    di = _world(q, memory=100 * GB, held=[_running("prep", "vision", "h100-01", 2, 32, 150 * GB)])
    f = _quota_finding(check_scheduling(di))
    assert f.facts["resource"] == "cpu"
    assert "once raised, queue vision at 233 GiB of its memory limit 186 GiB would hold it next" in f.statement
    (a,) = propose(di, [f])
    assert '"cpu":{"limit":48000}' in a.command and "memory" not in a.command
    assert "Alone it does not start vision/ft" in a.impact


def test_a_departments_cpu_limit_is_the_department_cause_and_patches_its_parent_queue():
    q = _vision()
    q.state["department"] = "research"
    dept = EntityState(
        "department",
        "research",
        state={
            "scheduler": "kai",
            "quota_gpus": 32,
            "limit_gpus": None,
            "queues": ["vision"],
            "projects": ["vision"],
            "parent": "default-parent-queue",
            "allocated_gpus": 2,
            "limit_cpu_cores": 36,
        },
        valid_from=T0,
    )
    di = _world(q, held=[_running("prep", "vision", "h100-01", 2, 32)], departments=[dept])
    findings = check_scheduling(di)
    f = _quota_finding(findings, C.DEPARTMENT_QUOTA_EXHAUSTED)
    assert f.supported and "CPU limit of department research" in f.statement
    assert not [g for g in findings if g.code == C.PROJECT_QUOTA_EXHAUSTED and g.supported]
    (a,) = propose(di, [f])
    assert a.command.startswith("kubectl patch queue research ") and '"cpu":{"limit":48000}' in a.command


def _gpu_held(**cpu_memory: Any):
    q = queue("vision", 8, 8)
    q.state.update(cpu_memory)
    return _world(q, cpu=2, held=[_running("big", "vision", "h100-01", 8, 4)])


def test_a_job_its_gpus_hold_reads_as_before_whatever_its_cpu_bound():
    plain, bounded = _gpu_held(), _gpu_held(limit_cpu_cores=64, quota_cpu_cores=8)
    f_plain, f_bounded = (_quota_finding(check_scheduling(di)) for di in (plain, bounded))
    assert f_bounded.supported and "resource" not in f_bounded.facts
    assert f_bounded.statement == f_plain.statement and f_bounded.statement.startswith("project vision uses 8")
    (a_plain, *_), (a_bounded, *_) = propose(plain, [f_plain]), propose(bounded, [f_bounded])
    assert a_bounded.command == a_plain.command and '"gpu"' in a_bounded.command and "cpu" not in a_bounded.command

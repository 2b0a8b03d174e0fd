"""department_quota_exhausted: the project is within its own quota, its department (KAI parent queue, Kueue
cohort) is at its limit; the siblings' use is named and the project's own quota is not blamed."""

from __future__ import annotations

from incidents.diagnosis import codes as C
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.quota import quota_at
from incidents.diagnosis.relevance import CAUSE, neighbourhood
from incidents.diagnosis.request import job_request
from incidents.diagnosis.scheduling import check_scheduling
from incidents.diagnosis.types import EntityState, Ref

from .dx_world import T0, job, node, pod, queue, world

JOB = Ref("job", "train", "vision")
OVER_LIMIT = (
    "OverLimit: research quota has reached the allowable limit of GPUs. Limit is 16 GPUs, currently 16 GPUs "
    "allocated and workload requested 8 GPUs"
)


def department(name: str, quota: int, limit: int | None, projects: list[str], scheduler: str = "kai"):
    return EntityState(
        "department",
        name,
        state={
            "scheduler": scheduler,
            "quota_gpus": quota,
            "limit_gpus": limit,
            "queues": projects,
            "projects": projects,
            "parent": "default-parent-queue",
            "allocated_gpus": 0,
        },
        valid_from=T0,
    )


def in_dept(q: EntityState, dept: str) -> EntityState:
    q.state["department"] = dept
    return q


def research_world(*, limit: int | None = 16, message: str = "", vision_quota: int = 12, extra_pods=()):
    # research: vision (quota 12, holds 0) and nlp (quota 4, holds 16: it borrows 12 inside the department);
    # serving is outside the department and borrows 4 over its quota of 4.
    pods = [
        pod("nlp-a-0", "nlp-a", "nlp", node_name="h100-01", gpus=8),
        pod("nlp-b-0", "nlp-b", "nlp", node_name="h100-02", gpus=8),
        pod("srv-0", "srv", "serving", node_name="h100-03", gpus=8),
        *extra_pods,
    ]
    return world(
        subjects=[JOB],
        nodes=[node("h100-01"), node("h100-02"), node("h100-03"), node("h100-04")],
        jobs=[
            job("train", gpus_per_pod=8, message=message),
            job("nlp-a", "nlp", phase="Running"),
            job("nlp-b", "nlp", phase="Running"),
            job("srv", "serving", phase="Running"),
        ],
        pods=pods,
        queues=[
            in_dept(queue("vision", vision_quota, 24), "research"),
            in_dept(queue("nlp", 4, 24), "research"),
            queue("serving", 4, 16),
        ],
        departments=[department("research", 16, limit, ["nlp", "vision"])],
    )


def by_code(findings):
    return {f.code: f for f in findings}


def test_the_department_at_its_limit_holds_a_job_within_its_project_quota():
    di = research_world()
    q = quota_at(di, di.jobs[0], job_request(di, di.jobs[0]), 0)
    assert q is not None and not q.blocks and q.department is not None
    assert q.department.allocated == 16 and q.department.after == 24 and q.department.blocks and q.holds
    found = by_code(check_scheduling(di))
    d = found[C.DEPARTMENT_QUOTA_EXHAUSTED]
    assert d.supported and d.confidence >= 0.9
    assert "project vision is within its own quota (0 of 12)" in d.statement
    assert (
        "department research uses 16 of its 16 GPUs of quota, limit 16: vision 0, nlp 16 GPU(s) (quota 4)"
        in d.statement
    )
    assert "24 would exceed the department's limit of 16" in d.statement
    assert d.facts["borrowing"] == [{"project": "nlp", "allocated": 16.0, "quota": 4.0}]
    # Not also the project's own quota.
    p = found[C.PROJECT_QUOTA_EXHAUSTED]
    assert p.status == "refuted" and "its department research is what is at its limit" in p.statement


def test_the_schedulers_words_about_the_department_corroborate_it_not_the_project():
    di = research_world(message=OVER_LIMIT)
    found = by_code(check_scheduling(di))
    assert found[C.DEPARTMENT_QUOTA_EXHAUSTED].confidence == 0.95
    assert found[C.PROJECT_QUOTA_EXHAUSTED].status == "refuted"  # not "unverified: the scheduler says quota"


def test_it_is_refuted_when_the_department_has_room():
    di = research_world(limit=32)
    found = by_code(check_scheduling(di))
    d = found[C.DEPARTMENT_QUOTA_EXHAUSTED]
    assert d.status == "refuted" and "24 ≤ the department's limit 32" in d.why


def test_no_finding_without_a_department():
    di = research_world()
    di.departments.clear()
    for q in di.queues:
        q.state.pop("department", None)
    assert C.DEPARTMENT_QUOTA_EXHAUSTED not in by_code(check_scheduling(di))


def test_the_projects_own_limit_stays_the_cause_when_both_are_exceeded():
    di = research_world(vision_quota=4)
    di.queues[0].state["limit_gpus"] = 4
    found = by_code(check_scheduling(di))
    assert found[C.PROJECT_QUOTA_EXHAUSTED].supported
    d = found[C.DEPARTMENT_QUOTA_EXHAUSTED]
    assert d.supported and d.confidence < found[C.PROJECT_QUOTA_EXHAUSTED].confidence
    assert "over its own quota as well" in d.statement


def test_no_node_fault_is_a_cause_while_the_department_holds_the_job():
    di = research_world()
    di.nodes[3].state["unschedulable"] = (
        True  # the only free node is cordoned: moot while the department holds it
    )
    hood = neighbourhood(di)
    assert not hood.capacity
    dx = run_checks(di)
    causes = [f for f in dx.findings if f.supported and f.scope == CAUSE]
    assert causes[0].code == C.DEPARTMENT_QUOTA_EXHAUSTED
    assert C.GPU_NODE_UNAVAILABLE not in {f.code for f in causes}


def test_raising_the_department_limit_names_who_then_borrows_less():
    dx = run_checks(research_world())
    actions = [a for a in dx.actions if a.code == C.DEPARTMENT_QUOTA_EXHAUSTED]
    raise_it, give_back = actions
    assert raise_it.title == "Raise department research's GPU limit from 16 to 24"
    assert '"limit":24' in raise_it.command and "kubectl patch queue research" in raise_it.command
    assert "serving (8 of quota 4)" in raise_it.impact
    assert raise_it.subject == Ref("department", "research")
    assert "project nlp" in give_back.title and "12 GPU(s)" in give_back.title


def test_kueue_cohorts_get_a_cohort_edit():
    di = research_world()
    di.departments[0].state["scheduler"] = "kueue"
    dx = run_checks(di)
    (raise_it, *_) = [a for a in dx.actions if a.code == C.DEPARTMENT_QUOTA_EXHAUSTED]
    assert raise_it.command.startswith("kubectl edit cohort research")

"""The consistency checks run over every bundled scenario at each moment diagnosed (tests/incidents/
test_scenarios_expect.py) catch what they are for: one answer telling two stories."""

from __future__ import annotations

from incidents.diagnosis import codes as C
from incidents.diagnosis.checks import Diagnosis
from incidents.diagnosis.types import REFUTED, SUPPORTED, Derived, Finding, Ref
from tests.incidents.test_scenarios_expect import inconsistencies, title_numbers_apart

from .dx_world import T, job, node, world


def _finding(code: str, status: str, statement: str = "s", supports=None, subject=None) -> Finding:
    cite = Derived(kind="fact", locator="x", content={}, summary="x", observed_at=T)
    return Finding(code, statement, status, 0.8, supports=supports or [cite], subject=subject)


def test_a_job_that_fits_now_with_a_capacity_cause_is_caught():
    ref = Ref("job", "train", "vision")
    di = world(subjects=[ref], nodes=[node("h100-01")], jobs=[job("train")])
    told = Diagnosis(findings=[_finding(C.GPU_MISSING, SUPPORTED, subject=ref)], actions=[])
    assert inconsistencies(di, told) == ["vision/train fits now, yet ['gpu_missing'] supported"]
    full = world(subjects=[ref], nodes=[node("h100-01", allocatable=7, capacity=7)], jobs=[job("train")])
    assert inconsistencies(full, told) == []


def test_a_change_cited_while_recent_change_says_nothing_changed_is_caught():
    change = Derived(kind="change", locator="c", content={}, summary="quota cut", observed_at=T)
    di = world(subjects=[Ref("project", "vision")])
    told = Diagnosis(
        findings=[
            _finding(C.DEPARTMENT_QUOTA_EXHAUSTED, SUPPORTED, supports=[change]),
            _finding(
                C.RECENT_CHANGE,
                REFUTED,
                "Nothing was changed on the 8 related object(s) from 03:00 to 06:00.",
            ),
        ],
        actions=[],
    )
    assert inconsistencies(di, told) == [
        "['department_quota_exhausted'] cite a change while recent_change says nothing changed"
    ]


def test_a_title_with_numbers_of_its_own_is_caught():
    statement = "GPU 3 on h100-12 logged 11510 NVLink CRC errors since 04:10."
    assert title_numbers_apart("h100-12 NVLink errors: counter rose by 13760", statement) == ["13760"]
    assert title_numbers_apart("h100-12 NVLink errors: 11510 CRC errors since 04:10", statement) == []


def test_a_statement_that_names_a_code_instead_of_its_words_is_caught():
    di = world(subjects=[Ref("project", "vision")])
    late = _finding(C.RECENT_CHANGE, SUPPORTED, "quota cut at 01:20; since then project_quota_exhausted holds it.")
    worded = _finding(C.RECENT_CHANGE, SUPPORTED, "quota cut at 01:20; since then project quota exhausted holds it.")
    keyed = _finding(C.GPU_MISSING, SUPPORTED, "see gpu_missing|node/h100-03 and quota_gpus 16 → 8")
    assert inconsistencies(di, Diagnosis(findings=[late], actions=[])) == [
        "recent_change's statement names ['project_quota_exhausted']: " + late.statement
    ]
    assert inconsistencies(di, Diagnosis(findings=[worded, keyed], actions=[])) == []


def test_a_count_of_jobs_ahead_apart_from_the_jobs_position_is_caught():
    from datetime import timedelta

    from .dx_world import T0

    ref = Ref("job", "second", "vision")
    di = world(
        subjects=[ref],
        nodes=[node("h100-01")],
        jobs=[job("first"), job("second", submitted=T0 + timedelta(minutes=1))],
    )

    def told(count: int) -> Diagnosis:
        cite = Derived(
            kind="queue_order", locator="q", content={"job": ref.label, "count": count}, summary="s", observed_at=T
        )
        return Diagnosis(findings=[_finding(C.QUEUE_PRIORITY, SUPPORTED, supports=[cite], subject=ref)], actions=[])

    assert inconsistencies(di, told(1)) == []
    assert inconsistencies(di, told(0)) == ["vision/second: 0 job(s) ahead, yet 2 in the cluster's order"]

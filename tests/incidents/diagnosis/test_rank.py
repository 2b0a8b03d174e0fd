"""Ranking: supported before unverified before refuted, causes before symptoms, context after mechanisms."""

from __future__ import annotations

from incidents.diagnosis import codes as C
from incidents.diagnosis.rank import finalize, rank
from incidents.diagnosis.types import DiagnosisInput, Finding, SourceFailure

from .dx_world import T


def f(code, status="supported", conf=0.8, explains=(), sources=("k8s",), **kw):
    return Finding(
        code, f"{code} statement", status, conf, supports=[1], explains=tuple(explains), sources=sources, **kw
    )


def test_it_puts_the_cause_before_a_more_confident_symptom():
    out = rank(
        [
            f(C.GPU_CAPACITY_SHORTAGE, conf=0.9),
            f(C.DEVICE_PLUGIN_UNHEALTHY, conf=0.6, explains=[C.GPU_CAPACITY_SHORTAGE]),
        ]
    )
    assert [x.code for x in out] == [C.DEVICE_PLUGIN_UNHEALTHY, C.GPU_CAPACITY_SHORTAGE]


def test_it_keeps_refuted_hypotheses_last_and_recent_change_after_mechanisms():
    out = rank(
        [
            f(C.PROJECT_QUOTA_EXHAUSTED, "refuted", 0.9),
            f(C.RECENT_CHANGE, conf=0.95),
            f(C.QUEUE_PRIORITY, "unverified", 0.3),
            f(C.GPU_FRAGMENTATION, conf=0.5),
        ]
    )
    assert [x.code for x in out] == [
        C.GPU_FRAGMENTATION,
        C.RECENT_CHANGE,
        C.QUEUE_PRIORITY,
        C.PROJECT_QUOTA_EXHAUSTED,
    ]


def test_it_lowers_confidence_of_findings_that_rely_on_a_failed_source():
    di = DiagnosisInput(
        t=T, onset=T, cluster="c", failures=[SourceFailure("prometheus", "query_range", "timeout")]
    )
    out = finalize(
        di,
        [
            f(C.GPU_THERMAL_THROTTLING, conf=0.8, sources=("prometheus",)),
            f(C.GPU_NODE_UNAVAILABLE, conf=0.8, sources=("k8s",)),
        ],
    )
    by = {x.code: x for x in out}
    assert by[C.GPU_THERMAL_THROTTLING].confidence < 0.8 and "prometheus" in by[C.GPU_THERMAL_THROTTLING].why
    assert by[C.GPU_NODE_UNAVAILABLE].confidence == 0.8


def test_it_merges_one_code_into_one_hypothesis_citing_everything():
    a = Finding(C.GPU_XID_FAULT, "a", "supported", 0.9, supports=[1, 2])
    b = Finding(C.GPU_XID_FAULT, "b", "supported", 0.6, supports=[3])
    di = DiagnosisInput(t=T, onset=T, cluster="c")
    out = finalize(di, [a, b])
    assert len(out) == 1 and out[0].supports == [1, 2, 3]

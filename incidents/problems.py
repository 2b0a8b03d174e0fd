"""One problem, many incidents: incidents whose current top cause is the same fault are worked as one.

Twelve jobs waiting on one quota cut, or the pods of one failed node, each raise their own alert and
incident; the operator has one thing to fix. The diagnosis names, with every supported cause, the shared
object it is about (:func:`cause_key`: the project whose quota holds, the node that failed, the GPU that
faults). The current run's key is kept on the incident (``Incident.cause_key``), so the home page groups
open incidents by (cluster, key) in SQL: one row per problem with its members counted, whatever their
number, and each member still one click away.

A cause about the subject alone (its own crash loop, its own request) has no key: its incident is its own
problem.
"""

from __future__ import annotations

from incidents.diagnosis import codes as C
from incidents.diagnosis.types import Finding

# Causes about an object many workloads share, and which fact names it (first present wins).
_BY_FACT: dict[str, tuple[str, ...]] = {
    C.PROJECT_QUOTA_EXHAUSTED: ("project", "queue"),
    C.QUEUE_PRIORITY: ("queue", "project"),
    **{code: ("gpu", "node") for code in C.HEALTH_CODES},
    C.GPU_NODE_UNAVAILABLE: ("node",),
}
_FACT_KIND = {"project": "project", "queue": "queue", "gpu": "gpu", "node": "node"}
SHARED_KINDS = ("node", "gpu", "queue", "project")


def cause_key(finding: Finding | None) -> str:
    """``code|kind/name`` of the shared object a supported cause is about, or "" (no sharing)."""
    if finding is None or not finding.supported or finding.scope != "cause":
        return ""
    for fact in _BY_FACT.get(finding.code, ()):
        value = finding.facts.get(fact)
        name = getattr(value, "label", value)  # a Ref or a plain name
        if isinstance(name, str) and name:
            return f"{finding.code}|{_FACT_KIND[fact]}/{name}"[:300]
    ref = finding.subject
    if ref is not None and ref.kind in SHARED_KINDS:
        return f"{finding.code}|{ref.kind}/{ref.label}"[:300]
    return ""


def describe(key: str) -> tuple[str, str]:
    """(code, "kind name") of a key, for the page: ``project_quota_exhausted|project/vision`` →
    ("project_quota_exhausted", "project vision")."""
    code, _, obj = key.partition("|")
    kind, _, name = obj.partition("/")
    return code, f"{kind} {name}".strip()

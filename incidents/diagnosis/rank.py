"""Merge, adjust and order findings: the cause before its symptoms, context after mechanisms.

Findings are first scoped (``relevance``): only those about the subject's causal
neighbourhood are causes; supported faults elsewhere are kept last, as context.
Order: supported, then unverified, then refuted. Among supported findings a
finding that *explains* another (an Xid 79 explains the missing GPU, which
explains the capacity shortage; a device plugin failure explains "insufficient
GPUs") comes first whatever the confidences; otherwise higher confidence
first. ``recent_change`` is context: it comes after every supported mechanism,
and its confidence rises when the change touches what a supported mechanism is
about (a quota cut next to an exhausted quota).
"""

from __future__ import annotations

import logging

from incidents.diagnosis import codes as C
from incidents.diagnosis.change_categories import LINKS
from incidents.diagnosis.relevance import ELSEWHERE, apply_scope
from incidents.diagnosis.types import (
    FAILED_SOURCE_FACTOR,
    REFUTED,
    SUPPORTED,
    UNVERIFIED,
    Cite,
    DiagnosisInput,
    Finding,
)

logger = logging.getLogger(__name__)

STATUS_ORDER = {SUPPORTED: 0, UNVERIFIED: 1, REFUTED: 2}
MAX_CONFIDENCE = 0.95


def finalize(di: DiagnosisInput, findings: list[Finding]) -> list[Finding]:
    """What diagnose persists: relevant, merged, adjusted for failed sources, in rank order."""
    findings = apply_scope(di, findings)
    findings = merge(findings)
    symptoms_of_causes(findings)
    idle_from_failure(findings)
    link_changes(findings)
    apply_source_failures(di, findings)
    for f in findings:
        f.confidence = round(max(0.0, min(f.confidence, MAX_CONFIDENCE)), 2)
    return rank(findings)


SYMPTOMS = ("gpu_capacity_shortage", "gpu_fragmentation")


def symptoms_of_causes(findings: list[Finding]) -> None:
    """Too few free GPUs because a supported cause took or hid them (a reclaim, a withdrawn GPU, a node
    gone) is that cause's symptom, not a second cause: it stays listed, unverified, naming what explains it."""
    causes = [f for f in findings if f.supported and f.scope == "cause"]
    for f in findings:
        if f.code not in SYMPTOMS or not f.supported or f.scope != "cause":
            continue
        # only a cause about the same workload (its preemption, the jobs that overtook it, the blocker whose
        # removal alone lets it fit): a fault on one candidate node explains part of a shortage, not all of it
        by = next((c for c in causes if c is not f and f.code in c.explains and c.subject == f.subject), None)
        if by is None:
            continue
        f.status, f.confidence = UNVERIFIED, min(f.confidence, 0.35)
        f.why = f"a consequence of {C.name(by.code)}: fixing that gives the job its GPUs back"


def _key(c: Cite) -> object:
    return c if isinstance(c, int) else c.key


def _dedupe(cites: list[Cite]) -> list[Cite]:
    seen: set[object] = set()
    out = []
    for c in cites:
        k = _key(c)
        if k not in seen:
            seen.add(k)
            out.append(c)
    return out


def merge(findings: list[Finding]) -> list[Finding]:
    """One hypothesis per code: the strongest reading, citing everything the others cited."""
    by_code: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        by_code.setdefault((f.code, f.scope), []).append(f)
    out = []
    for (code, _scope), group in by_code.items():
        group.sort(key=lambda f: (STATUS_ORDER.get(f.status, 3), -f.confidence))
        best = group[0]
        if len(group) > 1:
            same = [g for g in group[1:] if g.status == best.status]
            best.supports = _dedupe([*best.supports, *[c for g in same for c in g.supports]])
            best.refutes = _dedupe([*best.refutes, *[c for g in same for c in g.refutes]])
            best.explains = tuple(dict.fromkeys([*best.explains, *[e for g in same for e in g.explains]]))
            best.next_questions = list(
                dict.fromkeys([*best.next_questions, *[q for g in same for q in g.next_questions]])
            )[:5]
            others = [g for g in same if g.statement != best.statement and (g.subject != best.subject)]
            if others and best.supported:
                best.statement += f" Also: {others[0].statement}" + (
                    f" (+{len(others) - 1} more)" if len(others) > 1 else ""
                )
            nodes = list(
                dict.fromkeys(
                    [*best.facts.get("nodes", []), *[n for g in same for n in g.facts.get("nodes", [])]]
                )
            )
            if nodes:
                best.facts["nodes"] = nodes
            best.facts.setdefault("subjects", [g.subject for g in group if g.subject])
        best.supports = _dedupe(best.supports)
        best.refutes = _dedupe(best.refutes)
        out.append(best)
        logger.debug("merged %d finding(s) for %s", len(group), code)
    return out


FAILURES = (C.CRASHLOOP_CONFIG_ERROR, C.OOM_KILLED, C.GPU_OOM, C.IMAGE_PULL_ERROR)


def idle_from_failure(findings: list[Finding]) -> None:
    """GPUs sit idle while their containers crash or cannot start: the idleness is the failure's symptom."""
    failing = [f.code for f in findings if f.supported and f.scope == "cause" and f.code in FAILURES]
    if not failing:
        return
    for f in findings:
        if f.code in C.EFFICIENCY_CODES and f.supported and f.scope == "cause":
            f.status, f.confidence = UNVERIFIED, min(f.confidence, 0.3)
            f.why = (f.why + " " if f.why else "") + (
                f"The containers fail ({', '.join(failing)}): the idle GPUs are its symptom, not a waste to reclaim."
            )


def link_changes(findings: list[Finding]) -> None:
    """A change that touches what a supported mechanism is about is more likely the trigger."""
    mechanisms = {
        f.code for f in findings if f.supported and f.code != C.RECENT_CHANGE and f.scope != ELSEWHERE
    }
    for f in findings:
        if f.code != C.RECENT_CHANGE:
            continue
        if f.status == REFUTED and f.facts.get("late_categories"):
            late = sorted(
                {m for cat in f.facts["late_categories"] for m in LINKS.get(cat, ()) if m in mechanisms}
            )
            if late:
                f.status, f.supports, f.refutes, f.confidence = SUPPORTED, f.refutes, [], 0.7
                f.statement = (
                    f"{f.facts['late_summary']}, while the symptom had already begun; since then "
                    f"{', '.join(C.name(code) for code in late)} holds it."
                )
                f.why = "the change came after onset but is what the supported mechanism is about"
                f.facts["linked"] = late
            continue
        if not f.supported:
            continue
        linked = sorted(
            {m for cat in f.facts.get("categories", []) for m in LINKS.get(cat, ()) if m in mechanisms}
        )
        if linked:
            f.confidence = max(f.confidence, 0.75)
            f.facts["linked"] = linked
            f.statement += f" It bears on {', '.join(C.name(code) for code in linked)}."
        else:
            f.confidence = min(f.confidence, 0.4)


def apply_source_failures(di: DiagnosisInput, findings: list[Finding]) -> None:
    """A source that could not answer lowers the confidence of every finding that relies on it."""
    failed = {fl.source for fl in di.failures}
    if not failed:
        return
    for f in findings:
        hit = sorted(set(f.sources) & failed) or (sorted(failed) if not f.sources else [])
        if not hit:
            continue
        f.confidence *= FAILED_SOURCE_FACTOR
        errors = "; ".join(f"{fl.source}: {fl.error[:80]}" for fl in di.failures if fl.source in hit)[:300]
        f.why = (f.why + " " if f.why else "") + f"Lower confidence: {', '.join(hit)} failed ({errors})."
        f.next_questions.append(f"Re-collect once {', '.join(hit)} answers: does the finding hold?")


def rank(findings: list[Finding]) -> list[Finding]:
    """Supported causes (a cause before what it explains), then changes as context, then unverified, then
    refuted; faults elsewhere in the cluster last: a refuted or unrelated finding is never first."""
    elsewhere = [f for f in findings if f.scope == ELSEWHERE]
    findings = [f for f in findings if f.scope != ELSEWHERE]
    supported = [f for f in findings if f.supported and f.code != C.RECENT_CHANGE]
    context = [f for f in findings if f.supported and f.code == C.RECENT_CHANGE]
    rest = [f for f in findings if not f.supported]
    ordered: list[Finding] = []
    remaining = sorted(supported, key=lambda f: -f.confidence)
    while remaining:
        codes = {f.code for f in remaining}
        # A finding goes next when no remaining supported finding explains it.
        nxt = next(
            (f for f in remaining if not any(f.code in g.explains and g is not f for g in remaining)), None
        )
        if nxt is None:  # a cycle of "explains": fall back to confidence
            nxt = remaining[0]
        ordered.append(nxt)
        remaining.remove(nxt)
        logger.debug("rank %d: %s (remaining %s)", len(ordered), nxt.code, codes)
    ordered += sorted(context, key=lambda f: -f.confidence)
    ordered += sorted(rest, key=lambda f: (STATUS_ORDER.get(f.status, 3), -f.confidence))
    ordered += sorted(elsewhere, key=lambda f: -f.confidence)
    return ordered

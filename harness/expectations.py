"""A scenario's ``expect`` block judged against a run's incidents (docs/scenarios.md §2, §5), and the run's
precision: of the supported causes judged, the share expected."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from collectors.models import EntityVersion
from rcaweb.timestamps import format_t_or_none


def subject_matches(expect_subject: dict[str, Any], subjects: list[dict[str, Any]], cluster: str) -> bool:
    for kind in ("job", "node", "project"):
        if kind in expect_subject:
            return any(s["kind"] == kind and s["name"] == expect_subject[kind] for s in subjects)
    gpu = expect_subject.get("gpu")
    if isinstance(gpu, dict):
        uuids = gpu_uuids(cluster, str(gpu.get("node")), int(gpu.get("index", -1)))
        return any(s["kind"] == "gpu" and s["name"] in uuids for s in subjects)
    return False


def gpu_uuids(cluster: str, node: str, index: int) -> set[str]:
    """UUIDs of the GPU that sat at (node, index) in any version (a GPU entity is named by its UUID)."""
    out = set()
    for v in EntityVersion.objects.filter(cluster__name=cluster, kind="gpu", node=node).select_related(
        "entity"
    ):
        if (v.state or {}).get("index") == index:
            out.add(v.entity.name)
    return out


def check_expectations(
    scenario: Any, incidents: list[dict[str, Any]], related: dict[int, list[dict[str, Any]]] | None = None
) -> list[dict[str, Any]]:
    """Each expect entry against the incident with its alert about its subject.

    The subject is looked for among the incident's subjects first, then among the entities linked to it as
    related (a GPU alert that names the pod holding the GPU is grouped about the GPU, with the pod and job
    as context; the expectation names the job).
    """
    related = related or {}
    out = []
    for exp in scenario.expect:
        matching = incidents_for(scenario, exp, incidents, related)
        if not matching:
            seen = sorted({a for i in incidents for a in i["alerts"]})
            out.append(
                {
                    "alert": exp.alert,
                    "passed": False,
                    "why": f"no incident with alert {exp.alert} about {exp.subject} (alerts seen: {seen or 'none'})",
                }
            )
            continue
        problems: list[str] = []
        inc = matching[0]
        moment, diagnosis = judged_diagnosis(scenario, exp, inc)
        if diagnosis is None:
            out.append(
                {
                    "alert": exp.alert,
                    "passed": False,
                    "why": f"incident {inc['id']}: no diagnosis in force at {moment}",
                }
            )
            continue
        hyps = diagnosis["hypotheses"]
        status = {h["code"]: h["status"] for h in hyps}
        if exp.top is not None:
            top = top_code(hyps)
            if top != exp.top:
                problems.append(f"top is {top or 'no cause found'}, expected {exp.top}")
        for code in exp.supported:
            if status.get(code) != "supported":
                problems.append(f"{code} is {status.get(code, 'absent')}, expected supported")
        for code in exp.not_supported:
            if status.get(code) == "supported":
                problems.append(f"{code} is supported, expected not")
        at = f" at {moment}" if moment else ""
        out.append(
            {
                "alert": exp.alert,
                "passed": not problems,
                "why": f"incident {inc['id']}{at}: " + "; ".join(problems) if problems else "",
            }
        )
    return out


def judged_diagnosis(scenario: Any, exp: Any, inc: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """The moment an expectation is judged at ("" for the first diagnosis) and that diagnosis (``at``,
    ``hypotheses``).

    Without ``at``, the incident's first diagnosis (``hypotheses``). With it, the diagnosis in force at
    ``start + at``: the last of ``diagnoses`` whose ``at`` is not later; None when there is none yet.
    """
    at_s = getattr(exp, "at_s", None)
    if at_s is None:
        return "", {"at": inc.get("diagnosed_at"), "hypotheses": inc["hypotheses"]}
    moment = format_t_or_none(scenario.start + timedelta(seconds=at_s)) or ""
    in_force = None
    for d in inc.get("diagnoses", []):
        if d["at"] <= moment:  # both are ISO 8601 UTC with Z: text order is time order
            in_force = d
    return moment, in_force


def top_code(hyps: list[dict[str, Any]]) -> str | None:
    """The incident's top: its first supported hypothesis (a refuted or unverified one is never the top)."""
    return next((h["code"] for h in hyps if h["status"] == "supported"), None)


def incidents_for(
    scenario: Any, exp: Any, incidents: list[dict[str, Any]], related: dict[int, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The incidents with the expectation's alert about its subject (subjects first, then related)."""
    with_alert = [i for i in incidents if exp.alert in i["alerts"]]
    matching = [i for i in with_alert if subject_matches(exp.subject, i["subjects"], scenario.cluster.name)]
    return matching or [
        i for i in with_alert if subject_matches(exp.subject, related.get(i["id"], []), scenario.cluster.name)
    ]


def precision(
    scenario: Any, incidents: list[dict[str, Any]], related: dict[int, list[dict[str, Any]]] | None = None
) -> float | None:
    """Of the supported hypotheses of every diagnosis an expectation judges, the share it expects.

    An expected cause is the expectation's ``top`` or one of its ``supported`` codes; several expectations
    judging one diagnosis (one incident, at one moment) pool their codes. Each judged diagnosis counts once:
    the first diagnosis for an expectation without ``at``, the one in force at ``at`` otherwise. None when no
    judged diagnosis has a supported hypothesis.
    """
    related = related or {}
    wanted: dict[tuple[int, str], set[str]] = {}
    judged: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for exp in scenario.expect:
        for inc in incidents_for(scenario, exp, incidents, related)[:1]:
            _, diagnosis = judged_diagnosis(scenario, exp, inc)
            if diagnosis is None:
                continue
            # The same diagnosis reached from two moments (or without one) is one judgement.
            key = (inc["id"], str(diagnosis["at"]))
            judged[key] = diagnosis["hypotheses"]
            codes = wanted.setdefault(key, set())
            codes.update([exp.top] if exp.top else [])
            codes.update(exp.supported)
    supported = matched = 0
    for key, hyps in judged.items():
        for h in hyps:
            if h["status"] == "supported":
                supported += 1
                matched += h["code"] in wanted[key]
    return round(matched / supported, 3) if supported else None



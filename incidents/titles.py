"""Incident titles that say what is wrong: the subject, the symptom, and once known the cause with its numbers.

"vision/resnet-train pending: project vision quota 8 < 16 needed (limit 8), cut from 16 by platform-admin at
01:05". Grouping sets the alert-only part ("vision/resnet-train pending") when it opens an incident; after
each diagnosis :func:`refresh_title` appends the gist of the current run's top supported cause, or keeps the
alert-only title when no cause was found. :func:`build_title` and its helpers are pure (tested on their own);
the text comes from alert labels and is stored as plain text: templates escape it like any other value.

A duration ("waiting 45 min") is deliberately not part of the title: a stored title would go stale while
the incident goes on, and every page shows the duration as of its cursor beside the title.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from collectors.sources.dcgm import alert_workload
from incidents.models import Alert, DiagnosisRun, Incident, IncidentSubject

TITLE_MAX = 300  # Incident.title max_length
GIST_MAX = 160  # the cause part: one short sentence, with its numbers

# What the bundled and simulated alert rules (deploy/prometheusrules.yaml, simulator/rules.py) say is
# wrong, in words that follow the subject. Other alerts keep their own name (and summary).
SYMPTOMS = {
    "GPUJobPendingTooLong": "pending",
    "NodeNotReady": "not Ready",
    "PodCrashLooping": "crash-looping",
    "GPUXidError": "Xid error",
    "GPUECCDoubleBitError": "double-bit ECC errors",
    "GPUHighTemperature": "overheating",
    "GPUIdleAllocated": "allocated but idle",
    "GPUMissing": "GPU missing",
}

# Which subject names the incident, most telling first: the workload an alert is about, then the hardware.
_LABEL_ORDER = ("pod", "job", "gpu", "node", "queue", "project")


def subject_label(subjects: Iterable[tuple[str, str, str]], labels: Mapping[str, str]) -> str:
    """The subject in an operator's words, from (kind, namespace, name) entities, else the alert's labels.

    A pod or job reads "namespace/name"; a GPU "h100-03 GPU 4" (its node and index from the dcgm labels,
    as operators think of GPUs), else its node and UUID; a node its name; a queue or project "queue nlp".
    Labels that named nothing in the inventory still name the subject ("gpu-99" of an unknown node).
    """
    by_kind: dict[str, tuple[str, str]] = {}
    for kind, namespace, name in subjects:
        by_kind.setdefault(kind, (namespace, name))
    node = labels.get("node") or labels.get("Hostname") or labels.get("hostname") or ""
    for kind in _LABEL_ORDER:
        if kind not in by_kind:
            continue
        namespace, name = by_kind[kind]
        if kind in ("pod", "job"):
            return f"{namespace}/{name}" if namespace else name
        if kind == "gpu":
            host = by_kind.get("node", ("", node))[1] or node
            index = labels.get("gpu", "")
            return f"{host} GPU {index}" if host and index else f"{host} {name}".strip()
        if kind == "node":
            return name
        return f"{kind} {name}"
    return _label_subject(labels, node)


def _label_subject(labels: Mapping[str, str], node: str) -> str:
    namespace, pod = alert_workload(dict(labels))
    if pod:
        return f"{namespace}/{pod}" if namespace else pod
    if labels.get("job_name"):
        return f"{namespace}/{labels['job_name']}" if namespace else labels["job_name"]
    if node and labels.get("gpu"):
        return f"{node} GPU {labels['gpu']}"
    if node or labels.get("UUID"):
        return node or labels["UUID"]
    for kind in ("queue", "project"):
        if labels.get(kind):
            return f"{kind} {labels[kind]}"
    return ""


# project_quota_exhausted, as incidents.diagnosis.quota_causes.quota_findings words it; anything else (or a
# rewording) falls back to the generic gist, so a change of wording never breaks a title, only shortens it.
_QUOTA = re.compile(
    r"project (?P<project>\S+) uses (?P<used>\d+) of (?P<quota>\S+) GPUs of quota"
    r"(?:, limit (?P<limit>\d+)|, no limit)"
    r"(?: since (?P<at>\d\d:\d\d), when (?:(?P<actor>\S+) )?changed (?P<field>\S+) from (?P<old>\S+) to (?P<new>\S+))?"
    r"; .*? needs (?P<needed>\d+) more, (?P<after>\d+) would exceed the (?P<what>limit|quota)"
)


# gpu_capacity_shortage's statement (scheduling.shortage_findings) and the place in line it may add
_SHORTAGE = re.compile(
    r"needs (?P<needed>\d+) GPUs \((?P<shape>.+?)\); only (?P<free>\d+) are free on the (?P<nodes>\d+) usable node"
)
_IN_LINE = re.compile(r" is (?P<nth>\d+(?:st|nd|rd|th)) in line\b")


def cause_gist(code: str, statement: str) -> str:
    """The cause in one short clause with its numbers: "project vision quota 8 < 16 needed, cut from 16 by …"."""
    statement = " ".join(statement.split())
    if code == "project_quota_exhausted":
        m = _QUOTA.search(statement)
        if m:
            return _quota_gist(m)
    if code == "gpu_capacity_shortage" and (m := _SHORTAGE.search(statement)):
        nodes = m["nodes"] + (" usable node" if m["nodes"] == "1" else " usable nodes")
        gist = f"needs {m['needed']} GPUs ({m['shape']}), {m['free']} free on {nodes}"
        line = _IN_LINE.search(statement)
        return gist + (f"; {line['nth']} in line" if line else "")
    first = re.split(r"(?<=[^\s.])\.(?:\s+(?=[A-Z(])|$)", statement, maxsplit=1)[0].strip()
    first = re.split(r"\s+(?:Also:|It bears on)\s", first, maxsplit=1)[0].rstrip(" .;,")
    if len(first) > GIST_MAX and "; " in first:
        first = first.split("; ", 1)[0]
    return _cut(first, GIST_MAX)


def _quota_gist(m: re.Match[str]) -> str:
    g = m.groupdict()
    cap = g["limit"] if g["what"] == "limit" and g["limit"] else g["quota"]
    word = "limit" if g["what"] == "limit" and g["limit"] != g["quota"] else "quota"
    gist = f"project {g['project']} {word} {cap} < {g['after']} needed"
    if g["at"] and g["old"]:
        by = f" by {g['actor']}" if g["actor"] else ""
        verb = "cut from" if _num(g["new"]) < _num(g["old"]) else "changed from"
        changed = "limit" if "limit" in (g["field"] or "") else "quota"
        what = "" if changed == word else f"{changed} "  # "limit 32 < 64 needed, quota cut from 48": say which
        gist += f", {what}{verb} {g['old']}{by} at {g['at']}"
    return gist


_UUID = re.compile(r"\s*\(GPU-[0-9a-fA-F-]{8,}\)")  # "GPU 3 (GPU-4c50…) on h100-02": the index says it


def _without_repeats(tail: str, subject: str) -> str:
    """The gist without the subject it starts with: the title already opens with it."""
    if subject and tail.startswith(subject + " ") and len(tail) > len(subject) + 12:
        return tail[len(subject) + 1 :]
    return tail


def _num(text: str | None) -> float:
    try:
        return float(text or "nan")
    except ValueError:
        return float("nan")


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:") + "…"


def build_title(subject: str, alert_name: str, summary: str = "", code: str = "", statement: str = "") -> str:
    """ "<subject> <symptom>[: <cause gist>]"; an unknown alert keeps its name and, without a cause, its summary."""
    symptom = SYMPTOMS.get(alert_name)
    if subject:
        head = f"{subject} {symptom}" if symptom else f"{subject}: {alert_name}"
    else:
        head = alert_name or "alert"
    summary = " ".join(summary.split())
    if code and statement.strip():
        tail = _without_repeats(cause_gist(code, _UUID.sub("", statement)), subject)
    elif not symptom and summary:
        tail = _cut(summary, GIST_MAX)
    else:
        tail = ""
    sep = " — " if tail and ": " in head else ": "
    return _cut(f"{head}{sep}{tail}" if tail else head, TITLE_MAX)


class TitleLines:
    """For a page's row that holds an ``incident``: its title as two lines, the short part (linked) and the
    cause line under it (:func:`title_parts`)."""

    incident: Any

    @property
    def short_title(self) -> str:
        return title_parts(self.incident.title)[0]

    @property
    def cause_line(self) -> str:
        return title_parts(self.incident.title)[1]


def title_parts(title: str) -> tuple[str, str]:
    """A title as :func:`build_title` writes it, split into its short part and its cause line ("" when none),
    so a page can link the short part and show the cause under it. The short part is "<subject> <symptom>",
    or "<subject>: <AlertName>" for an alert without a word here (its cause then follows " — "), or the
    alert's name alone when there is no subject (its summary or cause follows ": ")."""
    head, sep, tail = title.partition(": ")
    if not sep or head.endswith(_SYMPTOM_WORDS):
        return head, tail
    name, dash, rest = tail.partition(" — ")
    if " " not in name:  # an alert name (no space) after the subject: "<subject>: <AlertName>[ — <cause>]"
        return f"{head}: {name}", rest if dash else ""
    return head, tail


_SYMPTOM_WORDS = tuple(f" {w}" for w in SYMPTOMS.values())


def alert_title(alert: Alert, subjects: Iterable[tuple[str, str, str]]) -> str:
    """The title grouping gives a new incident: its subject and the alert's symptom, no cause yet."""
    summary = str(alert.annotations.get("summary", "")) if isinstance(alert.annotations, dict) else ""
    return build_title(subject_label(subjects, alert.labels or {}), alert.name, summary)


def refresh_title(incident: Incident) -> str:
    """Retitle the incident from its first alert, its subjects and its current run's top cause (one UPDATE).

    The current run is the one describing the latest moment (as ``incidents.diagnosis_run`` marks it); no
    supported cause keeps the alert-only title. Returns the title.
    """
    run = (
        DiagnosisRun.objects.filter(incident=incident)
        .order_by("-at", "-id")
        .values_list("top_code", "top_statement")
        .first()
    )
    code, statement = run if run else ("", "")
    title = title_for(incident, code, statement)
    if title is None:
        return incident.title
    if title != incident.title:
        Incident.objects.filter(pk=incident.pk).update(title=title)
        incident.title = title
    return title


def title_for(incident: Incident, code: str, statement: str) -> str | None:
    """The incident's title with ``code``/``statement`` as its top cause (None before any alert joined)."""
    first = (
        Alert.objects.filter(incident=incident)
        .order_by("starts_at", "id")
        .only("name", "labels", "annotations")
        .first()
    )
    if first is None:
        return None
    subjects = IncidentSubject.objects.filter(incident=incident, role="subject").order_by("id")
    entities = list(subjects.values_list("entity__kind", "entity__namespace", "entity__name"))
    summary = str(first.annotations.get("summary", "")) if isinstance(first.annotations, dict) else ""
    return build_title(subject_label(entities, first.labels or {}), first.name, summary, code, statement)

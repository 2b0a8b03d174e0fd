"""Precedence between two jobs (queue priority, then priority class: the jobs that may pass a waiting one), and
the row a job ahead is shown by (``QueuedJob``; the jobs ahead themselves are ``ahead.jobs_ahead``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from incidents.diagnosis.allocation import ACTIVE_POD_PHASES
from incidents.diagnosis.types import DiagnosisInput, EntityState, parse_ts


@dataclass
class QueuedJob:
    """A pending job the scheduler considers before this one."""

    job: EntityState
    queue: str
    queue_priority: int
    priority_class: str
    submitted: str
    gpus: float  # GPU units (a 0.5 share is 0.5)
    why: str  # "higher queue priority" | "same queue, submitted earlier" | "higher priority class"

    @property
    def gpus_words(self) -> str:
        return f"{round(self.gpus, 4):g}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.job.namespace,
            "name": self.job.name,
            "queue": self.queue,
            "queue_priority": self.queue_priority,
            "priority_class": self.priority_class,
            "submitted": self.submitted,
            "gpus": self.gpus,
            "why": self.why,
        }


CLASS_RANK = {"inference": 1, "train": 0}
# The PriorityClass values KAI installs for its classes (a job of another class counts as train).
CLASS_VALUE = {"inference": 125, "build": 100, "interactive-preemptible": 75, "train": 50}


def job_rank(job: EntityState) -> int:
    """A job's priority as the scheduler compares it: its PriorityClass value when the inventory records one
    (``priority_value``), else the value of its class (inference over build over train)."""
    value = job.get("priority_value")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    return CLASS_VALUE.get(job.get("priority_class") or "train", CLASS_VALUE["train"])


def queue_priority_of(di: DiagnosisInput, name: str) -> int:
    q = di.find("queue", name) or di.find("project", name)
    try:
        return int((q.get("priority") if q else 0) or 0)
    except (TypeError, ValueError):
        return 0


def precedes(di: DiagnosisInput, other: EntityState, job: EntityState) -> bool:
    """Whether the scheduler serves ``other``'s queue/priority class before ``job``'s."""
    return precedence(di, other, job) is not None


def precedence(di: DiagnosisInput, other: EntityState, job: EntityState) -> str | None:
    """By which mechanism the scheduler serves ``other`` before ``job`` (None when it does not).

    Queue priority first (KAI Queue spec.priority), then the priority class (inference before train):
    the wording names the one that applies, never "higher-priority queue" between queues of equal priority.
    """
    mine_q = job.get("queue") or job.get("project") or ""
    their_q = other.get("queue") or other.get("project") or ""
    mine_p, their_p = queue_priority_of(di, mine_q), queue_priority_of(di, their_q)
    if their_p != mine_p:
        return f"queue priority {their_p} > {mine_p}" if their_p > mine_p else None
    mine_c = job.get("priority_class") or "train"
    their_c = other.get("priority_class") or "train"
    if CLASS_RANK.get(their_c, 0) > CLASS_RANK.get(mine_c, 0):
        return f"priority class {their_c} over {mine_c}"
    return None


def overtaking_pods(di: DiagnosisInput, job: EntityState, since: datetime | None) -> list[EntityState]:
    """Pods of jobs with precedence that started after ``job`` began waiting and hold GPUs at t."""
    if since is None:
        return []
    out = []
    for p in di.pods:
        if not p.get("node") or p.get("phase") not in ACTIVE_POD_PHASES or not p.get("gpus"):
            continue
        if p.get("job") == job.name and p.namespace == job.namespace:
            continue
        started = parse_ts(p.get("started")) or parse_ts(p.get("created")) or p.valid_from
        if started is None or started <= since:
            continue
        owner = di.find("job", p.get("job") or "", p.namespace)
        if owner is not None and precedes(di, owner, job):
            out.append(p)
    return out

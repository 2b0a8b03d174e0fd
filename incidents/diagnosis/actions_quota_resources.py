"""Actions for a KAI queue's (or department's) CPU or memory quota or limit that holds a job: patch that
resource of that Queue (``spec.resources.cpu`` in millicores, ``.memory`` in megabytes of 10^6 bytes) by the
smallest amount that lets the job in, with what it does to the cluster, how to see it worked and how to undo it.
Never a GPU patch: the GPUs are not what holds the job (``quota_resource_causes``)."""

from __future__ import annotations

import json
import math

from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.resource_quota import LIMIT, show
from incidents.diagnosis.resources import CPU, WORDS, job_vector, totals
from incidents.diagnosis.types import ActionDraft, DiagnosisInput, Finding, Ref

_KEYS = {  # the deserved-quota state key and the Queue's unit
    CPU: ("quota_cpu_cores", "millicores"),
    "memory": ("quota_memory_bytes", "MB"),
}
_PER_UNIT = {CPU: 1.0, "memory": 1e6}  # the model's unit (millicores, bytes) per Queue unit


def _queue_units(dim: str, amount: float) -> int:
    """The smallest whole Queue number (millicores, MB) at least ``amount`` (millicores, bytes)."""
    return math.ceil(amount / _PER_UNIT[dim] - 1e-9)


def _queue_number(dim: str, amount: float | None) -> int:
    return -1 if amount is None else round(amount / _PER_UNIT[dim])


def resource_quota_action(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    dim, kind, target = f.facts["resource"], f.facts["bound"], f.facts["target"]
    level, after, cap = f.facts["level"], float(f.facts["after"]), float(f.facts["cap"])
    limit_now = f.facts.get("limit_now")
    fmt, word, unit = show(dim), WORDS[dim], _KEYS[dim][1]
    new = _queue_units(dim, after)
    fields = {kind if kind == LIMIT else "quota": new}
    if kind != LIMIT and limit_now is not None and float(limit_now) < new * _PER_UNIT[dim] - 1e-9:
        fields["limit"] = new  # a deserved quota above the limit would be cut back to it
    also = f.facts.get("also_quota")
    if kind == LIMIT and also:  # non-preemptible past its deserved quota as well: raise that with the limit
        fields["quota"] = _queue_units(dim, float(also["after"]))
    patch = {"spec": {"resources": {dim: fields}}}
    cmd = f"kubectl patch queue {target} --type merge -p '{json.dumps(patch, separators=(',', ':'))}'"
    old = {"limit" if kind == LIMIT else "quota": _queue_number(dim, cap)}
    if "limit" in fields and kind != LIMIT:
        old["limit"] = _queue_number(dim, limit_now)
    if also and kind == LIMIT:
        old["quota"] = _queue_number(dim, float(also["cap"]))
    job: Ref | None = f.facts.get("job")
    label = job.label if job is not None else "the job"
    grow = new * _PER_UNIT[dim] - cap
    title = (
        f"Raise {level} {target}'s {word} {'limit' if kind == LIMIT else 'deserved quota'} from {fmt(cap)} to "
        f"{fmt(new * _PER_UNIT[dim])} (+{fmt(grow)}; {dim} {'limit' if kind == LIMIT else 'quota'} "
        f"{_queue_number(dim, cap)} -> {new} {unit})"
        + (f" and its deserved quota to {fmt(fields['quota'] * _PER_UNIT[dim])}" if also and kind == LIMIT else "")
    )
    new_quota = fields["quota"] * _PER_UNIT[dim] if "quota" in fields else None
    impact = _impact(di, f, dim, target, new * _PER_UNIT[dim], cap, new_quota)
    then = f.facts.get("then")
    if then:
        impact += f" Alone it does not start {label}: {then} would hold it next."
    rollback = (
        f"Set {target}'s {dim} "
        + " and ".join(f"{k} back to {v}" for k, v in old.items())
        + f" ({unit}, -1 = unlimited): kubectl patch queue {target} --type merge -p "
        + f"'{json.dumps({'spec': {'resources': {dim: old}}}, separators=(',', ':'))}'"
    )
    verify = (
        f"{label} is admitted and Running; the {word} its {level}'s bound pods request rises from "
        f"{fmt(float(f.facts['held']))} to {fmt(after)} (the Queue's status.allocated {dim}), within the new "
        f"{'limit' if kind == LIMIT else 'quota'} of {fmt(new * _PER_UNIT[dim])}."
    )
    return [ActionDraft(f.code, title, cmd, impact, verify, rollback, Ref("queue", target))]


def _impact(
    di: DiagnosisInput, f: Finding, dim: str, target: str, new: float, cap: float, new_quota: float | None
) -> str:
    """What the new bound does beyond the job: the other waiting jobs of the queue it also lets through, the
    cluster's CPU or memory it may then take, and (a quota) the deserved quotas' sum against the cluster."""
    i = 0 if dim == CPU else 1
    fmt, word = show(dim), WORDS[dim]
    total = totals(di)[i]
    members = set(f.facts.get("members") or ()) | {target}
    job: Ref | None = f.facts.get("job")
    room = new - float(f.facts["after"])
    others = []
    for other in di.jobs:
        if not is_pending(other) or (other.get("project") not in members and other.get("queue") not in members):
            continue
        if job is not None and other.name == job.name and other.namespace == job.namespace:
            continue
        want = job_vector(di, other)[i]
        if 0 < want <= room + 1e-9:
            room -= want
            others.append(other.ref.label)
    words = [
        f"{target} may then hold {fmt(new - cap)} more {word} than now, "
        f"{fmt(new)} of the {fmt(total)} allocatable on the cluster's schedulable nodes"
    ]
    if new_quota is None:
        words.append("a limit is a ceiling, not a reservation: no other queue's share or running pod changes")
    else:
        key = _KEYS[dim][0]
        scale = 1000.0 if dim == CPU else 1.0
        deserved = new_quota + sum(
            float(q.get(key)) * scale
            for q in di.queues
            if q.name != target and q.get(key) is not None and float(q.get(key)) >= 0
        )
        words.append(
            f"deserved {word} quotas would sum to {fmt(deserved)} of {fmt(total)}"
            + (" (over-committed: other queues' over-quota work may be reclaimed)" if deserved > total else "")
        )
    if others:
        words.append(
            f"its {word} also leaves room for {len(others)} other waiting job(s) of {target}: {', '.join(others[:5])}"
        )
    return "; ".join(words) + "."


__all__ = ["resource_quota_action"]

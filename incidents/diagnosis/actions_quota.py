"""Actions for a quota or a department limit that holds a job: the smallest sufficient edit (revert the cut,
or raise the limit by what is missing), saying when it would over-commit the cluster."""

from __future__ import annotations

import math

from incidents.diagnosis.actions_quota_resources import resource_quota_action
from incidents.diagnosis.allocation import job_units, project_allocated, units_held
from incidents.diagnosis.node_resources import node_nominal_gpus
from incidents.diagnosis.pending import is_pending
from incidents.diagnosis.queue_order import QueueOrder
from incidents.diagnosis.types import ActionDraft, DiagnosisInput, Finding, Ref


def quota(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    if f.facts.get("resource"):  # a CPU or memory quota or limit holds the job, not its GPUs
        return resource_quota_action(di, f)
    proj, queue = f.facts["project"], f.facts.get("queue") or f.facts["project"]
    quota, limit, alloc, need = (
        f.facts.get("quota"),
        f.facts.get("limit"),
        f.facts["allocated"],
        f.facts["requested"],
    )
    new_quota, new_limit, title = _smallest_quota_edit(f, proj, alloc + need)
    quota = _g(quota) if quota is not None else None
    limit = _g(limit) if limit is not None else None
    res = {
        "quota": _g(new_quota) if new_quota is not None else -1,
        "limit": _g(new_limit) if new_limit is not None else -1,
    }
    cmd = (
        f"kubectl patch queue {queue} --type merge -p "
        f'\'{{"spec":{{"resources":{{"gpu":{{"quota":{res["quota"]},"limit":{res["limit"]}}}}}}}}}\''
        if di.scheduler == "kai"
        else f"kubectl edit clusterqueue {queue}   # nvidia.com/gpu: nominalQuota {quota} -> {_g(new_quota)}"
        + (
            f", limit (nominalQuota + borrowingLimit) {limit} -> {_g(new_limit)}"
            if new_limit != f.facts.get("limit")
            else ""
        )
    )
    job = f.facts.get("job")
    ceiling_after = new_limit if new_limit is not None else new_quota
    unblocked = _pending_in_project_within(
        di, proj, queue, int(ceiling_after) if ceiling_after is not None else None, job
    )
    out = [
        ActionDraft(
            f.code,
            title,
            cmd,
            _quota_impact(di, queue, new_quota)
            + (
                f"; it would also admit {len(unblocked)} other waiting job(s) of {proj}: {', '.join(unblocked[:5])}"
                if unblocked
                else ""
            )
            + ".",
            f"{job.label if job else 'the job'} is admitted/Running; the queue's allocated GPUs rise by {_g(need)}.",
            f"Set quota back to {quota}"
            + (f" and limit to {limit}" if limit is not None else "")
            + " the same way.",
            Ref("queue", queue),
        )
    ]
    # A smaller request only helps when the room left in the quota holds at least one pod of the job:
    # "resubmit with at most 0 GPUs" helps nobody.
    ceiling = f.facts.get("limit") if f.facts.get("limit") is not None else f.facts.get("quota")
    left = max(float(ceiling or 0) - alloc, 0.0)
    per_pod = int(
        f.facts.get("per_pod") or 0
    )  # whole GPUs per pod; a share or MIG job is not resized this way
    if job is not None and per_pod >= 1 and left >= per_pod and left < need:
        pods = int(left // per_pod)
        out.append(
            ActionDraft(
                f.code,
                f"Or resubmit {job.label} with {pods} pod(s) × {per_pod} GPU ({pods * per_pod} GPUs), "
                f"which fits the {_g(left)} GPUs left in {proj}'s {'limit' if limit is not None else 'quota'}",
                f"resubmit {job.label} with {pods} pod(s) of {per_pod} GPUs",
                "Only this job is affected (smaller, longer run); no other project changes.",
                "The job is admitted with the smaller request.",
                "Resubmit with the original size.",
                job,
            )
        )
    return out


def _quota_impact(di: DiagnosisInput, queue: str, new_quota: float | None) -> str:
    """What a queue's new deserved quota does to the others: the sum of deserved quotas against the cluster's
    GPUs (over-committed, and who a reclaim could preempt then)."""
    total = sum(node_nominal_gpus(n) for n in di.nodes)
    deserved = _g(
        sum(float(q.get("quota_gpus") or 0) for q in di.queues if q.name != queue) + float(new_quota or 0)
    )
    over = [
        f"{q.name} ({_g(project_allocated(di, q.get('project') or q.name, q.name))} of {_g(q.get('quota_gpus'))})"
        for q in di.queues
        if q.name != queue
        and project_allocated(di, q.get("project") or q.name, q.name) > float(q.get("quota_gpus") or 0) + 1e-9
    ]
    return (
        f"Deserved quotas would sum to {deserved} of {total} GPUs in the cluster"
        + (
            f" (over-committed by {_g(float(deserved) - total)}: other projects may be reclaimed)"
            if float(deserved) > total
            else ""
        )
        + (
            f"; projects running over their quota that a reclaim could preempt: {', '.join(over)}"
            if over
            else "; no other project is over its quota, so nothing is preempted by this change"
        )
    )


def _smallest_quota_edit(f: Finding, proj: str, after: float) -> tuple[float | None, float | None, str]:
    """The smallest quota edit that lets the job in, as (quota, limit, title); None is "no limit"/"no quota".

    In order: revert the cut that made it (every quota field changed at that moment), when that suffices;
    else, for a job that may run over its quota (preemptible), raise only the limit by what is missing; else
    raise the quota (and the limit with it) to what the job needs. The scheduler lets a preemptible job run
    over its quota up to its limit, so a limit is often all that holds it.
    """
    quota, limit = _num_or_none(f.facts.get("quota")), _num_or_none(f.facts.get("limit"))
    preemptible = bool(f.facts.get("preemptible", True))

    def lets_in(q: float | None, lim: float | None) -> bool:
        within = q is None or after <= q + 1e-9
        return within or (preemptible and (lim is None or after <= lim + 1e-9))

    cut = f.facts.get("cut") or {}
    reverted = f.facts.get("reverted") or {}
    if cut and reverted:
        q = _num_or_none(reverted["quota_gpus"]) if "quota_gpus" in reverted else quota
        lim = _num_or_none(reverted["limit_gpus"]) if "limit_gpus" in reverted else limit
        if lets_in(q, lim):
            parts = []
            if "quota_gpus" in reverted:
                parts.append(f"quota to {_g(q) if q is not None else 'none'}")
            if "limit_gpus" in reverted:
                parts.append(f"limit to {_g(lim) if lim is not None else 'none (unlimited)'}")
            return (
                q,
                lim,
                (f"Restore project {proj}'s {' and '.join(parts)} (cut by {cut.get('actor') or 'someone'})"),
            )
    if preemptible and limit is not None and after > limit + 1e-9 and lets_in(quota, _whole(after)):
        new_limit = float(_whole(after))
        return (
            quota,
            new_limit,
            (
                f"Raise project {proj}'s GPU limit from {_g(limit)} to {_g(new_limit)} "
                f"(+{_g(new_limit - limit)}; its quota stays {_g(quota) if quota is not None else 'as it is'})"
            ),
        )
    # Fractions count as the scheduler charges them; a quota is raised to whole GPUs (Kueue's nominalQuota of
    # nvidia.com/gpu is a count; a KAI quota could be fractional, but a whole one is what operators set).
    raised = float(_whole(max(after, quota or 0)))
    raised_limit = float(_whole(max(raised, limit))) if limit is not None else None
    title = f"Raise project {proj}'s GPU quota from {_g(quota)} to {_g(raised)}" + (
        f" and limit to {_g(raised_limit)}" if limit is not None and raised_limit != limit else ""
    )
    return raised, raised_limit, title


def _num_or_none(x: object) -> float | None:
    try:
        return None if x is None or float(x) < 0 else float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _pending_in_project_within(
    di: DiagnosisInput, project: str, queue: str, ceiling: int | None, job: Ref | None
) -> list[str]:
    """Other waiting jobs of the project that a quota (or limit) of ``ceiling`` would have room for, in order."""
    if ceiling is None:
        return []
    room = ceiling - project_allocated(di, project, queue)
    if job is not None:
        mine = di.find("job", job.name, job.namespace)
        room -= job_units(mine) if mine else 0
    out = []
    waiting = [
        other
        for other in di.jobs
        if is_pending(other)
        and (other.get("project") or other.get("queue")) in (project, queue)
        and not (job is not None and other.name == job.name and other.namespace == job.namespace)
    ]
    for other in QueueOrder(di, waiting):  # the scheduler's order, as every "who starts" answer reads it
        want = job_units(other)
        if 0 < want <= room + 1e-9:
            room -= want
            out.append(other.ref.label)
    return out


def _whole(x: float) -> int:
    return math.ceil(x - 1e-9)


def _g(x: object) -> str:
    """A GPU count as the pages write it: 4, 3.5, 0.25 (None stays None for the caller's wording)."""
    if x is None:
        return "None"
    try:
        return f"{round(float(x), 4):g}"  # type: ignore[arg-type]  # any value: what float() refuses is str()
    except (TypeError, ValueError):
        return str(x)


def department(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    """Raise the department's limit (who can then borrow less), or have a sibling give back what it borrows."""
    if f.facts.get("resource"):  # the department's CPU or memory quota or limit, not its GPUs
        return resource_quota_action(di, f)
    job = f.facts.get("job")
    dept, limit, quota = f.facts["department"], f.facts.get("limit"), f.facts.get("quota")
    after = f.facts["allocated"] + f.facts["requested"]
    members = set(f.facts.get("projects") or {})
    over_limit = limit is not None and after > limit + 1e-9
    field_name = "limit" if over_limit else "quota"
    old = limit if over_limit else quota
    new = math.ceil(after - 1e-9)
    # Who borrows now outside the department: projects over their own quota, whose over-quota work a department
    # allowed {new - old} more GPUs would reclaim first.
    others = []
    for q in di.queues:
        name = q.get("project") or q.name
        if name in members or q.name in members or q.get("quota_gpus") is None:
            continue
        held = units_held(di, name, q.name)
        if held > float(q.get("quota_gpus") or 0) + 1e-9:
            others.append(f"{name} ({held:g} of quota {q.get('quota_gpus')})")
    if f.facts.get("scheduler", di.scheduler) == "kueue":
        cmd = f"kubectl edit cohort {dept}   # nvidia.com/gpu borrowingLimit (or nominalQuota) so that {field_name} = {new}"
    else:
        cmd = (
            f"kubectl patch queue {dept} --type merge -p "
            f'\'{{"spec":{{"resources":{{"gpu":{{"{field_name}":{new}}}}}}}}}\''
        )
    out = [
        ActionDraft(
            f.code,
            f"Raise department {dept}'s GPU {field_name} from {old:g} to {new}",
            cmd,
            (
                f"The department may then hold {new - (old or 0):g} more GPU(s) than now; what its projects take "
                "over their quotas comes from what others borrow"
                + (
                    f": projects outside {dept} running over their quota, the first a reclaim would shrink: "
                    + ", ".join(others[:6])
                    if others
                    else f": no project outside {dept} is over its quota now, so nobody is reclaimed today"
                )
                + "."
            ),
            f"{job.label if job else 'the job'} is admitted; department {dept}'s allocated GPUs rise by "
            f"{f.facts['requested']:g}.",
            f"Set the department's {field_name} back to {old:g} the same way.",
            Ref("department", dept),
        )
    ]
    for b in f.facts.get("borrowing") or []:
        give = b["allocated"] - (b["quota"] or 0)
        if give + 1e-9 < f.facts["requested"] - max((limit or after) - f.facts["allocated"], 0):
            continue
        out.append(
            ActionDraft(
                f.code,
                f"Or ask project {b['project']} to give back the {give:g} GPU(s) it uses over its quota in {dept}",
                f"# stop or shrink over-quota (preemptible) work of project {b['project']}",
                f"Project {b['project']} drops from {b['allocated']:g} to its quota {b['quota']:g} GPUs; "
                f"the department's quota and limit stay.",
                f"{job.label if job else 'the job'} is admitted within the department's limit.",
                f"Resubmit {b['project']}'s stopped work once the department has room.",
                job,
            )
        )
        break
    return out

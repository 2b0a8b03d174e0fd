"""Allocated but unused GPUs: idle allocations and jobs requesting more GPUs than they use.

Activity is DCGM_FI_PROF_SM_ACTIVE (fraction of time at least one warp was
resident on an SM); where the exporter does not enable profiling metrics,
DCGM_FI_DEV_GPU_UTIL / 100 stands in (coarser: it counts any kernel running).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import NamedTuple

from incidents.diagnosis import codes as C
from incidents.diagnosis.build import refuted
from incidents.diagnosis.citations import cite_series, cite_state
from incidents.diagnosis.types import (
    SUPPORTED,
    UNVERIFIED,
    Cite,
    DiagnosisInput,
    EntityState,
    Finding,
    Series,
    hhmm,
    parse_ts,
)

logger = logging.getLogger(__name__)

IDLE_BELOW = 0.10
IDLE_FOR = timedelta(hours=1)
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"


def activity(di: DiagnosisInput, gpu_uuid: str) -> tuple[Series | None, float]:
    """The activity series of a GPU and the factor that turns it into a 0..1 fraction."""
    util = None
    for s in di.series:
        if s.uuid != gpu_uuid:
            continue
        if s.metric == SM_ACTIVE:
            return s, 1.0
        if s.metric == GPU_UTIL:
            util = s
    return (util, 0.01) if util is not None else (None, 1.0)


def idle_since(points: list[tuple[datetime, float]], t: datetime, factor: float) -> datetime | None:
    """Start of the trailing spell (ending at t) in which activity stayed below IDLE_BELOW; None if active at t."""
    since = None
    for ts, v in sorted(points):
        if ts > t:
            break
        if v * factor < IDLE_BELOW:
            since = since or ts
        else:
            since = None
    return since


def _pods_of_interest(di: DiagnosisInput) -> list[EntityState]:
    pods: list[EntityState] = []
    for ref in di.subjects:
        if ref.kind == "pod":
            p = di.find("pod", ref.name, ref.namespace)
            pods += [p] if p else []
        elif ref.kind == "job":
            j = di.find("job", ref.name, ref.namespace)
            pods += di.pods_of_job(j) if j else []
        elif ref.kind == "gpu":
            g = di.find("gpu", ref.name)
            if g is not None and g.get("pod") and "/" in g.get("pod"):
                ns, name = g.get("pod").split("/", 1)
                p = di.find("pod", name, ns)
                pods += [p] if p else []
    seen: list[EntityState] = []
    for p in pods:
        if p not in seen and p.get("phase") == "Running" and not crashing(p):
            seen.append(p)
    return seen


def crashing(pod: EntityState) -> bool:
    """A container waiting to restart leaves its GPUs idle by consequence: that is the crash's finding, not this."""
    for c in pod.get("containers") or []:
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return True
    return False


class _Measured(NamedTuple):
    """A GPU of the pod with an activity series: mean activity over the idle window, idle since when."""

    gpu: EntityState
    series: Series
    mean: float
    since: datetime | None


def _earliest(rows: list[_Measured]) -> datetime:
    """The earliest idle-since of rows of which at least one is idle."""
    return min(r.since for r in rows if r.since is not None)


def check_efficiency(di: DiagnosisInput, idle_for: timedelta = IDLE_FOR) -> list[Finding]:
    out: list[Finding] = []
    for pod in _pods_of_interest(di):
        f = _pod_finding(di, pod, idle_for)
        if f is not None:
            out.append(f)
    return out


def _measure(
    di: DiagnosisInput, gpus: list[EntityState], idle_for: timedelta, held_from: datetime | None = None
) -> list[_Measured]:
    """The GPUs with an activity series in the idle window, each with its mean and idle-since. ``held_from``:
    when the pod got them (its start): an idle spell is the pod's from then, not the free GPU's before."""
    measured: list[_Measured] = []
    for g in gpus:
        s, factor = activity(di, g.name)
        if s is None:
            continue
        points = s.points if held_from is None else [(ts, v) for ts, v in s.points if ts >= held_from]
        vals = [v * factor for ts, v in points if ts <= di.t and ts >= di.t - idle_for]
        if vals:
            since = idle_since(points, di.t, factor)
            if since is not None and held_from is not None and since - held_from <= _step(s.points):
                # Idle from the first sample after the pod started, taken within a step of its start: idle
                # since it started, not since that sample (an hour-long spell would come out a step short).
                since = held_from
            measured.append(_Measured(g, s, sum(vals) / len(vals), since))
    return measured


def _step(points: list[tuple[datetime, float]]) -> timedelta:
    """The series' sample spacing (its smallest; zero with fewer than two points)."""
    times = sorted(ts for ts, _ in points)
    return min((b - a for a, b in zip(times, times[1:], strict=False)), default=timedelta(0))


def _pod_finding(di: DiagnosisInput, pod: EntityState, idle_for: timedelta) -> Finding | None:
    """The one efficiency rule that applies to a pod holding GPUs, by how many of its GPUs stayed idle."""
    gpus = [g for g in di.gpus if g.get("pod") == f"{pod.namespace}/{pod.name}"]
    if not gpus and not pod.get("gpus"):
        return None
    measured = _measure(di, gpus, idle_for, parse_ts(pod.get("started")))
    pcite = cite_state(pod, di.t)
    if not measured:
        return _unmeasured_finding(di, pod, gpus, pcite)
    idle = [r for r in measured if r.since is not None and di.t - r.since >= idle_for]
    cites: list[Cite] = [pcite, *[cite_series(r.series) for r in measured[:8]]]
    if idle and len(idle) == len(measured):
        return _idle_finding(di, pod, idle, cites, measured[0].gpu.get("node") or pod.get("node"))
    if idle:
        return _over_requested_finding(pod, measured, idle, cites, idle_for)
    if any(r.since is not None for r in measured) and "GPUIdleAllocated" in di.alertnames:
        return _idle_too_short_finding(di, pod, measured, cites, idle_for)
    if "GPUIdleAllocated" in di.alertnames or any(r.kind == "gpu" for r in di.subjects):
        return _busy_finding(di, pod, measured, cites, idle_for)
    return None


def _unmeasured_finding(
    di: DiagnosisInput, pod: EntityState, gpus: list[EntityState], pcite: Cite
) -> Finding | None:
    """An idle-GPU alert on a pod whose GPUs have no activity series: unverified."""
    if "GPUIdleAllocated" not in di.alertnames:
        return None
    return Finding(
        C.IDLE_GPU_ALLOCATION,
        f"{pod.ref.label} holds {pod.get('gpus') or len(gpus)} GPU(s) but no "
        "activity series was collected for them.",
        UNVERIFIED,
        0.3,
        supports=[pcite],
        subject=pod.ref,
        sources=("prometheus",),
        why="no DCGM activity series for the pod's GPUs",
        next_questions=["Does the DCGM exporter export DCGM_FI_PROF_SM_ACTIVE on this node?"],
    )


def _idle_finding(
    di: DiagnosisInput, pod: EntityState, idle: list[_Measured], cites: list[Cite], where: str | None
) -> Finding:
    """Every measured GPU of the pod stayed idle for the whole threshold: an idle allocation."""
    since = _earliest(idle)
    mean = sum(r.mean for r in idle) / len(idle)
    return Finding(
        C.IDLE_GPU_ALLOCATION,
        f"{pod.ref.label} holds {len(idle)} GPU(s) on {where} with mean SM activity {mean:.2f} "
        f"(< {IDLE_BELOW:.2f}) since {hhmm(since)} ({_dur(di.t - since)}).",
        SUPPORTED,
        0.85,
        supports=cites,
        subject=pod.ref,
        sources=("prometheus",),
        since=since,
        facts={
            "pod": pod.ref,
            "gpus": [r.gpu.name for r in idle],
            "node": where,
            "job": pod.get("job"),
            "project": pod.get("project"),
        },
        next_questions=["Is the job waiting on data/IO or stuck, or is it a forgotten notebook?"],
    )


def _over_requested_finding(
    pod: EntityState, measured: list[_Measured], idle: list[_Measured], cites: list[Cite], idle_for: timedelta
) -> Finding:
    """Some of the pod's GPUs work and some stayed idle: it requests more GPUs than it uses."""
    active = [r for r in measured if r.since is None]
    return Finding(
        C.OVER_REQUESTED,
        f"{pod.ref.label} uses {len(active)} of its {len(measured)} GPUs; {len(idle)} stayed below "
        f"{IDLE_BELOW:.2f} SM activity for over {_dur(idle_for)}.",
        SUPPORTED,
        0.75,
        supports=cites,
        subject=pod.ref,
        sources=("prometheus",),
        since=_earliest(idle),
        facts={
            "pod": pod.ref,
            "used": len(active),
            "requested": len(measured),
            "job": pod.get("job"),
        },
        next_questions=[
            "Does the code actually use all visible GPUs (DDP world size, CUDA_VISIBLE_DEVICES)?"
        ],
    )


def _idle_too_short_finding(
    di: DiagnosisInput, pod: EntityState, measured: list[_Measured], cites: list[Cite], idle_for: timedelta
) -> Finding:
    """Idle now, but for less than the threshold: unverified."""
    since = _earliest(measured)
    return Finding(
        C.IDLE_GPU_ALLOCATION,
        f"{pod.ref.label}'s GPUs are below {IDLE_BELOW:.2f} SM activity only since {hhmm(since)} "
        f"({_dur(di.t - since)}), shorter than the {_dur(idle_for)} threshold.",
        UNVERIFIED,
        0.4,
        supports=cites,
        subject=pod.ref,
        sources=("prometheus",),
        since=since,
        why="idle, but not for long enough to call it an idle allocation",
    )


def _busy_finding(
    di: DiagnosisInput, pod: EntityState, measured: list[_Measured], cites: list[Cite], idle_for: timedelta
) -> Finding:
    """The pod's GPUs are active at t: an idle allocation is refuted."""
    mean = sum(r.mean for r in measured) / len(measured)
    return refuted(
        C.IDLE_GPU_ALLOCATION,
        f"{pod.ref.label}'s GPUs are busy: mean SM activity {mean:.2f} over the last {_dur(idle_for)}.",
        0.75,
        cites,
        pod.ref,
        ("prometheus",),
        f"activity above {IDLE_BELOW:.2f} at {hhmm(di.t)}",
    )


def _dur(d: timedelta) -> str:
    mins = int(d.total_seconds() // 60)
    return f"{mins // 60}h{mins % 60:02d}m" if mins >= 60 else f"{mins}m"

"""Why a GPU job fails: crash loops and the log line that explains them, OOM (host vs GPU), image pulls, preemption.

Container memory OOM (the kernel's OOMKilled, exit 137) and CUDA out-of-memory
(a Python/C++ exception in the log, usually exit 1) are different fixes, so
they are told apart from the termination reason and the log, never guessed
from the exit code alone.
"""

from __future__ import annotations

import logging
import re
from typing import Any, NamedTuple

from incidents.diagnosis import codes as C
from incidents.diagnosis.build import refuted
from incidents.diagnosis.citations import cite_change, cite_event, cite_state
from incidents.diagnosis.efficiency import IDLE_BELOW, activity, crashing
from incidents.diagnosis.preemption import preemption_findings
from incidents.diagnosis.types import (
    SUPPORTED,
    Cite,
    DiagnosisInput,
    EntityState,
    Finding,
    LogRec,
    hhmm,
    parse_ts,
)

logger = logging.getLogger(__name__)

CUDA_OOM = re.compile(
    r"CUDA out of memory|CUDA error: out of memory|cudaErrorMemoryAllocation|OutOfMemoryError: CUDA|"
    r"CUBLAS_STATUS_ALLOC_FAILED|RESOURCE_EXHAUSTED: Out of memory while trying to allocate|"
    r"out of memory on device|NCCL.*(?:out of memory|cudaMalloc)",
    re.I,
)
# Log lines that explain a crash, most specific first: (pattern, what it means).
EXPLAINERS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"FileNotFoundError|No such file or directory|ENOENT|does not exist", re.I),
        "a missing file or config",
    ),
    (
        re.compile(r"PermissionError|Permission denied|EACCES|Operation not permitted", re.I),
        "a permission problem",
    ),
    (
        re.compile(r"ModuleNotFoundError|ImportError|No module named|cannot import name", re.I),
        "an import error",
    ),
    (
        re.compile(
            r"KeyError|yaml\.\w+Error|json\.decoder|JSONDecodeError|ValidationError|invalid (?:config|value|argument)|"
            r"unrecognized arguments|error: argument",
            re.I,
        ),
        "a configuration error",
    ),
    (
        re.compile(
            r"Connection refused|Name or service not known|Temporary failure in name resolution|timed out",
            re.I,
        ),
        "a dependency it cannot reach",
    ),
    (re.compile(r"Traceback|Error|Exception|FATAL|panic:", re.I), "an error"),
]
PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
CRASH_REASONS = (
    "CrashLoopBackOff",
    "RunContainerError",
    "CreateContainerError",
    "CreateContainerConfigError",
)


def related_pods(di: DiagnosisInput) -> list[EntityState]:
    pods: list[EntityState] = []
    for ref in di.subjects:
        if ref.kind == "pod":
            p = di.find("pod", ref.name, ref.namespace)
            if p is not None:
                pods.append(p)
        elif ref.kind == "job":
            j = di.find("job", ref.name, ref.namespace)
            if j is not None:
                pods.extend(di.pods_of_job(j))
    return pods


def idle_holders(di: DiagnosisInput) -> list[EntityState]:
    """Pods holding a subject GPU that sits idle because the pod never got to run on it: a container waiting
    to be pulled or restarted (its GPUs stay allocated and idle). The pod's failure is why the GPU is
    allocated and idle, so it is weighed as the subject's own pod would be. A faulty GPU is left out: there
    the pod's trouble may be the fault's consequence."""
    out: list[EntityState] = []
    for ref in di.subjects:
        g = di.find("gpu", ref.name) if ref.kind == "gpu" else None
        holder = str(g.get("pod") or "") if g is not None else ""
        if g is None or "/" not in holder or g.get("xid_last") or g.get("present") is False:
            continue
        ns, name = holder.split("/", 1)
        pod = di.find("pod", name, ns)
        if pod is None or pod in out or not crashing(pod):
            continue
        series, factor = activity(di, g.name)
        last = [v for ts, v in series.points if ts <= di.t][-1:] if series is not None else []
        if last and last[0] * factor < IDLE_BELOW:
            out.append(pod)
    return out


def check_workloads(di: DiagnosisInput) -> list[Finding]:
    out: list[Finding] = []
    pods = related_pods(di)
    for pod in pods + [p for p in idle_holders(di) if p not in pods]:
        out.extend(pod_findings(di, pod))
    out.extend(preemption_findings(di))
    return out


def _containers(pod: EntityState) -> list[dict[str, Any]]:
    return list(pod.get("containers") or [])


def _logs_of(di: DiagnosisInput, pod: EntityState) -> list[LogRec]:
    return [lg for lg in di.logs if lg.pod.name == pod.name and lg.pod.namespace == pod.namespace]


def explaining_line(lines: list[str]) -> tuple[str, str] | None:
    """The log line that best explains a crash, and what it means (None when nothing explains it)."""
    for pattern, meaning in EXPLAINERS:
        for line in reversed(lines):  # the last matching line is the one the process died on
            if pattern.search(line):
                return line.strip(), meaning
    return None


def pod_findings(di: DiagnosisInput, pod: EntityState) -> list[Finding]:
    """Every container rule in turn: image pull, then for a crashed container OOM, CUDA OOM or crash loop."""
    logs = _logs_of(di, pod)
    out: list[Finding] = []
    for c in _containers(pod):
        out.extend(_container_findings(di, pod, c, logs))
    return out


class _Crash(NamedTuple):
    """A crashed container and what its pod's log says: the facts every crash rule reads."""

    pod: EntityState
    container: dict[str, Any]
    name: str  # "<ns>/<pod> container <name>"
    reason: str  # the waiting reason (CrashLoopBackOff, …)
    restarts: int
    exit_code: Any
    t_reason: str  # the termination reason (OOMKilled, Error, …)
    term: dict[str, Any]
    pcite: Cite
    logs: list[LogRec]
    log_lines: list[str]
    log_cites: list[Cite]
    cuda_line: str | None


def _container_findings(
    di: DiagnosisInput, pod: EntityState, c: dict[str, Any], logs: list[LogRec]
) -> list[Finding]:
    pcite = cite_state(pod, di.t)
    waiting = (c.get("state") or {}).get("waiting") or {}
    term = (c.get("last_state") or {}).get("terminated") or (c.get("state") or {}).get("terminated") or {}
    reason = waiting.get("reason") or ""
    restarts = int(c.get("restart_count") or 0)
    exit_code = term.get("exitCode", term.get("exit_code"))
    t_reason = term.get("reason") or ""
    if reason in PULL_REASONS:
        return [_image_pull(di, pod, c, reason, waiting.get("message") or "", pcite)]
    crashed = reason in CRASH_REASONS or (restarts > 0 and term) or (t_reason and exit_code not in (None, 0))
    if not crashed:
        return []
    log_lines = [ln for lg in logs for ln in lg.lines]
    crash = _Crash(
        pod,
        c,
        f"{pod.ref.label} container {c.get('name', 'main')}",
        reason,
        restarts,
        exit_code,
        t_reason,
        term,
        pcite,
        logs,
        log_lines,
        [lg.obs_id for lg in logs if lg.obs_id is not None],
        next((ln for ln in reversed(log_lines) if CUDA_OOM.search(ln)), None),
    )
    if t_reason == "OOMKilled" or (exit_code == 137 and t_reason != "Error" and not crash.cuda_line):
        return _oom_killed_findings(crash)
    if crash.cuda_line is not None:
        return _cuda_oom_findings(crash)
    return [_crashloop_finding(crash)]


def _oom_killed_findings(crash: _Crash) -> list[Finding]:
    """The kernel OOM-killed the container (host memory); without a CUDA OOM line, GPU OOM is refuted."""
    pod, c = crash.pod, crash.container
    out = [
        Finding(
            C.OOM_KILLED,
            f"{crash.name} was OOMKilled (exit {crash.exit_code}) after {crash.restarts} restart(s): the container "
            "hit its memory limit (host memory, not GPU memory).",
            SUPPORTED,
            0.9,
            supports=[crash.pcite, *crash.log_cites],
            subject=pod.ref,
            sources=("k8s",),
            since=parse_ts(crash.term.get("finishedAt")),
            facts={"pod": pod.ref, "container": c.get("name"), "exit_code": crash.exit_code},
            next_questions=["What is the container's memory limit, and does the data loader's memory grow?"],
        )
    ]
    if crash.cuda_line is None:
        out.append(
            refuted(
                C.GPU_OOM,
                f"No CUDA out-of-memory line in {crash.name}'s log: the OOM is host memory.",
                0.6,
                [crash.pcite, *crash.log_cites],
                pod.ref,
                ("log",),
                "termination reason OOMKilled and no CUDA OOM in the log",
            )
        )
    return out


def _cuda_oom_findings(crash: _Crash) -> list[Finding]:
    """CUDA out of memory in the log (GPU memory), and so not the kernel's OOM kill."""
    pod, c, cuda_line, exit_code = crash.pod, crash.container, crash.cuda_line or "", crash.exit_code
    return [
        Finding(
            C.GPU_OOM,
            f"{crash.name} exits {exit_code if exit_code is not None else '?'} with CUDA out of memory "
            f"({cuda_line.strip()[:160]}): the model or batch does not fit the GPU's memory.",
            SUPPORTED,
            0.9,
            supports=[*crash.log_cites, crash.pcite] if crash.log_cites else [crash.pcite],
            subject=pod.ref,
            sources=("log",),
            since=parse_ts(crash.term.get("finishedAt")),
            facts={"pod": pod.ref, "container": c.get("name"), "line": cuda_line, "gpus": pod.get("gpus")},
            next_questions=["Did the batch size, sequence length or model change with the last image?"],
        ),
        refuted(
            C.OOM_KILLED,
            f"{crash.name} was not OOMKilled by the kernel (reason {crash.t_reason or 'unknown'}, "
            f"exit {exit_code}).",
            0.7,
            [crash.pcite],
            pod.ref,
            ("k8s",),
            "the termination reason is not OOMKilled; the log shows a CUDA OOM instead",
        ),
    ]


def _crashloop_finding(crash: _Crash) -> Finding:
    """A crash loop and the log line that explains it (supported), or none does (unverified)."""
    pod, c, name, exit_code = crash.pod, crash.container, crash.name, crash.exit_code
    loop = f"{name} is in {crash.reason or 'a crash loop'} after {crash.restarts} restart(s), exit code {exit_code}"
    line = explaining_line(crash.log_lines)
    if line is None:
        return Finding(
            C.CRASHLOOP_CONFIG_ERROR,
            f"{loop}; no log line explains it" + (" (log not collected)" if not crash.logs else "") + ".",
            "unverified",
            0.35,
            supports=[crash.pcite],
            subject=pod.ref,
            sources=("k8s", "log"),
            why="the log does not say why" if crash.logs else "no log was collected",
            facts={"pod": pod.ref, "container": c.get("name"), "exit_code": exit_code},
            next_questions=[f"What does `kubectl logs --previous {pod.name}` show?"],
        )
    text, meaning = line
    return Finding(
        C.CRASHLOOP_CONFIG_ERROR,
        f"{loop} ({crash.t_reason or 'Error'}); the log shows {meaning}: {text[:200]}",
        SUPPORTED,
        0.85 if meaning not in ("an error",) else 0.6,
        supports=[*crash.log_cites, crash.pcite] if crash.log_cites else [crash.pcite],
        subject=pod.ref,
        sources=("k8s", "log"),
        since=parse_ts(crash.term.get("finishedAt")),
        facts={
            "pod": pod.ref,
            "container": c.get("name"),
            "line": text,
            "meaning": meaning,
            "exit_code": exit_code,
            "image": c.get("image"),
        },
        next_questions=["Which config/volume/secret does the job expect, and did it change?"],
    )


def _image_pull(
    di: DiagnosisInput, pod: EntityState, c: dict[str, Any], reason: str, message: str, pcite: Cite
) -> Finding:
    image = c.get("image") or ""
    job_name = pod.get("job") or ""
    related = {pod.ref}
    job = di.find("job", job_name, pod.namespace) if job_name else None
    if job is not None:
        related.add(job.ref)
    changes = [ch for ch in di.changes if ch.entity in related and "image" in ch.field and ch.time <= di.t]
    cites: list[Cite] = [pcite]
    evs = [
        e
        for e in di.events
        if e.involved
        and e.involved.name == pod.name
        and e.time <= di.t
        and ("pull" in (e.message or "").lower() or e.reason in ("Failed", "BackOff", "ErrImagePull"))
    ]
    cites += [cite_event(e) for e in evs[-2:]]
    change_words = ""
    prev_image = None
    if changes:
        ch = max(changes, key=lambda x: x.time)
        prev_image = ch.old
        who = f" by {ch.actor}" if ch.actor else ""
        change_words = f"; the image changed from {ch.old} to {ch.new} at {hhmm(ch.time)}{who}"
        cites.append(cite_change(ch))
    detail = (message or (evs[-1].message if evs else ""))[:160]
    return Finding(
        C.IMAGE_PULL_ERROR,
        f"{pod.ref.label} cannot pull {image} ({reason}{': ' + detail if detail else ''}){change_words}.",
        SUPPORTED,
        0.9 if changes else 0.8,
        supports=cites,
        subject=pod.ref,
        sources=("k8s",),
        since=max(changes, key=lambda x: x.time).time if changes else None,
        facts={"pod": pod.ref, "image": image, "previous_image": prev_image, "job": job.ref if job else None},
        next_questions=[
            f"Does the tag {image.rsplit(':', 1)[-1] if ':' in image else image} exist in the registry, "
            "and can the node's pull secret read it?"
        ],
    )

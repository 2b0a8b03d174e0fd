"""Proposed actions for workload, efficiency and thermal findings (split from ``actions``; same contract)."""

from __future__ import annotations

import logging

from incidents.diagnosis import codes as C
from incidents.diagnosis.fault_pass import starts_with_room
from incidents.diagnosis.types import ActionDraft, DiagnosisInput, EntityState, Finding, Ref

logger = logging.getLogger(__name__)


def pods_on(di: DiagnosisInput, node: str) -> list[EntityState]:
    return [p for p in di.pods_on_node(node) if p.get("phase") == "Running" or p.get("node")]


def describe_pods(pods: list[EntityState]) -> str:
    """Pods grouped by project, named, with their GPUs and priority class: the "who else" of an impact."""
    if not pods:
        return "no running pods"
    by_project: dict[str, list[str]] = {}
    for p in pods:
        by_project.setdefault(p.get("project") or p.namespace, []).append(
            f"{p.ref.label} ({p.get('gpus') or 0} GPU, {p.get('priority_class') or 'train'})"
        )
    return "; ".join(
        f"project {proj}: {', '.join(names[:5])}{' …' if len(names) > 5 else ''}"
        for proj, names in sorted(by_project.items())
    )


def workload(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    pod = f.facts.get("pod")
    what = {
        C.CRASHLOOP_CONFIG_ERROR: (
            "Fix the configuration the log names",
            f"fix: {str(f.facts.get('line', ''))[:120]}",
        ),
        C.OOM_KILLED: (
            "Raise the container memory limit or reduce host-side memory use",
            "resources.limits.memory: raise, or lower dataloader workers/prefetch",
        ),
        C.GPU_OOM: (
            "Lower the batch size (or use gradient checkpointing / more GPU memory)",
            "reduce batch size; or request a GPU product with more memory",
        ),
        C.PREEMPTED: (
            "Run within the project's quota or as non-preemptible",
            "resubmit within quota (or with priorityClassName inference if allowed)",
        ),
    }[f.code]
    return [
        ActionDraft(
            f.code,
            what[0],
            what[1],
            f"Only {pod.label if pod else 'this workload'} is affected.",
            "The pod stays Running with no new restarts for 10 minutes.",
            "Resubmit with the previous settings.",
            pod,
        )
    ]


def image(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    prev, cur, pod = f.facts.get("previous_image"), f.facts.get("image"), f.facts.get("pod")
    if prev:
        return [
            ActionDraft(
                f.code,
                f"Roll the image back to {prev}",
                f"resubmit with image {prev} (was {cur})",
                f"Only {pod.label if pod else 'this workload'} is affected.",
                "The pod's container starts (no ErrImagePull/ImagePullBackOff).",
                f"Resubmit with {cur} once the tag exists.",
                pod,
            )
        ]
    return [
        ActionDraft(
            f.code,
            f"Fix the image reference {cur} or the pull secret",
            f"crane manifest {cur}   # does the tag exist?",
            f"Only {pod.label if pod else 'this workload'} is affected.",
            "The pod's container starts.",
            "Resubmit with the previous image.",
            pod,
        )
    ]


def idle(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    pod = f.facts.get("pod")
    gpus = f.facts.get("gpus", [])
    node = f.facts.get("node") or ""
    could = _pending_that_fit_after_release(di, {node: len(gpus)}) if node else []
    return [
        ActionDraft(
            f.code,
            f"Ask the owner of {pod.label if pod else 'the pod'} to release its {len(gpus)} idle GPU(s)",
            f"kubectl -n {pod.namespace} delete pod {pod.name}   # only with the owner's agreement"
            if pod
            else "",
            f"Frees {len(gpus)} GPUs on {node} for project {f.facts.get('project') or '?'}; pending jobs that would then "
            f"fit: {', '.join(could) or 'none right now'}.",
            "The GPUs show as free (no pod) and DCGM_FI_PROF_SM_ACTIVE of the next holder is above 0.1.",
            "Resubmit the job.",
            pod,
        )
    ]


def _pending_that_fit_after_release(di: DiagnosisInput, freed: dict[str, int]) -> list[str]:
    """Pending jobs that would start, in queue order, if pods released ``freed`` GPUs (per node)."""
    return starts_with_room(di, freed, freed=True)


def over_requested(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    pod = f.facts.get("pod")
    used, req = f.facts.get("used", 0), f.facts.get("requested", 0)
    return [
        ActionDraft(
            f.code,
            f"Resubmit with {used} GPU(s) instead of {req}",
            f"request nvidia.com/gpu: {used}",
            f"Frees {req - used} GPUs for other jobs; only this job changes.",
            "All requested GPUs show SM activity above 0.1.",
            f"Resubmit with {req} GPUs.",
            pod,
        )
    ]


def thermal(di: DiagnosisInput, f: Finding) -> list[ActionDraft]:
    node = f.facts.get("node", "")
    return [
        ActionDraft(
            f.code,
            f"Check cooling of {node}; drain it if the GPU keeps throttling",
            f"kubectl cordon {node}   # then inspect fans/airflow",
            f"Cordoning stops new pods on {node}; running: {describe_pods(pods_on(di, node))}.",
            "DCGM_FI_DEV_GPU_TEMP stays below 85 °C and the SM clock recovers.",
            f"kubectl uncordon {node}",
            Ref("node", node),
        )
    ]

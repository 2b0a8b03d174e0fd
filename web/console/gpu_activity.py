"""When an allocated GPU counts as active or as used well: thresholds on DCGM's SM activity, and the two
per-GPU readings of it the fleet page makes (one query each)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Avg, Count, OuterRef, Subquery

from collectors.models import EntityVersion, TelemetrySample
from rcaweb.cursor import Cursor

# SM activity (DCGM_FI_PROF_SM_ACTIVE, a 0..1 ratio) above which an allocated GPU counts as active,
# and above which it counts as "used well". The idle threshold matches the simulator's GPUIdleAllocated rule.
ACTIVE_SM = float(getattr(settings, "RCAWEB_ACTIVE_SM_THRESHOLD", 0.1))
WELL_USED_SM = float(getattr(settings, "RCAWEB_WELL_USED_SM_THRESHOLD", 0.5))
SM_METRIC = "DCGM_FI_PROF_SM_ACTIVE"
SAMPLE_STEP_MIN = 5  # TelemetrySample points are 5-minute averages (docs/inventory.md)
NEAR_T = timedelta(minutes=10)  # "SM activity at t" = mean of the 5-minute points in [t-10m, t]


def sm_by_gpu(
    cursor: Cursor, gpu_ids: list[int] | None, scope: dict[str, Any]
) -> dict[int, dict[str, float]]:
    """Per GPU: mean SM activity near t (one query)."""
    t = cursor.t
    qs = TelemetrySample.objects.filter(
        metric=SM_METRIC, time__gt=max(cursor.start, t - NEAR_T), time__lte=t, **scope
    )
    if gpu_ids is not None:
        qs = qs.filter(gpu_id__in=gpu_ids)
    rows = qs.values("gpu_id").annotate(recent=Avg("value"))
    return {r["gpu_id"]: {"recent": r["recent"]} for r in rows}


def idle_points_while_allocated(
    cursor: Cursor, pod_by_gpu: dict[int, str], scope: dict[str, Any]
) -> dict[int, int]:
    """Per GPU held at t: window points below ACTIVE_SM while the GPU was held by that same pod (one query).

    A point at time T averages (T-5m, T]; it counts when the GPU's version at T-5m names the pod holding it
    at t, so a GPU allocated 12 minutes ago counts at most the two points wholly inside its allocation (not
    the idle hours before it, when it was free or someone else's).
    """
    if not pod_by_gpu:
        return {}
    step = timedelta(minutes=SAMPLE_STEP_MIN)
    pod_at_span_start = (
        EntityVersion.objects.filter(entity_id=OuterRef("gpu_id"), valid_from__lte=OuterRef("time") - step)
        .order_by("-valid_from")
        .values("pod")[:1]
    )
    qs = TelemetrySample.objects.filter(
        metric=SM_METRIC, time__gt=cursor.start, time__lte=cursor.t, value__lt=ACTIVE_SM, **scope
    )
    if len(pod_by_gpu) <= 900:
        qs = qs.filter(gpu_id__in=list(pod_by_gpu))
    rows = (
        qs.annotate(alloc_pod=Subquery(pod_at_span_start))
        .values("gpu_id", "alloc_pod")
        .annotate(points=Count("id"))
        .order_by()
    )
    return {
        r["gpu_id"]: r["points"]
        for r in rows
        if r["alloc_pod"] and r["alloc_pod"] == pod_by_gpu.get(r["gpu_id"])
    }

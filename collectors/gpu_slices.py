"""A GPU's slices, its KAI shares and MIG instances, recorded by diff beside its state and read as of t."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q

from collectors.models import Cluster, Entity, GpuSlice
from collectors.observed import Observed


def gpu_slices(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The slices a GPU state describes (its ``shares`` and ``mig`` lists), as GpuSlice field values."""
    out: list[dict[str, Any]] = []
    for sh in state.get("shares") or []:
        out.append(
            {
                "kind": "share",
                "gi_id": None,
                "profile": "",
                "pod": sh.get("pod") or "",
                "fraction": sh.get("fraction"),
                "memory_mib": sh.get("memory_mib"),
                "reservation": state.get("reservation") or "",
            }
        )
    for inst in state.get("mig") or []:
        out.append(
            {
                "kind": "mig",
                "gi_id": inst.get("gi_id"),
                "profile": inst.get("profile") or "",
                "pod": inst.get("pod") or "",
                "fraction": None,
                "memory_mib": inst.get("memory_mib"),
                "reservation": "",
            }
        )
    return out


def _slice_key(row: dict[str, Any]) -> tuple[Any, ...]:
    # A MIG instance is one slot whatever holds it; a share is the pod's claim on the GPU.
    return ("mig", row["gi_id"], row["profile"]) if row["kind"] == "mig" else ("share", row["pod"])


_SLICE_FIELDS = ("pod", "fraction", "memory_mib", "reservation", "profile", "gi_id")


def record_slices(cluster: Cluster, gpus: Sequence[Observed], at: datetime) -> int:
    """Record the shares and MIG instances of the observed GPUs by diff; returns rows written (opened + closed).

    A slice whose pod, fraction or memory changed is closed and reopened; one no longer listed is closed.
    GPUs not observed this time keep their open slices (a GPU that stopped reporting is "missing", its slices
    stay as last seen, like the GPU's own state).
    """
    by_uuid = {o.name: o for o in gpus if o.kind == "gpu"}
    if not by_uuid:
        return 0
    entities = dict(
        Entity.objects.filter(cluster=cluster, kind="gpu", name__in=list(by_uuid)).values_list("name", "id")
    )
    open_rows: dict[int, list[GpuSlice]] = {}
    for row in GpuSlice.objects.filter(
        cluster=cluster, gpu_id__in=list(entities.values()), valid_to__isnull=True
    ):
        open_rows.setdefault(row.gpu_id, []).append(row)
    to_close: list[int] = []
    to_open: list[GpuSlice] = []
    for uuid, obs in by_uuid.items():
        gpu_id = entities.get(uuid)
        if gpu_id is None:
            continue
        if not obs.state.get("present", True):
            continue
        wanted = {_slice_key(r): r for r in gpu_slices(obs.state)}
        current = {}
        for row in open_rows.get(gpu_id, []):
            current[_slice_key({f: getattr(row, f) for f in ("kind", *_SLICE_FIELDS)})] = row
        for key, row in current.items():
            new = wanted.get(key)
            if new is None or any(getattr(row, f) != new[f] for f in _SLICE_FIELDS):
                to_close.append(row.pk)
        for key, new in wanted.items():
            was = current.get(key)
            if was is None or any(getattr(was, f) != new[f] for f in _SLICE_FIELDS):
                to_open.append(
                    GpuSlice(
                        cluster=cluster, gpu_id=gpu_id, node=obs.state.get("node") or "", valid_from=at, **new
                    )
                )
    with transaction.atomic():
        if to_close:
            GpuSlice.objects.filter(pk__in=to_close).update(valid_to=at)
        if to_open:
            GpuSlice.objects.bulk_create(to_open, batch_size=1000)
    return len(to_close) + len(to_open)


def slices_at(gpu: Entity, t: datetime) -> list[GpuSlice]:
    """A GPU's shares and MIG instances at ``t``, MIG instances by GPU_I_ID, then shares by pod."""
    rows = GpuSlice.objects.filter(gpu=gpu, valid_from__lte=t).filter(
        Q(valid_to__isnull=True) | Q(valid_to__gt=t)
    )
    return sorted(rows, key=lambda r: (r.kind != "mig", r.gi_id or 0, r.pod))

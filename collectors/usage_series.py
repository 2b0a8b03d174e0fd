"""The usage series as a Prometheus answers them: the selector that names a job's pods, the window as a PromQL
range, requests and values per container (a restarted container is one), a GPU series' share of its GPU."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from datetime import datetime, timedelta

from collectors.sources.dcgm import dcgm_identity
from collectors.sources.prometheus import Series
from rcaweb.mig import mig_units

MAX_PODS = 200  # pods named in one selector (a job page's pods; a bigger job is read by its namespace)
MIG_SLICES = 7  # an A100/H100 has seven compute slices: a "3g" instance holds 3/7 of the GPU
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def range_text(window: timedelta) -> str:
    return f"{max(1, int(window.total_seconds() // 60))}m"


def quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def pod_selector(namespace: str, pods: list[str], prefix: str = "") -> str:
    """Matchers for these pods of a namespace (all of its pods when ``pods`` is empty or too many); ``prefix``
    ``exported_`` names the labels as a scrape without honor_labels left them on DCGM series."""
    parts = [f'{prefix}namespace="{quoted(namespace)}"']
    names = sorted({p for p in pods if _NAME.match(p)})
    # DNS names need no escaping but for ".", which as a regex also matches itself (a PromQL string would
    # need "\\." for it): a pod name with a dot may match a sibling differing there, which the caller drops.
    if names and len(names) <= MAX_PODS:
        parts.append(f'{prefix}pod=~"{"|".join(names)}"')
    elif names:  # a job of more pods than a selector should name: their common prefix (the job's name)
        common = os.path.commonprefix(names)
        if common:
            parts.append(f'{prefix}pod=~"{common}.*"')
    return ",".join(parts)


def series_of_pods(series: list[Series], pods: list[str]) -> list[Series]:
    """The series of these pods (all when ``pods`` is empty): a selector may take in more (see pod_selector)."""
    if not pods:
        return series
    wanted = set(pods)
    return [s for s in series if (s.labels.get("pod") or dcgm_identity(s.labels)["pod"]) in wanted]


def requested(series: list[Series]) -> dict[str, float]:
    """Each resource summed over the containers (:func:`requests_by_container`)."""
    out: dict[str, float] = defaultdict(float)
    for (_, _, _, resource), value in requests_by_container(series).items():
        out[resource] += value
    return dict(out)


def requests_by_container(series: list[Series]) -> dict[tuple[str, str, str, str], float]:
    """(namespace, pod, container, resource) -> request: a container's request counted once, although binding
    (the ``node`` label) or a kube-state-metrics restart gives it a new series."""
    most: dict[tuple[str, str, str, str], float] = {}
    for s in series:
        labels = s.labels
        key = (
            labels.get("namespace", ""),
            labels.get("pod", ""),
            labels.get("container", ""),
            labels.get("resource", ""),
        )
        most[key] = max(most.get(key, 0.0), s.last or 0.0)
    return most


def per_container(series: list[Series]) -> list[list[float]]:
    """Each container's values at the steps it reported in: a restarted container's instances (a new ``id`` and
    ``name`` each) are one container, summed at a step where two overlap."""
    return list(per_container_keyed(series).values())


def per_container_keyed(series: list[Series]) -> dict[tuple[str, str, str], list[float]]:
    """:func:`per_container` by (namespace, pod, container)."""
    runs: dict[tuple[str, str, str], dict[datetime, float]] = defaultdict(lambda: defaultdict(float))
    for s in series:
        key = (s.labels.get("namespace", ""), s.labels.get("pod", ""), s.labels.get("container", ""))
        for t, v in s.points:
            runs[key][t] += v
    return {k: list(r.values()) for k, r in runs.items() if r}


def gpu_units(series: Series) -> float:
    """What one DCGM series is of a GPU: 1, or a MIG instance's slices of seven."""
    profile = dcgm_identity(series.labels)["gi_profile"]
    return mig_units(profile) / MIG_SLICES if profile else 1.0

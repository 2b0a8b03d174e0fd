"""``manage.py cluster check``: one read of every kind rcaweb needs, from every source of a cluster.

Each check is one real call through the same source classes the collectors use (so the same kubeconfig,
TLS, token, timeout and error wording), reading at most one object: Kubernetes nodes, pods, a pod's log,
events, jobs, namespaces and the scheduler's objects (KAI queues/podgroups or Kueue's four kinds),
Prometheus' DCGM telemetry, and Run:ai when the cluster has a URL. A failure names the source, the call
and the reason (``forbidden (the service account lacks get/list on this resource): ...``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from collectors.models import Cluster
from collectors.sources.endpoints import EndpointError, check_url
from collectors.sources.errors import SourceError

DCGM_PROBE = "count(DCGM_FI_DEV_GPU_UTIL)"
SCHEDULER_KINDS = {
    "kai": [("scheduling.run.ai", "v2", "queues"), ("scheduling.run.ai", "v2alpha2", "podgroups")],
    "kueue": [
        ("kueue.x-k8s.io", "v1beta1", "clusterqueues"),
        ("kueue.x-k8s.io", "v1beta1", "localqueues"),
        ("kueue.x-k8s.io", "v1beta1", "workloads"),
        ("kueue.x-k8s.io", "v1beta1", "resourceflavors"),
    ],
    "default": [],
}


@dataclass
class Check:
    source: str
    call: str
    ok: bool
    detail: str  # what was read, or the reason it failed
    latency_ms: float | None = None


def _timed(source: str, call: str, fn: Callable[[], str]) -> Check:
    started = time.perf_counter()
    try:
        detail = fn()
        ok = True
    except SourceError as exc:
        ok, detail = False, exc.message
    except Exception as exc:  # a check must report, never crash: the table is the answer
        ok, detail = False, f"{type(exc).__name__}: {exc}"
    return Check(source, call, ok, detail, (time.perf_counter() - started) * 1000)


def _one(page: dict[str, Any]) -> str:
    items = page.get("items") or []
    if not items:
        return "answered (none exist)"
    meta = items[0].get("metadata") or {}
    name = f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
    return f"read {name}"


def check_cluster(cluster: Cluster, timeout: float | None = None) -> list[Check]:
    from collectors.sources.kubernetes import KubeSource

    checks: list[Check] = []
    kube: KubeSource | None = None
    try:
        kube = KubeSource(cluster, timeout=timeout)
    except SourceError as exc:
        checks.append(Check("kubernetes", exc.call, False, exc.message))
    if kube is not None:
        with kube:
            checks.extend(_kube_checks(kube, cluster.scheduler))
    # The URLs as `cluster add` checks them: a cluster stored before it did may hold one no request can use, or
    # credentials that a failure's detail would show.
    for source, option, url, probe in (
        ("prometheus", "--prometheus", cluster.prometheus_url, _prometheus_check),
        ("runai", "--runai", cluster.runai_url, _runai_check),
    ):
        if source == "runai" and not url:
            continue
        try:
            if url:  # none at all: the probe says so
                check_url(option, url)
        except EndpointError as exc:
            checks.append(Check(source, "configure", False, str(exc)))
            continue
        checks.append(probe(cluster, timeout))
    return checks


def _kube_checks(kube: Any, scheduler: str) -> list[Check]:
    from collectors.sources.kube_client import custom_listing

    core, batch, custom = kube.core, kube.batch, kube.custom
    out: list[Check] = []
    lists: list[tuple[str, Callable[..., Any]]] = [
        ("list nodes", core.list_node),
        ("list namespaces", core.list_namespace),
        ("list pods", core.list_pod_for_all_namespaces),
        ("list events", core.list_event_for_all_namespaces),
        ("list jobs", batch.list_job_for_all_namespaces),
    ]
    for call, fn in lists:

        def first(call: str = call, fn: Callable[..., Any] = fn) -> str:
            return _one(kube._json(call, fn, limit=1))

        out.append(_timed("kubernetes", call, first))
    out.append(_timed("kubernetes", "read pod log", lambda: _pod_log(kube)))
    for group, version, plural in SCHEDULER_KINDS.get(scheduler, []):
        call = custom_listing(group, version, plural)

        def read(group: str = group, version: str = version, plural: str = plural, call: str = call) -> str:
            return _one(
                kube._json(
                    call,
                    lambda **kw: custom.list_cluster_custom_object(group, version, plural, **kw),
                    limit=1,
                )
            )

        out.append(_timed("kubernetes", call, read))
    return out


def _pod_log(kube: Any) -> str:
    """The last line of a running pod's log (RBAC pods/log); a cluster with no running pod has none to read."""
    page = kube._json(
        "list running pods",
        kube.core.list_pod_for_all_namespaces,
        limit=1,
        field_selector="status.phase=Running",
    )
    items = page.get("items") or []
    if not items:
        return "answered (no running pod to read a log from)"
    meta = items[0]["metadata"]
    resp = kube._raw(
        "read pod log",
        kube.core.read_namespaced_pod_log,
        meta["name"],
        meta["namespace"],
        tail_lines=1,
    )
    try:
        resp.data  # noqa: B018 - read and drop: only access matters (the line may hold secrets)
    finally:
        resp.release_conn()
    return f"read {meta['namespace']}/{meta['name']} (1 line, not shown)"


def _prometheus_check(cluster: Cluster, timeout: float | None) -> Check:
    from collectors.sources.prometheus import PrometheusSource

    def probe() -> str:
        # no time parameter: Prometheus evaluates at its own now (is it scraping dcgm-exporter at present?)
        data = PrometheusSource(cluster.prometheus_url, timeout)._get(
            "/api/v1/query", {"query": DCGM_PROBE}, call=f"query {DCGM_PROBE}"
        )
        result = data.get("result") if data.get("resultType") == "vector" else None
        if not isinstance(result, list):
            raise SourceError(
                "prometheus", f"query {DCGM_PROBE}", f"expected a vector, got {data.get('resultType')!r}"
            )
        try:
            gpus = int(float(result[0]["value"][1])) if result else 0
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise SourceError(
                "prometheus", f"query {DCGM_PROBE}", f"malformed vector sample: {exc!r}"
            ) from exc
        if not gpus:
            raise SourceError(
                "prometheus",
                f"query {DCGM_PROBE}",
                "answered, but holds no DCGM_FI_DEV_GPU_UTIL series: is dcgm-exporter scraped by this Prometheus?",
            )
        return f"{gpus} GPU(s) report DCGM_FI_DEV_GPU_UTIL"

    return _timed("prometheus", f"query {DCGM_PROBE}", probe)


def _runai_check(cluster: Cluster, timeout: float | None) -> Check:
    from collectors.sources.runai import RunaiSource, runai_enabled

    def probe() -> str:
        body = RunaiSource(cluster.runai_url, timeout=timeout)._get(
            "/api/v1/org-unit/projects", {"offset": 0, "limit": 1}, "list projects"
        )
        projects = body.get("projects")
        if not isinstance(projects, list):
            raise SourceError("runai", "list projects", "malformed answer: no 'projects' list")
        what = f"read project {projects[0].get('name')}" if projects else "answered (no projects)"
        if not runai_enabled(cluster.runai_url):
            what += "; RCAWEB_RUNAI_ENABLED is false, so it is not collected"
        elif not getattr(settings, "RCAWEB_RUNAI_TOKEN", ""):
            what += "; no RCAWEB_RUNAI_TOKEN set"
        return what

    return _timed("runai", "list projects", probe)

"""Pod page, the troubleshooter: phase, node, containers (state, last state, restarts, image, env as stored),
conditions, events near t, its container state history and YAML as of t with the diff from the version before,
and its logs, read now from the Kubernetes API by a lazily loaded panel (``pod_logs``, ``collectors.podlogs``).
"""

from __future__ import annotations

import difflib
import logging
from typing import Any, NamedTuple
from urllib.parse import urlencode

import yaml
from django import forms
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from collectors import podlogs, queries
from collectors.models import EntityVersion
from collectors.sources.redact import redact_text
from rcaweb import kinds
from rcaweb.http import RcaRequest
from web import gpu_amounts as amounts
from web.inventory.entity_page import entity_page_context, finish, not_found, render_page
from web.inventory.podstatus import pod_status
from web.inventory.sharing import entity_resolver, gpus_held, with_links

logger = logging.getLogger(__name__)

# The kinds of these pages in the registry (rcaweb/kinds.py): their name and template.
POD = kinds.get("pod")
HISTORY_SHOWN = 20  # versions of "container state history" (newest first, up to t)


def container_state_text(st: dict[str, Any] | None) -> tuple[str, str, str]:
    """(word, reason, detail) of a Kubernetes container state dict: running / waiting / terminated."""
    if not st:
        return ("", "", "")
    if "waiting" in st:
        w = st["waiting"] or {}
        return ("waiting", w.get("reason", ""), w.get("message", ""))
    if "terminated" in st:
        x = st["terminated"] or {}
        detail = f"exit code {x.get('exitCode')}" if x.get("exitCode") is not None else ""
        if x.get("finishedAt"):
            detail += f" at {x['finishedAt']}"
        return ("terminated", x.get("reason", ""), detail.strip())
    if "running" in st:
        r = st["running"] or {}
        return ("running", "", f"since {r['startedAt']}" if r.get("startedAt") else "")
    return ("", "", "")


@require_GET
@vary_on_headers("HX-Request")
def pod_detail(request: RcaRequest, cluster: str, namespace: str, name: str) -> HttpResponse:
    ctx = entity_page_context(request, cluster, POD.name, name, namespace)
    pod = ctx["entity"]
    c, t, version, state = pod.cluster, ctx["t"], ctx["version"], ctx["state"]
    containers = []
    for ct in state.get("containers") or []:
        word, reason, detail = container_state_text(ct.get("state"))
        lword, lreason, ldetail = container_state_text(ct.get("last_state"))
        containers.append(
            {
                **ct,
                "state_word": word,
                "state_reason": reason,
                "state_detail": detail,
                "last_word": lword,
                "last_reason": lreason,
                "last_detail": ldetail,
                "env_items": sorted((ct.get("env") or {}).items()),
            }
        )
    job_name = version.job if version else ""
    node_name = version.node if version else ""
    gpus = queries.gpus_of_pod(c, namespace, name, t)
    # A share or MIG instance is not the GPU's pod (DCGM names KAI's reservation pod, or one instance's pod):
    # found in the GPU states of its node, one query, only for a pod asking one.
    held = gpus_held(c, [version] if version else [], t, entity_resolver(c, [pod])).get(
        f"{namespace}/{name}", []
    )
    for pg in held:
        with_links(pg.use, request.cursor)
    objects = [("Pod", namespace, name)]
    if job_name:
        objects.append(("Job", namespace, job_name))
    ctx.update(
        containers=containers,
        pod_status=pod_status(state, version.phase if version else ""),
        conditions=sorted((state.get("conditions") or {}).items()),
        node_ref=queries.ref(c, "node", node_name),
        job_ref=queries.ref(c, "job", job_name, namespace),
        queue_ref=queries.ref(c, "queue", version.queue if version else ""),
        project_ref=queries.ref(c, "project", version.project if version else ""),
        gpus=[g for g in gpus if g.entity_id not in {pg.gpu.entity_id for pg in held}],
        held=held,
        gpu_request=amounts.state_request_words(state),
        reservation_ref=queries.ref(c, "gpu", state.get("reservation_for")),
        events=queries.events_near(c, objects, t, request.cursor.window),
        tolerations=state.get("tolerations") or [],
        node_selector=sorted((state.get("node_selector") or {}).items()),
    )
    history = queries.versions_until(pod, t, HISTORY_SHOWN + 1)
    ctx.update(yaml_view(version, history), state_history=state_history(history))
    if version is not None:
        logs = reverse("collectors:pod_logs", args=[c.name, namespace, name])
        ctx.update(logs_url=request.cursor.link(logs), logs_action=logs)
    related = queries.related_entities(
        c, [pod] + [g.entity for g in gpus], [("job", namespace, job_name), ("node", "", node_name)]
    )
    return render_page(request, POD.template, finish(request, ctx, related))


#
# YAML and container state history
#


def state_yaml(state: dict[str, Any]) -> str:
    """A recorded state as YAML, redacted again on its way out (docs/design.md §2: one policy, both ways)."""
    return redact_text(yaml.safe_dump(state, sort_keys=False, allow_unicode=True, width=110))


def yaml_view(version: EntityVersion | None, history: list[EntityVersion]) -> dict[str, Any]:
    """The version at t as YAML and the unified diff from the version before it (``history``: newest first)."""
    if version is None:
        return {"yaml": "", "yaml_previous": None, "yaml_diff": []}
    text = state_yaml(version.state or {})
    previous = next((v for v in history if v.valid_from < version.valid_from and not v.deleted), None)
    diff: list[tuple[str, str]] = []
    if previous is not None:
        lines = difflib.unified_diff(
            state_yaml(previous.state or {}).splitlines(),
            text.splitlines(),
            fromfile=f"from {previous.valid_from:%Y-%m-%dT%H:%M:%SZ}",
            tofile=f"from {version.valid_from:%Y-%m-%dT%H:%M:%SZ}",
            lineterm="",
        )
        diff = [(_diff_class(ln), ln) for ln in lines]
    return {"yaml": text, "yaml_previous": previous, "yaml_diff": diff}


def _diff_class(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "head"
    return {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "")


class ContainerStep(NamedTuple):
    """One container in one version of the pod: its state, last state and restarts then."""

    name: str
    word: str
    reason: str
    detail: str
    last_reason: str
    last_detail: str
    restarts: int


class StateStep(NamedTuple):
    """One version of the pod in its container state history: from when, its status and containers, and which
    of its fields differ from the version before."""

    version: EntityVersion
    status: str
    containers: list[ContainerStep]
    changed: list[str]


def state_history(history: list[EntityVersion]) -> list[StateStep]:
    """The last ``HISTORY_SHOWN`` versions up to t, newest first (one more is read for the first one's diff)."""
    steps = []
    for i, v in enumerate(history[:HISTORY_SHOWN]):
        state = v.state or {}
        older = history[i + 1].state or {} if i + 1 < len(history) else {}
        containers = []
        for ct in state.get("containers") or []:
            word, reason, detail = container_state_text(ct.get("state"))
            _, lreason, ldetail = container_state_text(ct.get("last_state"))
            containers.append(
                ContainerStep(
                    ct.get("name") or "", word, reason, detail, lreason, ldetail, ct.get("restart_count") or 0
                )
            )
        changed = sorted(k for k in set(state) | set(older) if state.get(k) != older.get(k)) if older else []
        status = "deleted" if v.deleted else pod_status(state, v.phase)
        steps.append(StateStep(v, status, containers, changed))
    return steps


#
# Logs: the lazily loaded panel (and its own page without JS, and the download)
#


class LogForm(forms.Form):
    """What the logs panel reads: which container, its current or previous log, how many lines, a search."""

    container = forms.CharField(required=False, max_length=253)
    previous = forms.ChoiceField(
        required=False, choices=[("", "as fits"), ("0", "current"), ("1", "previous")]
    )
    tail = forms.IntegerField(required=False, min_value=1, max_value=podlogs.MAX_TAIL)
    q = forms.CharField(required=False, max_length=200, strip=False)
    download = forms.BooleanField(required=False)


def _default_container(containers: list[dict[str, Any]]) -> dict[str, Any]:
    """The container whose log answers "why": the first one not running, else the first."""
    for ct in containers:
        if "running" not in (ct.get("state") or {}):
            return ct
    return containers[0] if containers else {}


@require_GET
@vary_on_headers("HX-Request")
def pod_logs(request: RcaRequest, cluster: str, namespace: str, name: str) -> HttpResponse:
    """A container's log, read now through the collectors' Kubernetes client; the pod page loads it lazily."""
    form = LogForm(request.GET)
    if not form.is_valid():
        field, errors = next(iter(form.errors.items()))
        return HttpResponseBadRequest(f"{field}: {errors[0]}\n")
    t = request.cursor.t
    pod, version = queries.entity_at(cluster, POD.name, name, namespace, t)
    if pod is None:
        raise not_found(cluster, POD.name, name, namespace)
    containers = (version.state or {}).get("containers") or [] if version else []
    names = [ct.get("name") or "" for ct in containers]
    data = form.cleaned_data
    chosen = data["container"] or _default_container(containers).get("name", "")
    if data["container"] and chosen not in names:
        return HttpResponseBadRequest(
            f"container: the pod has no container {chosen!r} at t; it has {', '.join(names)}\n"
        )
    ct = containers[names.index(chosen)] if chosen in names else {}
    previous = data["previous"] == "1"
    if not data["previous"]:  # not asked: after a crash, the log of the container that died
        previous = "running" not in (ct.get("state") or {}) and bool(
            (ct.get("last_state") or {}).get("terminated")
        )
    tail = data["tail"] or podlogs.DEFAULT_TAIL
    until = None if request.cursor.live else t
    gone_at = None
    if version is None:
        answer = podlogs.LogRead(
            chosen, previous, timezone.now(), until, data["q"], error=_absent(request, pod)
        )
    else:
        now = queries.version_at(pod, timezone.now()) if until is not None else version
        if now is None:
            gone_at = pod.last_seen
            answer = podlogs.LogRead(chosen, previous, timezone.now(), until, data["q"])
            answer.error = "This pod no longer exists: Kubernetes deleted its logs with it."
        else:
            answer = podlogs.read_log(
                pod.cluster,
                namespace,
                name,
                chosen,
                previous=previous,
                tail=tail,
                until=until,
                query=data["q"],
            )
    if data["download"]:
        return _download(answer, name)
    action = reverse("collectors:pod_logs", args=[pod.cluster.name, namespace, name])
    query = {"container": chosen, "previous": "1" if previous else "0", "tail": tail, "q": data["q"]}
    ctx = {
        "entity": pod,
        "cluster": pod.cluster,
        "version": version,
        "t": t,
        "log": answer,
        "gone_at": gone_at,
        "containers": names,
        "tail": tail,
        "logs_action": action,
        "download_url": request.cursor.link(f"{action}?{urlencode({**query, 'download': '1'})}"),
    }
    htmx = getattr(request, "htmx", None)
    if htmx and not htmx.history_restore_request:
        return render(request, "collectors/_pod_logs.html", ctx)
    return render(request, "collectors/pod_logs.html", ctx)


def _absent(request: RcaRequest, pod: Any) -> str:
    if request.cursor.live:
        return "This pod no longer exists: Kubernetes deleted its logs with it."
    return "This pod did not exist at t: there is no log as of t."


def _download(answer: podlogs.LogRead, name: str) -> HttpResponse:
    """The lines shown, as a text file; a log that could not be read is a 503 saying why, never a 500."""
    if answer.error:
        return HttpResponse(answer.error + "\n", status=503, content_type="text/plain; charset=utf-8")
    resp = HttpResponse(answer.text(), content_type="text/plain; charset=utf-8")
    suffix = "-previous" if answer.previous else ""
    resp["Content-Disposition"] = f'attachment; filename="{name}-{answer.container}{suffix}.log"'
    return resp

"""The fleet-wide part of the inventory as of t, read once per sweep and shared by the diagnoses that follow.

A diagnosis reads every node, GPU, job, queue and project of the cluster, and every unfinished pod's hot
columns, as of t (the last sweep): on a 1,000-node / 20,000-pod cluster that is most of its time, and
alerts come in bursts about the same moment. The rows depend only on (cluster, t) and on what the
inventory holds; sweeps are the only writers, every version they open is a new row and every version they
close (a change, a deletion) writes a Change row, so the newest EntityVersion and Change ids tell whether the
inventory moved (a sweep that moved nothing, like every events sweep, keeps the rows). Small
inventories are not kept (reading them is cheap, and a test database reuses ids across rollbacks).

Jobs are read the same way as pods: by what the checks read of a job that is not the incident's (whether it
waits, its queue, project and priority class, when it was submitted, its request: queue order, quota,
the fit of another waiting job), never its scheduler message, conditions or image. Decoding 20,000 job
states was most of a fleet read; the loader reads the incident's own jobs in full (``diagnosis_input``).

Rows are plain tuples and dicts; callers build their own EntityState objects (observation ids are per
incident) and must not mutate the shared state dicts.
"""

from __future__ import annotations

import gc
import json
import logging
import threading
from datetime import datetime
from typing import Any

import orjson
from django.db.models import Case, Max, TextField, Value, When
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast

from collectors.models import Change, Cluster, EntityVersion
from rcaweb import kinds

logger = logging.getLogger(__name__)

# Read in full; jobs and pods by their hot keys (below): the registry of kinds says which (rcaweb/kinds.py).
KINDS = tuple(k.name for k in kinds.KINDS if k.fleet_read == "full")
MIN_CACHED_ROWS = 5000  # below this, read every time
ROW_LIMIT = 20000  # per kind, as the loader's bound
SLIM_POD_LIMIT = ROW_LIMIT + 1000  # the loader drops the subject pods from these, then keeps ROW_LIMIT

# (pk, name, namespace, state, valid_from, valid_to) per version, by kind (jobs with a state of SLIM_JOB_KEYS);
# unfinished pods as (pk, name, ns, state, valid_from) with a state of hot columns and ``pod_extras``.
Rows = dict[str, list[tuple[Any, ...]]]

_lock = threading.Lock()
_cached: tuple[tuple[Any, ...], Rows] | None = None


def fleet_rows(cluster: Cluster, t: datetime) -> Rows:
    """The cluster's objects as of t (cached while the inventory does not move)."""
    global _cached
    key = _key(cluster, t)
    with _lock:
        if _cached is not None and _cached[0] == key:
            return _cached[1]
    rows = _read(cluster, t)
    if sum(len(v) for v in rows.values()) >= MIN_CACHED_ROWS:
        with _lock:
            _cached = (key, rows)
        # The kept rows (~200,000 tuples and dicts at 1,000 nodes) out of the cycle collector's reach: each full
        # collection walked them all (up to 1 s CPU in the store after a diagnosis). They hold no cycles;
        # refcounting frees them when the next sweep's rows replace them.
        gc.freeze()
    return rows


def forget() -> None:
    global _cached
    with _lock:
        _cached = None


def _key(cluster: Cluster, t: datetime) -> tuple[Any, ...]:
    """Which inventory a read as of t sees: the cluster's last change at or before t, and the newest version and
    change ids (any version opened or closed since moves them: a version closed after t, by a change or a
    deletion, changes the ``valid_to`` of a row valid at t). Every version the inventory opens or closes is
    written with a Change row at the same moment (``collectors.inventory``), so between two changes the versions
    valid at t are the same for every t: a burst of alerts between two sweeps, each diagnosed at its own firing
    time, shares one read. A Change that is no version's (an external change) only splits the key further."""
    moved = Change.objects.filter(cluster=cluster, time__lte=t).aggregate(m=Max("time"))["m"]
    return (
        cluster.pk,
        t if moved is None else moved,
        EntityVersion.objects.aggregate(m=Max("id"))["m"],
        Change.objects.aggregate(m=Max("id"))["m"],
    )


def _read(cluster: Cluster, t: datetime) -> Rows:
    base = EntityVersion.objects.as_of(t).filter(cluster=cluster, deleted=False)
    out: Rows = {}
    for kind in KINDS:  # one bounded query per kind, no model objects; each state's text decoded by orjson
        out[kind] = [
            (pk, name, ns, loads(text), since, until)
            for pk, name, ns, text, since, until in base.filter(kind=kind)
            .order_by("entity__namespace", "entity__name")
            .annotate(s_text=Cast("state", TextField()))
            .values_list("pk", "entity__name", "entity__namespace", "s_text", "valid_from", "valid_to")[
                :ROW_LIMIT
            ]
        ]
    slim = (
        base.filter(kind="pod")
        .exclude(phase__in=("Succeeded", "Failed"))
        .annotate(
            s_started=KeyTextTransform("started", "state"),
            s_created=KeyTextTransform("created", "state"),
            s_class=KeyTextTransform("priority_class", "state"),
        )
        .values_list(
            "pk",
            "entity__name",
            "entity__namespace",
            "phase",
            "node",
            "job",
            "queue",
            "project",
            "gpus",
            "valid_from",
            "s_started",
            "s_created",
            "s_class",
        )
    )
    out["job"] = _slim_jobs(base)
    extras = pod_extras(base)
    pods = []
    for pk, name, ns, phase, node, job, queue, project, gpus, since, started, created, klass in slim[
        :SLIM_POD_LIMIT
    ]:
        state = {
            "phase": phase,
            "node": node or None,
            "job": job,
            "queue": queue,
            "project": project,
            "gpus": gpus or 0,
            "started": started,
            "created": created,
            "priority_class": klass or "",
        }
        extra = extras.get(pk)
        if extra:
            state.update(extra)
        pods.append((pk, name, ns, state, since))
    out["pod"] = pods
    return out


# A waiting pod's spec as the fit reads it (``request.job_request`` prefers the pod's to its job's): what the
# scheduler sees, including tolerations Kubernetes adds to GPU pods. Running pods' are not read: placed already.
PENDING_POD_JSON = ("tolerations", "node_selector", "gpu_share")


def pod_extras(base: Any) -> dict[int, dict[str, Any]]:
    """What the fit counts beyond the hot columns, for the unfinished pods that have it: GPU units (fractions,
    MIG), MIG instances and CPU/memory requests (when the inventory records them), and a waiting pod's
    ``PENDING_POD_JSON``, by version id.

    The requests (cores and bytes, ``collectors.mapping``) are read as two text values, not as a JSON map per
    pod: decoding 20,000 maps was a third of a fleet's load.
    """
    requests = KeyTransform("requests", "state")

    def pending_only(key: str) -> Case:
        return Case(When(phase="Pending", then=KeyTextTransform(key, "state")), default=Value(None))

    rows = (
        base.filter(kind="pod")
        .exclude(phase__in=("Succeeded", "Failed"))
        .annotate(
            s_mig=KeyTextTransform("mig", "state"),
            s_cpu=KeyTextTransform("cpu", requests),
            s_memory=KeyTextTransform("memory", requests),
            **{f"s_{key}": pending_only(key) for key in PENDING_POD_JSON},
        )
        .values_list("pk", "gpu_units", "s_mig", "s_cpu", "s_memory", *(f"s_{k}" for k in PENDING_POD_JSON))
    )
    out: dict[int, dict[str, Any]] = {}
    for pk, units, mig, cpu, memory, *spec in rows[:SLIM_POD_LIMIT]:
        extra: dict[str, Any] = {}
        if units is not None:
            extra["gpu_units"] = units
        if mig and mig not in ("{}", "null"):
            extra["mig"] = loads(mig)
        for key, text in zip(PENDING_POD_JSON, spec, strict=True):
            if text and text not in ("{}", "[]", "null"):
                extra[key] = loads(text)
        if cpu is not None or memory is not None:
            extra["requests"] = {
                k: _number(v) for k, v in (("cpu", cpu), ("memory", memory)) if v is not None
            }
        if extra:
            out[pk] = extra
    return out


def _number(text: Any) -> Any:
    """A JSON number's text back as the number (a quantity string stays as it is; SQLite gives numbers)."""
    if not isinstance(text, str):
        return text
    if text.isdigit():
        return int(text)
    try:
        return float(text) if "." in text or "e" in text else int(text)
    except ValueError:
        return text


# What the checks read of a job that is not the incident's own: is it waiting (phase, active, suspended), where
# it is charged and served (queue, project, priority class, submitted, scheduler) and its request (what
# ``request.job_request`` reads, for another waiting job's fit in an action's impact). Strings come back as they
# are; numbers, booleans, lists and maps as their JSON text, decoded here (most are "0", "{}" or "[]").
SLIM_JOB_TEXT = ("phase", "queue", "project", "priority_class", "submitted", "started", "scheduler")
SLIM_JOB_JSON = (
    "active",
    "suspended",
    "admitted",
    "pods",
    "gpus_per_pod",
    "gpus_total",
    "gpu_units",
    "gpu_share",
    "mig",
    "preemptible",
    "node_selector",
    "tolerations",
    "requests_per_pod",
)
SLIM_JOB_KEYS = (*SLIM_JOB_TEXT, *SLIM_JOB_JSON)
_SCALARS: dict[str, Any] = {"0": 0, "1": 1, "true": True, "false": False}


SLIM_JOB_BOOLS = frozenset({"suspended", "admitted", "preemptible"})


def _decode(key: str, text: Any) -> Any:
    """One value of SLIM_JOB_JSON as the state holds it (SQLite hands numbers and booleans over as numbers)."""
    if not isinstance(text, str):
        return bool(text) if key in SLIM_JOB_BOOLS else text
    if text in _SCALARS:
        return _SCALARS[text]
    if text == "{}":
        return {}  # a new one each time: states must not share mutable values
    if text == "[]":
        return []
    if text.isdigit():
        return int(text)
    return loads(text)


def loads(text: Any) -> Any:
    """A JSON value from its text (orjson, 3-5x faster than json; json for what orjson refuses, an integer past
    64 bits); a value the database handed over decoded already (SQLite's numbers) as it is."""
    if not isinstance(text, (str, bytes)):
        return text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _slim_jobs(base: Any) -> list[tuple[Any, ...]]:
    """Every job as of t with a state of SLIM_JOB_KEYS only (a key absent or null in the state is absent)."""
    cols = {f"s_{k}": KeyTextTransform(k, "state") for k in SLIM_JOB_KEYS}
    rows = (
        base.filter(kind="job")
        .order_by("entity__namespace", "entity__name")
        .annotate(**cols)
        .values_list("pk", "entity__name", "entity__namespace", "valid_from", "valid_to", *cols)[:ROW_LIMIT]
    )
    n_text = len(SLIM_JOB_TEXT)
    out = []
    for pk, name, ns, since, until, *values in rows:
        state: dict[str, Any] = {}
        for i, (key, raw) in enumerate(zip(SLIM_JOB_KEYS, values, strict=True)):
            if raw is not None:
                state[key] = raw if i < n_text else _decode(key, raw)
        out.append((pk, name, ns, state, since, until))
    return out

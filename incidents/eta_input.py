"""Load what the ETA replay reads besides the state at t (``incidents.diagnosis.eta.Basis``).

Not pure (database reads only). Two bounded queries, never one per job: the jobs that finished over the window
before t (their project and shape, start and completion, newest first, at most ``MAX_FINISHED``), and the running
jobs' runtime limits as of t (``active_deadline_seconds``, only the jobs that have one).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from typing import Any

from django.db.models.fields.json import KeyTextTransform

from collectors.models import Cluster, EntityVersion
from incidents.diagnosis.durations import Basis, shape_of
from incidents.diagnosis.types import parse_ts

logger = logging.getLogger(__name__)

FINISHED_PHASES = ("Succeeded", "Failed")
MAX_FINISHED = 5000
MAX_LIMITS = 20000
DEFAULT_WINDOW = timedelta(hours=24)
# The state keys a finished job's shape and duration come from (``eta.shape_of``), read as text.
_KEYS = ("project", "queue", "pods", "gpus_per_pod", "gpu_share", "mig", "started", "completed")


def load_basis(cluster: Cluster, t: datetime, window: timedelta | None = None) -> Basis:
    """Finished jobs' durations per project and shape over ``window`` before t, and running jobs' limits."""
    window = window or DEFAULT_WINDOW
    basis = Basis(window=window)
    cols = {f"s_{k}": KeyTextTransform(k, "state") for k in _KEYS}
    # A job's finished version is dated at its completion (docs/inventory.md): the versions that began inside
    # the window, newest first; a job with several (a later label change) counts once.
    finished = (
        EntityVersion.objects.filter(
            cluster=cluster,
            kind="job",
            phase__in=FINISHED_PHASES,
            valid_from__gt=t - window,
            valid_from__lte=t,
            deleted=False,
        )
        .order_by("-valid_from", "-id")
        .annotate(**cols)
        .values_list("entity_id", *cols)[:MAX_FINISHED]
    )
    seen: set[int] = set()
    rows = 0
    for entity_id, *values in finished:
        rows += 1
        if entity_id in seen:
            continue
        seen.add(entity_id)
        state = {k: _decode(v) for k, v in zip(_KEYS, values, strict=True)}
        start, end = parse_ts(state["started"]), parse_ts(state["completed"])
        if start is None or end is None or end < start or end > t:
            continue
        basis.durations.setdefault(shape_of(state), []).append((end - start).total_seconds())
    basis.truncated = rows >= MAX_FINISHED
    limit = KeyTextTransform("active_deadline_seconds", "state")
    running = (
        EntityVersion.objects.as_of(t)
        .filter(cluster=cluster, kind="job", deleted=False, phase="Running")
        .filter(state__has_key="active_deadline_seconds")
        .annotate(s_limit=limit)
        .values_list("entity__namespace", "entity__name", "s_limit")[:MAX_LIMITS]
    )
    for ns, name, text in running:
        seconds = _decode(text)
        if isinstance(seconds, int | float) and seconds > 0:
            basis.limits[(ns, name)] = float(seconds)
    return basis


def _decode(text: Any) -> Any:
    """A state value read as JSON text (strings come back bare; numbers, maps and nulls as their JSON)."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text

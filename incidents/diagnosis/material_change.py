"""Which changes of an incident's subjects are a new moment of its problem (pure; no database).

A firing incident is diagnosed again when a subject, or the queue or project a subject job waits on, changed
(``incidents.diagnosis_run.rediagnose_changed``). On a busy cluster most recorded changes are not news about the
problem: KAI rewrites a waiting job's condition at every scheduling cycle ("… currently 33 GPUs allocated …",
then 31), a crash-looping container's restart count, back-off and last finish time move every few minutes, and
every condition carries the time it was last written. Diagnosing again at each of those costs a whole diagnosis
input (the fleet as of that moment) and gives the answer it gave before.

A change is *material* when the state differs once these are set aside:

- every timestamp (``since``, ``finishedAt``, ``started`` …): when a thing was last written is not what it is;
- the numbers inside free text (``message``): the same scheduler or kubelet message with other counts is the
  same message (its parse gives the same reasons; the numbers the checks use come from structured fields);
- how many times something happened (``restart_count``, a job's ``active``/``succeeded``/``failed``): only
  whether it happened at all.

Everything else counts: phase, node, readiness, reasons, exit codes, requests, quotas and limits, images,
tolerations, a deletion. Equal digests are an equivalence, so a chain of immaterial changes never adds up to a
material one unnoticed.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson

# ISO 8601 / RFC 3339 date-times as Kubernetes and the collectors write them
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?")
NUMBER = re.compile(r"\d+(\.\d+)?")
FREE_TEXT = frozenset({"message"})  # keys whose string values are prose written with counts in it
COUNTERS = frozenset({"restart_count", "restartCount", "active", "succeeded", "failed"})


def material(value: Any, key: str = "") -> Any:
    """``value`` with what is not material set aside (see the module's docstring); JSON-shaped in, JSON-shaped out."""
    if isinstance(value, dict):
        return {k: material(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [material(v, key) for v in value]
    if isinstance(value, str):
        if TIMESTAMP.fullmatch(value):
            return "<time>"
        if key in FREE_TEXT:
            return NUMBER.sub("#", TIMESTAMP.sub("<time>", value))
        return value
    if key in COUNTERS and isinstance(value, int) and not isinstance(value, bool):
        return min(value, 1)
    return value


def digest(state: Any, deleted: bool = False) -> str:
    """A digest of a version's material state: two versions with equal digests are the same moment of a problem."""
    body = orjson.dumps(material(state), option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.blake2b(body + (b"\x00deleted" if deleted else b""), digest_size=16).hexdigest()

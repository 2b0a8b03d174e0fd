"""An object as a source saw it, normalized (:class:`Observed`), what recording many of them did
(:class:`RecordResult`), and how two states compare: field by field (:func:`diff_states`) or by digest
(:func:`state_hash`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson


@dataclass
class Observed:
    """One object as a source saw it, already normalized (no resourceVersion, managedFields, timestamps that tick)."""

    kind: str
    name: str
    state: dict[str, Any]
    namespace: str = ""
    uid: str = ""
    hot: dict[str, Any] = field(default_factory=dict)
    actor: str = ""  # who made the change, where the source says (managedFields manager, audit user)
    # Finer attribution where the source tells writers apart: who created the object, and who wrote its
    # spec — a change of a key in ``spec_keys`` is the spec writer's (CI bumping an image), not the
    # controller's that reported status since.
    creator: str = ""
    spec_actor: str = ""
    spec_keys: frozenset[str] = frozenset()
    # ``state_hash(state)`` when the mapper already knows it (a pod mapped at an earlier sweep, unchanged since);
    # "" = computed when recorded. Whoever sets it must not change ``state`` afterwards.
    digest: str = field(default="", compare=False)
    # ``state`` holds only part of the state whose digest is ``digest``, recorded already (a sweep's memo keeps
    # no more of an unchanged object than it reads): recording it is refused unless that digest is the open
    # version's, so a part is never written as a whole.
    partial: bool = field(default=False, compare=False)
    # The object's own latest transition time, where the source gives one (``latest_transition``): a new
    # state is dated then rather than when the sweep saw it, when that time falls after the kind's previous
    # listing (``record_states(listed_before=…)``).
    since: datetime | None = field(default=None, compare=False)

    def actor_of(self, path: str) -> str:
        """Who changed the state key at ``path`` ("created" for the object's creation)."""
        if path == "created":
            return self.creator or self.actor
        if self.spec_actor and path.split(".", 1)[0] in self.spec_keys:
            return self.spec_actor
        return self.actor

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)


@dataclass
class RecordResult:
    seen: int = 0
    created: int = 0  # new entities
    opened: int = 0  # new versions
    closed: int = 0  # versions closed by deletion
    changes: int = 0

    def __iadd__(self, other: RecordResult) -> RecordResult:
        for f in ("seen", "created", "opened", "closed", "changes"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        return self


def diff_states(old: Any, new: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """Field-level differences as (dotted path, old, new); lists compare whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(set(old) | set(new), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in old:
                out.append((path, None, new[key]))
            elif key not in new:
                out.append((path, old[key], None))
            elif old[key] != new[key]:
                out.extend(diff_states(old[key], new[key], path))
        return out
    if old != new:
        return [(prefix or "state", old, new)]
    return []


def state_hash(state: dict[str, Any]) -> str:
    """A stable digest of a normalized state: unchanged objects are recognised without decoding stored JSON.

    A digest computed another way (older rows) only costs one diff: an empty diff refreshes the digest.
    """
    blob = orjson.dumps(state, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    return hashlib.blake2b(blob, digest_size=16).hexdigest()

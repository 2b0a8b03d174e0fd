"""The rows one write of the inventory makes for the objects whose state changed: the versions it opens and
closes, the changes it records field by field, each dated (:func:`dated`) and carrying its hot columns
(:func:`hot_values`)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from collectors.models import Cluster, EntityVersion
from collectors.observed import Observed, diff_states

logger = logging.getLogger(__name__)

HOT_FIELDS = (
    "phase",
    "node",
    "namespace",
    "queue",
    "project",
    "job",
    "pod",
    "gpus",
    "gpus_allocatable",
    "ready",
    "gpu_units",
)
MAX_CHANGES_PER_DIFF = 50  # a wholesale rewrite is summarized rather than exploded into thousands of rows


def hot_values(obs: Observed) -> dict[str, Any]:
    hot = {k: obs.hot.get(k) for k in HOT_FIELDS if k in obs.hot}
    hot.setdefault("namespace", obs.namespace)
    for k in ("phase", "node", "namespace", "queue", "project", "job", "pod"):
        if hot.get(k) is None:
            hot[k] = ""
    return hot


def dated(
    obs: Observed, at: datetime, listed_before: datetime | None, opened: datetime | None = None
) -> datetime:
    """When ``obs``' new state began: its ``since`` when that falls after the previous listing (and after the
    open version began), before ``at``; else ``at``, the moment it was seen."""
    since = obs.since
    if since is None or listed_before is None or not (listed_before < since < at):
        return at
    if opened is not None and since <= opened:
        return at
    return since


class VersionRows:
    """The rows one write makes: versions to close (by when), digests to heal, versions and changes to insert,
    entities seen."""

    def __init__(
        self, cluster: Cluster, kind: str, at: datetime, source: str, listed_before: datetime | None
    ) -> None:
        self.cluster, self.kind, self.at, self.source, self.listed_before = (
            cluster,
            kind,
            at,
            source,
            listed_before,
        )
        self.to_close: dict[datetime, list[int]] = {}
        self.healed: list[EntityVersion] = []
        self.versions: list[dict[str, Any]] = []
        self.changes: list[dict[str, Any]] = []
        self.touched: list[int] = []

    def add(
        self,
        obs: Observed,
        eid: int,
        digest: str,
        current: int | None,
        previous: dict[int, tuple[Any, datetime]],
    ) -> None:
        """One pending object: a new version (and its changes) unless nothing changed or it is out of order."""
        at = self.at
        base = {"cluster_id": self.cluster.pk, "kind": self.kind, "source": self.source, "entity_id": eid}
        if current is not None:
            old_state, valid_from = previous[current]
            if at <= valid_from:
                logger.warning(
                    "refusing out-of-order state for %s %s/%s at %s", self.kind, obs.namespace, obs.name, at
                )
                return
            diffs = diff_states(old_state, obs.state)
            if not diffs:  # same state, digest computed another way: remember the new digest, open nothing
                self.healed.append(EntityVersion(pk=current, state_hash=digest))
                return
            when = dated(obs, at, self.listed_before, valid_from)
            self.to_close.setdefault(when, []).append(current)
            if len(diffs) > MAX_CHANGES_PER_DIFF:
                diffs = [("state", None, f"{len(diffs)} fields changed")]
            for path, old, new in diffs:
                self.changes.append(
                    {**base, "time": when, "field": path, "old": old, "new": new, "actor": obs.actor_of(path)}
                )
        else:
            when = dated(obs, at, self.listed_before)
            self.changes.append(
                {
                    **base,
                    "time": when,
                    "field": "created",
                    "old": None,
                    "new": None,
                    "actor": obs.actor_of("created"),
                }
            )
        self.versions.append(
            {
                "entity_id": eid,
                "cluster_id": self.cluster.pk,
                "kind": self.kind,
                "valid_from": when,
                "state": obs.state,
                "state_hash": digest,
                **hot_values(obs),
            }
        )
        self.touched.append(eid)

"""What a watch session keeps of a cluster (every listed object, by listing, and where each listing stands), the
source that keeps it while listing, and the source that answers the sweep's listings from it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import orjson

from collectors.models import Cluster
from collectors.sources.errors import SourceError
from collectors.sources.kube_client import SOURCE, custom_listing
from collectors.sources.kubernetes import KubeSource

Key = tuple[str, str]


def _key(obj: dict[str, Any]) -> Key:
    m = obj.get("metadata") or {}
    return (str(m.get("namespace") or ""), str(m.get("name") or ""))


def keepable(obj: dict[str, Any]) -> bytes:
    """The object as kept: its JSON (a fifth of the memory of the decoded dicts; decoded again only when
    events are applied), ``managedFields`` without their ``fieldsV1`` (the mappers read only who wrote it,
    when, and whether it was the status)."""
    m = obj.get("metadata")
    fields = m.get("managedFields") if isinstance(m, dict) else None
    if isinstance(m, dict) and isinstance(fields, list) and fields:
        slim = [{k: v for k, v in e.items() if k != "fieldsV1"} if isinstance(e, dict) else e for e in fields]
        obj = {**obj, "metadata": {**m, "managedFields": slim}}
    return orjson.dumps(obj)


@dataclass
class Kept:
    """What a session keeps of a cluster: every listed object by listing, and where each listing stands."""

    items: dict[str, dict[Key, bytes]] = field(default_factory=dict)  # call -> key -> object (keepable)
    rv: dict[str, str] = field(default_factory=dict)  # call -> resourceVersion to watch from
    absent: set[str] = field(default_factory=set)  # listings the server does not serve (404: no such API)

    def apply(self, call: str, event: dict[str, Any]) -> bool:
        """One watch event; True when it changed a kept object (a bookmark only moves the resourceVersion)."""
        obj = event["object"]
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if rv:
            self.rv[call] = rv
        kind = event["type"]
        store = self.items.setdefault(call, {})
        if kind in ("ADDED", "MODIFIED"):
            store[_key(obj)] = keepable(obj)
            return True
        if kind == "DELETED":
            return store.pop(_key(obj), None) is not None
        return False


class RecordingKube(KubeSource):
    """A ``KubeSource`` that keeps every complete listing (objects and resourceVersion) in ``kept``.

    ``close`` is a no-op: the session owns the connection and watches through it afterwards.
    """

    def __init__(self, cluster: Cluster, kept: Kept, **kw: Any) -> None:
        super().__init__(cluster, **kw)
        # The watches and a relist share the pool: one connection each, and room to spare.
        self.api.rest_client.pool_manager.connection_pool_kw["maxsize"] = 32
        self.kept = kept

    def iter_items(self, call: str, fn: Callable[..., Any], **params: Any) -> Iterator[dict[str, Any]]:
        listed: dict[Key, bytes] = {}
        try:
            for item in super().iter_items(call, fn, **params):
                listed[_key(item)] = keepable(item)
                yield item
        except SourceError as exc:
            if exc.status == 404:
                self.kept.absent.add(call)
            raise
        self.kept.items[call] = listed  # only a complete listing replaces what was kept
        self.kept.rv[call] = self.last_resource_version.get(call, "")

    def iter_reusing(
        self, call: str, fn: Callable[..., Any], reuse: Callable[[Any], Any], **params: Any
    ) -> Iterator[dict[str, Any]]:
        """Every object decoded and kept (a relist keeps what it lists): ``reuse`` is not asked."""
        return self.iter_items(call, fn, **params)

    def close(self) -> None:
        pass

    def shutdown(self) -> None:
        self.stop_watches()
        super().close()


class CachedKube:
    """Answers the sweep's listings from what a session keeps: the sweep's mapping without HTTP."""

    def __init__(self, kept: Kept) -> None:
        self.kept = kept
        # the sweep names kube.batch.list_job_for_all_namespaces as the lister of "list jobs"; never called here
        self.batch = SimpleNamespace(list_job_for_all_namespaces=None)

    def iter_items(self, call: str, fn: Any = None, **params: Any) -> Iterator[dict[str, Any]]:
        store = self.kept.items.get(call)
        if store is None:
            if call in self.kept.absent:
                raise SourceError(SOURCE, call, "the server does not serve it", status=404)
            raise SourceError(SOURCE, call, "not listed in this watch session (its listing failed)")
        return (orjson.loads(store[k]) for k in sorted(store))  # a list's order: namespace, then name

    def list_nodes(self) -> list[dict[str, Any]]:
        return list(self.iter_items("list nodes"))

    def list_namespaces(self) -> list[dict[str, Any]]:
        return list(self.iter_items("list namespaces"))

    def iter_pods(self, reuse: Callable[[Any], Any] | None = None) -> Iterator[dict[str, Any]]:
        return self.iter_items("list pods")

    def iter_reusing(
        self, call: str, fn: Any, reuse: Callable[[Any], Any], **params: Any
    ) -> Iterator[dict[str, Any]]:
        return self.iter_items(call)

    def list_pods(self) -> list[dict[str, Any]]:
        return list(self.iter_pods())

    def list_jobs(self) -> list[dict[str, Any]]:
        return list(self.iter_items("list jobs"))

    def iter_custom(
        self, group: str, version: str, plural: str, reuse: Callable[[Any], Any] | None = None
    ) -> Iterator[dict[str, Any]]:
        return self.iter_items(custom_listing(group, version, plural))

    def list_custom(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
        return list(self.iter_custom(group, version, plural))

    def close(self) -> None:
        pass

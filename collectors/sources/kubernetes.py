"""Kubernetes API through the official client: nodes, pods, events, jobs, custom objects, pod logs. Read only.

Lists are paginated (``limit``/``continue``; an expired continue token, 410, restarts the listing once) and
come back as plain JSON dicts exactly as the API server sent them (``_preload_content=False``, decoded by
orjson): deserializing 20,000 pods into generated model classes costs seconds and hundreds of MB for nothing.
``iter_reusing`` goes further for a caller that knows most objects already (a sweep's memos): each page is
parsed by simdjson and only the items the caller does not recognise are decoded.
While the caller maps one page, the next one is already being fetched (one page ahead, one thread), so the
API server's time to answer overlaps ours; a caller that knows what it will list can have whole listings read
ahead (``prefetch``: the inventory sweep asks all of its own at its start). Every failure —
timeout, refused, 401/403/5xx, an answer that is not JSON — is a :class:`SourceError`.
Only read verbs are called here; ``tests/collectors/test_readonly.py`` proves it.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import orjson
import simdjson
import urllib3
from django.conf import settings
from kubernetes import client

from collectors.sources.errors import SourceError
from collectors.sources.kube_client import SOURCE, ClusterAccess, api_client, custom_listing, request
from collectors.sources.kube_watch import RawWatch, watch_events
from collectors.sources.redact import is_secret_object, redact_text

logger = logging.getLogger(__name__)

PAGE_SIZE = 500  # kubectl's default chunk size
PREFETCH_BYTES = 64 * 1024 * 1024  # what a read ahead keeps at most (prefetch); then the listing goes live


class KubeSource:
    """Read-only view of one cluster's API server."""

    def __init__(
        self, cluster: ClusterAccess, timeout: float | None = None, *, page_size: int = PAGE_SIZE
    ) -> None:
        self.cluster = cluster
        self.timeout = float(timeout if timeout is not None else settings.RCAWEB_SOURCE_TIMEOUT_S)
        self.page_size = page_size
        self.api = api_client(cluster, self.timeout)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.last_resource_version: dict[str, str] = {}  # per listing: the list's resourceVersion (for watch)
        self._watches: set[RawWatch] = set()
        self._ahead: dict[str, queue.SimpleQueue[tuple[str, Any]]] = {}  # listings read ahead (prefetch)
        self._reader: threading.Thread | None = None
        self._stopping = threading.Event()

    def close(self) -> None:
        if self._reader is not None:  # a read ahead stops after its request in flight, before the pool closes
            self._stopping.set()
            self._reader.join()
        self.api.close()

    def __enter__(self) -> KubeSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    #
    # Lists
    #

    def list_nodes(self) -> list[dict[str, Any]]:
        return list(self.iter_items("list nodes", self.core.list_node))

    def list_namespaces(self) -> list[dict[str, Any]]:
        return list(self.iter_items("list namespaces", self.core.list_namespace))

    def iter_pods(self, reuse: Callable[[Any], Any] | None = None) -> Iterator[Any]:
        """The pods; with ``reuse``, as ``iter_reusing`` gives them."""
        if reuse is not None:
            return self.iter_reusing("list pods", self.core.list_pod_for_all_namespaces, reuse)
        return self.iter_items("list pods", self.core.list_pod_for_all_namespaces)

    def list_pods(self) -> list[dict[str, Any]]:
        return list(self.iter_items("list pods", self.core.list_pod_for_all_namespaces))

    def list_events(self) -> list[dict[str, Any]]:
        return list(self.iter_items("list events", self.core.list_event_for_all_namespaces))

    def list_jobs(self) -> list[dict[str, Any]]:
        return list(self.iter_items("list jobs", self.batch.list_job_for_all_namespaces))

    def list_custom(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
        """All objects of a custom resource, cluster-wide (namespaced kinds across namespaces)."""
        return list(self.iter_custom(group, version, plural))

    def iter_custom(
        self, group: str, version: str, plural: str, reuse: Callable[[Any], Any] | None = None
    ) -> Iterator[Any]:
        """The objects of a custom resource; with ``reuse``, as ``iter_reusing`` gives them."""

        def call(**kw: Any) -> Any:
            return self.custom.list_cluster_custom_object(group, version, plural, **kw)

        if reuse is not None:
            return self.iter_reusing(custom_listing(group, version, plural), call, reuse)
        return self.iter_items(custom_listing(group, version, plural), call)

    def iter_items(self, call: str, fn: Callable[..., Any], **params: Any) -> Iterator[dict[str, Any]]:
        """Yield the items of a paginated list, page by page (memory stays at two pages of raw JSON).

        A 410 on a continue token means the snapshot expired mid-listing: start again, once.
        """
        return self._items(call, fn, params, None)

    def iter_reusing(
        self, call: str, fn: Callable[..., Any], reuse: Callable[[Any], Any], **params: Any
    ) -> Iterator[Any]:
        """``iter_items``, except that each item is first shown to ``reuse`` undecoded: a read-only
        ``simdjson.Object`` whose ``get`` reads one field without decoding the rest. What ``reuse`` returns
        (when not None) is yielded in the item's place, and only the other items are decoded into dicts.

        A sweep's memos know an unchanged object by its uid and resourceVersion: between two sweeps of a busy
        cluster most objects are unchanged, and their JSON (managedFields and all) is then never decoded."""
        return self._items(call, fn, params, reuse)

    def _items(
        self, call: str, fn: Callable[..., Any], params: dict[str, Any], reuse: Callable[[Any], Any] | None
    ) -> Iterator[Any]:
        for attempt in (1, 2):
            pages = 0
            try:
                for page in self._pages(call, fn, params, lazy=reuse is not None):
                    pages += 1
                    for item in page["items"]:
                        if reuse is not None:
                            if not isinstance(item, simdjson.Object):
                                raise SourceError(SOURCE, call, "malformed answer: an item is not an object")
                            kept = reuse(item)
                            if kept is not None:
                                yield kept  # an object reuse knew, Secrets never among them (see below)
                                continue
                            item = item.as_dict()
                        elif not isinstance(item, dict):
                            raise SourceError(SOURCE, call, "malformed answer: an item is not an object")
                        if is_secret_object(item):
                            continue  # Secrets are never stored, whatever listed them
                        yield item
                return
            except SourceError as exc:
                if exc.gone and pages and attempt == 1:  # the failed request carried a continue token
                    logger.info("%s: continue token expired, listing again", call)
                    continue
                raise

    def _pages(
        self, call: str, fn: Callable[..., Any], params: dict[str, Any], *, lazy: bool = False
    ) -> Iterator[Any]:
        """The pages of one listing; page n+1 is requested (in a worker thread) as soon as page n arrived.
        ``lazy``: each page parsed by simdjson (a ``simdjson.Object``, its fields decoded when read). A listing
        read ahead (:meth:`prefetch`) gives its pages from there, then goes on live where the read stopped."""
        token: str | None = None
        ahead_pages = self._ahead.pop(call, None) if not params else None
        if ahead_pages is not None:
            while True:
                what, value = ahead_pages.get()
                if what == "error":
                    raise value
                if what == "end":
                    return
                if what == "stop":
                    token = value  # where the read ahead stopped (its bound, or closed): None, the start
                    break
                page = self._page(call, self._decode(call, value, lazy), lazy)
                meta = page.get("metadata") or {}
                if not meta.get("continue"):
                    self.last_resource_version[call] = str(meta.get("resourceVersion") or "")
                yield page

        def get(token: str | None) -> Any:
            kw: dict[str, Any] = {"limit": self.page_size, **params}
            if token:
                kw["_continue"] = token
            return self._page(call, self._json(call, fn, lazy=lazy, **kw), lazy)

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="k8s-page") as ahead:
            pending: Future[dict[str, Any]] | None = ahead.submit(get, token)
            while pending is not None:
                page = pending.result()
                meta = page.get("metadata") or {}
                token = meta.get("continue") or None
                pending = ahead.submit(get, str(token)) if token else None
                if not token:
                    self.last_resource_version[call] = str(meta.get("resourceVersion") or "")
                yield page

    @staticmethod
    def _page(call: str, page: Any, lazy: bool) -> Any:
        """A decoded page, checked: an object with an items list."""
        mapping_type, list_type = (simdjson.Object, simdjson.Array) if lazy else (dict, list)
        if not isinstance(page.get("items"), list_type):
            raise SourceError(SOURCE, call, "malformed answer: no items list")
        if not isinstance(page.get("metadata") or {}, mapping_type | dict):
            raise SourceError(SOURCE, call, "malformed answer: metadata is not an object")
        return page

    def prefetch(self, calls: list[str], *, max_bytes: int = PREFETCH_BYTES) -> None:
        """Start reading these listings now ("list nodes", "list pods", …: :meth:`lister`'s names), one after
        the other in a thread of their own, while the caller does something else; a later listing of the same
        name (without parameters) takes its pages from there, as they arrive, instead of asking again.

        For a driver that knows it will list and is waiting on other work meanwhile (the simulation harness,
        while its inline worker finishes): the API server answers on its own time. The pages are kept as the
        server sent them (bytes) and decoded when listed. At most ``max_bytes`` are kept: a listing that
        reaches the bound stops there, and its listing goes on live from that page's continue token; the
        listings after it are not read ahead. A failure is raised where the listing would have met it. A
        listing read ahead is listed once: a second listing (a restart after an expired token) goes live."""
        fns = {call: self.lister(call) for call in calls}  # an unknown name fails here, in the caller
        queues: dict[str, queue.SimpleQueue[tuple[str, Any]]] = {c: queue.SimpleQueue() for c in fns}
        self._ahead.update(queues)

        def read() -> None:
            kept = 0
            for call, (fn, args) in fns.items():
                out, token = queues[call], None
                while True:
                    if self._stopping.is_set() or kept >= max_bytes:
                        # its listing goes on live from here (None: from the start)
                        out.put_nowait(("stop", token))
                        break
                    kw: dict[str, Any] = {"limit": self.page_size}
                    if token:
                        kw["_continue"] = token
                    try:
                        raw = self._body(call, fn, *args, **kw)
                    except SourceError as exc:
                        out.put_nowait(("error", exc))
                        break
                    except Exception:  # not the source's failure: the listing meets it live, or not
                        logger.exception("%s: reading ahead failed", call)
                        out.put_nowait(("stop", token))
                        break
                    kept += len(raw)
                    out.put_nowait(("page", raw))
                    token = _continue_token(raw)
                    if token is None:
                        out.put_nowait(("end", None))
                        break

        self._reader = threading.Thread(target=read, name="k8s-ahead", daemon=True)
        self._reader.start()

    #
    # Watch
    #

    def watch(
        self, call: str, fn: Callable[..., Any], resource_version: str, timeout_s: int = 10, *args: Any
    ) -> Iterator[dict[str, Any]]:
        """Stream watch events ({"type", "object"}) from ``resource_version`` for at most ``timeout_s``.

        Through the client's ``kubernetes.watch.Watch`` (one request: ``timeout_seconds`` turns off its
        own restarts), without deserializing objects into model classes: ``object`` is the JSON dict the
        server sent. ``BOOKMARK`` events are passed on (their ``metadata.resourceVersion`` is where to resume).
        A 410 (resourceVersion too old, sent as an ERROR event or as the HTTP status) raises a
        ``SourceError`` with ``gone`` set: the caller re-lists and watches from the list's resourceVersion.
        Secrets are never passed on, whatever produced them.
        """
        stream = RawWatch()
        self._watches.add(stream)
        try:
            yield from watch_events(
                self.api, self.timeout, stream, call, fn, resource_version, timeout_s, *args
            )
        finally:
            self._watches.discard(stream)

    def stop_watches(self) -> None:
        """End every open watch of this source (from another thread): their streams return."""
        for stream in list(self._watches):
            stream.stop()

    def watch_events(self, resource_version: str, timeout_s: int = 10) -> Iterator[dict[str, Any]]:
        return self.watch(
            "watch events", self.core.list_event_for_all_namespaces, resource_version, timeout_s
        )

    def watch_listing(
        self, call: str, resource_version: str, timeout_s: int = 10
    ) -> Iterator[dict[str, Any]]:
        """Watch what the listing named ``call`` listed ("list pods", "list queues.scheduling.run.ai/v2", …)."""
        fn, args = self.lister(call)
        return self.watch(call.replace("list ", "watch ", 1), fn, resource_version, timeout_s, *args)

    def lister(self, call: str) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """The client method (and its leading arguments) behind a listing's call name."""
        fixed: dict[str, Callable[..., Any]] = {
            "list nodes": self.core.list_node,
            "list namespaces": self.core.list_namespace,
            "list pods": self.core.list_pod_for_all_namespaces,
            "list events": self.core.list_event_for_all_namespaces,
            "list jobs": self.batch.list_job_for_all_namespaces,
        }
        if call in fixed:
            return fixed[call], ()
        what = call.removeprefix("list ")
        plural, _, rest = what.partition(".")
        group, _, version = rest.rpartition("/")
        if not (call.startswith("list ") and plural and group and version):
            raise ValueError(f"no watchable listing is named {call!r}")
        return self.custom.list_cluster_custom_object, (group, version, plural)

    #
    # Logs
    #

    def pod_log(
        self,
        namespace: str,
        name: str,
        container: str | None = None,
        previous: bool = False,
        tail_lines: int = 200,
        timestamps: bool = False,
    ) -> str:
        """The last ``tail_lines`` lines (at most 1 MiB) of a container's log, current or previous, redacted;
        with ``timestamps`` each line starts with the RFC 3339 time the kubelet read it (the pod page cuts a
        past cursor's log there)."""
        call = f"log {namespace}/{name}{' previous' if previous else ''}"
        kw: dict[str, Any] = {"tail_lines": max(1, min(int(tail_lines), 5000)), "limit_bytes": 1024 * 1024}
        if container:
            kw["container"] = container
        if previous:
            kw["previous"] = True
        if timestamps:
            kw["timestamps"] = True
        resp = self._raw(call, self.core.read_namespaced_pod_log, name, namespace, **kw)
        try:
            text = resp.data.decode("utf-8", errors="replace")
        finally:
            resp.release_conn()
        return redact_text(text)

    #
    # HTTP
    #

    def _raw(
        self, call: str, fn: Callable[..., Any], *args: Any, read_timeout: float | None = None, **kw: Any
    ) -> Any:
        return request(self.api, self.timeout, call, fn, *args, read_timeout=read_timeout, **kw)

    def _body(self, call: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> bytes:
        """The answer's body as the server sent it."""
        resp = self._raw(call, fn, *args, **kw)
        try:
            return bytes(resp.data)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise SourceError(SOURCE, call, f"answer broke off: {exc}")
        finally:
            resp.release_conn()

    def _json(self, call: str, fn: Callable[..., Any], *, lazy: bool = False, **kw: Any) -> Any:
        """The answer decoded (a dict), or with ``lazy`` parsed by simdjson (a ``simdjson.Object``)."""
        return self._decode(call, self._body(call, fn, **kw), lazy)

    @staticmethod
    def _decode(call: str, raw: bytes, lazy: bool) -> Any:
        try:
            # A parser per page: a page's objects stay readable while the next page is parsed.
            body = simdjson.Parser().parse(raw) if lazy else orjson.loads(raw)
        except (orjson.JSONDecodeError, ValueError):
            raise SourceError(SOURCE, call, f"malformed answer (not JSON): {raw[:120]!r}")
        if not isinstance(body, simdjson.Object if lazy else dict):
            raise SourceError(SOURCE, call, "malformed answer: not a JSON object")
        return body


def _continue_token(raw: bytes) -> str | None:
    """A page's continue token, read without decoding the page (None: the last page, or not a list page: the
    listing then meets the same answer when it decodes it)."""
    try:
        page = simdjson.Parser().parse(raw)
        meta = page.get("metadata") if isinstance(page, simdjson.Object) else None
        token = meta.get("continue") if isinstance(meta, simdjson.Object) else None
    except ValueError:
        return None
    return str(token) if isinstance(token, str) and token else None

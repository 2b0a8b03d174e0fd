"""HTTP handler for the Kubernetes API subset: routing, lists, gets, watches, logs, Status errors."""
# size: the API server's request handling, one route per path family, read top to bottom

from __future__ import annotations

import base64
import binascii
import bisect
import json
import logging
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from simulator.apiserver.leases import lease_entries
from simulator.apiserver.logs import LogError, pod_log
from simulator.apiserver.resources import (
    RESOURCE_KINDS,
    RESOURCES,
    USER,
    WATCH_DEFAULT_TIMEOUT,
    HTTPError,
    forbidden,
    status,
)
from simulator.apiserver.selectors import Predicate, SelectorError, field_selector, label_selector
from simulator.apiserver.tables import table, wants_table

if TYPE_CHECKING:
    from simulator.apiserver import KubeAPIServer

logger = logging.getLogger(__name__)


class KubeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes: Nagle + delayed ACK cost 40 ms a request.
    disable_nagle_algorithm = True
    server_version = "sim-kube-apiserver/1.31"
    sim: KubeAPIServer  # set on the handler subclass by KubeAPIServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        logger.debug("kube %s", format % args)

    #
    # Verbs
    #

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        try:
            self._authorize()
            self.sim.store.catch_up(self.sim.lock)  # the world as it is now, published if it moved unread
            self._route()
        except HTTPError as exc:
            self._json(exc.code, exc.body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _refuse(self) -> None:
        """Every write is refused as RBAC refuses a read-only user: 403 Forbidden with the real Status."""
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        try:
            self._authorize()
            self._json(403, forbidden(self.command, self.path, USER))
        except HTTPError as exc:
            self._json(exc.code, exc.body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_POST = do_PUT = do_PATCH = do_DELETE = _refuse  # noqa: N815

    def _authorize(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {self.sim.token}":
            raise HTTPError(401, "Unauthorized", "Unauthorized")

    #
    # Routing
    #

    # length: one dispatch over every path the server answers, in matching order
    def _route(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        self._query = query
        parts = [p for p in url.path.split("/") if p]
        if parts == ["version"]:
            return self._json(
                200,
                {
                    "major": "1",
                    "minor": "31",
                    "gitVersion": "v1.31.4",
                    "gitCommit": "sim",
                    "gitTreeState": "clean",
                    "buildDate": "2024-12-10T11:37:36Z",
                    "goVersion": "go1.22.9",
                    "compiler": "gc",
                    "platform": "linux/amd64",
                },
            )
        if parts in (["healthz"], ["readyz"], ["livez"]):
            return self._raw(200, b"ok", "text/plain")
        if parts == ["api"]:
            return self._json(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": self.sim.address}
                    ],
                },
            )
        if parts == ["apis"]:
            return self._json(200, self._group_list())
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise HTTPError(404, "NotFound", "the server could not find the requested resource")
        if not self._group_served(group, version):
            raise HTTPError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            return self._json(200, self._resource_list(group, version))
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        plural, name, sub = (
            rest[0],
            (rest[1] if len(rest) > 1 else None),
            (rest[2] if len(rest) > 2 else None),
        )
        spec = RESOURCES.get((group, version, plural))
        if spec is None or (spec[3] and spec[3] != self.sim.store.scheduler) or len(rest) > 3:
            raise HTTPError(404, "NotFound", "the server could not find the requested resource")
        resource, kind, namespaced, _, _ = spec
        if namespace is not None and not namespaced:
            raise HTTPError(404, "NotFound", "the server could not find the requested resource")
        if sub is not None:
            if (resource, sub) != ("pods", "log") or namespace is None or name is None:
                raise HTTPError(404, "NotFound", "the server could not find the requested resource")
            return self._log(namespace, name, query)
        if name is not None:
            if namespaced and namespace is None:
                raise HTTPError(404, "NotFound", "the server could not find the requested resource")
            return self._get(resource, kind, plural, group, namespace or "", name)
        try:
            predicates = [
                p
                for p in (
                    label_selector(query.get("labelSelector")),
                    field_selector(query.get("fieldSelector"), resource),
                )
                if p
            ]
        except SelectorError as exc:
            raise HTTPError(400, "BadRequest", str(exc)) from exc
        if query.get("watch") in ("1", "true", "True"):
            return self._watch(resource, namespace, predicates, query)
        return self._list(resource, kind, group, version, namespace, predicates, query)

    def _group_served(self, group: str, version: str) -> bool:
        return any(
            g == group and v == version and (s is None or s == self.sim.store.scheduler)
            for (g, v, _), (_, _, _, s, _) in RESOURCES.items()
        )

    def _group_list(self) -> dict[str, Any]:
        groups: dict[str, list[str]] = {}
        for (g, v, _), (_, _, _, s, _) in RESOURCES.items():
            if g and (s is None or s == self.sim.store.scheduler) and v not in groups.setdefault(g, []):
                groups[g].append(v)
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": g,
                    "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                    "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                }
                for g, vs in groups.items()
            ],
        }

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        out = []
        for (g, v, plural), (_, kind, namespaced, s, short) in RESOURCES.items():
            if g == group and v == version and (s is None or s == self.sim.store.scheduler):
                out.append(
                    {
                        "name": plural,
                        "singularName": kind.lower(),
                        "namespaced": namespaced,
                        "kind": kind,
                        "verbs": ["get", "list", "watch"],
                        **({"shortNames": short} if short else {}),
                        # `kubectl get all` lists the kinds of the "all" category (pods and jobs among ours)
                        **({"categories": ["all"]} if plural in ("pods", "jobs") else {}),
                    }
                )
                if plural == "pods":
                    out.append(
                        {
                            "name": "pods/log",
                            "singularName": "",
                            "namespaced": True,
                            "kind": "Pod",
                            "verbs": ["get"],
                        }
                    )
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": out}

    #
    # Reads
    #

    def _get(self, resource: str, kind: str, plural: str, group: str, namespace: str, name: str) -> None:
        snap = self.sim.store.snapshot()
        entry = self._entries(resource, snap)[0].get((namespace, name)) if snap else None
        if entry is None:
            qualified = f"{plural}.{group}" if group else plural
            raise HTTPError(
                404,
                "NotFound",
                f'{qualified} "{name}" not found',
                {"name": name, "group": group or None, "kind": plural}
                if group
                else {"name": name, "kind": plural},
            )
        version = wants_table(self.headers.get("Accept"))
        if version is not None:
            return self._table(resource, [entry.data], version, {"resourceVersion": str(entry.rv)})
        self._raw(200, entry.data)

    def _entries(self, resource: str, snap: Any) -> tuple[dict[tuple[str, str], Any], list[tuple[str, str]]]:
        if resource == "leases":
            return lease_entries(snap, self.sim.world.now)
        return snap.entries.get(resource, {}), snap.order.get(resource, [])

    def _table(self, resource: str, items: list[bytes], version: str, meta: dict[str, Any]) -> None:
        include = self._query.get("includeObject") or "Metadata"
        if include not in ("None", "Metadata", "Object"):
            raise HTTPError(400, "BadRequest", f"includeObject: unsupported value: {include!r}")
        body = table(resource, [json.loads(b) for b in items], self.sim.world.now, version, include, meta)
        self._json(200, body)

    def _list(
        self,
        resource: str,
        kind: str,
        group: str,
        version: str,
        namespace: str | None,
        predicates: list[Predicate],
        query: dict[str, str],
    ) -> None:
        token = query.get("continue")
        start_key: tuple[str, str] | None = None
        if token:
            try:
                decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
                snap = self.sim.store.snapshot(int(decoded["rv"]))
                start_key = (decoded["start"][0], decoded["start"][1])
            except (ValueError, KeyError, TypeError, binascii.Error) as exc:
                raise HTTPError(400, "BadRequest", "continue key is not valid: illegal base64 data") from exc
            if snap is None:
                raise HTTPError(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result. "
                    "You can start a new list without the continue parameter.",
                )
        else:
            snap = self.sim.store.snapshot()
        try:
            limit = int(query.get("limit") or 0)
        except ValueError as exc:
            raise HTTPError(400, "BadRequest", f"invalid limit: {query.get('limit')}") from exc
        entries, order = self._entries(resource, snap)
        if namespace is not None:
            lo, hi = (
                bisect.bisect_left(order, (namespace, "")),
                bisect.bisect_left(order, (namespace + "\x00", "")),
            )
        else:
            lo, hi = 0, len(order)
        if start_key is not None:
            lo = max(lo, bisect.bisect_left(order, start_key))
        items: list[bytes] = []
        next_key = None
        index = lo
        while index < hi:
            key = order[index]
            entry = entries[key]
            if all(p(entry) for p in predicates):
                if limit and len(items) == limit:
                    next_key = key
                    break
                items.append(entry.data)
            index += 1
        meta: dict[str, Any] = {"resourceVersion": str(snap.rv)}
        if next_key is not None:
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"rv": snap.rv, "start": list(next_key)}).encode()
            ).decode()
            if not predicates:
                meta["remainingItemCount"] = hi - index
        table_version = wants_table(self.headers.get("Accept"))
        if table_version is not None:
            return self._table(resource, items, table_version, meta)
        api_version = f"{group}/{version}" if group else version
        head = json.dumps(
            {"kind": f"{kind}List", "apiVersion": api_version, "metadata": meta}, separators=(",", ":")
        )
        body = head[:-1].encode() + b',"items":[' + b",".join(items) + b"]}"
        self._raw(200, body)

    def _log(self, namespace: str, name: str, query: dict[str, str]) -> None:
        with self.sim.lock:
            try:
                text = pod_log(self.sim.world, namespace, name, query)
            except LogError as exc:
                raise HTTPError(exc.code, exc.reason, str(exc)) from exc
        self._raw(200, text.encode(), "text/plain")

    #
    # Watch
    #

    def _watch(
        self, resource: str, namespace: str | None, predicates: list[Predicate], query: dict[str, str]
    ) -> None:
        store = self.sim.store
        try:
            timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else WATCH_DEFAULT_TIMEOUT
            since = int(query.get("resourceVersion") or 0)
        except ValueError as exc:
            raise HTTPError(400, "BadRequest", f"invalid watch parameters: {exc}") from exc
        deadline = time.monotonic() + timeout
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def matches(entry: Any, res: str) -> bool:
            if res != resource:
                return False
            if namespace is not None and entry.fields.get("metadata.namespace") != namespace:
                return False
            return all(p(entry) for p in predicates)

        table_version = wants_table(self.headers.get("Accept"))

        def send(kind: str, data: bytes) -> None:
            if table_version is not None:
                obj = table(resource, [json.loads(data)], self.sim.world.now, table_version, include)
                data = json.dumps(obj, separators=(",", ":")).encode()
            self._chunk(b'{"type":"' + kind.encode() + b'","object":' + data + b"}\n")

        include = query.get("includeObject") or "Metadata"
        store.watch_opened()
        try:
            self._stream(store, resource, since, deadline, query, matches, send)
        finally:
            store.watch_closed()

    def _stream(
        self,
        store: Any,
        resource: str,
        since: int,
        deadline: float,
        query: dict[str, str],
        matches: Any,
        send: Any,
    ) -> None:
        store.catch_up(self.sim.lock)  # an advance between the request's catch-up and the watch's opening
        if since == 0 or resource == "leases":  # leases have no history: a watch starts from what they are
            snap = store.snapshot()
            entries, order = self._entries(resource, snap)
            for key in order:
                entry = entries[key]
                if matches(entry, resource) and since == 0:
                    send("ADDED", entry.data)
            since = snap.rv
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true", "True")
        kind = RESOURCE_KINDS.get(resource, ("v1", "Object"))

        def bookmark() -> None:
            # lets the client resume from here without replaying what it has seen (like the real server)
            mark = {
                "type": "BOOKMARK",
                "object": {
                    "kind": kind[1],
                    "apiVersion": kind[0],
                    "metadata": {"resourceVersion": str(since)},
                },
            }
            self._chunk(json.dumps(mark).encode() + b"\n")

        # Like the apiserver's watch cache, a bookmark about every minute (store.bookmark_interval_s) while
        # the watch is open, and one as the timeout closes it; none after an ERROR.
        next_mark = time.monotonic() + store.bookmark_interval_s
        expired = False
        while time.monotonic() < deadline and not store.closed:
            store.catch_up(self.sim.lock)
            events = store.events_since(since)
            if events is None:
                body = status(410, "Expired", f"too old resource version: {since} ({store.rv})")
                self._chunk(json.dumps({"type": "ERROR", "object": body}).encode() + b"\n")
                expired = True
                break
            for rv, res, kind_, data, entry in events:
                if matches(entry, res):
                    send(kind_, data)
                since = rv
            if bookmarks and time.monotonic() >= next_mark:
                bookmark()
                next_mark = time.monotonic() + store.bookmark_interval_s
            store.wait(since, max(0.0, min(1.0, deadline - time.monotonic(), next_mark - time.monotonic())))
        if bookmarks and not store.closed and not expired:
            bookmark()
        self._chunk(b"")

    #
    # Output
    #

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _json(self, code: int, body: Any) -> None:
        self._raw(code, json.dumps(body, separators=(",", ":")).encode())

    def _raw(self, code: int, data: bytes, content_type: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

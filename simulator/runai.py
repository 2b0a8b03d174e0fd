"""A Run:ai control-plane REST API subset over the world: projects, node pools, workloads, audit log.

Paths and field names follow NVIDIA Run:ai's public API reference
(``/api/v1/org-unit/projects``, ``/api/v1/node-pools``, ``/api/v1/workloads``,
``/api/v1/audit/log``) as far as it is documented; see API.md.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from datetime import datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from simulator.loopback import LoopbackServer

logger = logging.getLogger(__name__)
_NS = uuid.UUID("0c6f7f1a-8d0e-4f7e-9d5c-3a1b2c4d5e6f")
PHASES = {"Pending": "Pending", "Running": "Running", "Succeeded": "Completed", "Failed": "Failed"}


def _ts(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%S.000Z") if value else None


def _id(*parts: str) -> str:
    return str(uuid.uuid5(_NS, "/".join(parts)))


def _values(container: Any) -> list[Any]:
    return list(container.values()) if isinstance(container, dict) else list(container)


class RunaiApi:
    """Builds the JSON documents (pure reads of the world; the caller holds the lock)."""

    def __init__(self, world: Any) -> None:
        self.world = world

    @property
    def cluster(self) -> str:
        return getattr(self.world, "cluster_name", None) or "sim"

    @property
    def cluster_id(self) -> str:
        return _id("cluster", self.cluster)

    def pools(self) -> list[str]:
        return sorted({n.nodepool for n in _values(self.world.nodes)})

    def project(self, p: Any) -> dict[str, Any]:
        changes = [
            c
            for c in self.world.changes
            if c.kind == "project" and c.target == p.name and c.time <= self.world.now
        ]
        pools = self.pools()
        resources = [
            {
                "nodePool": {"id": _id("pool", pool), "name": pool},
                "gpu": {
                    "deserved": p.quota_gpus if i == 0 else 0,
                    "limit": p.limit_gpus if p.limit_gpus is not None else -1,
                    "overQuotaWeight": p.over_quota_weight,
                },
                "cpu": {"deserved": None, "limit": None, "overQuotaWeight": 2},
                "memory": {"deserved": None, "limit": None, "overQuotaWeight": 2, "units": "Mib"},
                "priority": "Normal",
            }
            for i, pool in enumerate(pools)
        ]
        return {
            "id": _id("project", p.name),
            "name": p.name,
            "clusterId": self.cluster_id,
            "parentId": _id("department", "default"),
            "requestedNamespace": p.namespace,
            "enforceRunaiScheduler": True,
            "status": {"namespace": p.namespace, "phase": "Ready", "phaseMessage": None},
            "resources": resources,
            "defaultNodePools": pools,
            "createdAt": _ts(p.created_at),
            "updatedAt": _ts(changes[-1].time if changes else p.created_at),
            "createdBy": "platform-admin",
            "updatedBy": (changes[-1].actor or "system") if changes else "platform-admin",
        }

    def projects(self) -> list[dict[str, Any]]:
        return [self.project(p) for p in sorted(_values(self.world.projects), key=lambda p: p.name)]

    def node_pools(self) -> list[dict[str, Any]]:
        created = min((n.created_at for n in _values(self.world.nodes)), default=self.world.now)
        return [
            {
                "id": _id("pool", pool),
                "name": pool,
                "labelKey": "run.ai/node-pool",
                "labelValue": pool,
                "clusterId": self.cluster_id,
                "status": "Ready",
                "createdAt": _ts(created),
                "updatedAt": _ts(created),
            }
            for pool in self.pools()
        ]

    def workloads(self) -> list[dict[str, Any]]:
        out = []
        pods = _values(self.world.pods)
        for j in sorted(_values(self.world.jobs), key=lambda j: (j.namespace, j.name)):
            if j.state == "Waiting" or j.submit_at > self.world.now:
                continue
            live = [
                p for p in pods if p.namespace == j.namespace and p.job == j.name and p.deleted_at is None
            ]
            allocated = sum(p.gpus_requested for p in live if p.node and p.phase in ("Pending", "Running"))
            out.append(
                {
                    "id": _id("workload", j.uid),
                    "name": j.name,
                    "type": "Inference" if j.priority_class == "inference" else "Training",
                    "phase": PHASES.get(j.state, j.state),
                    "projectName": j.project,
                    "projectId": _id("project", j.project),
                    "clusterId": self.cluster_id,
                    "namespace": j.namespace,
                    "createdAt": _ts(j.submit_at),
                    "phaseUpdatedAt": _ts(j.finished_at or j.started_at or j.submit_at),
                    "requestedNodePools": self.pools(),
                    "allocatedResources": {"gpu": allocated},
                    "requestedResources": {"gpu": j.pods * j.gpus_per_pod},
                    "podsCount": len(live),
                    "submittedBy": getattr(j, "submitted_by", None) or "user",
                }
            )
        return out

    def audit(self, start: datetime | None, end: datetime | None) -> list[dict[str, Any]]:
        logs = []
        for i, c in enumerate(self.world.changes):
            if c.time > self.world.now or (start and c.time < start) or (end and c.time > end):
                continue
            logs.append(
                {
                    "id": _id("audit", str(i)),
                    "tenantId": 1001,
                    "timestamp": _ts(c.time),
                    "subject": c.actor or "system",
                    "subjectType": "User" if c.actor else "System",
                    "action": "Update",
                    "httpMethod": "PUT",
                    "entityType": c.kind,
                    "entityId": _id(c.kind, c.target),
                    "entityName": c.target,
                    "clusterId": self.cluster_id,
                    "clusterName": self.cluster,
                    "success": True,
                    "details": {"field": c.field, "old": c.old, "new": c.new},
                }
            )
        return list(reversed(logs))


class RunaiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes: Nagle + delayed ACK cost 40 ms a request.
    disable_nagle_algorithm = True
    server_version = "sim-runai/2.20"
    sim: RunaiServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        logger.debug("runai %s", format % args)

    def _refuse(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self._json(405, {"code": 405, "message": "the simulated Run:ai control plane is read-only"})

    do_POST = do_PUT = do_PATCH = do_DELETE = _refuse  # noqa: N815

    def do_GET(self) -> None:  # noqa: N802
        if self.headers.get("Authorization") != f"Bearer {self.sim.token}":
            return self._json(401, {"code": 401, "message": "Unauthorized: missing or invalid bearer token"})
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        path = url.path.rstrip("/")
        try:
            offset, limit = int(q.get("offset", 0)), int(q.get("limit", 500))
        except ValueError:
            return self._json(400, {"code": 400, "message": "offset and limit must be integers"})
        api = RunaiApi(self.sim.world)
        with self.sim.lock:
            if path == "/api/v1/org-unit/projects":
                return self._page("projects", api.projects(), offset, limit)
            if path.startswith("/api/v1/org-unit/projects/"):
                wanted = path.rsplit("/", 1)[1]
                for p in api.projects():
                    if wanted in (p["id"], p["name"]):
                        return self._json(200, p)
                return self._json(404, {"code": 404, "message": f"project {wanted} not found"})
            if path == "/api/v1/node-pools":
                return self._json(200, {"nodePools": api.node_pools()})
            if path == "/api/v1/workloads":
                items = api.workloads()
                for term in filter(None, (q.get("filterBy") or "").split(",")):
                    name, _, value = term.partition("==")
                    if name not in ("projectName", "name", "phase", "type"):
                        return self._json(
                            400, {"code": 400, "message": f"unsupported filterBy field: {name}"}
                        )
                    items = [w for w in items if str(w.get(name)) == value]
                return self._page("workloads", items, offset, limit)
            if path == "/api/v1/audit/log":
                try:
                    start = (
                        datetime.fromisoformat(q["start"].replace("Z", "+00:00")) if q.get("start") else None
                    )
                    end = datetime.fromisoformat(q["end"].replace("Z", "+00:00")) if q.get("end") else None
                except ValueError:
                    return self._json(400, {"code": 400, "message": "start and end must be ISO 8601 times"})
                logs = api.audit(start, end)
                return self._json(200, {"logs": logs[offset : offset + limit], "total": len(logs)})
            if path == "/api/v1/clusters":
                return self._json(
                    200, [{"uuid": api.cluster_id, "name": api.cluster, "status": {"state": "Connected"}}]
                )
        self._json(404, {"code": 404, "message": f"no such endpoint: {url.path}"})

    def _page(self, name: str, items: list[dict[str, Any]], offset: int, limit: int) -> None:
        body: dict[str, Any] = {name: items[offset : offset + limit]}
        if offset + limit < len(items):
            body["next"] = offset + limit
        self._json(200, body)

    def _json(self, code: int, body: Any) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class RunaiServer(LoopbackServer):
    thread_name = "sim-runai"

    def __init__(
        self, world: Any, lock: threading.RLock, token: str, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.world = world
        self.lock = lock
        self.token = token
        self._bind(RunaiHandler, host, port)

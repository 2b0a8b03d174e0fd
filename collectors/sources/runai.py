"""Run:ai control-plane REST API: projects, node pools, workloads and the audit log (who changed what).

Off unless ``RCAWEB_RUNAI_ENABLED`` is true and the cluster has a ``runai_url``; the bearer token comes from
``RCAWEB_RUNAI_TOKEN`` (or ``RCAWEB_RUNAI_TOKEN_FILE``). GET only.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import requests
from django.conf import settings

from collectors.sources.errors import SourceError, describe_http_error
from rcaweb.timestamps import format_t

logger = logging.getLogger(__name__)

SOURCE = "runai"
PAGE = 500


def runai_enabled(runai_url: str) -> bool:
    return bool(getattr(settings, "RCAWEB_RUNAI_ENABLED", False) and runai_url)


class RunaiSource:
    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout: float | None = None,
        *,
        session: requests.Session | None = None,
    ) -> None:
        if not url:
            raise SourceError(SOURCE, "configure", "no Run:ai URL configured for this cluster")
        self.url = url.rstrip("/")
        self.timeout = float(timeout if timeout is not None else settings.RCAWEB_SOURCE_TIMEOUT_S)
        self.session = session or requests.Session()
        token = token if token is not None else getattr(settings, "RCAWEB_RUNAI_TOKEN", "")
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def projects(self) -> list[dict[str, Any]]:
        return self._paged("/api/v1/org-unit/projects", "projects", "list projects")

    def node_pools(self) -> list[dict[str, Any]]:
        return self._paged("/api/v1/node-pools", "nodePools", "list node pools")

    def workloads(self) -> list[dict[str, Any]]:
        return self._paged("/api/v1/workloads", "workloads", "list workloads")

    def audit_log(self, start: datetime, end: datetime) -> list[dict[str, Any]]:
        """Audit entries in [start, end], oldest first (the API answers newest first)."""
        params = {"start": format_t(start), "end": format_t(end)}
        logs = self._paged("/api/v1/audit/log", "logs", "audit log", params=params)
        return sorted(logs, key=lambda e: str(e.get("timestamp", "")))

    def _paged(
        self, path: str, key: str, call: str, params: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        offset = 0
        for _ in range(1000):  # bounded: a server that always says "next" must not loop forever
            body = self._get(path, {**(params or {}), "offset": offset, "limit": PAGE}, call)
            items = body.get(key)
            if not isinstance(items, list):
                raise SourceError(SOURCE, call, f"malformed answer: no {key!r} list")
            out.extend(i for i in items if isinstance(i, dict))
            nxt = body.get("next")
            if nxt in (None, "", 0) or not items:
                return out
            try:
                offset = int(nxt)
            except (TypeError, ValueError):
                raise SourceError(SOURCE, call, f"malformed answer: next={nxt!r}")
        raise SourceError(SOURCE, call, "pagination did not end after 1000 pages")

    def _get(self, path: str, params: dict[str, Any], call: str) -> dict[str, Any]:
        try:
            resp = self.session.get(
                self.url + path, params=params, timeout=(min(self.timeout, 5.0), self.timeout)
            )
        except requests.Timeout:
            raise SourceError(SOURCE, call, f"did not answer within {self.timeout:g} s ({self.url})")
        except requests.ConnectionError as exc:
            raise SourceError(SOURCE, call, f"cannot connect to {self.url}: {str(exc)[:200]}")
        except requests.RequestException as exc:
            raise SourceError(SOURCE, call, f"request failed: {str(exc)[:200]}")
        if resp.status_code != 200:
            raise SourceError(
                SOURCE,
                call,
                describe_http_error(resp.status_code, resp.reason or "", resp.text[:300]),
                status=resp.status_code,
            )
        try:
            body = resp.json()
        except ValueError:
            raise SourceError(SOURCE, call, f"malformed answer (not JSON): {resp.text[:120]!r}")
        if not isinstance(body, dict):
            raise SourceError(SOURCE, call, "malformed answer: not a JSON object")
        return body

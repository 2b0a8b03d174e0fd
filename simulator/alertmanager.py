"""Sends the world's alerts as Alertmanager v0.27+ would post them to a webhook receiver.

Grouping, group_wait / group_interval / repeat_interval and resolved
notifications run on the *simulated* clock, so a fast-forwarded scenario
produces the same notifications a real Alertmanager would have sent over the
same hours. Payload fields and their order follow notify/webhook and
template.Data (see /work/shared/samples/alertmanager_webhook.json).
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

logger = logging.getLogger(__name__)

ZERO_TIME = "0001-01-01T00:00:00Z"
Sink = Callable[[dict[str, Any]], None]


def _ts(value: Any) -> str:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value) if value else ZERO_TIME


def fingerprint(labels: dict[str, str]) -> str:
    """Prometheus model.LabelSet.Fingerprint: FNV-1a 64 over sorted name, 0xff, value, 0xff."""
    h = 0xCBF29CE484222325
    for name in sorted(labels):
        for part in (name.encode(), b"\xff", labels[name].encode(), b"\xff"):
            for byte in part:
                h ^= byte
                h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def _group_key(group_labels: dict[str, str]) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(group_labels.items()))
    return "{}:{" + inner + "}"


@dataclass
class _Group:
    labels: dict[str, str]
    first_seen: datetime
    next_flush: datetime
    alerts: dict[str, dict[str, Any]] = field(
        default_factory=dict
    )  # fingerprint -> alert (as in the payload)
    notified: dict[str, str] = field(default_factory=dict)  # fingerprint -> status last notified
    last_sent: datetime | None = None


class AlertSender:
    """Call ``tick(now, alerts)`` after every world advance; it posts what is due by ``now``."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        sink: Sink | None = None,
        *,
        receiver: str = "rcaweb",
        external_url: str = "http://alertmanager.sim:9093",
        generator_url: str = "http://prometheus.sim:9090",
        group_by: tuple[str, ...] = ("alertname", "cluster"),
        group_wait_s: int = 30,
        group_interval_s: int = 300,
        repeat_interval_s: int = 4 * 3600,
        retries: int = 3,
        backoff_s: float = 0.2,
        timeout_s: float = 10.0,
    ) -> None:
        self.url = url
        self.token = token
        self.sink = sink
        self.receiver = receiver
        self.external_url = external_url
        self.generator_url = generator_url
        self.group_by = group_by
        self.group_wait = timedelta(seconds=group_wait_s)
        self.group_interval = timedelta(seconds=group_interval_s)
        self.repeat_interval = timedelta(seconds=repeat_interval_s)
        self.retries = retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.groups: dict[tuple[tuple[str, str], ...], _Group] = {}
        self.sent: list[tuple[datetime, dict[str, Any]]] = []
        self.failures: list[tuple[datetime, str]] = []
        # fingerprint -> (the raw alert's fields, its payload form): 10,000 firing alerts that did not
        # change since the last tick are not converted again.
        self._converted: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}

    #
    # Alert state
    #

    def _alert(self, raw: dict[str, Any], now: datetime) -> dict[str, Any]:
        labels = {str(k): str(v) for k, v in raw["labels"].items()}
        status = raw.get("status") or "firing"
        ends = raw.get("endsAt")
        if status == "resolved" and not ends:
            ends = now
        expr = raw.get("expr") or labels.get("alertname", "")
        return {
            "status": status,
            "labels": labels,
            "annotations": {str(k): str(v) for k, v in (raw.get("annotations") or {}).items()},
            "startsAt": _ts(raw.get("startsAt")),
            "endsAt": _ts(ends) if status == "resolved" else ZERO_TIME,
            "generatorURL": f"{self.generator_url}/graph?g0.expr={urllib.parse.quote(expr)}&g0.tab=1",
            "fingerprint": raw.get("fingerprint") or fingerprint(labels),
        }

    def tick(self, now: datetime, alerts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Take the world's alerts at ``now`` and send every notification due by then; returns them."""
        seen: set[str] = set()
        for raw in alerts:
            if raw.get("status") == "pending":
                continue
            alert = self._convert(raw, now)
            key = tuple((name, alert["labels"].get(name, "")) for name in self.group_by)
            group = self.groups.get(key)
            if group is None:
                if alert["status"] == "resolved":
                    continue  # never notified as firing: nothing to resolve
                group = _Group(
                    labels={k: v for k, v in key if v}, first_seen=now, next_flush=now + self.group_wait
                )
                self.groups[key] = group
            group.alerts[alert["fingerprint"]] = alert
            seen.add(alert["fingerprint"])
        for group in self.groups.values():
            for fp, alert in group.alerts.items():
                if fp not in seen and alert["status"] == "firing":
                    # the rule stopped returning it: Prometheus sends it resolved
                    group.alerts[fp] = {**alert, "status": "resolved", "endsAt": _ts(now)}
        sent = []
        for key in sorted(self.groups):
            group = self.groups[key]
            while group.next_flush <= now:
                payload = self._flush(group)
                at = group.next_flush
                group.next_flush = at + self.group_interval
                if payload is not None:
                    self._send(at, payload)
                    sent.append(payload)
                    group.last_sent = at
                if not group.alerts:
                    break
        for key in [k for k, g in self.groups.items() if not g.alerts]:
            del self.groups[key]
        if len(self._converted) > 2 * len(seen) + 1000:
            self._converted = {fp: c for fp, c in self._converted.items() if fp in seen}
        return sent

    def _convert(self, raw: dict[str, Any], now: datetime) -> dict[str, Any]:
        """``_alert``, reusing last tick's result when the raw alert is the same (and does not depend on now)."""
        fp = raw.get("fingerprint")
        status = raw.get("status") or "firing"
        if not fp or (status == "resolved" and not raw.get("endsAt")):
            return self._alert(raw, now)
        key = (
            status,
            raw.get("startsAt"),
            raw.get("endsAt"),
            raw.get("expr"),
            raw["labels"],
            raw.get("annotations"),
        )
        hit = self._converted.get(fp)
        if hit is not None and hit[0] == key:
            return hit[1]
        alert = self._alert(raw, now)
        self._converted[fp] = (key, alert)
        return alert

    def _flush(self, group: _Group) -> dict[str, Any] | None:
        if not group.alerts:
            return None
        alerts = sorted(group.alerts.values(), key=lambda a: sorted(a["labels"].items()))
        changed = any(group.notified.get(a["fingerprint"]) != a["status"] for a in alerts)
        at = group.next_flush
        due_repeat = group.last_sent is not None and at - group.last_sent >= self.repeat_interval
        if not changed and not due_repeat:
            return None
        payload = self.payload(group.labels, alerts)
        for a in alerts:
            group.notified[a["fingerprint"]] = a["status"]
        for a in alerts:
            if a["status"] == "resolved":
                group.alerts.pop(a["fingerprint"], None)
                group.notified.pop(a["fingerprint"], None)
        return payload

    def payload(self, group_labels: dict[str, str], alerts: list[dict[str, Any]]) -> dict[str, Any]:
        common_labels = dict(alerts[0]["labels"])
        common_ann = dict(alerts[0]["annotations"])
        for a in alerts[1:]:
            common_labels = {k: v for k, v in common_labels.items() if a["labels"].get(k) == v}
            common_ann = {k: v for k, v in common_ann.items() if a["annotations"].get(k) == v}
        return {
            "receiver": self.receiver,
            "status": "firing" if any(a["status"] == "firing" for a in alerts) else "resolved",
            # own label and annotation dicts: the converted alerts are reused across ticks (_convert)
            "alerts": [
                {**a, "labels": dict(a["labels"]), "annotations": dict(a["annotations"])} for a in alerts
            ],
            "groupLabels": dict(sorted(group_labels.items())),
            "commonLabels": dict(sorted(common_labels.items())),
            "commonAnnotations": dict(sorted(common_ann.items())),
            "externalURL": self.external_url,
            "version": "4",
            "groupKey": _group_key(group_labels),
            "truncatedAlerts": 0,
        }

    #
    # Delivery
    #

    def _send(self, at: datetime, payload: dict[str, Any]) -> None:
        self.sent.append((at, payload))
        if self.sink is not None:
            self.sink(payload)
        if self.url:
            self._post(self.url, at, payload)

    def _post(self, url: str, at: datetime, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", "User-Agent": "Alertmanager/0.27.0"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        delay = self.backoff_s
        for attempt in range(1, self.retries + 1):
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    response.read()
                return
            except urllib.error.HTTPError as exc:
                if exc.code < 500:
                    logger.warning("alert webhook refused the notification (%s): not retrying", exc.code)
                    self.failures.append((at, f"HTTP {exc.code}"))
                    return
                reason = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError) as exc:
                reason = str(exc)
            logger.info("alert webhook attempt %d failed: %s", attempt, reason)
            if attempt < self.retries:
                time.sleep(delay)
                delay *= 2
        self.failures.append((at, reason))
        logger.warning("alert webhook gave up after %d attempts: %s", self.retries, reason)

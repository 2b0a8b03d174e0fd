"""Prometheus HTTP API client (``/api/v1/query``, ``/api/v1/query_range``): GET only, typed results, clear errors.

The PromQL lives in :mod:`collectors.sources.promql`; DCGM label variants are normalized by
:func:`dcgm_identity` (re-exported here).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
import requests
from django.conf import settings

from collectors.sources.dcgm import dcgm_identity
from collectors.sources.errors import SourceError, describe_http_error

__all__ = ["PrometheusSource", "Series", "dcgm_identity"]

logger = logging.getLogger(__name__)

SOURCE = "prometheus"


@dataclass
class Series:
    """One time series: its labels (``__name__`` included when Prometheus kept it) and its points, oldest first."""

    labels: dict[str, str]
    points: list[tuple[datetime, float]] = field(default_factory=list)

    @property
    def last(self) -> float | None:
        return self.points[-1][1] if self.points else None


def _ts(value: datetime) -> str:
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}: pass an aware UTC time")
    return f"{value.timestamp():.3f}"


def _float(raw: Any) -> float:
    # Prometheus encodes sample values as strings, including "NaN", "+Inf", "-Inf".
    return float(raw)


class PrometheusSource:
    """A Prometheus server. ``timeout`` bounds each call (connect and read), default RCAWEB_SOURCE_TIMEOUT_S."""

    def __init__(
        self,
        url: str,
        timeout: float | None = None,
        *,
        session: requests.Session | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        if not url:
            raise SourceError(SOURCE, "configure", "no Prometheus URL configured for this cluster")
        self.url = url.rstrip("/")
        self.timeout = float(timeout if timeout is not None else settings.RCAWEB_SOURCE_TIMEOUT_S)
        self.session = session or requests.Session()
        if headers:
            self.session.headers.update(headers)

    def query(self, promql: str, at: datetime) -> list[Series]:
        """Instant query at ``at``: one point per series (the evaluation time, the value)."""
        data = self._get("/api/v1/query", {"query": promql, "time": _ts(at)}, call=f"query {promql}")
        rtype, result = data.get("resultType"), data.get("result")
        if rtype == "scalar" and isinstance(result, list) and len(result) == 2:
            return [Series({}, [(self._time(result[0], promql), _float(result[1]))])]
        if rtype != "vector" or not isinstance(result, list):
            raise SourceError(SOURCE, f"query {promql}", f"expected a vector result, got {rtype!r}")
        out: list[Series] = []
        # an instant vector's samples share the evaluation time: parse it once
        times: dict[Any, datetime] = {}
        try:
            for item in result:
                ts, value = item["value"]
                t = times.get(ts)
                if t is None:
                    t = times[ts] = self._time(ts, promql)
                out.append(Series(dict(item.get("metric") or {}), [(t, _float(value))]))
        except (KeyError, TypeError, ValueError) as exc:
            raise SourceError(SOURCE, f"query {promql}", f"malformed vector sample: {exc!r}")
        return out

    def query_range(self, promql: str, start: datetime, end: datetime, step: float | int) -> list[Series]:
        """Range query [start, end] every ``step`` seconds; NaN points are dropped (no data is not a value)."""
        if end < start:
            raise ValueError(f"query_range: end {end} before start {start}")
        params = {"query": promql, "start": _ts(start), "end": _ts(end), "step": f"{float(step):g}"}
        data = self._get("/api/v1/query_range", params, call=f"query_range {promql}")
        if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
            raise SourceError(
                SOURCE, f"query_range {promql}", f"expected a matrix result, got {data.get('resultType')!r}"
            )
        out: list[Series] = []
        try:
            for item in data["result"]:
                points = []
                for ts, value in item.get("values") or []:
                    v = _float(value)
                    if not math.isnan(v):
                        points.append((self._time(ts, promql), v))
                out.append(Series(dict(item.get("metric") or {}), points))
        except (KeyError, TypeError, ValueError) as exc:
            raise SourceError(SOURCE, f"query_range {promql}", f"malformed matrix sample: {exc!r}")
        return out

    def history_start(self) -> tuple[datetime, datetime] | None:
        """(oldest, newest) sample time Prometheus' head block holds (``/api/v1/status/tsdb`` headStats).

        The head holds the last two to three hours; a Prometheus younger than that holds nothing older, so
        a window that starts before ``oldest`` has "no data" there because there is no history, not because
        the exporter is silent. None when the server does not serve the endpoint (older than 2.15, or a
        Prometheus-compatible store without it) or its answer lacks the times: callers then say nothing
        about history. A failure to answer at all raises SourceError like every other call.
        """
        try:
            data = self._get("/api/v1/status/tsdb", {}, call="status tsdb")
        except SourceError as exc:
            if exc.status is not None and 400 <= exc.status < 500:
                return None  # answered, but does not know this endpoint
            raise
        head = data.get("headStats")
        if not isinstance(head, dict):
            return None
        try:
            low, high = int(head["minTime"]), int(head["maxTime"])
        except (KeyError, TypeError, ValueError):
            return None
        if low <= 0 or high < low or low >= 2**62:  # an empty head reports math.MaxInt64 / MinInt64
            return None
        return datetime.fromtimestamp(low / 1000, tz=UTC), datetime.fromtimestamp(high / 1000, tz=UTC)

    #
    # HTTP
    #

    def _time(self, ts: Any, promql: str) -> datetime:
        try:
            return datetime.fromtimestamp(float(ts), tz=UTC)
        except (TypeError, ValueError, OverflowError):
            raise SourceError(SOURCE, f"query {promql}", f"malformed timestamp {ts!r}")

    def _get(self, path: str, params: dict[str, str], *, call: str) -> dict[str, Any]:
        url = self.url + path
        try:
            resp = self.session.get(url, params=params, timeout=(min(self.timeout, 5.0), self.timeout))
        except requests.Timeout:
            raise SourceError(SOURCE, call, f"did not answer within {self.timeout:g} s ({self.url})")
        except requests.ConnectionError as exc:
            raise SourceError(SOURCE, call, f"cannot connect to {self.url}: {_short(exc)}")
        except requests.RequestException as exc:
            raise SourceError(SOURCE, call, f"request failed: {_short(exc)}")
        try:
            body = orjson.loads(resp.content)  # ~10,000 GPU series a query: the C decoder, not json's
        except ValueError:
            body = None
        if resp.status_code != 200:
            detail = body.get("error", "") if isinstance(body, dict) else resp.text[:300]
            raise SourceError(
                SOURCE,
                call,
                describe_http_error(resp.status_code, resp.reason or "", detail),
                status=resp.status_code,
            )
        if not isinstance(body, dict):
            raise SourceError(SOURCE, call, f"malformed answer (not JSON): {resp.text[:120]!r}")
        if body.get("status") != "success":
            raise SourceError(
                SOURCE, call, f"{body.get('errorType', 'error')}: {body.get('error', body)!s:.300}"
            )
        if body.get("warnings"):
            logger.info("prometheus warnings for %s: %s", call, body["warnings"])
        data = body.get("data")
        if not isinstance(data, dict):
            raise SourceError(SOURCE, call, "malformed answer: no data object")
        return data


def short_history(history: tuple[datetime, datetime] | None, start: datetime, slack_s: float = 60) -> str:
    """"Prometheus holds only N min of history (since 03:12Z)" when its history begins after ``start``, else "".

    ``history`` is :meth:`PrometheusSource.history_start`'s answer; ``slack_s`` absorbs a scrape interval
    (history starting within it of ``start`` covers the window).
    """
    if history is None:
        return ""
    oldest, newest = history
    if (oldest - start).total_seconds() <= slack_s:
        return ""
    minutes = int((newest - oldest).total_seconds() // 60)
    held = f"{minutes} min" if minutes >= 1 else "less than a minute"
    return f"Prometheus holds only {held} of history (since {oldest.astimezone(UTC):%H:%M}Z)"


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 200 else text[:200] + "…"

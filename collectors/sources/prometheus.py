"""Prometheus HTTP API client (``/api/v1/query``, ``/api/v1/query_range``): GET only, typed results, clear errors.

The PromQL lives in :mod:`collectors.sources.promql`; DCGM label variants are normalized by
:func:`dcgm_identity` (re-exported here).
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
import requests
from django.conf import settings

from collectors.sources.dcgm import dcgm_identity
from collectors.sources.errors import SourceError, describe_http_error

__all__ = ["Answer", "PrometheusSource", "Series", "dcgm_identity"]

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


def _time(ts: Any, promql: str) -> datetime:
    try:
        return datetime.fromtimestamp(float(ts), tz=UTC)
    except (TypeError, ValueError, OverflowError):
        raise SourceError(SOURCE, f"query {promql}", f"malformed timestamp {ts!r}")


def _instant(data: dict[str, Any], promql: str) -> list[Series]:
    """The series of an instant query's ``data`` (a vector, or a scalar as one series without labels)."""
    rtype, result = data.get("resultType"), data.get("result")
    if rtype == "scalar" and isinstance(result, list) and len(result) == 2:
        return [Series({}, [(_time(result[0], promql), _float(result[1]))])]
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
                t = times[ts] = _time(ts, promql)
            out.append(Series(dict(item.get("metric") or {}), [(t, _float(value))]))
    except (KeyError, TypeError, ValueError) as exc:
        raise SourceError(SOURCE, f"query {promql}", f"malformed vector sample: {exc!r}")
    return out


# A successful vector answer as Prometheus (and the simulator) encodes it: compact JSON, status first. An
# answer that starts otherwise (or carries warnings, which are logged) is decoded at once instead.
_VECTOR = b'{"status":"success","data":{"resultType":"vector","result":['
_SAMPLE = b'"value":['  # cannot occur inside a JSON string: a quote there is escaped
_SAMPLES = re.compile(rb'"value":\[[^\]]*\]')


class Answer:
    """An instant query's answer as it came: decoded into series only when they are asked for.

    ``fingerprint`` is a cheap form of it for telling whether an answer is the one got last time without
    decoding either (the watch's GPU poll, every 30 s, of answers that rarely change): the body without the
    sample times, which differ at every evaluation time, and with ``values=False`` without the values too
    (only the label sets: the GPU inventory query's value is utilisation, which the inventory does not keep).
    """

    __slots__ = ("_body", "_series", "promql")

    def __init__(self, promql: str, body: bytes | None = None, series: list[Series] | None = None) -> None:
        if (body is None) == (series is None):
            raise ValueError("an Answer holds a raw vector body or decoded series")
        self.promql = promql
        self._body = body
        self._series = series

    def series(self) -> list[Series]:
        """The series (decoded once); SourceError when a sample cannot be read."""
        if self._series is None:
            assert self._body is not None
            try:
                data = orjson.loads(self._body)["data"]
            except (ValueError, KeyError, TypeError):
                raise SourceError(SOURCE, f"query {self.promql}", "malformed answer (not JSON)")
            self._series = _instant(data, self.promql)
        return self._series

    def empty(self) -> bool:
        if self._body is not None and self._series is None:
            return self._body.startswith(_VECTOR + b"]")
        return not self.series()

    def fingerprint(self, *, values: bool = True) -> bytes:
        """Equal for two answers with the same series (label sets, and values unless ``values=False``) in the
        same order, whatever their sample times. A raw body and decoded series never fingerprint alike (an
        answer whose encoding changed costs one decoding)."""
        body = self._body
        if body is None:
            assert self._series is not None
            if values:  # repr: NaN and ±Inf apart
                return orjson.dumps([[s.labels, repr(s.last)] for s in self._series])
            return orjson.dumps([s.labels for s in self._series])
        if not values:
            return _SAMPLES.sub(b"", body)
        at = body.find(_SAMPLE)
        if at < 0:
            return body
        start = at + len(_SAMPLE)
        end = body.find(b",", start)
        # every sample of an instant vector has the evaluation time; one that had another would stay in
        return body.replace(_SAMPLE + body[start : end + 1], _SAMPLE + b",") if end > start else body


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
        # the credentials a URL may not carry (collectors/sources/endpoints.py)
        username = getattr(settings, "RCAWEB_PROMETHEUS_USERNAME", "")
        if username and self.session.auth is None:
            self.session.auth = (username, getattr(settings, "RCAWEB_PROMETHEUS_PASSWORD", ""))

    def query(self, promql: str, at: datetime) -> list[Series]:
        """Instant query at ``at``: one point per series (the evaluation time, the value)."""
        return self.answer(promql, at).series()

    def answer(self, promql: str, at: datetime) -> Answer:
        """Instant query at ``at``, its vector left undecoded until its series are asked for (``Answer``)."""
        call = f"query {promql}"
        resp = self._request("/api/v1/query", {"query": promql, "time": _ts(at)}, call=call)
        body = resp.content
        if resp.status_code == 200 and body.startswith(_VECTOR) and b'"warnings"' not in body:
            return Answer(promql, body)
        return Answer(promql, series=_instant(self._data(resp, call=call), promql))

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
        # a matrix's series share the steps' times: each is parsed once, not once per series
        times: dict[Any, datetime] = {}
        try:
            for item in data["result"]:
                points = []
                for ts, value in item.get("values") or []:
                    v = _float(value)
                    if not math.isnan(v):
                        when = times.get(ts)
                        if when is None:
                            when = times[ts] = _time(ts, promql)
                        points.append((when, v))
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

    def _get(self, path: str, params: dict[str, str], *, call: str) -> dict[str, Any]:
        return self._data(self._request(path, params, call=call), call=call)

    def _request(self, path: str, params: dict[str, str], *, call: str) -> requests.Response:
        url = self.url + path
        try:
            resp = self.session.get(url, params=params, timeout=(min(self.timeout, 5.0), self.timeout))
        except requests.Timeout:
            raise SourceError(SOURCE, call, f"did not answer within {self.timeout:g} s ({self.url})")
        except requests.ConnectionError as exc:
            raise SourceError(SOURCE, call, f"cannot connect to {self.url}: {_short(exc)}")
        except requests.RequestException as exc:
            raise SourceError(SOURCE, call, f"request failed: {_short(exc)}")
        return resp

    def _data(self, resp: requests.Response, *, call: str) -> dict[str, Any]:
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
    """ "Prometheus holds only N min of history (since 03:12Z)" when its history begins after ``start``, else "".

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

"""The simulated Prometheus: HTTP API (query, query_range, series, labels) and per-node exporter pages.

Formats follow Prometheus' own JSON (``{"status": "success", "data": {...}}``,
errors ``{"status": "error", "errorType": "bad_data", ...}`` with 400) and
dcgm-exporter's text exposition. See ../API.md for the PromQL subset.
"""
# size: the Prometheus HTTP API in one handler: queries, ranges, series, labels, targets

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from simulator.loopback import LoopbackServer
from simulator.prometheus import kubestate
from simulator.prometheus.containers import ContainerSeries
from simulator.prometheus.dcgm import MigView, telemetry_key
from simulator.prometheus.evaluate import RangeReader, evaluate_keyed, format_ts, format_value
from simulator.prometheus.promql import PromQLError, Selector, parse, parse_duration
from simulator.prometheus.series import DcgmSource

__all__ = ["DcgmSource", "PrometheusServer", "exporter_targets", "kubelet_targets", "scrape_config"]

logger = logging.getLogger(__name__)
MAX_POINTS = 11_000
DOWN = "\x00down"  # exposition() of a node whose exporter does not answer


class BadData(Exception):
    pass


def parse_time(text: str | None, default: float) -> float:
    if not text:
        return default
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError as exc:
        raise BadData(f'cannot parse "{text}" to a valid timestamp') from exc


def parse_step(text: str | None) -> float:
    if not text:
        raise BadData('invalid parameter "step": cannot parse "" to a valid duration')
    try:
        step = float(text)
    except ValueError:
        try:
            step = float(parse_duration(text))
        except PromQLError as exc:
            raise BadData(f'invalid parameter "step": cannot parse "{text}" to a valid duration') from exc
    if step <= 0:
        raise BadData(
            "zero or negative query resolution step widths are not accepted. Try a positive integer"
        )
    return step


class PrometheusHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes: Nagle + delayed ACK cost 40 ms a request.
    disable_nagle_algorithm = True
    server_version = "sim-prometheus/2.55"
    sim: PrometheusServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        logger.debug("prometheus %s", format % args)

    def do_GET(self) -> None:  # noqa: N802
        self._handle({})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        self._handle({k: v for k, v in parse_qs(body, keep_blank_values=True).items()})

    def _handle(self, form: dict[str, list[str]]) -> None:
        url = urlsplit(self.path)
        params = {k: list(v) for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        for k, v in form.items():
            params.setdefault(k, []).extend(v)
        one = {k: v[-1] for k, v in params.items()}
        path = url.path.rstrip("/") or "/"
        try:
            if path in ("/-/ready", "/-/healthy"):
                return self._raw(200, b"Prometheus Server is Ready.\n", "text/plain")
            if path.startswith("/nodes/") and path.endswith("/metrics/cadvisor"):
                return self._cadvisor(path[len("/nodes/") : -len("/metrics/cadvisor")])
            if path.startswith("/nodes/") and path.endswith("/metrics"):
                return self._exposition(path[len("/nodes/") : -len("/metrics")])
            if path == "/kube-state-metrics/metrics":
                return self._kube_state()
            with self.sim.lock:
                self.sim.source.begin()
                try:
                    data = self._api(path, params, one)
                finally:
                    self.sim.source.end()
            if data is not None:
                return self._ok(data)
            self._json(
                404, {"status": "error", "errorType": "not_found", "error": f"unknown path {url.path}"}
            )
        except (BadData, PromQLError, ValueError) as exc:
            self._json(400, {"status": "error", "errorType": "bad_data", "error": str(exc)})
        except (BrokenPipeError, ConnectionResetError):
            pass

    # API

    def _api(self, path: str, params: dict[str, list[str]], one: dict[str, str]) -> Any:
        if path == "/api/v1/query":
            return self._query(one)
        if path == "/api/v1/query_range":
            return self._query_range(one)
        if path == "/api/v1/series":
            return self._series(params.get("match[]", []), one)
        if path == "/api/v1/labels":
            return self._label_names()
        if path.startswith("/api/v1/label/") and path.endswith("/values"):
            return self._label_values(path[len("/api/v1/label/") : -len("/values")])
        return None

    def _now(self) -> float:
        return self.sim.world.now.timestamp()

    def _query(self, one: dict[str, str]) -> dict[str, Any]:
        expr = parse(one.get("query", ""))
        t = parse_time(one.get("time"), self._now())
        result = evaluate_keyed(self.sim.source, expr, t)
        ts = format_ts(t)
        if isinstance(result, float):
            return {"resultType": "scalar", "result": [ts, format_value(result)]}
        result.sort(key=_first)  # series keys are unique in a vector: the labels alone order it
        labels = self.sim.source.label_map
        return {
            "resultType": "vector",
            "result": [{"metric": labels(key), "value": [ts, format_value(v)]} for key, v in result],
        }

    def _query_range(self, one: dict[str, str]) -> dict[str, Any]:
        expr = parse(one.get("query", ""))
        start = parse_time(one.get("start"), float("nan"))
        end = parse_time(one.get("end"), float("nan"))
        if start != start or end != end:
            raise BadData('invalid parameter "start" or "end": both are required')
        if end < start:
            raise BadData('invalid parameter "end": end timestamp must not be before start time')
        step = parse_step(one.get("step"))
        if (end - start) / step > MAX_POINTS:
            raise BadData(
                "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"
            )
        reader = RangeReader(self.sim.source, expr, start, end)
        times: list[float] = []
        t = start
        while t <= end + 1e-9:
            times.append(t)
            t += step
        series = reader.by_series(expr, times)
        if series is None:
            series = {}
            for t in times:
                result = evaluate_keyed(reader, expr, t)
                ts = format_ts(t)
                if isinstance(result, float):
                    series.setdefault((), []).append([ts, format_value(result)])
                else:
                    for key, v in result:
                        points = series.get(key)
                        if points is None:
                            points = series[key] = []
                        points.append([ts, format_value(v)])
        return {
            "resultType": "matrix",
            "result": [
                {"metric": self.sim.source.label_map(k), "values": v}
                for k, v in sorted(series.items(), key=_first)
            ],
        }

    def _series(self, matches: list[str], one: dict[str, str]) -> list[dict[str, str]]:
        if not matches:
            raise BadData("no match[] parameter provided")
        now = self._now()
        start = parse_time(one.get("start"), now - 300)
        end = parse_time(one.get("end"), now)
        found: dict[tuple, dict[str, str]] = {}
        for text in matches:
            expr = parse(text)
            if not isinstance(expr, Selector):
                raise BadData(f'invalid parameter "match[]": {text!r} is not a series selector')
            for key, pts in self.sim.source.select(expr, start - 1e-9, end).items():
                if pts:
                    found[key] = dict(key)
        return [found[k] for k in sorted(found)]

    def _label_names(self) -> list[str]:
        names = {"__name__"}
        for node, gpu in self.sim.source.gpus():
            names |= set(self.sim.source.static_labels(node, gpu))
        prefix = "exported_" if self.sim.source.variant == "scraped" else ""
        names |= {f"{prefix}container", f"{prefix}namespace", f"{prefix}pod"}
        return sorted(names)

    def _label_values(self, name: str) -> list[str]:
        if name == "__name__":
            return sorted({*self.sim.source.metric_names, *self.sim.source.container_names, "up"})
        values = set()
        now = self.sim.world.now
        for node, gpu in self.sim.source.gpus():
            labels = {
                **self.sim.source.static_labels(node, gpu),
                **self.sim.source.pod_labels(node, gpu, now),
            }
            v = labels.get(name)
            if v:
                values.add(v)
        return sorted(values)

    # /nodes/<name>/metrics

    def _exposition(self, node_name: str) -> None:
        with self.sim.lock:
            text = self.sim.exposition(node_name)
        if text is None:
            return self._raw(404, f"node {node_name} not found\n".encode(), "text/plain")
        if text is DOWN:  # a real scrape times out; 503 says why to whoever curls it
            return self._raw(
                503, f"node {node_name} is down: its dcgm-exporter does not answer\n".encode(), "text/plain"
            )
        self._raw(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")

    def _cadvisor(self, node_name: str) -> None:
        """The kubelet's /metrics/cadvisor of one node: 404 unknown, 503 down (its kubelet does not answer)."""
        with self.sim.lock:
            nodes = self.sim.world.nodes
            node = nodes.get(node_name) if isinstance(nodes, dict) else None
            now = self.sim.world.now
            if node is None:
                text = None
            elif not self.sim.source.exporter_up(node, now.timestamp()):
                text = DOWN
            else:
                text = self.sim.source.containers.exposition(node_name, now)
        if text is None:
            return self._raw(404, f"node {node_name} not found\n".encode(), "text/plain")
        if text is DOWN:
            return self._raw(
                503, f"node {node_name} is down: its kubelet does not answer\n".encode(), "text/plain"
            )
        self._raw(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")

    def _kube_state(self) -> None:
        if self.sim.store is None:
            return self._raw(
                404, b"no Kubernetes API store: kube-state-metrics is not simulated\n", "text/plain"
            )
        self.sim.store.catch_up(self.sim.lock)
        with self.sim.lock:
            text = kubestate.exposition(self.sim.store)
        self._raw(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")

    # Output

    def _ok(self, data: Any) -> None:
        self._json(200, {"status": "success", "data": data})

    def _json(self, code: int, body: Any) -> None:
        # orjson: a fleet's answer is thousands of series, and the standard encoder was a tenth of the
        # simulated Prometheus' CPU in a pipeline run (bench/sim.py --pipeline); the bytes are the same.
        self._raw(code, orjson.dumps(body), "application/json")

    def _raw(self, code: int, data: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _first(item: tuple[Any, Any]) -> Any:
    return item[0]


class PrometheusServer(LoopbackServer):
    thread_name = "sim-prometheus"

    def __init__(
        self,
        world: Any,
        lock: threading.RLock,
        source: DcgmSource,
        host: str = "127.0.0.1",
        port: int = 0,
        store: Any = None,
    ) -> None:
        self.world = world
        self.lock = lock
        self.source = source
        self.store = store  # the Kubernetes API's store: kube-state-metrics' exposition reads its objects
        self._bind(PrometheusHandler, host, port)

    def exposition(self, node_name: str) -> str | None:
        """dcgm-exporter's /metrics for one node at world.now (the exporter's labels, before Prometheus);
        None for an unknown node, DOWN when the node is down (NotReady: its exporter does not answer)."""
        nodes = self.world.nodes
        node = (
            nodes.get(node_name)
            if isinstance(nodes, dict)
            else next((n for n in nodes if n.name == node_name), None)
        )
        if node is None:
            return None
        now = self.world.now
        if not self.source.exporter_up(node, now.timestamp()):
            return DOWN
        lines: list[str] = []
        # MIG: one entity per GPU instance (GPU_I_PROFILE / GPU_I_ID), else one per GPU
        entities = [v for g in node.gpus for v in ([MigView(g, i) for i in g.mig] if g.mig else [g])]
        for metric, kind, help_text in self.source.metrics:
            lines.append(f"# HELP {metric} {help_text}")
            lines.append(f"# TYPE {metric} {kind}")
            for gpu in entities:
                value = self.world.gpu_metric(node.name, telemetry_key(gpu, metric), metric, now)
                if value is None:
                    continue
                labels = self.source.exporter_labels(node, gpu)
                held = self.world.gpu_pod_at(node.name, telemetry_key(gpu), now)
                ns, _, pod = (held or "").partition("/")
                labels.update({"container": "main" if held else "", "namespace": ns, "pod": pod})
                body = ",".join(f'{k}="{v}"' for k, v in labels.items())
                shown = (
                    format_value(float(value))
                    if kind == "counter" or float(value).is_integer()
                    else f"{float(value):.6f}"
                )
                lines.append(f"{metric}{{{body}}} {shown}")
        return "\n".join(lines) + "\n"


_ = UTC


def exporter_targets(prometheus_url: str, nodes: list[Any], source: DcgmSource) -> list[dict[str, Any]]:
    """file_sd target groups: one per node's dcgm-exporter, with the labels a ServiceMonitor gives it."""
    address = urlsplit(prometheus_url).netloc
    scraped = DcgmSource(source.world, "scraped", source.disabled, source.interval, source.retention)
    return [
        {
            "targets": [address],
            "labels": {"__metrics_path__": f"/nodes/{node.name}/metrics", **scraped.target_labels(node)},
        }
        for node in sorted(nodes, key=lambda n: n.name)
    ]


def kubelet_targets(prometheus_url: str, nodes: list[Any]) -> list[dict[str, Any]]:
    """file_sd target groups: one per node's kubelet cAdvisor endpoint, labelled as kube-prometheus' kubelet
    ServiceMonitor labels it (``node``, ``metrics_path``, ``endpoint``, ``service``, the node's ``instance``)."""
    address = urlsplit(prometheus_url).netloc
    groups = []
    for node in sorted(nodes, key=lambda n: n.name):
        labels = ContainerSeries.kubelet_target(node.name)
        labels.pop("job")  # the scrape job's name
        groups.append(
            {
                "targets": [address],
                "labels": {"__metrics_path__": f"/nodes/{node.name}/metrics/cadvisor", **labels},
            }
        )
    return groups


def scrape_config(
    prometheus_url: str,
    targets_file: str,
    *,
    scrape_interval_s: int = 30,
    kubelet_targets_file: str | None = None,
) -> dict[str, Any]:
    """A prometheus.yml that scrapes the simulated exporters the way a ServiceMonitor would.

    dcgm-exporter: the targets of ``targets_file`` (:func:`exporter_targets`; rewritten when nodes are
    added), one per node at ``/nodes/<node>/metrics``, ``honor_labels: false``, and as target labels
    the exporter pod's ``namespace``/``pod``/``container``/``service``/``endpoint`` plus ``instance``
    (the pod's address) and ``job`` — so the exposition's own ``pod``/``namespace``/``container`` arrive
    as ``exported_*``, as after gpu-operator's ServiceMonitor. kube-state-metrics: ``honor_labels: true``
    (kube-prometheus' ServiceMonitor), its objects' labels kept. The series a real Prometheus stores
    from this are the simulator's ``scraped`` label variant. With ``kubelet_targets_file``
    (:func:`kubelet_targets`), job ``kubelet`` scrapes every node's ``/metrics/cadvisor``, ``honor_labels:
    true`` as kube-prometheus does, so its container series are the simulator's own.
    """
    address = urlsplit(prometheus_url).netloc
    interval = f"{scrape_interval_s}s"
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [
            {
                "job_name": "dcgm-exporter",
                "honor_labels": False,
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "file_sd_configs": [{"files": [targets_file], "refresh_interval": "30s"}],
            },
            {
                "job_name": "kube-state-metrics",
                "honor_labels": True,
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "metrics_path": "/kube-state-metrics/metrics",
                "static_configs": [
                    {
                        "targets": [address],
                        "labels": {"instance": "10.0.0.2:8080", "container": "kube-state-metrics"},
                    }
                ],
            },
            *(
                [
                    {
                        "job_name": "kubelet",
                        "honor_labels": True,
                        "scrape_interval": interval,
                        "scrape_timeout": interval,
                        "file_sd_configs": [{"files": [kubelet_targets_file], "refresh_interval": "30s"}],
                    }
                ]
                if kubelet_targets_file
                else []
            ),
        ],
    }

"""Honest gaps: a Prometheus that answers with less history than the window is "no data", not a failure.

Only a real failure (no answer, an HTTP 5xx, a malformed answer) is an error observation and lowers the
diagnosis' confidence ("prometheus failed"); a short history is shown as "no data: Prometheus holds only
N min of history" and changes no confidence. Both against real HTTP servers on loopback.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from collectors.models import SourceRun
from collectors.sweep.telemetry import sweep_telemetry
from incidents.diagnosis_input import load_incident_input
from incidents.evidence import collect_evidence
from incidents.models import Hypothesis
from tests.incidents.test_evidence import NOW, OBS, EvidenceTestCase

_SELECTOR = re.compile(
    r'^(?:avg_over_time\()?(?P<metric>DCGM_FI_\w+)(?:\{(?P<label>\w+)=~"(?P<ids>[^"]*)"\})?'
)


class ShortHistoryPrometheus:
    """Answers like a Prometheus started ``history`` before ``now``: points only from then on, every 30 s.

    ``/api/v1/status/tsdb`` reports the head block's minTime/maxTime as Prometheus does; ``status`` other
    than 200 answers every query with that HTTP status (a Prometheus in trouble).
    """

    def __init__(
        self,
        now: datetime,
        history: timedelta,
        uuids: list[str],
        status: int = 200,
        head: timedelta | None = None,
        disabled: tuple[str, ...] = (),
    ) -> None:
        self.disabled = set(disabled)  # fields the exporter does not export: no series at all
        self.now, self.oldest, self.uuids, self.status = now, now - history, uuids, status
        # the head block's span: the whole history while it is young, the last hours once blocks were cut
        self.head_min = now - (head or history)
        self.paths: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                url = urlsplit(self.path)
                owner.paths.append(url.path)
                code, body = owner.answer(url.path, {k: v[-1] for k, v in parse_qs(url.query).items()})
                raw = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, path: str, q: dict[str, str]) -> tuple[int, dict]:
        if self.status != 200:
            return self.status, {"status": "error", "errorType": "unavailable", "error": "injected"}
        if path == "/api/v1/status/tsdb":
            head = {"numSeries": len(self.uuids), "chunkCount": len(self.uuids)}
            head |= {
                "minTime": int(self.head_min.timestamp() * 1000),
                "maxTime": int(self.now.timestamp() * 1000),
            }
            return 200, {"status": "success", "data": {"headStats": head, "seriesCountByMetricName": []}}
        if path != "/api/v1/query_range":
            return 404, {"status": "error", "errorType": "not_found", "error": path}
        m = _SELECTOR.match(q["query"])
        assert m, q["query"]
        wanted = m["ids"].split("|") if m["ids"] else self.uuids
        start, end, step = float(q["start"]), float(q["end"]), float(q["step"])
        result = []
        for uuid in [u for u in self.uuids if u in wanted and m["metric"] not in self.disabled]:
            values, t = [], start
            while t <= end:
                # a point (raw, or a 5-minute average ending at t) exists only once the history began
                if self.oldest.timestamp() <= t <= self.now.timestamp():
                    values.append([t, "42"])
                t += step
            if values:
                result.append(
                    {
                        "metric": {"__name__": m["metric"], "UUID": uuid, "Hostname": "h100-01"},
                        "values": values,
                    }
                )
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nobody listens once closed: "connection refused"


class GapTests(EvidenceTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.uuids = list(
            self.gpu_incident.incidentsubject_set.filter(entity__kind="gpu").values_list(
                "entity__name", flat=True
            )
        )

    def use(self, url: str) -> None:
        self.cluster.prometheus_url = url
        self.cluster.save()

    def failures(self) -> set[str]:
        return {f.source for f in load_incident_input(self.gpu_incident).failures}

    def whys(self) -> str:
        return " ".join(Hypothesis.objects.filter(incident=self.gpu_incident).values_list("why", flat=True))

    def test_a_short_history_is_no_data_and_no_failure(self) -> None:
        prom = ShortHistoryPrometheus(NOW, timedelta(minutes=7), self.uuids)
        self.addCleanup(prom.close)
        self.use(prom.url)
        collect_evidence(self.gpu_incident.pk, now=NOW)

        series = OBS.filter(incident=self.gpu_incident, kind="dcgm_series")
        self.assertFalse(series.exclude(error="").exists(), list(series.exclude(error="").values("error")))
        gap = series.get(dedup_key="dcgm-history")
        self.assertIn("no data: Prometheus holds only 7 min of history (since 03:23Z)", gap.summary)
        self.assertEqual(gap.error, "")
        # what it holds is frozen as usual
        live = series.filter(
            source="prometheus", content__uuid=self.uuids[0], content__metric="DCGM_FI_DEV_GPU_UTIL"
        )
        self.assertTrue(live.get().content["points"])
        self.assertIn("/api/v1/status/tsdb", prom.paths)
        self.assertNotIn("prometheus", self.failures())
        self.assertNotIn("prometheus failed", self.whys())
        page = self.client.get(self.gpu_incident.get_absolute_url()).content.decode()
        self.assertIn("no data: Prometheus holds only 7 min of history (since 03:23Z)", page)
        self.assertNotIn("did not answer", page)

    def test_a_full_history_asks_nothing_about_it(self) -> None:
        prom = ShortHistoryPrometheus(NOW, timedelta(hours=3), self.uuids)
        self.addCleanup(prom.close)
        self.use(prom.url)
        collect_evidence(self.gpu_incident.pk, now=NOW)
        self.assertFalse(OBS.filter(incident=self.gpu_incident, dedup_key="dcgm-history").exists())
        self.assertNotIn("/api/v1/status/tsdb", prom.paths)

    def test_a_recent_head_block_with_older_blocks_is_no_short_history(self) -> None:
        # An old Prometheus: the head holds the last 7 minutes, persisted blocks the rest (the series say so).
        prom = ShortHistoryPrometheus(
            NOW,
            timedelta(hours=3),
            self.uuids,
            head=timedelta(minutes=7),
            disabled=("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",),
        )
        self.addCleanup(prom.close)
        self.use(prom.url)
        collect_evidence(self.gpu_incident.pk, now=NOW)
        series = OBS.filter(incident=self.gpu_incident, kind="dcgm_series")
        self.assertFalse(series.filter(dedup_key="dcgm-history").exists())
        self.assertFalse(series.filter(summary__contains="holds only").exists())
        absent = series.get(dedup_key="dcgm-absent:DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
        self.assertEqual(
            absent.summary, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL: no series for these GPUs in the window"
        )

    def test_a_field_absent_from_a_young_prometheus_says_its_history_is_short(self) -> None:
        prom = ShortHistoryPrometheus(
            NOW, timedelta(minutes=7), self.uuids, disabled=("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",)
        )
        self.addCleanup(prom.close)
        self.use(prom.url)
        collect_evidence(self.gpu_incident.pk, now=NOW)
        absent = OBS.get(incident=self.gpu_incident, dedup_key="dcgm-absent:DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
        self.assertIn("no data: Prometheus holds only 7 min of history", absent.summary)
        self.assertEqual(absent.error, "")

    def test_a_dead_prometheus_is_a_failure_that_lowers_confidence(self) -> None:
        self.use(f"http://127.0.0.1:{closed_port()}")
        collect_evidence(self.gpu_incident.pk, now=NOW)
        errors = OBS.filter(incident=self.gpu_incident, kind="dcgm_series").exclude(error="")
        self.assertTrue(errors.filter(error__startswith="Prometheus did not answer: cannot connect").exists())
        self.assertFalse(OBS.filter(incident=self.gpu_incident, dedup_key="dcgm-history").exists())
        self.assertIn("prometheus", self.failures())
        self.assertIn("Lower confidence: prometheus failed", self.whys())
        page = self.client.get(self.gpu_incident.get_absolute_url()).content.decode()
        self.assertIn("not available: Prometheus did not answer: cannot connect", page)
        self.assertNotIn("holds only", page)

    def test_a_prometheus_answering_5xx_failed(self) -> None:
        prom = ShortHistoryPrometheus(NOW, timedelta(hours=3), self.uuids, status=503)
        self.addCleanup(prom.close)
        self.use(prom.url)
        collect_evidence(self.gpu_incident.pk, now=NOW)
        errors = OBS.filter(incident=self.gpu_incident, kind="dcgm_series").exclude(error="")
        self.assertTrue(errors.filter(error__startswith="Prometheus failed:").exists())
        self.assertIn("prometheus", self.failures())

    def test_the_telemetry_sweep_records_a_short_history_as_a_gap(self) -> None:
        at = datetime(2026, 11, 29, 3, 34, tzinfo=UTC)  # history since 03:31: no 5-minute point at 03:30 yet
        prom = ShortHistoryPrometheus(at, timedelta(minutes=3), self.uuids)
        self.addCleanup(prom.close)
        self.use(prom.url)
        sweep_telemetry(self.cluster.name, at, metrics=("DCGM_FI_DEV_GPU_UTIL",))
        run = SourceRun.objects.get(cluster=self.cluster, call="no data DCGM_FI_DEV_GPU_UTIL")
        self.assertTrue(run.is_gap)
        self.assertIn("no data: Prometheus holds only 3 min of history (since 03:31Z)", run.error)
        self.assertNotIn("does not export", run.error)
        self.assertNotIn(
            "prometheus", {f.source for f in load_incident_input(self.gpu_incident, at).failures}
        )

    def test_a_chart_shows_the_gap_not_a_failure(self) -> None:
        from web.console.chartdata import Scope, _source_failures

        SourceRun.objects.create(
            cluster=self.cluster,
            source="prometheus",
            call="no data DCGM_FI_DEV_GPU_UTIL",
            time=NOW,
            ok=False,
            error="no data: Prometheus holds only 3 min of history (since 03:27Z); …",
        )
        scope = Scope(self.cluster, "fleet", None, NOW - timedelta(hours=1), NOW, NOW)
        why = _source_failures(scope, ("prometheus",))
        self.assertTrue(why.startswith("Prometheus holds only 3 min of history"), why)
        SourceRun.objects.create(
            cluster=self.cluster,
            source="prometheus",
            call="query_range x",
            time=NOW - timedelta(minutes=1),
            ok=False,
            error="cannot connect to http://p:9090",
        )
        self.assertIn("prometheus failed at", _source_failures(scope, ("prometheus",)))

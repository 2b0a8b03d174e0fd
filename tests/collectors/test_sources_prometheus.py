"""PrometheusSource on recorded answers and injected faults, and dcgm_identity on every label variant."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from collectors.sources import prometheus, promql
from collectors.sources.errors import SourceError
from collectors.sources.prometheus import PrometheusSource, dcgm_identity
from tests.collectors.faultserver import fault_server, refused_url

FIX = Path(__file__).parent / "fixtures"
T = datetime(2026, 11, 29, 1, 15, tzinfo=UTC)


def _labels(line: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', line.split("{", 1)[1].rsplit("}", 1)[0]))


@pytest.fixture(scope="module")
def exposition() -> list[str]:
    return [ln for ln in (FIX / "dcgm_metrics.txt").read_text().splitlines() if ln.startswith("DCGM_FI_")]


def test_it_normalizes_classic_hostname_and_pod_labels(exposition):
    ident = dcgm_identity(_labels(exposition[0]))  # sample A: Hostname, pod attribution
    assert ident["uuid"] == "GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77"
    assert ident["hostname"] == "gsrh100-074" and ident["model"] == "NVIDIA H100 80GB HBM3"
    assert (ident["namespace"], ident["pod"], ident["container"]) == (
        "model-playground-stg",
        "text-embedding-predictor-00008-deployment-57946f6c67-vdtjl",
        "kserve-container",
    )


def test_it_treats_missing_and_empty_pod_labels_as_free(exposition):
    no_pod = dcgm_identity(_labels(exposition[1]))  # sample A second series: no pod labels at all
    empty = dcgm_identity(_labels(next(ln for ln in exposition if 'pod=""' in ln)))  # sample C
    assert no_pod["pod"] == "" and empty["pod"] == "" and empty["namespace"] == ""


def test_it_handles_the_oldest_format_without_model_or_host(exposition):
    ident = dcgm_identity(_labels(next(ln for ln in exposition if "6bf47ca9" in ln)))  # sample D
    assert ident["uuid"].startswith("GPU-6bf47ca9") and ident["model"] == "" and ident["hostname"] == ""


def test_it_handles_lowercase_hostname_and_uuid():
    ident = dcgm_identity({"uuid": "GPU-a", "hostname": "n1", "gpu": "2", "modelName": "NVIDIA A100"})
    assert (ident["uuid"], ident["hostname"], ident["gpu"]) == ("GPU-a", "n1", "2")


def test_it_prefers_exported_labels_after_a_scrape_without_honor_labels():
    ident = dcgm_identity(
        {
            "UUID": "GPU-b",
            "Hostname": "n2",
            "exported_pod": "train-0",
            "exported_namespace": "vision",
            "exported_container": "main",
            "pod": "nvidia-dcgm-exporter-x7k2p",
            "namespace": "gpu-operator",
            "container": "nvidia-dcgm-exporter",
        }
    )
    assert (ident["namespace"], ident["pod"], ident["container"]) == ("vision", "train-0", "main")


def test_it_drops_the_exporter_pod_posing_as_the_workload():
    ident = dcgm_identity(
        {
            "UUID": "GPU-c",
            "Hostname": "nvidia-dcgm-exporter-57pvc",
            "node": "aks-gpu-0",
            "pod": "nvidia-dcgm-exporter-57pvc",
            "namespace": "gpu-operator",
            "container": "nvidia-dcgm-exporter",
        }
    )
    assert ident["pod"] == "" and ident["hostname"] == "aks-gpu-0"


def test_it_parses_a_recorded_vector_answer_over_http():
    answer = json.loads((FIX / "sim_kai.json").read_text())["gpu_inventory"]
    with fault_server(bodies={"/api/v1/query": json.dumps(answer).encode()}) as srv:
        series = PrometheusSource(srv.url, timeout=2).query(promql.GPU_INVENTORY, T)
        assert srv.methods == ["GET"]
    assert len(series) == 16
    assert series[0].points[0][0].tzinfo is not None and isinstance(series[0].last, float)
    assert {dcgm_identity(s.labels)["hostname"] for s in series} == {"h100-01", "h100-02"}


def test_it_drops_nan_points_from_a_range_answer():
    answer = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {
                    "metric": {"UUID": "GPU-1"},
                    "values": [[1795914600, "1.5"], [1795914900, "NaN"], [1795915200, "2"]],
                }
            ],
        },
    }
    with fault_server(bodies={"/api/v1/query_range": json.dumps(answer).encode()}) as srv:
        (s,) = PrometheusSource(srv.url, timeout=2).query_range("x", T, T, 300)
    assert [v for _, v in s.points] == [1.5, 2.0]


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ("500", "server error 500"),
        ("401", "unauthorized"),
        ("garbage", "not JSON"),
        ("hang", "did not answer within 0.5 s"),
    ],
)
def test_it_turns_every_fault_into_a_source_error(fault, words):
    with fault_server(faults={"/api/v1/": fault}, hang_s=2) as srv:
        with pytest.raises(SourceError) as err:
            PrometheusSource(srv.url, timeout=0.5).query("up", T)
    assert err.value.source == "prometheus" and words in err.value.message


def test_it_reports_a_refused_connection():
    with pytest.raises(SourceError, match="cannot connect"):
        PrometheusSource(refused_url(), timeout=1).query_range("up", T, T, 60)


def test_a_refused_connection_does_not_carry_the_urls_credentials():
    """Issue 42, item 3: the message named the URL it could not reach, password and all, and the home page's
    source-error panel showed it to every signed-in user."""
    url = refused_url().replace("http://", "http://user:PA55;w0rd@")
    with pytest.raises(SourceError) as err:
        PrometheusSource(url, timeout=1).query_range("up", T, T, 60)
    assert "cannot connect to http://" in err.value.message and "127.0.0.1" in err.value.message
    assert "PA55" not in err.value.message and "PA55" not in str(err.value) and "w0rd" not in str(err.value)


def test_it_names_all_queries_in_one_place():
    queries = promql.all_queries()
    assert queries["gpu_inventory"] == promql.GPU_INVENTORY
    assert queries["telemetry DCGM_FI_PROF_SM_ACTIVE"] == "avg_over_time(DCGM_FI_PROF_SM_ACTIVE[5m])"
    with pytest.raises(ValueError):
        promql.telemetry("up) or vector(1")


def _vector(samples: list[tuple[dict[str, str], float, str]]) -> bytes:
    """A vector answer encoded as Prometheus encodes it (compact JSON, status first)."""
    result = [{"metric": labels, "value": [ts, value]} for labels, ts, value in samples]
    return json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": result}}, separators=(",", ":")
    ).encode()


def test_an_answer_fingerprints_without_sample_times_and_decodes_only_when_asked():
    a, b = {"UUID": "GPU-1", "pod": "p"}, {"UUID": "GPU-2"}
    first = _vector([(a, 1795914600.5, "0"), (b, 1795914600.5, "48")])
    later = _vector([(a, 1795914630, "0"), (b, 1795914630, "48")])  # asked 30 s later: same series
    with fault_server(bodies={"/api/v1/query": first}) as srv:
        answer = PrometheusSource(srv.url, timeout=2).answer("last_over_time(x[2m])", T)
    assert answer._series is None  # nothing decoded yet
    assert answer.fingerprint() == prometheus.Answer("q", later).fingerprint()
    assert not answer.empty() and prometheus.Answer("q", _vector([])).empty()
    value = prometheus.Answer("q", _vector([(a, 1795914630, "0"), (b, 1795914630, "79")]))
    assert value.fingerprint() != answer.fingerprint()  # a new Xid
    assert value.fingerprint(values=False) == answer.fingerprint(values=False)  # the same label sets
    moved = prometheus.Answer("q", _vector([({**a, "pod": "q"}, 1795914630, "0"), (b, 1795914630, "48")]))
    gone = prometheus.Answer("q", _vector([(a, 1795914630, "0")]))
    assert len({answer.fingerprint(values=False), moved.fingerprint(values=False), gone.fingerprint()}) == 3
    assert [(s.labels, s.last) for s in answer.series()] == [(a, 0.0), (b, 48.0)]
    assert answer.series()[0].points[0][0] == datetime.fromtimestamp(1795914600.5, UTC)


def test_an_answer_encoded_otherwise_is_decoded_at_once_and_a_bad_one_fails_when_decoded():
    spaced = json.dumps(orjson.loads(_vector([({"UUID": "GPU-1"}, 1795914600, "1")]))).encode()
    with fault_server(bodies={"/api/v1/query": spaced}) as srv:
        answer = PrometheusSource(srv.url, timeout=2).answer("x", T)
    assert answer._series is not None and answer.series()[0].last == 1.0
    bad = prometheus.Answer("x", _vector([({"UUID": "GPU-1"}, 1795914600, "one")]))
    with pytest.raises(SourceError, match="malformed vector sample"):
        bad.series()

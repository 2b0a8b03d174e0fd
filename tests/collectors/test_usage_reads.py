"""collectors.usage on recorded answers: selectors, the pods kept, GPU-hours held and wasted, missing series."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from collectors import usage, usage_series
from collectors.sources.prometheus import Series

T = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)


def test_the_selector_names_the_pods_or_their_common_prefix_for_a_big_job() -> None:
    assert usage.pod_selector("nlp", ["b-1", "a-0"]) == 'namespace="nlp",pod=~"a-0|b-1"'
    assert usage.pod_selector("nlp", ["x"], "exported_") == 'exported_namespace="nlp",exported_pod=~"x"'
    many = [f"sweep-{i}-abcde" for i in range(usage.MAX_PODS + 1)]
    assert usage.pod_selector("nlp", many) == 'namespace="nlp",pod=~"sweep-.*"'
    assert usage.pod_selector("nlp", []) == 'namespace="nlp"'
    # a name that is no DNS label is never put in a regex
    assert usage.pod_selector('nl"p', ['a"|.*']) == 'namespace="nl\\"p"'


def test_only_the_named_pods_series_are_kept() -> None:
    series = [
        Series({"pod": "sweep-1-a"}),
        Series({"pod": "sweep-10-a"}),
        Series({"exported_pod": "sweep-1-a"}),
    ]
    kept = usage_series.series_of_pods(series, ["sweep-1-a"])
    assert [s.labels for s in kept] == [{"pod": "sweep-1-a"}, {"exported_pod": "sweep-1-a"}]
    assert usage_series.series_of_pods(series, []) == series


def test_holdings_count_each_step_a_gpu_reported_with_a_pod() -> None:
    step = timedelta(minutes=5)
    pts = [(T - i * step, v) for i, v in enumerate([0.0, 0.1, 0.2, 0.1])]
    series = [
        Series({"UUID": "GPU-1", "pod": "nb-0", "namespace": "research"}, pts),
        Series({"UUID": "GPU-2", "pod": "nb-0", "namespace": "research"}, pts[:2]),
        Series({"UUID": "GPU-3"}, pts),  # free: no pod label
        Series(  # a MIG instance: three slices of seven
            {
                "UUID": "GPU-4",
                "GPU_I_PROFILE": "3g.40gb",
                "GPU_I_ID": "1",
                "exported_pod": "inf-0",
                "exported_namespace": "serve",
                "pod": "nvidia-dcgm-exporter-abcde",
                "namespace": "gpu-operator",
            },
            [(T, 50.0)],
        ),  # fmt: skip
    ]
    (nb,) = [h for h in usage._holdings(series, step, 1.0) if h.pod == "nb-0"]
    assert nb.gpus == {"GPU-1", "GPU-2"}
    assert abs(nb.gpu_hours - 6 * 5 / 60) < 1e-9  # six GPU-steps of five minutes
    assert abs(nb.active_hours - (0.4 + 0.1) * 5 / 60) < 1e-9
    assert abs(nb.wasted_hours - (nb.gpu_hours - nb.active_hours)) < 1e-12
    (inf,) = [h for h in usage._holdings(series, step, 100.0) if h.pod == "inf-0"]
    assert inf.namespace == "serve" and abs(inf.gpu_hours - 3 / 7 * 5 / 60) < 1e-9 and inf.activity == 0.5


def test_the_step_grows_with_the_window_to_bound_the_points() -> None:
    assert usage.fleet_step(timedelta(hours=2)) == timedelta(minutes=5)
    assert usage.fleet_step(timedelta(days=1)) == timedelta(minutes=30)
    assert timedelta(days=7) / usage.fleet_step(timedelta(days=7)) <= usage.FLEET_POINTS


class Silent:
    """A Prometheus that has no series for anything asked (what a pending job's GPUs give)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def query(self, promql: str, at: datetime) -> list[Series]:
        self.asked.append(promql)
        return []


def test_gpus_not_reporting_are_one_missing_entry_unless_none_was_asked_for() -> None:
    for requested, missing in ((8.0, ["DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_DEV_GPU_UTIL"]), (0.0, [])):
        out = usage.Usage(at=T, window=timedelta(hours=2), gpus_requested=requested)
        source = Silent()
        usage._gpus(source, "nlp", ["big-0-x"], T, timedelta(hours=2), out)  # type: ignore[arg-type]
        assert [m.series for m in out.missing] == missing
        assert out.gpus is None and out.gpu_activity is None
        # both label spellings of both fields were tried
        assert len(source.asked) == 4 and any("exported_pod" in q for q in source.asked)


def test_a_request_counts_once_although_binding_gave_it_a_second_series() -> None:
    pod = {"namespace": "nlp", "pod": "big-0-x", "container": "main"}
    series = [
        Series({**pod, "resource": "cpu"}, [(T, 16.0)]),  # before binding: no node label
        Series({**pod, "resource": "cpu", "node": "h100-01"}, [(T, 16.0)]),
        Series({**pod, "resource": "memory", "node": "h100-01"}, [(T, 2.0**36)]),
        Series({**pod, "pod": "big-1-y", "resource": "cpu", "node": "h100-02"}, [(T, 16.0)]),
    ]
    assert usage_series.requested(series) == {"cpu": 32.0, "memory": 2.0**36}


def test_use_is_the_mean_while_running_and_a_restart_is_the_same_container() -> None:
    step = timedelta(minutes=5)
    pod = {"namespace": "nlp", "pod": "p", "container": "main"}
    first = Series({**pod, "id": "a"}, [(T, 2.0), (T + step, 4.0)])  # ran two steps of a long window
    second = Series({**pod, "id": "b"}, [(T + 3 * step, 3.0)])  # restarted later
    other = Series({**pod, "pod": "q"}, [(T, 1.0)])
    runs = sorted(usage_series.per_container([first, second, other]))
    assert runs == [[1.0], [2.0, 4.0, 3.0]]  # p's mean is 3 cores while it ran, not diluted by the window

"""The sweep's Runner: one SourceRun per call, failures recorded as the source's, durations the source's."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from collectors.models import Cluster
from collectors.sources.errors import SourceError
from collectors.sweep import runner as sweep_runner
from collectors.sweep.runner import Runner
from collectors.sweep.summary import SweepSummary

pytestmark = pytest.mark.django_db

AT = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def runner(monkeypatch) -> tuple[Runner, Clock]:
    clock = Clock()
    monkeypatch.setattr(sweep_runner.time, "monotonic", clock)
    cluster = Cluster.objects.create(name="c1")
    return Runner(cluster, AT, SweepSummary(cluster="c1", kind="inventory", at=AT)), clock


def test_a_calls_duration_leaves_out_the_work_done_aside(runner) -> None:
    run, clock = runner

    def listing() -> int:
        clock.now += 0.3  # the source's pages
        with run.aside():
            clock.now += 4.0  # recording what they held
        clock.now += 0.2
        return 7

    assert run.call("k8s", "list pods", listing) == 7
    assert run.call("k8s", "list nodes", lambda: 1) == 1  # aside is per call
    assert [(r.call, r.ok, r.duration_ms) for r in run.runs] == [
        ("list pods", True, 500),
        ("list nodes", True, 0),
    ]


def test_a_failure_of_a_passing_type_is_not_the_sources(runner) -> None:
    run, _ = runner

    class Mine(Exception):
        pass

    def failing() -> None:
        raise Mine("the database went away")

    with pytest.raises(Mine):
        run.call("k8s", "list pods", failing, passes=(Mine,))
    assert run.runs == [] and run.failed == set()

    def source_failing() -> None:
        raise SourceError("k8s", "list pods", "connection reset")

    assert run.call("k8s", "list pods", source_failing, passes=(Mine,)) is None
    assert run.failed == {"list pods"} and "connection reset" in run.summary.errors[0]


def test_a_failure_is_recorded_without_the_credentials_it_quotes(runner) -> None:
    """Issue 42, item 3: a source error quoting a URL with its password reached the home page as stored."""
    run, _ = runner

    def unforeseen() -> None:
        raise ValueError("bad answer from http://user:PA55@prom:9090/api/v1/query?token=T0KEN")

    def refused() -> None:
        raise SourceError("prometheus", "query up", "cannot connect to http://user:PA55@prom:9090")

    run.call("prometheus", "query up", unforeseen)
    run.call("prometheus", "query up", refused)
    run.note("prometheus", "query up", "no data from http://user:PA55@prom:9090")
    run.save()
    errors = [r.error for r in run.cluster.source_runs.all()]
    assert len(errors) == 3 and all("prom:9090" in e for e in errors)
    assert not any("PA55" in e or "T0KEN" in e for e in errors)
    assert not any("PA55" in e for e in run.summary.errors)

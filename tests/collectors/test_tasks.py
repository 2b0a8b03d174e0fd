"""Celery wiring: tasks are thin, nothing escapes them, failed sweeps schedule a backed-off retry."""

from __future__ import annotations

import random
from datetime import timedelta
from types import SimpleNamespace
from unittest import mock

import pytest

from collectors import tasks
from collectors.models import Cluster, SourceRun
from tests.collectors.faultserver import refused_url
from tests.collectors.simhelpers import register, served, small_world

pytestmark = pytest.mark.django_db


def test_it_sweeps_through_the_task_and_returns_the_summary():
    world = small_world("kai")
    with served(world) as sim:
        sim.advance_to(world.start + timedelta(minutes=20))
        register(sim)
        result = tasks.sweep_inventory.apply(args=["gpu-prod", "2026-11-29T00:20:00Z"])
    assert result.successful()
    assert result.result["opened"] > 0 and result.result["errors"] == [] and result.result["retry_in"] is None


def test_a_failing_source_ends_the_task_normally_with_a_retry_scheduled(settings):
    settings.RCAWEB_SOURCE_TIMEOUT_S = 1
    Cluster.objects.create(name="down", kubeconfig="/nonexistent/kubeconfig", prometheus_url=refused_url())
    result = tasks.sweep_inventory.apply(args=["down"])
    assert result.successful()  # no exception escapes the task
    assert result.result["errors"] and 2.5 <= result.result["retry_in"] <= 5
    assert SourceRun.objects.filter(cluster__name="down", ok=False).count() == 2  # k8s connect + prometheus


def test_an_unexpected_crash_is_recorded_not_raised(monkeypatch):
    Cluster.objects.create(name="c1")
    monkeypatch.setattr("collectors.sweep.sweep_cluster", mock.Mock(side_effect=RuntimeError("boom")))
    result = tasks.sweep_inventory.apply(args=["c1"])
    assert result.successful() and result.result["errors"] == ["RuntimeError: boom"]
    run = SourceRun.objects.get(source="sweep")
    assert not run.ok and "boom" in run.error


def test_an_unknown_cluster_is_not_retried():
    result = tasks.sweep_events.apply(args=["nope"])
    assert (
        result.successful()
        and result.result["retry_in"] is None
        and "unknown cluster" in result.result["errors"][0]
    )


def test_on_a_worker_it_asks_celery_for_a_retry_with_backoff(settings, monkeypatch):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    Cluster.objects.create(name="c2")
    summary = mock.Mock(as_dict=lambda: {"errors": ["prometheus: query: refused"]})
    monkeypatch.setattr("collectors.sweep.sweep_telemetry", mock.Mock(return_value=summary))
    fake = SimpleNamespace(request=SimpleNamespace(retries=1, is_eager=False), retry=mock.Mock())
    result = tasks._run(fake, "telemetry", "c2", None)
    fake.retry.assert_called_once()
    kwargs = fake.retry.call_args.kwargs
    assert (
        5 <= kwargs["countdown"] <= 10
        and kwargs["throw"] is False
        and kwargs["max_retries"] == tasks.MAX_RETRIES
    )
    assert result["retry_in"] == round(kwargs["countdown"], 1)
    fake.request.retries = tasks.MAX_RETRIES  # exhausted: the next beat tick will sweep again
    fake.retry.reset_mock()
    tasks._run(fake, "telemetry", "c2", None)
    fake.retry.assert_not_called()


def test_the_backoff_grows_exponentially_with_jitter_and_a_cap():
    rng = random.Random(1)
    values = [tasks.retry_countdown(n, rng=rng) for n in range(8)]
    for n, v in enumerate(values):
        backoff = min(tasks.RETRY_CAP_S, tasks.RETRY_BASE_S * 2**n)
        assert backoff / 2 <= v <= backoff
    assert len({round(tasks.retry_countdown(3), 3) for _ in range(20)}) > 1  # jittered


def test_the_tasks_ack_late():
    for task in (tasks.sweep_inventory, tasks.sweep_telemetry, tasks.sweep_events, tasks.sweep_all):
        assert task.acks_late is True


def test_beat_fans_out_one_sweep_per_configured_cluster(monkeypatch):
    Cluster.objects.create(name="a")
    Cluster.objects.create(name="b")
    delay = mock.Mock()
    monkeypatch.setattr(tasks.sweep_events, "delay", delay)
    assert tasks.sweep_all.apply(kwargs={"kind": "events"}).result == 2
    assert sorted(c.args[0] for c in delay.call_args_list) == ["a", "b"]


def test_beat_schedule_uses_the_configured_intervals(settings):
    settings.RCAWEB_SWEEP_INVENTORY_S = 30
    settings.RCAWEB_SWEEP_EVENTS_S = 15
    schedule = tasks.beat_schedule()
    assert schedule["collectors-sweep-inventory"]["schedule"] == 30.0
    assert schedule["collectors-sweep-events"] == {
        "task": "collectors.tasks.sweep_all",
        "schedule": 15.0,
        "kwargs": {"kind": "events"},
        "options": {"expires": 15.0},
    }
    from rcaweb.celery import app

    app.finalize()
    assert "collectors-sweep-telemetry" in app.conf.beat_schedule


def test_a_sweep_time_that_cannot_be_read_is_refused_naming_it():
    Cluster.objects.create(name="gpu-prod", scheduler="kai")
    result = tasks.sweep_inventory.apply(args=["gpu-prod", "yesterday"])
    assert result.successful()
    assert result.result["errors"] == ["'yesterday' is not a time such as 2026-11-29T03:12:00Z"]
    assert result.result["retry_in"] is None  # retrying will not make it readable


def test_with_watch_on_beat_starts_watch_sessions_instead_of_inventory_and_event_sweeps(
    settings, monkeypatch
):
    settings.RCAWEB_WATCH = True
    settings.RCAWEB_WATCH_CHECK_S = 20
    schedule = tasks.beat_schedule()
    assert "collectors-sweep-inventory" not in schedule
    assert schedule["collectors-watch-inventory"] == {
        "task": "collectors.tasks.watch_all",
        "schedule": 20.0,
        "options": {"expires": 20.0},
    }
    assert "collectors-sweep-events" not in schedule  # the sessions watch the events too
    assert schedule["collectors-sweep-telemetry"]["kwargs"] == {"kind": "telemetry"}
    Cluster.objects.create(name="a")
    Cluster.objects.create(name="b")
    delay = mock.Mock()
    monkeypatch.setattr(tasks.watch_inventory, "delay", delay)
    assert tasks.watch_all.apply().result == 2
    assert sorted(c.args[0] for c in delay.call_args_list) == ["a", "b"]


def test_a_watch_task_for_an_unknown_cluster_is_refused_not_raised():
    result = tasks.watch_inventory.apply(args=("nope",)).result
    assert result["cluster"] == "nope" and "unknown cluster 'nope'" in result["errors"][0]

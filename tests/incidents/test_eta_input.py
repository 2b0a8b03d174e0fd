"""What the ETA replay reads from the inventory as of t (incidents.eta_input.load_basis): finished jobs' durations
per project and shape over the window, and running jobs' runtime limits, in two queries whatever the fleet."""

from __future__ import annotations

from datetime import timedelta

from collectors.inventory import record_states
from incidents.eta_input import load_basis
from tests.base import BaseTestCase
from tests.collectors.factories import T0, iso, job_obs


def _finished(name, queue, started, minutes, *, pods=1, gpus=8):
    obs = job_obs(
        queue, name, queue=queue, phase="Succeeded", pods=pods, gpus_per_pod=gpus, submitted=started
    )
    obs.state.update(started=iso(started), completed=iso(started + timedelta(minutes=minutes)))
    return obs


class LoadBasisTest(BaseTestCase):
    def test_it_reads_finished_durations_by_shape_within_the_window_and_running_limits(self):
        running = job_obs(
            "vision", "r", queue="vision", phase="Running", pods=1, gpus_per_pod=8, submitted=T0
        )
        running.state.update(started=iso(T0), active_deadline_seconds=7200)
        record_states(self.cluster, [running], T0)
        for i, minutes in enumerate((60, 90, 120)):
            record_states(
                self.cluster, [_finished(f"done-{i}", "vision", T0, minutes)], T0 + timedelta(minutes=minutes)
            )
        record_states(self.cluster, [_finished("two", "vision", T0, 30, pods=2)], T0 + timedelta(minutes=30))
        # finished long before the window, and after t: neither counts
        old = _finished("old", "vision", T0 - timedelta(days=3), 10)
        record_states(self.cluster, [old], T0 - timedelta(days=3) + timedelta(minutes=10))
        record_states(self.cluster, [_finished("late", "vision", T0, 300)], T0 + timedelta(minutes=300))
        t = T0 + timedelta(hours=3)
        with self.assertNumQueries(2):
            basis = load_basis(self.cluster, t, timedelta(hours=24))
        assert sorted(basis.durations[("vision", 1, "8")]) == [3600.0, 5400.0, 7200.0]
        assert basis.durations[("vision", 2, "8")] == [1800.0]
        assert basis.limits == {("vision", "r"): 7200.0}
        assert not basis.truncated

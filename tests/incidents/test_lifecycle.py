"""The incident lifecycle (incidents.lifecycle, services, grouping rule 5): resolved when it is over, reopened when
it comes back, never closed under a person, every transition audited, and the duration right everywhere."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
import time_machine
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from collectors.inventory import Observed, record_states
from collectors.models import EntityVersion
from incidents import lifecycle, services, tasks
from incidents.handoffs.markdown import incident_markdown
from incidents.intake import ingest_alertmanager
from incidents.models import Alert, AuditEntry, Incident
from incidents.outbox import process_alert
from rcaweb.cursor import format_t
from rcaweb.settings import envduration
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import AUTH, alert, payload, small_world

NODE = {"cluster": "gpu-prod", "node": "h100-01"}
T_SIM = datetime(2026, 11, 29, tzinfo=UTC)  # FLAPPING_NODE's start


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


class LifecycleTestCase(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        small_world(self.cluster, T0 - timedelta(hours=1))

    def fire(self, name: str, labels: dict[str, str], at, ends=None) -> Incident:  # type: ignore[no-untyped-def]
        """One Alertmanager notification through the intake and the outbox (the real path)."""
        body = alert(name, labels, at, ends=ends)
        ingest_alertmanager(payload([body]))
        row = Alert.objects.get(fingerprint=body["fingerprint"], starts_at=at)
        process_alert(row.pk)
        row.refresh_from_db()
        return Incident.objects.get(pk=row.incident_id)

    def resolve(self, name: str, labels: dict[str, str], at, ends) -> Incident:  # type: ignore[no-untyped-def]
        """The resolved notification of the alert that started at ``at``."""
        return self.fire(name, labels, at, ends=ends)

    def node_state(self, phase: str, at) -> None:  # type: ignore[no-untyped-def]
        ready = phase == "Ready"
        record_states(
            self.cluster,
            [
                Observed(
                    "node",
                    "h100-01",
                    {"ready": ready, "labels": {"nodepool": "h100"}},
                    hot={"phase": phase, "ready": ready, "gpus": 8, "gpus_allocatable": 8, "node": "h100-01"},
                )
            ],
            at,
        )

    def audit(self, incident: Incident) -> list[tuple[str, str, dict, dict]]:
        return [
            (e.user_name, e.action, e.before, e.after)
            for e in AuditEntry.objects.filter(target_type="incident", target_id=incident.pk).order_by("id")
        ]


class AutoResolveTests(LifecycleTestCase):
    def test_it_resolves_an_open_incident_once_its_alerts_resolved_and_the_quiet_period_passed(self) -> None:
        inc = self.fire("NodeNotReady", NODE, T0)
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        self.assertEqual(lifecycle.settle(T0 + minutes(24)), {})  # quiet 14 min: not a candidate yet
        self.assertEqual(Incident.objects.get(pk=inc.pk).status, "open")
        self.assertEqual(lifecycle.settle(T0 + minutes(25)), {"resolved": 1})
        inc.refresh_from_db()
        self.assertEqual((inc.status, inc.auto_resolved), ("resolved", True))
        self.assertEqual(inc.resolved_at, T0 + minutes(10))  # when it was over, not when rcaweb noticed
        [entry] = self.audit(inc)
        self.assertEqual(entry[:3], ("rcaweb", "incident.status", {"status": "open"}))
        self.assertEqual(entry[3]["status"], "resolved")
        self.assertIs(entry[3]["automatically"], True)
        self.assertIn("the alert resolved at 2026-11-29T03:10:00Z", entry[3]["why"])
        self.assertEqual(AuditEntry.objects.get().time, T0 + minutes(25))  # on the clock settle ran at
        self.assertEqual(lifecycle.settle(T0 + minutes(40)), {})  # nothing twice

    def test_a_firing_alert_keeps_it_open(self) -> None:
        inc = self.fire("NodeNotReady", NODE, T0)
        self.fire("GPUXidError", NODE, T0 + minutes(2))
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        self.assertEqual(lifecycle.check_incident(inc, T0 + timedelta(hours=3)), "firing")
        self.assertEqual(Incident.objects.get(pk=inc.pk).status, "open")

    def test_a_subject_still_in_a_bad_state_keeps_it_open_and_its_recovery_starts_the_quiet_period(
        self,
    ) -> None:
        self.node_state("NotReady", T0 + minutes(1))
        inc = self.fire("NodeNotReady", NODE, T0)
        self.resolve(
            "NodeNotReady", NODE, T0, ends=T0 + minutes(10)
        )  # the rule stopped; the node did not recover
        self.assertEqual(lifecycle.settle(T0 + timedelta(hours=1)), {"troubled": 1})
        self.assertIn("node h100-01 is still NotReady", lifecycle.explain(inc, T0 + timedelta(hours=1)))
        self.node_state("Ready", T0 + minutes(70))
        self.assertEqual(lifecycle.settle(T0 + minutes(80)), {"quiet": 1})
        self.assertEqual(lifecycle.settle(T0 + minutes(85)), {"resolved": 1})
        inc.refresh_from_db()
        self.assertEqual((inc.status, inc.resolved_at), ("resolved", T0 + minutes(70)))
        self.assertIn("subject healthy again at 2026-11-29T04:10:00Z", self.audit(inc)[0][3]["why"])

    def test_a_bad_state_in_between_that_is_over_restarts_the_quiet_period(self) -> None:
        inc = self.fire("NodeNotReady", NODE, T0)
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        self.node_state("NotReady", T0 + minutes(12))
        self.node_state("Ready", T0 + minutes(20))
        self.assertEqual(lifecycle.check_incident(inc, T0 + minutes(30)), "quiet")  # 10 min since recovery
        self.assertEqual(lifecycle.check_incident(inc, T0 + minutes(35)), "resolved")

    def test_a_check_that_runs_late_resolves_as_of_the_first_quiet_period(self) -> None:
        # Workers were down (or the demo replays a backlog): by the time the check runs the node has failed
        # again. It was over 15 min after the alert ended; the new failure is a new episode, not this one's.
        inc = self.fire("NodeNotReady", NODE, T0)
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        self.node_state("NotReady", T0 + minutes(40))
        self.assertEqual(lifecycle.check_incident(inc, T0 + timedelta(hours=3)), "resolved")
        inc.refresh_from_db()
        self.assertEqual(inc.resolved_at, T0 + minutes(10))
        self.assertIn("stayed quiet for 15m (RCAWEB_AUTO_RESOLVE_AFTER)", self.audit(inc)[0][3]["why"])

    def test_the_pending_job_crashlooping_pod_and_faulty_gpu_are_trouble_healthy_and_gone_are_not(
        self,
    ) -> None:
        def v(kind: str, phase: str = "", **kw) -> EntityVersion:  # type: ignore[no-untyped-def]
            return EntityVersion(kind=kind, phase=phase, **kw)

        crash = {"containers": [{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}
        self.assertEqual(lifecycle.trouble(v("job", "Pending")), "Pending")
        self.assertEqual(lifecycle.trouble(v("pod", "Running", state=crash)), "CrashLoopBackOff")
        self.assertEqual(lifecycle.trouble(v("node", "NotReady")), "NotReady")
        self.assertEqual(
            lifecycle.trouble(v("node", "Ready", gpus=8, gpus_allocatable=7)), "7 of 8 GPUs allocatable"
        )
        self.assertEqual(lifecycle.trouble(v("gpu", "missing")), "missing")
        for healthy in (
            v("job", "Running"),
            v("job", "Failed"),
            v("node", "Ready", gpus=8, gpus_allocatable=8),
        ):
            self.assertEqual(lifecycle.trouble(healthy), "")
        self.assertEqual(
            lifecycle.trouble(v("node", "NotReady", deleted=True)), ""
        )  # gone: nothing to wait for

    def test_a_person_taking_it_between_the_check_and_the_lock_wins(self) -> None:
        inc = self.fire("NodeNotReady", NODE, T0)
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        Incident.objects.filter(pk=inc.pk).update(status="investigating")
        self.assertFalse(services.auto_resolve(inc, resolved_at=T0, now=T0 + minutes(30), why="x"))
        self.assertEqual(Incident.objects.get(pk=inc.pk).status, "investigating")
        self.assertEqual(AuditEntry.objects.count(), 0)

    def test_a_tick_with_nothing_to_settle_costs_one_query(self) -> None:
        self.fire("NodeNotReady", NODE, T0)
        with CaptureQueriesContext(connection) as q:
            self.assertEqual(lifecycle.settle(T0 + timedelta(hours=2)), {})
        self.assertEqual(len(q.captured_queries), 1)

    def test_beat_runs_it_every_minute_at_the_present(self) -> None:
        entry = tasks.beat_schedule()["incidents-settle"]
        self.assertEqual((entry["task"], entry["schedule"]), ("incidents.tasks.settle_incidents", 60.0))
        inc = self.fire("NodeNotReady", NODE, T0)
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        with time_machine.travel(T0 + minutes(26), tick=False):
            self.assertEqual(tasks.settle_incidents(), {"resolved": 1})
        self.assertEqual(Incident.objects.get(pk=inc.pk).status, "resolved")

    @override_settings(RCAWEB_AUTO_RESOLVE_AFTER=timedelta(minutes=5))
    def test_the_quiet_period_is_a_setting(self) -> None:
        inc = self.fire("NodeNotReady", NODE, T0)
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        self.assertEqual(lifecycle.check_incident(inc, T0 + minutes(15)), "resolved")

    def test_the_settings_read_durations_and_refuse_anything_else(self) -> None:
        with mock.patch.dict(os.environ, {"X_AFTER": "1h30m"}):
            self.assertEqual(envduration("X_AFTER", "15m"), timedelta(minutes=90))
        with mock.patch.dict(os.environ, {"X_AFTER": "0"}):
            self.assertEqual(envduration("X_AFTER", "15m"), timedelta(0))
        self.assertEqual(envduration("X_UNSET", "15m"), timedelta(minutes=15))
        with mock.patch.dict(os.environ, {"X_AFTER": "15 minutes"}):
            with self.assertRaisesMessage(ImproperlyConfigured, "X_AFTER='15 minutes': expected a duration"):
                envduration("X_AFTER", "15m")


class ReopenTests(LifecycleTestCase):
    def test_a_re_fire_within_the_reopen_window_reopens_it_audited(self) -> None:
        inc = self.fire("NodeNotReady", NODE, T0)
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        lifecycle.settle(T0 + minutes(30))
        again = self.fire(
            "NodeNotReady", NODE, T0 + minutes(50)
        )  # new startsAt: a new alert, same fingerprint
        self.assertEqual(again.pk, inc.pk)
        again.refresh_from_db()
        self.assertEqual(
            (again.status, again.resolved_at, again.window_end, again.auto_resolved),
            ("open", None, None, False),
        )
        self.assertEqual(again.alerts.count(), 2)
        _, reopen = self.audit(inc)
        self.assertEqual(reopen[:2], ("rcaweb", "incident.status"))
        self.assertEqual(
            reopen[2], {"status": "resolved", "resolved_at": "2026-11-29T03:10:00Z", "automatically": True}
        )
        self.assertEqual(reopen[3]["status"], "open")
        self.assertIn(
            "NodeNotReady fired again at 2026-11-29T03:50:00Z, within the 1h reopen window", reopen[3]["why"]
        )

    def test_a_re_fire_after_the_reopen_window_opens_a_new_incident(self) -> None:
        inc = self.fire("NodeNotReady", NODE, T0)
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        lifecycle.settle(T0 + minutes(30))
        later = self.fire("NodeNotReady", NODE, T0 + minutes(71))
        self.assertNotEqual(later.pk, inc.pk)
        self.assertEqual(Incident.objects.get(pk=inc.pk).status, "resolved")

    def test_a_re_fire_reopens_a_resolution_the_periodic_check_had_not_made_yet(self) -> None:
        # The quiet period had passed when the alert came back, but no tick ran in between (workers down, or a
        # backlog of notifications): grouping settles it as of the alert's start, so the outcome is the same.
        inc = self.fire("NodeNotReady", NODE, T0)
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        again = self.fire("NodeNotReady", NODE, T0 + minutes(50))
        self.assertEqual(again.pk, inc.pk)
        self.assertEqual([a[3]["status"] for a in self.audit(inc)], ["resolved", "open"])
        new = self.fire("GPUXidError", NODE, T0 + timedelta(hours=5))  # …and long after: a new one
        self.assertEqual(Incident.objects.get(pk=inc.pk).status, "open")  # still firing: it joins instead
        self.assertEqual(new.pk, inc.pk)

    def test_a_repeat_before_the_quiet_period_passed_just_joins(self) -> None:
        inc = self.fire("NodeNotReady", NODE, T0)
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        again = self.fire("NodeNotReady", NODE, T0 + minutes(20))
        self.assertEqual((again.pk, again.status), (inc.pk, "open"))
        self.assertEqual(self.audit(inc), [])

    @override_settings(RCAWEB_REOPEN_WINDOW=timedelta(0))
    def test_a_zero_reopen_window_never_reopens(self) -> None:
        inc = self.fire("NodeNotReady", NODE, T0)
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        lifecycle.settle(T0 + minutes(30))
        self.assertNotEqual(self.fire("NodeNotReady", NODE, T0 + minutes(31)).pk, inc.pk)


class HeldIncidentTests(LifecycleTestCase):
    """Decision: rcaweb never closes an incident a person holds. It flags it all clear (audited once, with the
    state it left alone and who holds it) and the page, list and home say it is theirs to close: the on-call
    engineer who said "investigating" may be mid-postmortem, and "mitigated" may be a workaround to undo."""

    def test_acknowledged_investigating_and_mitigated_are_flagged_not_resolved(self) -> None:
        for status in ("acknowledged", "investigating", "mitigated"):
            with self.subTest(status=status):
                node = {"cluster": "gpu-prod", "node": "h100-02", "status_case": status}
                inc = self.fire("NodeNotReady", node, T0)
                services.assign_owner(inc, "alice", self.alice)
                services.set_status(inc, status, self.alice)
                self.resolve("NodeNotReady", node, T0, ends=T0 + minutes(10))
                self.assertEqual(lifecycle.check_incident(inc, T0 + minutes(30)), "flagged")
                inc.refresh_from_db()
                self.assertEqual((inc.status, inc.all_clear_at), (status, T0 + minutes(10)))
                flag = self.audit(inc)[-1]
                self.assertEqual(flag[:3], ("rcaweb", "incident.all_clear", {"status": status}))
                self.assertIn(f"left {status} for alice to close", flag[3]["why"])
                lifecycle.settle(T0 + timedelta(hours=2))  # flagged once, not every tick
                self.assertEqual(
                    AuditEntry.objects.filter(action="incident.all_clear", target_id=inc.pk).count(), 1
                )
                page = self.client.get(inc.get_absolute_url()).content.decode()
                self.assertIn("all clear: yours to close", page)
                self.assertIn(f"rcaweb does not close a {status} incident: it is alice&#x27;s to close", page)
                services.set_status(inc, "resolved", self.alice)  # the person closes it
                self.assertFalse(Incident.objects.get(pk=inc.pk).auto_resolved)

    def test_a_re_fire_withdraws_the_all_clear_audited(self) -> None:
        inc = self.fire("NodeNotReady", NODE, T0)
        services.acknowledge(inc, self.alice)
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        lifecycle.settle(T0 + minutes(30))
        again = self.fire("NodeNotReady", NODE, T0 + minutes(40))
        self.assertEqual(again.pk, inc.pk)
        again.refresh_from_db()
        self.assertEqual((again.status, again.all_clear_at), ("acknowledged", None))
        withdrawn = self.audit(inc)[-1]
        self.assertEqual(
            withdrawn[1:3],
            ("incident.all_clear", {"status": "acknowledged", "all_clear_since": "2026-11-29T03:10:00Z"}),
        )
        self.assertIn("NodeNotReady fired again at 2026-11-29T03:40:00Z", withdrawn[3]["why"])

    def test_a_person_who_reopens_it_after_its_alerts_ended_is_not_overridden(self) -> None:
        inc = self.fire("NodeNotReady", NODE, T0)
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        with time_machine.travel(T0 + minutes(20), tick=False):
            services.set_status(inc, "resolved", self.alice)
        with time_machine.travel(T0 + minutes(30), tick=False):
            services.set_status(inc, "open", self.alice)  # "this is not over"
        Incident.objects.filter(pk=inc.pk).update(
            window_end=T0 + minutes(10)
        )  # as the next resolved resend sets it
        self.assertEqual(lifecycle.settle(T0 + timedelta(hours=2)), {"flagged": 1})
        self.assertEqual(Incident.objects.get(pk=inc.pk).status, "open")


class DurationTests(LifecycleTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.inc = self.fire("NodeNotReady", NODE, T0)

    def test_the_incident_page_counts_from_the_onset_to_now_while_unresolved(self) -> None:
        with time_machine.travel(T0 + timedelta(hours=2, minutes=5), tick=False):
            page = self.client.get(
                self.inc.get_absolute_url()
            ).content.decode()  # cursor defaults to the onset
        self.assertIn('<td id="incident-duration">2h5m (ongoing)</td>', page)

    def test_the_incident_page_list_and_api_count_to_the_resolution_once_resolved(self) -> None:
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        lifecycle.settle(T0 + minutes(40))
        with time_machine.travel(T0 + timedelta(days=2), tick=False):
            page = self.client.get(self.inc.get_absolute_url()).content.decode()
            listing = self.client.get("/incidents/").content.decode()
            api = self.client.get(f"/api/v1/incidents/{self.inc.pk}", **AUTH).json()
        self.assertIn('<td id="incident-duration">10m</td>', page)
        self.assertIn("resolved automatically at", page)
        self.assertIn("Resolved automatically at 2026-11-29T03:10:00Z", page)
        self.assertIn('<td class="num">10m</td>', listing)
        self.assertIn('resolved <span class="muted">automatically</span>', listing)
        self.assertEqual(
            (api["duration_s"], api["ongoing"], api["resolved_automatically"], api["resolved_at"]),
            (600, False, True, "2026-11-29T03:10:00Z"),
        )

    def test_the_list_counts_unresolved_incidents_to_now(self) -> None:
        with time_machine.travel(T0 + timedelta(minutes=45), tick=False):
            listing = self.client.get("/incidents/").content.decode()
        self.assertIn('<td class="num">45m <span class="muted">ongoing</span></td>', listing)

    def test_the_lifecycle_sentence_says_when_it_will_resolve(self) -> None:
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        with time_machine.travel(T0 + minutes(15), tick=False):
            page = self.client.get(self.inc.get_absolute_url()).content.decode()
        self.assertIn(
            "The alert resolved at 2026-11-29T03:10:00Z; quiet for 5m of 15m (RCAWEB_AUTO_RESOLVE_AFTER): "
            "it resolves automatically at 2026-11-29T03:25:00Z if nothing fires.",
            page,
        )

    def test_home_and_handoffs_count_to_their_cursor(self) -> None:
        home = self.client.get("/?t=2026-11-29T04:30:00Z").content.decode()
        self.assertIn(">1h30m</td>", home)
        handoffs = self.client.get("/handoffs/?t=2026-11-29T04:30:00Z&w=2h").content.decode()
        self.assertIn("open for 1h30m", handoffs)
        md = self.client.get("/handoffs.md?t=2026-11-29T04:30:00Z&w=2h").content.decode()
        self.assertIn("Duration: 1h30m (ongoing)", md)
        self.resolve("NodeNotReady", NODE, T0, ends=T0 + minutes(10))
        lifecycle.settle(T0 + minutes(40))
        self.inc.refresh_from_db()
        self.assertIn("Duration: 10m ·", incident_markdown(self.inc, None, now=T0 + timedelta(hours=5)))
        self.assertIn("Duration: 5m (ongoing)", incident_markdown(self.inc, None, now=T0 + minutes(5)))
        home = self.client.get("/?t=2026-11-29T04:30:00Z").content.decode()
        self.assertNotIn(self.inc.title, home)  # resolved by then


FLAPPING_NODE = """
format: 1
name: flapping-node
summary: A node goes NotReady, recovers, and fails again 35 minutes after it recovered.
start: 2026-11-29T00:00:00Z
duration: 80m
seed: 5
cluster:
  name: gpu-flap
  scheduler: kai
  nodepools:
    - {name: h100, nodes: 2, gpus_per_node: 8, gpu_product: NVIDIA-H100-80GB-HBM3}
projects:
  - {name: eval, quota: {gpu: 8}}
events:
  - {at: 5m, node_ready: {node: h100-02, ready: false}}
  - {at: 20m, node_ready: {node: h100-02, ready: true}}
  - {at: 55m, node_ready: {node: h100-02, ready: false}}
alerts:
  - {name: NodeNotReady, for: 5m}
"""


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("scenario_db")  # the webhook's server threads must see the database
def test_a_fast_forwarded_scenario_resolves_and_reopens_at_simulated_time(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from harness.scenario_run import run_scenario_file

    path = tmp_path / "flap.yaml"
    path.write_text(FLAPPING_NODE)
    result = run_scenario_file(str(path))
    [inc] = result.incidents  # the re-fire 35 min after the resolution reopened it: one incident
    assert inc["alerts"] == ["NodeNotReady"]
    incident = Incident.objects.get(pk=inc["id"])
    assert incident.status == "open" and incident.alerts.count() == 2
    entries = list(AuditEntry.objects.filter(target_id=incident.pk).order_by("id"))
    assert [(e.user_name, e.after["status"]) for e in entries] == [("rcaweb", "resolved"), ("rcaweb", "open")]
    resolved = entries[0]
    # Resolved by the driver's tick at simulated time, 15 min after the alert's end (the node Ready again).
    ends_at = incident.alerts.order_by("starts_at").first().ends_at
    assert resolved.after["resolved_at"] == format_t(ends_at)
    assert ends_at + timedelta(minutes=15) <= resolved.time <= ends_at + timedelta(minutes=17)
    assert T_SIM < ends_at < T_SIM + timedelta(minutes=30)

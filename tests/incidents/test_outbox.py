"""The outbox: with the broker down, every posted alert is stored, and the sweeper processes each exactly once."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from unittest import mock

from django.utils import timezone
from kombu.exceptions import OperationalError

from incidents import grouping, intake, tasks
from incidents.models import Alert, Incident
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import AUTH, alert, payload

URL = "/api/v1/alerts/alertmanager"


class OutboxTests(BaseTestCase):
    def test_it_stores_1000_alerts_with_the_broker_down_and_the_sweeper_processes_each_once(self) -> None:
        broker_down = OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        with mock.patch.object(tasks.process_alerts, "delay", side_effect=broker_down) as delay:
            for batch in range(100):  # 100 notifications of 10 alerts, as Alertmanager would send them
                alerts = [
                    alert(
                        "GPUJobPendingTooLong",
                        {"job_name": f"job-{batch}-{i}", "namespace": "vision"},
                        T0 + timedelta(seconds=batch),
                    )
                    for i in range(10)
                ]
                with self.captureOnCommitCallbacks(execute=True):
                    r = self.anon.post(
                        URL, data=json.dumps(payload(alerts)), content_type="application/json", **AUTH
                    )
                self.assertEqual(r.status_code, 200)
        self.assertEqual(delay.call_count, 100)
        self.assertEqual(Alert.objects.count(), 1000)
        self.assertEqual(Alert.objects.filter(processed_at__isnull=True).count(), 1000)

        calls: Counter[int] = Counter()
        real, real_batch = grouping.group_alert, grouping.open_unresolved

        def counting(a, **kw):  # type: ignore[no-untyped-def]
            calls[a.pk] += 1
            return real(a, **kw)

        def counting_batch(items):  # type: ignore[no-untyped-def]
            grouped = real_batch(items)
            calls.update(list(grouped))  # the alerts it grouped; group_alert gets the others
            return grouped

        later = timezone.now() + timedelta(minutes=1)
        with (
            mock.patch("incidents.grouping.group_alert", side_effect=counting),
            mock.patch("incidents.grouping.open_unresolved", side_effect=counting_batch),
            mock.patch.object(tasks.collect_evidence, "delay"),
        ):
            self.assertEqual(intake.sweep_outbox(now=later, limit=5000), 1000)
            self.assertEqual(intake.sweep_outbox(now=later, limit=5000), 0)  # a second sweep finds nothing
        self.assertEqual(len(calls), 1000)
        self.assertEqual(set(calls.values()), {1})  # none twice
        self.assertEqual(Alert.objects.filter(processed_at__isnull=True).count(), 0)
        self.assertEqual(Incident.objects.count(), 1000)  # each names a different (unknown) job

    def test_it_leaves_fresh_alerts_to_the_task_enqueued_on_commit(self) -> None:
        intake.ingest_alertmanager(payload([alert("A", {"node": "x"}, T0)]))
        self.assertEqual(intake.sweep_outbox(), 0)  # received just now: within the grace period
        self.assertEqual(intake.sweep_outbox(now=timezone.now() + timedelta(seconds=30)), 1)

    def test_it_retries_an_alert_whose_grouping_failed(self) -> None:
        intake.ingest_alertmanager(payload([alert("A", {"node": "x"}, T0)]))
        later = timezone.now() + timedelta(minutes=1)
        hiccup = RuntimeError("database hiccup")
        with (  # wherever grouping happens: a batch of unknown subjects, or one alert at a time
            mock.patch("incidents.grouping.open_unresolved", side_effect=hiccup),
            mock.patch("incidents.grouping.group_alert", side_effect=hiccup),
        ):
            self.assertEqual(intake.sweep_outbox(now=later), 0)
        self.assertIsNone(Alert.objects.get().processed_at)  # the claim rolled back with the failure
        self.assertEqual(intake.sweep_outbox(now=later), 1)

    def test_it_queues_one_collection_for_a_burst_of_alerts_joining_an_incident(self) -> None:
        from incidents import outbox

        def process(name: str) -> int:
            intake.ingest_alertmanager(payload([alert(name, {"node": "x"}, T0)]))
            alert_id = Alert.objects.get(name=name).pk
            with self.captureOnCommitCallbacks(execute=True):
                incident_id = outbox.process_alert(alert_id)
            assert incident_id is not None
            return incident_id

        with mock.patch.object(tasks.collect_evidence, "delay") as delay:
            incident_id = process("A")  # a new incident ("pending" by default) queues its collection
            self.assertEqual(delay.call_count, 1)
            self.assertEqual(process("B"), incident_id)  # joins while that collection is still queued
            self.assertEqual(delay.call_count, 1)
            Incident.objects.filter(pk=incident_id).update(collection_state="running")
            process("C")  # the running collection may have read the alerts already: collect again
            self.assertEqual(delay.call_count, 2)
            Incident.objects.filter(pk=incident_id).update(collection_state="done")
            process("D")
            self.assertEqual(delay.call_count, 3)

    def test_it_runs_the_beat_task_through_celery(self) -> None:
        intake.ingest_alertmanager(
            payload([alert("A", {"node": "x"}, T0)]), received_at=timezone.now() - timedelta(minutes=5)
        )
        with mock.patch.object(tasks.collect_evidence, "delay"):
            result = tasks.sweep_outbox.apply()
        self.assertEqual(result.get(), 1)
        self.assertEqual(
            tasks.beat_schedule()["incidents-sweep-outbox"]["task"], "incidents.tasks.sweep_outbox"
        )


class PublisherTests(BaseTestCase):
    """With a real broker, on-commit enqueues are coalesced by one publisher thread per process."""

    def test_it_sends_the_ids_of_several_notifications_in_one_message(self) -> None:
        from django.test import override_settings

        from incidents.outbox import enqueue_processing, publisher

        with (
            override_settings(CELERY_TASK_ALWAYS_EAGER=False),
            mock.patch.object(tasks.process_alerts, "delay") as delay,
        ):
            for ids in ([1, 2], [3], [4, 5, 6]):
                self.assertTrue(enqueue_processing(ids))
            publisher.flush()
        sent = [i for call in delay.call_args_list for i in call.args[0]]
        self.assertEqual(sorted(sent), [1, 2, 3, 4, 5, 6])
        self.assertLessEqual(delay.call_count, 3)

    def test_it_survives_a_broker_outage_and_keeps_sending_afterwards(self) -> None:
        from django.test import override_settings

        from incidents.outbox import enqueue_processing, publisher

        with (
            override_settings(CELERY_TASK_ALWAYS_EAGER=False),
            mock.patch.object(tasks.process_alerts, "delay", side_effect=OperationalError("refused")) as down,
        ):
            enqueue_processing([7])
            publisher.flush()
        self.assertEqual(down.call_count, 1)
        with (
            override_settings(CELERY_TASK_ALWAYS_EAGER=False),
            mock.patch.object(tasks.process_alerts, "delay") as up,
        ):
            enqueue_processing([8])
            publisher.flush()
        up.assert_called_once_with([8])

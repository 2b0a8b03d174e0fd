"""Without Celery workers the webhook answers first and the in-process worker thread processes after it.

``RCAWEB_INLINE_PROCESSING=thread`` (the demo, run_scenario): the response returns once the alerts are
stored; grouping, evidence and diagnosis then run in ``incidents.inline_worker``'s thread, nothing is lost, and an
error leaves the alerts in the outbox for the sweep. Tests default to ``sync`` (deterministic); these switch
the thread on and wait with ``inline_worker.drain()``. TransactionTestCase: the thread has its own connection and
must see committed rows.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from unittest import mock

from django.test import Client, TransactionTestCase, override_settings
from django.utils import timezone

from collectors.models import Cluster
from incidents import inline_worker, outbox
from incidents.models import Alert, Incident
from tests.base import T0
from tests.incidents.fixtures.alertmanager import AUTH, alert, gpu_uuid, payload, small_world

URL = "/api/v1/alerts/alertmanager"


@override_settings(RCAWEB_INLINE_PROCESSING="thread", CELERY_TASK_ALWAYS_EAGER=True)
class InlineThreadTests(TransactionTestCase):
    def setUp(self) -> None:
        self.cluster = Cluster.objects.create(name="gpu-prod", scheduler="kai")
        small_world(self.cluster, T0)
        self.client = Client()
        self.addCleanup(self.assertTrue, inline_worker.drain(timeout=60))  # nothing runs after the test's flush
        self.gate = threading.Event()
        self.real = inline_worker.InlineWorker._group
        self.calls: list[list[int]] = []
        test = self

        def gated(worker: inline_worker.InlineWorker, alert_ids: list[int]) -> None:
            # before the grouping takes the write lock: the intake goes on storing meanwhile
            test.calls.append(list(alert_ids))
            assert test.gate.wait(30), "the test never opened the gate"
            test.real(worker, alert_ids)

        self.gated = mock.patch.object(inline_worker.InlineWorker, "_group", gated)

    def post(self, alerts: list[dict]) -> int:
        r = self.client.post(URL, data=json.dumps(payload(alerts)), content_type="application/json", **AUTH)
        self.assertEqual(r.status_code, 200, r.content)
        return r.status_code

    def xid(self, node: str, index: int) -> dict:
        labels = {"cluster": "gpu-prod", "UUID": gpu_uuid(node, index), "Hostname": node, "xid": "79"}
        return alert("GPUXidError", labels, T0, severity="critical")

    def test_the_response_returns_before_processing_which_then_happens(self) -> None:
        with self.gated:
            self.post([self.xid("h100-01", 3)])
            # Answered: the alert is stored, not grouped yet (the worker waits at the gate).
            a = Alert.objects.get()
            self.assertIsNone(a.processed_at)
            self.assertFalse(Incident.objects.exists())
            self.gate.set()
            self.assertTrue(inline_worker.drain(timeout=60))
        a.refresh_from_db()
        self.assertIsNotNone(a.processed_at)
        inc = Incident.objects.get()
        self.assertEqual(a.incident_id, inc.pk)
        # evidence and diagnosis ran in the worker too
        self.assertEqual(inc.collection_state, "done")
        self.assertIsNotNone(inc.diagnosed_at)
        self.assertTrue(inc.observations.filter(kind="alert").exists())

    def test_nothing_is_lost_from_a_backlog(self) -> None:
        with self.gated:
            for node in ("h100-01", "h100-02"):
                for index in range(8):
                    self.post([self.xid(node, index)])
            self.assertEqual(Alert.objects.filter(processed_at__isnull=True).count(), 16)
            self.gate.set()
            self.assertTrue(inline_worker.drain(timeout=120))
        self.assertEqual(sum(len(c) for c in self.calls), 16)  # each alert handed over once
        self.assertFalse(Alert.objects.filter(processed_at__isnull=True).exists())
        self.assertFalse(Alert.objects.filter(incident__isnull=True).exists())
        self.assertFalse(Incident.objects.exclude(collection_state="done").exists())
        self.assertFalse(Incident.objects.filter(diagnosed_at__isnull=True).exists())

    def test_an_error_is_a_log_line_the_alert_stays_in_the_outbox_and_the_worker_goes_on(self) -> None:
        broken = mock.patch.object(outbox, "process_alerts", side_effect=RuntimeError("grouping exploded"))
        with broken, self.assertLogs("incidents.inline_worker", "ERROR") as logs:
            self.post([self.xid("h100-01", 1)])
            self.assertTrue(inline_worker.drain(timeout=60))
        self.assertIn("inline processing failed", logs.output[0])
        lost = Alert.objects.get()
        self.assertIsNone(lost.processed_at)  # still in the outbox
        self.post([self.xid("h100-02", 2)])  # the thread survived
        self.assertTrue(inline_worker.drain(timeout=60))
        self.assertEqual(Alert.objects.filter(processed_at__isnull=False).count(), 1)
        # What the worker's idle sweep (beat's sweep_outbox with workers) does once the grace passed:
        outbox.sweep_outbox(now=timezone.now() + timedelta(minutes=1))
        self.assertTrue(inline_worker.drain(timeout=60))
        lost.refresh_from_db()
        self.assertIsNotNone(lost.processed_at)
        self.assertEqual(Incident.objects.filter(collection_state="done").count(), 2)

    def test_the_intake_waits_for_the_workers_sqlite_write_instead_of_failing(self) -> None:
        from django.db import connection

        if connection.vendor != "sqlite":
            self.skipTest("the write lock serializes SQLite writers only")
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with inline_worker.serialized():
                held.set()
                release.wait(30)

        holder = threading.Thread(target=hold)
        holder.start()
        self.assertTrue(held.wait(10))
        answered: list[int] = []
        poster = threading.Thread(target=lambda: answered.append(self.post([self.xid("h100-01", 4)])))
        poster.start()
        poster.join(0.5)
        self.assertTrue(poster.is_alive())  # waiting for the lock, not failing with "database is locked"
        release.set()
        holder.join(10)
        poster.join(30)
        self.assertEqual(answered, [200])
        self.assertTrue(inline_worker.drain(timeout=60))
        self.assertIsNotNone(Alert.objects.get().processed_at)


class ModeTests(TransactionTestCase):
    def test_tests_default_to_sync(self) -> None:
        self.assertEqual(inline_worker.mode(), "sync")
        self.assertFalse(inline_worker.threaded())

    @override_settings(RCAWEB_INLINE_PROCESSING="background")
    def test_a_bad_mode_is_named(self) -> None:
        with self.assertRaisesMessage(
            ValueError, "RCAWEB_INLINE_PROCESSING='background': expected one of sync"
        ):
            inline_worker.mode()

    @override_settings(RCAWEB_INLINE_PROCESSING="thread", CELERY_TASK_ALWAYS_EAGER=False)
    def test_with_workers_the_thread_is_not_used(self) -> None:
        self.assertFalse(inline_worker.threaded())


def _file_sqlite(test: TransactionTestCase) -> None:
    """On SQLite, point the default database at a fresh file with the project's options (WAL, IMMEDIATE, busy
    timeout: what the demo runs on) for this test; the suite's in-memory database shares one cache between
    connections, where a conflict is an immediate "table is locked" whatever the options."""
    import contextlib
    import tempfile
    from pathlib import Path

    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection, connections

    if connection.vendor != "sqlite":
        return
    suite = connections["default"]  # holds the in-memory test database open until it is put back
    saved = dict(connections.settings["default"])
    tmp = tempfile.mkdtemp(prefix="rcaweb-test-burst-")
    connections.settings["default"].update(
        {"NAME": str(Path(tmp) / "burst.sqlite3"), "OPTIONS": dict(settings.SQLITE_OPTIONS)}
    )
    del connections["default"]
    call_command("migrate", verbosity=0, interactive=False)

    def restore() -> None:
        assert inline_worker.drain(timeout=120)
        with contextlib.suppress(Exception):
            connections["default"].close()
        connections.settings["default"].clear()
        connections.settings["default"].update(saved)
        connections["default"] = suite

    test.addCleanup(restore)


@override_settings(RCAWEB_INLINE_PROCESSING="thread", CELERY_TASK_ALWAYS_EAGER=True)
class BurstTests(TransactionTestCase):
    """A burst of notifications from several senders while the worker works a backlog and a sweep writes."""

    def test_every_alert_of_a_burst_lands_in_an_incident_and_no_sender_sees_a_5xx(self) -> None:
        from collectors.inventory import Observed, record_states

        _file_sqlite(self)
        errors_before = inline_worker.worker.errors
        cluster = Cluster.objects.create(name="gpu-prod", scheduler="kai")
        small_world(cluster, T0, nodes=6, pending_job=False)
        started = threading.Event()
        real = inline_worker.InlineWorker._group

        def signalled(worker: inline_worker.InlineWorker, alert_ids: list[int]) -> None:
            started.set()  # the backlog is being grouped: the burst goes out now, while it is
            real(worker, alert_ids)

        def xid(node: str, index: int, minute: int) -> dict:
            labels = {"cluster": "gpu-prod", "UUID": gpu_uuid(node, index), "Hostname": node, "xid": "79"}
            return alert("GPUXidError", labels, T0 + timedelta(minutes=minute), severity="critical")

        statuses: list[int] = []
        errors: list[BaseException] = []

        def sender(k: int) -> None:
            client = Client()
            try:
                for n in range(6):  # each notification: a known GPU and a node no inventory has
                    body = [
                        xid(f"h100-{(k + n) % 6 + 1:02d}", n % 8, 100 + 10 * k + n),
                        alert("NodeNotReady", {"cluster": "gpu-prod", "node": f"gone-{k}-{n}"}, T0),
                    ]
                    r = client.post(
                        URL, data=json.dumps(payload(body)), content_type="application/json", **AUTH
                    )
                    statuses.append(r.status_code)
            except BaseException as exc:  # the assertion below names it
                errors.append(exc)

        def sweep() -> None:  # the demo's sweep: inventory writes outside the inline worker's lock
            from django.db import connection

            try:
                for n in range(10):
                    at = T0 + timedelta(minutes=1 + n)
                    state = {"phase": "Running", "node": f"h100-0{n % 6 + 1}"}
                    record_states(
                        cluster, [Observed("pod", f"serve-{n}", state, namespace="nlp", hot=state)], at
                    )
            except BaseException as exc:
                errors.append(exc)
            finally:
                connection.close()

        with mock.patch.object(inline_worker.InlineWorker, "_group", signalled), self.assertNoLogs(level="WARNING"):
            backlog = [xid(f"h100-0{i % 6 + 1}", i % 8, i) for i in range(40)]
            backlog += [
                alert("NodeNotReady", {"cluster": "gpu-prod", "node": f"gone-{i}"}, T0) for i in range(40)
            ]
            self.assertEqual(
                self.client.post(
                    URL, data=json.dumps(payload(backlog)), content_type="application/json", **AUTH
                ).status_code,
                200,
            )
            self.assertTrue(started.wait(60))
            threads = [threading.Thread(target=sender, args=(k,)) for k in range(4)]
            threads.append(threading.Thread(target=sweep))
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            self.assertTrue(inline_worker.drain(timeout=120))
        self.assertEqual(errors, [])
        self.assertEqual(statuses, [200] * 24)
        self.assertEqual(Alert.objects.count(), 80 + 4 * 6 * 2)
        self.assertFalse(Alert.objects.filter(incident__isnull=True).exists())
        self.assertFalse(Alert.objects.filter(processed_at__isnull=True).exists())
        self.assertFalse(Incident.objects.exclude(collection_state="done").exists())
        self.assertFalse(Incident.objects.filter(diagnosed_at__isnull=True).exists())
        self.assertEqual(inline_worker.worker.errors, errors_before)


class WriteLockTests(TransactionTestCase):
    def test_a_waiting_webhook_goes_before_background_writers_that_asked_first(self) -> None:
        lock = inline_worker.WriteLock()
        order: list[str] = []
        lock.acquire()  # a background transaction in progress

        def writer(name: str, urgent: bool) -> None:
            lock.acquire(urgent=urgent)
            order.append(name)
            lock.release()

        def waiting(count: int) -> None:
            with lock.cond:
                while lock.waiting != count:
                    lock.cond.wait(0.01)

        background = threading.Thread(target=writer, args=("background", False))
        background.start()
        waiting(1)  # the background writer waits first
        webhook = threading.Thread(target=writer, args=("webhook", True))
        webhook.start()
        waiting(2)
        self.assertEqual(lock.urgent_waiting, 1)
        lock.release()
        webhook.join(30)
        background.join(30)
        self.assertEqual(order, ["webhook", "background"])

    def test_it_is_reentrant_and_refuses_a_release_by_another_thread(self) -> None:
        lock = inline_worker.WriteLock()
        lock.acquire()
        lock.acquire(urgent=True)  # the intake's transaction runs the sync-mode processing inside it
        lock.release()
        self.assertIsNotNone(lock.owner)
        errors: list[Exception] = []

        def other() -> None:
            try:
                lock.release()
            except RuntimeError as exc:
                errors.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join(10)
        self.assertEqual(len(errors), 1)
        lock.release()
        self.assertIsNone(lock.owner)

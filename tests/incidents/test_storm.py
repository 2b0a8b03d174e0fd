"""An alert storm: one notification with hundreds of distinct alerts is grouped in batches (incidents.outbox).

Two properties: the outcome is exactly that of grouping the alerts one at a time (same incidents, same
subjects and related entities, same links), and the number of queries does not grow with the number of
alerts for labels that name nothing known (the storm of issue 17) — for alerts on known subjects it grows
by a fixed few per alert, well under what one transaction per alert costs.
"""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

from django.db import connection
from django.test.utils import CaptureQueriesContext

from incidents import outbox, tasks
from incidents.intake import ingest_alertmanager
from incidents.models import Alert, Incident, IncidentSubject
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import alert, gpu_uuid, payload, small_world

# Queries for a whole batch of alerts that name nothing known, whatever their number: the claim (row
# locks, processed_at), the prefetch (clusters), the open/reopenable incidents of those label sets, the
# multi-row INSERT of the incidents, one UPDATE of the alerts, the evidence bookkeeping (3), the savepoint.
# Only the INSERT repeats: SQLite's 999 bound variables take about 50 incidents a statement (PostgreSQL
# 500, GROUPING_BATCH), so the count grows by one per ~50 new incidents on SQLite and is flat on PostgreSQL.
# On SQLite the batch's alerts are read once more, before the write lock (outbox._prefetch), so that the
# webhook's insert does not wait for the prefetching reads.
UNRESOLVED_BATCH_BUDGET = 15
# Alerts on known GPUs: a few prefetches per batch, then at most this many statements per alert
# (find the open incident, its attached entities, attach/promote, link, window, the alert's row);
# one transaction per alert (the code before batching) took about 16.
PER_SUBJECT_ALERT_BUDGET = 8
# On SQLite a batch commits when its time is up (outbox.SQLITE_TRANSACTION_S); each further transaction of
# the same batch: the claim (2), the unclaim of the rest, the evidence bookkeeping (3), its savepoint (2).
PER_SQLITE_TRANSACTION_BUDGET = 8


def unknown_storm(count: int, start=T0) -> list[dict]:
    """``count`` alerts on GPUs no inventory knows, each label set twice (a re-fire a minute later)."""
    out = []
    for n in range(count):
        labels = {"cluster": "elsewhere", "Hostname": f"a100-{n // 2 // 8:03d}", "gpu": str(n // 2 % 8)}
        out.append(alert("XidError", labels, start + timedelta(minutes=n % 2), severity="warning"))
    return out


class StormTests(BaseTestCase):
    def process(self, body: list[dict]) -> tuple[list[str], mock.MagicMock]:
        with mock.patch("incidents.intake.enqueue_processing"):
            result = ingest_alertmanager(payload(body))
        with (
            mock.patch.object(tasks.collect_evidence, "delay") as delay,
            self.captureOnCommitCallbacks(execute=True),
            CaptureQueriesContext(connection) as queries,
        ):
            self.assertEqual(outbox.process_alerts(result.queued), len(body))
        return [q["sql"] for q in queries.captured_queries], delay

    def test_it_groups_300_alerts_naming_nothing_known_in_a_fixed_number_of_queries(self) -> None:
        few, _ = self.process(unknown_storm(30))
        Incident.objects.all().delete()
        many, delay = self.process(unknown_storm(300, start=T0 + timedelta(hours=1)))
        self.assertLessEqual(len(many), UNRESOLVED_BATCH_BUDGET)
        inserts = [q for q in many if q.startswith('INSERT INTO "incidents_incident"')]
        self.assertLessEqual(len(inserts), 1 + 150 // 40)
        self.assertEqual(  # ten times the alerts, the same statements but for the rows per INSERT
            len(many) - len(inserts),
            len([q for q in few if not q.startswith('INSERT INTO "incidents_incident"')]),
        )
        self.assertEqual(Incident.objects.count(), 150)  # a label set and its re-fire share one incident
        for incident in Incident.objects.all():
            self.assertEqual(incident.alerts.count(), 2)
            self.assertEqual(
                {a.labels["Hostname"] + "/" + a.labels["gpu"] for a in incident.alerts.all()},
                {_one(incident)},
            )
        self.assertEqual(delay.call_count, 150)  # one collection per incident, not one per alert

    def test_it_joins_an_open_incident_of_the_same_labels_from_an_earlier_notification(self) -> None:
        self.process(unknown_storm(2))
        first = Incident.objects.get()
        Incident.objects.filter(pk=first.pk).update(collection_state="done")
        _, delay = self.process(unknown_storm(20, start=T0 + timedelta(minutes=5)))
        self.assertEqual(Incident.objects.count(), 10)
        self.assertEqual(first.alerts.count(), 4)  # the same labels joined the incident already open
        self.assertEqual(delay.call_count, 10)  # it had been collected: it collects again, once

    def test_it_groups_300_alerts_on_known_gpus_as_one_at_a_time_would(self) -> None:
        from collectors.inventory import Observed, record_states

        small_world(self.cluster, T0, nodes=20, pending_job=True)
        serving = {"phase": "Running", "node": "h100-03"}  # a pod on a node: related to its GPUs' incident
        record_states(
            self.cluster,
            [Observed("pod", "serve-0", serving, namespace="nlp", hot=serving)],
            T0 - timedelta(hours=1),
        )
        body = known_storm()
        with mock.patch.object(outbox, "SQLITE_TRANSACTION_S", None):  # one transaction, as on PostgreSQL
            queries, delay = self.process(body)
        batched = outcome()
        self.assertLessEqual(len(queries), 20 + PER_SUBJECT_ALERT_BUDGET * len(body))
        self.assertEqual(len(batched), 20 + 1 + 4)  # a node's GPUs share it; the job; unknown nodes
        self.assertEqual(delay.call_count, len(batched))

        # The same alerts, one transaction each (process_alert, the path the batch replaces).
        Incident.objects.all().delete()
        Alert.objects.update(processed_at=None)
        with mock.patch.object(tasks.collect_evidence, "delay"), self.captureOnCommitCallbacks(execute=True):
            for a in Alert.objects.order_by("id"):
                outbox.process_alert(a.pk)
        self.assertEqual(outcome(), batched)

    def test_on_sqlite_a_batch_commits_when_its_time_is_up_and_the_next_goes_on_as_one_would(self) -> None:
        # SQLite's writer is the webhook's too: a batch stops grouping at SQLITE_TRANSACTION_S, unclaims the
        # rest and commits; the next transaction goes on with the same lookups. A budget of 0 makes every
        # alert on a known subject its own transaction: the outcome is the one batch's, and each extra
        # transaction costs a few statements (claim, unclaim, evidence bookkeeping), not the prefetch again.
        small_world(self.cluster, T0, nodes=20, pending_job=True)
        body = known_storm()
        with mock.patch.object(outbox, "SQLITE_TRANSACTION_S", None):
            one, _ = self.process(body)
        batched = outcome()
        Incident.objects.all().delete()
        Alert.objects.all().delete()
        real = outbox._group_batch
        transactions = []

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            transactions.append(args[0])
            return real(*args, **kwargs)

        budget = 0.0 if connection.vendor == "sqlite" else None
        with (
            mock.patch.object(outbox, "SQLITE_TRANSACTION_S", budget),
            mock.patch.object(outbox, "_group_batch", counted),
        ):
            split, delay = self.process(body)
        self.assertEqual(outcome(), batched)
        self.assertFalse(Alert.objects.filter(processed_at__isnull=True).exists())
        self.assertEqual(delay.call_count, len(batched))  # one collection per incident, as in one batch
        if connection.vendor != "sqlite":
            self.assertEqual(len(transactions), 1)
            return
        known = len(body) - 9  # the nine NodeNotReady on unknown nodes open their incidents in bulk
        self.assertEqual(len(transactions), known)
        self.assertLessEqual(len(split), len(one) + PER_SQLITE_TRANSACTION_BUDGET * (len(transactions) - 1))

    def test_it_leaves_an_alert_whose_grouping_fails_for_the_sweeper_and_groups_the_others(self) -> None:
        from incidents import grouping

        real = grouping.group_alert

        def flaky(a, **kw):  # type: ignore[no-untyped-def]
            if a.labels.get("Hostname") == "h100-02":
                raise RuntimeError("database hiccup")
            return real(a, **kw)

        small_world(self.cluster, T0, nodes=2, pending_job=False)
        body = [alert("XidError", {"Hostname": f"h100-0{n}", "gpu": "1"}, T0) for n in (1, 2)]
        with mock.patch("incidents.intake.enqueue_processing"):
            result = ingest_alertmanager(payload(body + unknown_storm(4)))
        with (
            mock.patch("incidents.grouping.group_alert", side_effect=flaky),
            mock.patch.object(tasks.collect_evidence, "delay"),
        ):
            self.assertEqual(outbox.process_alerts(result.queued), 5)
        left = Alert.objects.get(processed_at__isnull=True)
        self.assertEqual(left.labels["Hostname"], "h100-02")
        self.assertIsNone(left.incident_id)
        self.assertEqual(Incident.objects.count(), 3)


def _one(incident: Incident) -> str:
    """The node/gpu an unknown-GPU incident's unresolved labels name ("node=a100-003, gpu=a100-003/5")."""
    return incident.unresolved_subject.split("gpu=", 1)[1]


def known_storm() -> list[dict]:
    """300 distinct alerts: two kinds on every GPU of 20 known nodes, the pending job, unknown nodes."""
    out = []
    for name in ("XidError", "ECCDoubleBit"):
        for i in range(1, 21):
            node = f"h100-{i:02d}"
            for g in range(8):
                labels = {"Hostname": node, "gpu": str(g), "UUID": gpu_uuid(node, g)}
                if (i + g) % 3 == 0:
                    labels.pop("UUID")  # dcgm-exporter without UUID: the index on the node
                out.append(alert(name, labels, T0 + timedelta(seconds=len(out)), severity="critical"))
    out = out[:290]
    out.append(alert("GPUJobPendingTooLong", {"namespace": "vision", "job_name": "resnet-train"}, T0))
    out += [alert("NodeNotReady", {"node": f"gone-{n % 4}"}, T0 + timedelta(seconds=n)) for n in range(9)]
    return out


def outcome() -> dict[frozenset[str], tuple]:
    """Each incident as (its alerts' fingerprints) -> what grouping decided about it, ids left out."""
    by_id = {}
    for inc in Incident.objects.all():
        fps = frozenset(inc.alerts.values_list("fingerprint", flat=True))
        subjects = frozenset(
            (s.entity.kind, s.entity.name, s.role)
            for s in IncidentSubject.objects.filter(incident=inc).select_related("entity")
        )
        by_id[inc.pk] = (fps, (inc.title, inc.severity, inc.onset, inc.unresolved_subject, subjects))
    out = {}
    for pk, (fps, facts) in by_id.items():
        links = frozenset(
            by_id[o][0] for o in Incident.objects.get(pk=pk).related.values_list("pk", flat=True)
        )
        out[fps] = (*facts, links)
    return out

"""The outbox: alerts stored by the intake are grouped here, each exactly once, whenever the broker allows.

``enqueue_processing`` runs on the intake's commit. Under eager Celery (the demo, run_scenario) it hands the
ids to the in-process worker thread (``incidents.inline_worker``: the webhook answers first), or, in ``sync`` mode
(tests), processes inline; with a real broker it hands the ids to a per-process publisher thread that coalesces the notifications of
the last few milliseconds into one ``process_alerts`` message (one broker round trip instead of one per
request, the most expensive part of the webhook after the insert). Nothing depends on that message
arriving: rows stay ``processed_at IS NULL`` until grouped, and ``sweep_outbox`` (beat) processes any left
behind — a broker outage, a worker that died before its publisher flushed.

``process_alerts`` groups a batch of alerts per transaction (``process_batch``): the lock is taken once,
the batch's subjects are resolved from a few prefetching queries, alerts naming nothing known open their
incidents in bulk, and each incident touched queues one evidence collection: a storm of 5,000 alerts in
one notification is grouped in seconds, not minutes (bench/intake.py --storm).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from incidents.models import Alert, Incident

if TYPE_CHECKING:
    from incidents import grouping

logger = logging.getLogger(__name__)

PUBLISH_COALESCE_S = 0.02  # how long the publisher waits for more ids before sending one message


def _publish(alert_ids: list[int]) -> bool:
    from incidents.tasks import process_alerts

    try:
        process_alerts.delay(alert_ids)
    except Exception as exc:  # kombu.OperationalError, redis.ConnectionError, ...: the rows are safe
        logger.warning("broker unavailable, %d alerts left for the outbox sweeper: %s", len(alert_ids), exc)
        return False
    return True


class _Publisher:
    """One daemon thread per process that sends the pending ids as one message every few milliseconds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.pending: list[int] = []
        self.pid = 0
        self.thread: threading.Thread | None = None
        self.sent = 0  # messages, for tests and curiosity
        self.busy = False  # ids taken, message not yet handed to the broker

    def add(self, alert_ids: list[int]) -> None:
        with self.lock:
            if self.thread is None or self.pid != os.getpid() or not self.thread.is_alive():
                # First use in this process (or after a fork: threads do not survive it).
                self.pid = os.getpid()
                self.pending = []
                self.thread = threading.Thread(target=self._run, name="rcaweb-outbox-publisher", daemon=True)
                self.thread.start()
            self.pending.extend(alert_ids)
        self.wake.set()

    def _run(self) -> None:
        while True:
            self.wake.wait()
            time.sleep(PUBLISH_COALESCE_S)
            with self.lock:
                ids, self.pending = self.pending, []
                self.wake.clear()
                self.busy = bool(ids)
            if ids:
                try:
                    _publish(ids)
                    self.sent += 1
                finally:
                    with self.lock:
                        self.busy = False

    def flush(self, timeout: float = 2.0) -> None:
        """Wait until everything added so far was sent (tests; a graceful shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if not self.pending and not self.wake.is_set() and not self.busy:
                    return
            time.sleep(0.005)


publisher = _Publisher()


def enqueue_processing(alert_ids: list[int]) -> bool:
    """Hand stored alerts on: to Celery through the coalescing publisher thread; without workers (eager) to
    the in-process worker thread (``incidents.inline_worker``, after the response), or inline in ``sync`` mode."""
    if getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False):
        from incidents import inline_worker

        if inline_worker.threaded():
            inline_worker.worker.add_alerts(list(alert_ids))
            return True
        return _publish(alert_ids)
    publisher.add(list(alert_ids))
    return True


#
# Processing (claimed atomically: each alert is grouped once, whoever gets there first)
#

OUTBOX_GRACE_S = 10  # the sweeper leaves fresh rows to the task enqueued on commit
OUTBOX_BATCH = 1000
GROUPING_LOCK = 0x7263_6177  # PostgreSQL advisory lock key ("rcaw") held by process_alert's transaction


def process_alert(alert_id: int) -> int | None:
    """Claim the alert and group it; returns the incident id, or None when someone else had it.

    The claim and the grouping share one transaction: if grouping fails, the claim rolls back
    and the sweeper retries later; on PostgreSQL a concurrent claimer waits on the row lock and
    then sees ``processed_at`` set, so an alert is never grouped twice.
    """
    from incidents.grouping import group_alert

    with transaction.atomic():
        if (
            connection.vendor == "postgresql"
        ):  # one grouper at a time, or two workers open two incidents for one job
            with connection.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", [GROUPING_LOCK])
        claimed = Alert.objects.filter(pk=alert_id, processed_at=None).update(processed_at=timezone.now())
        if claimed != 1:
            return None
        alert = Alert.objects.get(pk=alert_id)
        outcome = group_alert(alert)
        incident_id = outcome.pk
        if getattr(outcome, "needs_evidence", False) and not _already_queued(incident_id, alert_id):
            # The page polls while "pending"; the sweeper re-queues collections left pending too long.
            Incident.objects.filter(pk=incident_id).update(collection_state="pending")
            transaction.on_commit(lambda: enqueue_evidence(incident_id))
    return incident_id


def _already_queued(incident_id: int, alert_id: int) -> bool:
    """A collection is queued and not started yet: it will see this alert, so a burst queues one, not one each.

    "pending" is also a new incident's state, so it counts only once an earlier alert of the incident was
    processed (and queued the collection). The incident row stays locked until this transaction commits,
    and a collection marks itself "running" (an update of that row) before it reads anything: it cannot
    start, and miss this alert, in between.
    """
    state = (
        Incident.objects.select_for_update()
        .filter(pk=incident_id)
        .values_list("collection_state", flat=True)
        .first()
    )
    return (
        state == "pending"
        and Alert.objects.filter(incident_id=incident_id, processed_at__isnull=False)
        .exclude(pk=alert_id)
        .exists()
    )


GROUPING_BATCH = 500  # alerts grouped per transaction: a storm commits every few hundred, not once per alert
# On SQLite a transaction holds the database's only writer, and the webhook's insert waits for it. Alerts on
# known subjects cost a few statements each (tens of milliseconds on a loaded 2-core machine), so a batch
# stops grouping them once its transaction has run this long, gives the rest back (unclaimed) and commits;
# the next transaction goes on with the same prefetched lookups. Alerts naming nothing known are opened in
# bulk before that, whatever their number (a few statements: bench/intake.py --inline-backlog).
SQLITE_TRANSACTION_S = 0.05


def process_alerts(alert_ids: list[int]) -> int:
    """Group several alerts, a batch per transaction; one failure does not stop the others.

    A batch that fails is rolled back whole and its alerts are processed one by one
    (``process_alert``, a transaction each): the alert that fails stays unprocessed for
    the sweeper, the others are grouped. On SQLite each transaction holds the process' write lock
    (``inline_worker.serialized``) on its own and lasts about ``SQLITE_TRANSACTION_S``, so a webhook that arrives
    meanwhile waits for one short transaction, not for the whole list.
    """
    from incidents import inline_worker

    done = 0
    budget = SQLITE_TRANSACTION_S if connection.vendor == "sqlite" else None
    for start in range(0, len(alert_ids), GROUPING_BATCH):
        pending = alert_ids[start : start + GROUPING_BATCH]
        lookups = None
        try:
            if budget is not None:  # read before the write lock: the webhook does not wait for these reads
                lookups = _prefetch(pending)
            while pending:
                with inline_worker.serialized():
                    grouped, rest, lookups = _group_batch(pending, budget, lookups)
                done += grouped
                pending = rest
        except Exception as exc:
            logger.warning(
                "grouping a batch of %d alerts failed (%s: %s); grouping them one by one",
                len(pending),
                type(exc).__name__,
                str(exc)[:200],
            )
            for alert_id in pending:
                try:
                    with inline_worker.serialized():
                        if process_alert(alert_id) is not None:
                            done += 1
                except Exception:
                    logger.exception("grouping alert %s failed; the outbox sweeper will retry it", alert_id)
    return done


def process_batch(alert_ids: list[int]) -> int:
    """Claim and group these alerts in one transaction (the grouping lock held once); returns how many.

    The same claim as ``process_alert`` (a row lock, then ``processed_at``), the same grouping, in the
    same order: new alerts whose labels name nothing known are grouped together in a few statements
    (``grouping.open_unresolved``), every other alert by ``group_alert`` with the batch's prefetched
    lookups. Each incident the batch touched queues one evidence collection on commit, however many of
    its alerts were in the batch (and none when one is already queued, see ``_already_queued``).
    """
    return _group_batch(alert_ids, None)[0]


def _prefetch(alert_ids: list[int]) -> grouping.Lookups:
    """What ``_group_batch`` prefetches for these alerts, read outside any transaction (WAL: no lock)."""
    from incidents import grouping

    alerts = [a for a in Alert.objects.filter(pk__in=alert_ids, processed_at=None) if not a.incident_id]
    lookups = grouping.Lookups.prefetch(alerts)
    subjects: list[tuple[Alert, list]] = []
    for a in alerts:
        res = grouping.resolve_subjects(a, lookups)
        if res.subjects:
            subjects.append((a, res.subjects))
    if subjects:
        starts = [a.starts_at for a, _ in subjects]
        lookups.prefetch_related([e for _, ents in subjects for e in ents], min(starts), max(starts))
    return lookups


def _group_batch(
    alert_ids: list[int], budget_s: float | None, lookups: grouping.Lookups | None = None
) -> tuple[int, list[int], grouping.Lookups | None]:
    """``process_batch``; with ``budget_s``, the alerts ``group_alert`` has not reached once the transaction has
    run that long, or once a webhook waits for the write lock, are unclaimed again and returned, in order (at
    least one is always grouped), with the lookups to group them with: prefetched for all of ``alert_ids``,
    so the next transaction reads none (``lookups`` given: prefetched for them already, by ``_prefetch`` or
    by the transaction before)."""
    from incidents import grouping, inline_worker

    deadline = time.monotonic() + budget_s if budget_s is not None else None
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", [GROUPING_LOCK])
        order = {pk: i for i, pk in enumerate(alert_ids)}
        alerts = sorted(
            Alert.objects.select_for_update().filter(pk__in=alert_ids, processed_at=None),
            key=lambda a: order[a.pk],
        )
        if not alerts:
            return 0, [], lookups
        Alert.objects.filter(pk__in=[a.pk for a in alerts]).update(processed_at=timezone.now())
        fresh = lookups is None
        if lookups is None:
            lookups = grouping.Lookups.prefetch([a for a in alerts if not a.incident_id])
        unresolved: list[tuple[Alert, grouping.Resolution]] = []
        subjects: dict[int, tuple[Alert, list]] = {}
        for a in alerts:
            if not a.incident_id:
                res = grouping.resolve_subjects(a, lookups)
                if res.subjects:
                    subjects[a.pk] = (a, res.subjects)
                else:
                    unresolved.append((a, res))
        if subjects and fresh:
            starts = [a.starts_at for a, _ in subjects.values()]
            lookups.prefetch_related(
                [e for _, ents in subjects.values() for e in ents], min(starts), max(starts)
            )
        grouped = grouping.open_unresolved(unresolved)  # the alerts it leaves are grouped below, in order
        touched: dict[int, bool] = {incident.pk: True for incident in grouped.values()}
        rest: list[int] = []
        one_by_one = 0
        for a in alerts:
            if a.pk in grouped:
                continue
            if rest or (
                deadline is not None
                and one_by_one
                and (time.monotonic() > deadline or inline_worker.webhook_waiting())
            ):
                rest.append(a.pk)
                continue
            outcome = grouping.group_alert(a, lookups=lookups)
            one_by_one += 1
            touched[outcome.pk] = touched.get(outcome.pk, False) or getattr(outcome, "needs_evidence", False)
        if rest:  # not grouped in this transaction: back in the outbox, for the caller's next transaction
            Alert.objects.filter(pk__in=rest).update(processed_at=None)
        left = set(rest)
        _queue_evidence(
            [pk for pk, needed in touched.items() if needed], [a.pk for a in alerts if a.pk not in left]
        )
    return len(alerts) - len(rest), rest, lookups


def _queue_evidence(incident_ids: list[int], alert_ids: list[int]) -> None:
    """One collection per incident on commit, unless one is queued already and not started (it sees these)."""
    if not incident_ids:
        return
    states = dict(
        Incident.objects.select_for_update().filter(pk__in=incident_ids).values_list("id", "collection_state")
    )
    pending = [pk for pk in incident_ids if states.get(pk) == "pending"]
    queued = set(
        Alert.objects.filter(incident_id__in=pending, processed_at__isnull=False)
        .exclude(pk__in=alert_ids)
        .values_list("incident_id", flat=True)
        .distinct()
    )
    wanted = [pk for pk in incident_ids if pk not in queued]
    if not wanted:
        return
    Incident.objects.filter(pk__in=wanted).exclude(collection_state="pending").update(
        collection_state="pending"
    )
    transaction.on_commit(lambda: [enqueue_evidence(pk) for pk in wanted])


def sweep_outbox(
    *, now: datetime | None = None, grace_s: int = OUTBOX_GRACE_S, limit: int = OUTBOX_BATCH
) -> int:
    """Process alerts still unprocessed ``grace_s`` after they arrived (the broker was down, a worker died)."""
    cutoff = (now or timezone.now()) - timedelta(seconds=grace_s)
    ids = list(
        Alert.objects.filter(processed_at__isnull=True, received_at__lte=cutoff)
        .order_by("received_at", "id")
        .values_list("id", flat=True)[:limit]
    )
    if ids:
        logger.info("outbox sweeper: %d unprocessed alerts", len(ids))
    return process_alerts(ids)


def enqueue_evidence(incident_id: int) -> bool:
    from incidents import inline_worker
    from incidents.tasks import collect_evidence

    if getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False) and inline_worker.threaded():
        inline_worker.worker.add_evidence(incident_id)  # after the grouping that queued it, outside its write lock
        return True
    try:
        collect_evidence.delay(incident_id)
    except Exception as exc:
        logger.warning("broker unavailable, evidence for incident %s not queued: %s", incident_id, exc)
        return False
    return True

"""Two workers collecting one incident's evidence at the same moment (a redelivered task next to the original,
or two triggers racing) on PostgreSQL, many writers at once.

Must hold: both runs end without an error, and the incident ends with exactly the observations one run writes
alone: same facts, none twice; a third run writes nothing."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection

from collectors.models import Cluster
from incidents.evidence import collect_evidence
from incidents.grouping import group_alert
from incidents.intake import ingest_alertmanager
from incidents.models import Alert, Observation
from tests.base import T0
from tests.incidents.fixtures.alertmanager import alert, payload, small_world

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
NOW = T0 + timedelta(minutes=30)


def facts(incident_id: int) -> list[tuple[str, str, str]]:
    qs = Observation.objects.filter(incident_id=incident_id).exclude(dedup_key__startswith="dx:")
    return sorted(qs.values_list("dedup_key", "kind", "source"))


def test_concurrent_collections_of_one_incident_write_what_one_writes() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL): SQLite has one writer, nothing runs concurrently")
    cluster = Cluster.objects.create(name="gpu-prod", scheduler="kai")
    small_world(cluster, T0)
    body = alert(
        "GPUJobPendingTooLong", {"cluster": "gpu-prod", "namespace": "vision", "job_name": "resnet-train"}, T0
    )
    ingest_alertmanager(payload([body]))
    incident = group_alert(Alert.objects.get(fingerprint=body["fingerprint"]))

    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            start.wait(timeout=10)
            collect_evidence(incident.pk, now=NOW)
        except BaseException as exc:  # reported below, with the other worker's outcome
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    together = facts(incident.pk)
    assert together and len({k for k, _, _ in together}) == len(together)
    assert collect_evidence(incident.pk, now=NOW) == 0  # nothing left to write

    Observation.objects.filter(incident_id=incident.pk).delete()
    collect_evidence(incident.pk, now=NOW)
    assert facts(incident.pk) == together  # exactly what one run alone writes

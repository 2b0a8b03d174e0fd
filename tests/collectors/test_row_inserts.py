"""collectors.storage.insert_rows: COPY on PostgreSQL, one prepared INSERT per row elsewhere; the ORM's rows either way."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from collectors.models import Change, Cluster, Entity
from collectors.storage import insert_rows

T0 = datetime(2026, 11, 29, 3, 12, tzinfo=UTC)

pytestmark = pytest.mark.django_db


def _gpu_point(**values: object) -> dict[str, object]:
    """A telemetry point's row, on a new cluster's GPU."""
    cluster = Cluster.objects.create(name="c1")
    gpu = Entity.objects.create(cluster=cluster, kind="gpu", name="GPU-1", first_seen=T0, last_seen=T0)
    return {
        "cluster_id": cluster.pk,
        "gpu_id": gpu.pk,
        "metric": "DCGM_FI_DEV_GPU_UTIL",
        "time": T0,
        **values,
    }


def test_defaults_nulls_and_json_values_are_stored_as_the_orm_would():
    cluster = Cluster.objects.create(name="c1")
    insert_rows(
        Entity, [{"cluster_id": cluster.pk, "kind": "pod", "name": "p\tq", "first_seen": T0, "last_seen": T0}]
    )
    e = Entity.objects.get()
    assert (e.namespace, e.name, e.uid) == (
        "",
        "p\tq",
        "",
    )  # defaults filled, tab survived COPY's text format
    insert_rows(
        Change,
        [
            {"cluster_id": cluster.pk, "entity_id": e.pk, "time": T0, "field": "created"},
            {
                "cluster_id": cluster.pk,
                "entity_id": e.pk,
                "time": T0,
                "field": "quota",
                "old": 8,
                "new": {"gpu": [16]},
            },
            {
                "cluster_id": cluster.pk,
                "entity_id": None,
                "time": T0,
                "field": "note",
                "new": "line\nbreak \\ ok",
            },
        ],
    )
    rows = {c.field: c for c in Change.objects.all()}
    assert rows["created"].old is None and rows["created"].new is None and rows["created"].source == "k8s"
    assert (rows["quota"].old, rows["quota"].new) == (8, {"gpu": [16]})
    assert rows["note"].entity_id is None and rows["note"].new == "line\nbreak \\ ok"
    assert Change.objects.filter(old__isnull=True).count() == 2  # SQL NULL, as the ORM stores None


def test_an_unknown_field_is_refused_by_name():
    cluster = Cluster.objects.create(name="c1")
    with pytest.raises(TypeError, match="colour"):
        insert_rows(
            Entity,
            [
                {
                    "cluster_id": cluster.pk,
                    "kind": "pod",
                    "name": "p",
                    "colour": "red",
                    "first_seen": T0,
                    "last_seen": T0,
                }
            ],
        )
    assert Entity.objects.count() == 0


def test_nothing_to_insert_is_a_no_op():
    assert insert_rows(Entity, []) == 0


def test_ignore_conflicts_keeps_the_stored_row_and_inserts_the_rest():
    from collectors.models import TelemetrySample

    row = _gpu_point()
    insert_rows(TelemetrySample, [{**row, "value": 1.0}])
    later = T0.replace(minute=17)
    insert_rows(
        TelemetrySample, [{**row, "value": 2.0}, {**row, "time": later, "value": 3.0}], ignore_conflicts=True
    )
    insert_rows(
        TelemetrySample, [{**row, "time": later, "value": 4.0}], ignore_conflicts=True
    )  # twice in one test
    assert sorted(TelemetrySample.objects.values_list("time", "value")) == [(T0, 1.0), (later, 3.0)]


def test_rows_that_need_not_wait_for_the_disk_are_stored_and_the_setting_ends_with_their_transaction():
    from django.db import connection

    from collectors.models import TelemetrySample

    row = _gpu_point(value=1.0)
    assert insert_rows(TelemetrySample, [row], wait_for_disk=False) == 1
    insert_rows(TelemetrySample, [{**row, "value": 2.0}], ignore_conflicts=True, wait_for_disk=False)
    assert list(TelemetrySample.objects.values_list("value", flat=True)) == [1.0]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone()[0] == "on"  # the test's transaction (a caller's) is not left without it


@pytest.mark.django_db(transaction=True)
def test_rows_that_need_not_wait_for_the_disk_commit_on_their_own_without_waiting():
    """On PostgreSQL, in their own transaction with ``synchronous_commit`` off, which ends with it; SQLite
    has no such setting: the rows are stored as any others."""
    from django.db import connection

    from collectors.models import TelemetrySample

    seen: list[str] = []
    row = _gpu_point(value=1.0)

    def spy(execute, sql, params, many, context):  # noqa: ANN001, ANN202
        if sql.startswith(("SET", "COPY", "INSERT")):
            seen.append(sql.split()[0] + (" " + sql.split()[2] if sql.startswith("SET") else ""))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(spy):
        insert_rows(TelemetrySample, [row], wait_for_disk=False)
    assert TelemetrySample.objects.count() == 1
    if connection.vendor != "postgresql":
        assert seen and not any(s.startswith("SET") for s in seen)  # inserted, nothing else asked
        return
    assert seen[0] == "SET synchronous_commit"  # in the rows' own transaction, before them
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"  # ended with that transaction


def test_a_deleted_gpu_or_cluster_takes_its_telemetry_points_with_it():
    """The samples' foreign keys have no database constraint (a deferred check per point at commit): Django's
    cascade keeps the references."""
    from collectors.models import TelemetrySample

    cluster = Cluster.objects.create(name="c1")
    gpus = [
        Entity.objects.create(cluster=cluster, kind="gpu", name=f"GPU-{i}", first_seen=T0, last_seen=T0)
        for i in range(2)
    ]
    row = {"cluster_id": cluster.pk, "metric": "DCGM_FI_DEV_GPU_UTIL", "time": T0, "value": 1.0}
    insert_rows(TelemetrySample, [{**row, "gpu_id": g.pk} for g in gpus])
    gpus[0].delete()
    assert list(TelemetrySample.objects.values_list("gpu_id", flat=True)) == [gpus[1].pk]
    cluster.delete()
    assert not TelemetrySample.objects.exists()

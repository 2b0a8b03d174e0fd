"""The two inventory stores (collectors.storage) over the same inputs: the same rows and the same answers.

The tuned store (``COPY`` on PostgreSQL, one prepared ``INSERT`` per row elsewhere, hand-written SQL for the
reads) is held to the plain ORM one, the reference, on both backends: the SQLite pass compares the prepared
``INSERT``, the PostgreSQL pass (``DATABASE_URL=postgres://…``) ``COPY``.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from collectors import storage
from collectors.models import Change, Cluster, Entity, EntityVersion, TelemetrySample
from collectors.storage import InventoryStore, OrmStore, TunedStore
from tests.collectors.factories import T0, build_small_cluster, crowd_node, deepen_history

pytestmark = pytest.mark.django_db

_HOT = ("phase", "node", "namespace", "queue", "project", "job", "pod", "gpus", "gpus_allocatable")


def _record_story(name: str, store: InventoryStore, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    """The factories' story (creations, changes dated by their objects, deletions, an entity that comes
    back), a crowded node and a deepened history, every row written by ``store``."""
    cluster = Cluster.objects.create(name=name)
    with monkeypatch.context() as patched:
        patched.setattr(storage, "inventory_store", lambda: store)
        build_small_cluster(cluster)
        crowd_node(cluster, "h100-04", 12, T0 + timedelta(hours=2))
        deepen_history(cluster, T0 + timedelta(hours=3), versions=3)
    return cluster


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _tables(cluster: Cluster) -> dict[str, list[str]]:
    """The cluster's entities, versions and changes, each row with its entity named rather than numbered."""
    key = {
        pk: (kind, ns, name)
        for pk, kind, ns, name in Entity.objects.filter(cluster=cluster).values_list(
            "pk", "kind", "namespace", "name"
        )
    }
    entities = Entity.objects.filter(cluster=cluster).values_list(
        "kind", "namespace", "name", "uid", "first_seen", "last_seen"
    )
    versions = EntityVersion.objects.filter(cluster=cluster).values_list(
        "entity_id",
        "kind",
        "valid_from",
        "valid_to",
        "deleted",
        "state",
        "state_hash",
        *_HOT,
    )
    changes = Change.objects.filter(cluster=cluster).values_list(
        "entity_id", "kind", "time", "field", "old", "new", "actor", "source"
    )
    return {
        "entities": sorted(_text(row) for row in entities),
        "versions": sorted(_text((key[row[0]], *row[1:])) for row in versions),
        "changes": sorted(_text((key.get(row[0]), *row[1:])) for row in changes),
    }


def test_the_tuned_store_records_a_history_row_for_row_as_the_orm_does(monkeypatch):
    reference = _tables(_record_story("orm", OrmStore(), monkeypatch))
    tuned = _tables(_record_story("tuned", TunedStore(), monkeypatch))
    assert all(reference[table] for table in reference), "the story records rows of every table"
    for table in reference:
        assert tuned[table] == reference[table], table


def test_the_tuned_store_inserts_and_skips_conflicting_rows_as_the_orm_does():
    stored = {}
    for store in (OrmStore(), TunedStore()):
        cluster = Cluster.objects.create(name=store.name)
        gpu = Entity.objects.create(cluster=cluster, kind="gpu", name="GPU-1", first_seen=T0, last_seen=T0)
        row = {"cluster_id": cluster.pk, "gpu_id": gpu.pk, "metric": "DCGM_FI_DEV_GPU_UTIL", "value": 1.0}
        points = [{**row, "time": T0 + timedelta(minutes=5 * i), "value": float(i)} for i in range(4)]
        assert store.insert_rows(TelemetrySample, points, wait_for_disk=False) == 4
        again = [{**p, "value": -1.0} for p in points[2:]] + [{**row, "time": T0 + timedelta(hours=1)}]
        store.insert_rows(TelemetrySample, again, ignore_conflicts=True)
        stored[store.name] = sorted(
            TelemetrySample.objects.filter(cluster=cluster).values_list("metric", "time", "value")
        )
    assert stored["tuned"] == stored["orm"] and len(stored["orm"]) == 5
    assert -1.0 not in [value for _, _, value in stored["orm"]]  # a stored point is kept


def _read(store: InventoryStore, cluster: Cluster, kinds: list[str], t: datetime, **hot: str) -> list[str]:
    rows = []
    for v in store.versions_at(cluster, kinds, t, **hot):
        e = v.entity
        rows.append(
            _text(
                (
                    v.pk,
                    v.valid_from,
                    v.valid_to,
                    v.state,
                    *(getattr(v, col) for col in _HOT),
                    e.pk,
                    e.kind,
                    e.namespace,
                    e.name,
                    e.uid,  # loaded on access by the tuned store
                    e.first_seen,
                    e.cluster.name,
                )
            )
        )
    return sorted(rows)


@pytest.mark.parametrize(
    "kinds, hot",
    [
        (["pod"], {"node": "h100-01"}),
        (["gpu", "pod"], {"node": "h100-02"}),
        (["gpu"], {"pod": "vision/resnet-train-0"}),
        (["pod"], {"namespace": "vision", "job": "resnet-train"}),
        (["job"], {"queue": "vision"}),
        (["job"], {}),
        (["node", "queue", "project"], {}),
        (["pod"], {"phase": "Pending"}),
    ],
)
def test_the_tuned_store_reads_the_versions_at_t_the_orm_reads(monkeypatch, kinds, hot):
    cluster = _record_story("c1", storage.inventory_store(), monkeypatch)
    Cluster.objects.create(name="c2")  # another cluster's rows are never read
    times = [T0 - timedelta(hours=1), *(T0 + timedelta(minutes=m) for m in (0, 5, 30, 61, 125, 181, 240))]
    seen = 0
    for t in times:
        reference = _read(OrmStore(), cluster, kinds, t, **hot)
        assert _read(TunedStore(), cluster, kinds, t, **hot) == reference, t
        seen += len(reference)
    assert seen, "some versions are valid at some of these times"


@pytest.mark.parametrize("store", [OrmStore(), TunedStore()], ids=lambda s: s.name)
def test_both_stores_refuse_a_filter_on_a_column_that_is_not_hot(store):
    cluster = Cluster.objects.create(name="c1")
    with pytest.raises(ValueError, match="not a hot column of EntityVersion: state"):
        store.versions_at(cluster, ["job"], T0, state="x")


def test_the_tuned_store_is_chosen_unless_the_reference_is_asked_for(settings):
    assert isinstance(storage.inventory_store(), TunedStore)
    settings.RCAWEB_INVENTORY_STORE = "orm"
    assert isinstance(storage.inventory_store(), OrmStore)
    settings.RCAWEB_INVENTORY_STORE = "fast"
    with pytest.raises(ValueError, match="orm, tuned"):
        storage.inventory_store()

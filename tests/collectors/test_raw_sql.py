"""collectors.storage.raw_sql: hand-written reads give the same models and values as the ORM, on both backends."""

from __future__ import annotations

from datetime import timedelta

import pytest

from collectors import changes_around, collection_errors, queries
from collectors.models import Change, Cluster, EntityVersion
from collectors.storage import raw_sql
from tests.collectors.factories import T0, build_small_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def small():
    return build_small_cluster(Cluster.objects.create(name="gpu-a"))


@pytest.mark.parametrize("kind", ["node", "gpu", "pod", "job"])
def test_a_version_read_by_sql_equals_the_orm_one(small, kind):
    t = T0 + timedelta(minutes=30)
    orm = EntityVersion.objects.as_of(t).filter(cluster=small.cluster, kind=kind).order_by("entity_id")[0]
    row = raw_sql.fetch(f"SELECT {raw_sql.EV_SELECT} FROM {raw_sql.EV} v WHERE v.id = %s", [orm.pk])[0]
    got = raw_sql.version(row)
    assert got.pk == orm.pk and got._state.adding is False
    for f in EntityVersion._meta.concrete_fields:
        assert getattr(got, f.attname) == getattr(orm, f.attname), f.attname
    assert got.valid_from.utcoffset() == timedelta(0)  # aware UTC on SQLite too


def test_change_values_keep_json_types_and_sql_null(small):
    e = small.entity("node", "h100-01")
    for old, new in [(None, {"a": [1, 2.5, "x"]}), ("it's <b>", True), (0, None)]:
        Change.objects.create(
            cluster=small.cluster, entity=e, kind="node", time=T0, field="f", old=old, new=new
        )
    orm = list(Change.objects.filter(entity=e, field="f").order_by("id"))
    rows = raw_sql.fetch(
        f"SELECT {raw_sql.CHANGE_SELECT} FROM {raw_sql.CHANGE} ch WHERE ch.field = 'f' ORDER BY ch.id", []
    )
    got = [raw_sql.change(r) for r in rows]
    assert [(c.old, c.new, c.time) for c in got] == [(c.old, c.new, c.time) for c in orm]


def test_json_that_orjson_refuses_falls_back_to_the_json_module():
    assert raw_sql.load_json('{"x": NaN}')["x"] != raw_sql.load_json('{"x": NaN}')["x"]  # nan
    assert raw_sql.load_json("[18446744073709551616]") == [2**64]
    assert raw_sql.load_json(None) is None and raw_sql.load_json({"a": 1}) == {"a": 1}


def test_time_value_parses_sqlite_aggregates():
    got = raw_sql.time_value("2026-11-29 03:12:00.5")
    assert got.utcoffset() == timedelta(0) and got.microsecond == 500000
    assert raw_sql.time_value(None) is None


def test_any_hot_column_other_than_the_indexed_ones_is_refused(small):
    with pytest.raises(ValueError, match="not a hot column of EntityVersion: state"):
        queries.jobs_where(small.cluster, T0, state="x")


def test_entity_at_says_absent_between_versions_and_never_recorded(small):
    node, version = queries.entity_at("gpu-a", "node", "h100-01", "", T0 - timedelta(days=1))
    assert node is not None and version is None and node.cluster == small.cluster
    assert queries.entity_at("gpu-a", "node", "no-such-node", "", T0) == (None, None)
    assert queries.entity_at("no-such-cluster", "node", "h100-01", "", T0) == (None, None)


def test_a_busy_window_shows_the_changes_nearest_t_and_exact_neighbours(small):
    node = small.entity("node", "h100-01")
    related = queries.related_entities(small.cluster, [node])
    t = T0 + timedelta(hours=5)
    rows = [
        Change(cluster=small.cluster, entity=node, kind="node", time=t - timedelta(seconds=s), field=f"b{s}")
        for s in range(1, 31)
    ] + [
        Change(cluster=small.cluster, entity=node, kind="node", time=t + timedelta(seconds=s), field=f"a{s}")
        for s in range(1, 4)
    ]
    Change.objects.bulk_create(rows)
    got = changes_around.changes_around(small.cluster, related, t, timedelta(hours=1), limit=10)
    assert [c.field for c in got.lines] == [f"b{s}" for s in range(10, 0, -1)] + ["a1", "a2", "a3"]
    assert (got.prev, got.next, got.limited) == (t - timedelta(seconds=1), t + timedelta(seconds=1), True)
    assert got.lines[0].entity.name == "h100-01"


def test_neighbours_beyond_an_empty_window_come_from_the_whole_history(small):
    node = small.entity("node", "h100-01")
    related = queries.related_entities(small.cluster, [node])
    t = T0 + timedelta(days=3)
    far_before, far_after = t - timedelta(days=1), t + timedelta(days=1)
    Change.objects.bulk_create(
        [
            Change(cluster=small.cluster, entity=node, kind="node", time=far_before, field="x"),
            Change(cluster=small.cluster, entity=node, kind="node", time=far_after, field="y"),
        ]
    )
    got = changes_around.changes_around(small.cluster, related, t, timedelta(hours=1))
    assert (got.lines, got.prev, got.next, got.limited) == ([], far_before, far_after, False)


def test_the_entity_page_query_reads_the_entity_and_its_clusters_collection_errors(small):
    from collectors.models import SourceRun

    t = T0 + timedelta(minutes=30)
    other = Cluster.objects.create(name="gpu-b")
    for cluster, source, minute, ok in [
        (small.cluster, "prometheus", 10, False),
        (small.cluster, "prometheus", 20, False),
        (small.cluster, "k8s", 25, False),
        (small.cluster, "k8s", 26, True),  # a success is no trouble
        (small.cluster, "kai", 45, False),  # after t
        (other, "k8s", 15, False),  # another cluster's
    ]:
        SourceRun.objects.create(
            cluster=cluster,
            source=source,
            call=f"{source} call",
            time=T0 + timedelta(minutes=minute),
            ok=ok,
            error="boom",
        )
    entity, version, troubles = queries.entity_page_at("gpu-a", "node", "h100-01", "", t, T0)
    assert (entity, version) == queries.entity_at("gpu-a", "node", "h100-01", "", t)
    assert version is not None and version.valid_from.utcoffset() == timedelta(0)
    assert troubles == collection_errors.collection_errors(small.cluster, T0, t)
    assert [(tr.source, tr.count, tr.first, tr.last) for tr in troubles] == [
        ("prometheus", 2, T0 + timedelta(minutes=10), T0 + timedelta(minutes=20)),
        ("k8s", 1, T0 + timedelta(minutes=25), T0 + timedelta(minutes=25)),
    ]
    assert queries.entity_page_at("gpu-a", "node", "no-such-node", "", t, T0) == (None, None, [])


@pytest.mark.parametrize("model", [EntityVersion, Change, Cluster])
def test_an_instance_built_without_init_is_what_from_db_builds(small, model):
    """``raw_sql.instance`` skips ``Model.__init__`` (docs/decisions.md): it must leave what ``from_db`` leaves,
    with the fields it was not given deferred, and save and refresh like any loaded row."""
    orm = model.objects.order_by("pk").first()
    fields = [f.attname for f in model._meta.concrete_fields]
    some = fields[: max(2, len(fields) // 2)]  # the primary key and a few more; the rest stay deferred
    for attnames in (fields, some):
        values = [getattr(orm, a) for a in attnames]
        built = raw_sql.instance(model, attnames, values)
        loaded = model.from_db("default", list(attnames), list(values))
        assert type(built) is model
        assert {k: v for k, v in vars(built).items() if k != "_state"} == {
            k: v for k, v in vars(loaded).items() if k != "_state"
        }
        assert (
            (built._state.adding, built._state.db)
            == (loaded._state.adding, loaded._state.db)
            == (False, "default")
        )
        assert built.get_deferred_fields() == loaded.get_deferred_fields() == set(fields) - set(attnames)
        assert built == orm and hash(built) == hash(orm)
    deferred = raw_sql.instance(model, some, [getattr(orm, a) for a in some])
    for a in set(fields) - set(some):
        assert getattr(deferred, a) == getattr(orm, a), a  # a deferred field loads on access


def test_a_model_with_init_receivers_still_goes_through_from_db(small):
    from django.db.models.signals import post_init

    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance)

    post_init.connect(receiver, sender=Cluster)
    try:
        built = raw_sql.instance(Cluster, ["id", "name"], [small.cluster.pk, small.cluster.name])
    finally:
        post_init.disconnect(receiver, sender=Cluster)
    assert seen == [built]

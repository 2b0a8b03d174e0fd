from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.test import TestCase
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase as HypothesisTestCase

from collectors import inventory, queries
from collectors.inventory import Observed
from collectors.models import Change, Cluster, Entity, EntityVersion
from collectors.observed import diff_states

T0 = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)


def node(name: str, **state) -> Observed:
    return Observed(
        kind="node", name=name, state={"ready": True, "gpus": 8, **state}, hot={"gpus": state.get("gpus", 8)}
    )


class RecordStatesTest(TestCase):
    def setUp(self):
        self.cluster = Cluster.objects.create(name="c1")

    def test_it_writes_nothing_for_an_unchanged_state(self):
        inventory.record_states(self.cluster, [node("n1")], T0)
        before = (EntityVersion.objects.count(), Change.objects.count(), Entity.objects.count())
        result = inventory.record_states(self.cluster, [node("n1")], T0 + timedelta(minutes=1))
        assert result.opened == 0 and result.changes == 0
        assert (EntityVersion.objects.count(), Change.objects.count(), Entity.objects.count()) == before

    def test_a_changed_field_makes_exactly_one_change_naming_it(self):
        inventory.record_states(self.cluster, [node("n1")], T0)
        Change.objects.all().delete()
        inventory.record_states(self.cluster, [node("n1", ready=False)], T0 + timedelta(minutes=5))
        ch = Change.objects.get()
        assert (ch.field, ch.old, ch.new) == ("ready", True, False)
        v1, v2 = EntityVersion.objects.order_by("valid_from")
        assert v1.valid_to == v2.valid_from == T0 + timedelta(minutes=5)
        assert v2.valid_to is None

    def test_deletion_closes_the_last_version(self):
        inventory.record_states(self.cluster, [node("n1"), node("n2")], T0)
        res = inventory.record_absent(self.cluster, "node", [("", "n1")], T0 + timedelta(minutes=1))
        assert res.closed == 1
        gone = Entity.objects.get(name="n2")
        assert inventory.version_of(gone, T0 + timedelta(minutes=2)) is None
        assert inventory.version_of(gone, T0) is not None
        assert Change.objects.filter(entity=gone, field="deleted").count() == 1

    def test_it_refuses_to_rewrite_history(self):
        inventory.record_states(self.cluster, [node("n1", ready=False)], T0 + timedelta(hours=1))
        res = inventory.record_states(self.cluster, [node("n1", ready=True)], T0)
        assert res.opened == 0
        assert EntityVersion.objects.count() == 1

    def test_as_of_lists_many_entities_in_one_query(self):
        inventory.record_states(self.cluster, [node(f"n{i}") for i in range(20)], T0)
        with self.assertNumQueries(1):
            rows = list(inventory.as_of(self.cluster, "node", T0 + timedelta(seconds=1)))
        assert len(rows) == 20 and rows[0].entity.cluster.name == "c1"

    def test_batched_recording_commits_each_batch_and_writes_the_same_rows(self):
        nodes = [node(f"n{i:03d}", gpus=i % 8) for i in range(1203)]
        result = inventory.record_states(self.cluster, nodes, T0, batch=500)
        assert (result.created, result.opened, result.changes) == (1203, 1203, 1203)
        assert EntityVersion.objects.filter(valid_to__isnull=True).count() == 1203
        changed = [node(f"n{i:03d}", gpus=i % 8, ready=i % 2 == 0) for i in range(1203)]
        result = inventory.record_states(self.cluster, changed, T0 + timedelta(minutes=1), batch=500)
        assert (result.created, result.opened, result.changes) == (0, 601, 601)  # the 601 odd ones went NotReady
        assert EntityVersion.objects.filter(valid_to__isnull=True).count() == 1203

    def test_an_old_style_digest_is_refreshed_without_opening_a_version(self):
        inventory.record_states(self.cluster, [node("n1")], T0)
        EntityVersion.objects.update(state_hash="computed-another-way")
        result = inventory.record_states(self.cluster, [node("n1")], T0 + timedelta(minutes=1))
        assert result.opened == 0 and result.changes == 0
        v = EntityVersion.objects.get()
        assert v.state_hash == inventory.state_hash(node("n1").state) and v.valid_to is None

    def test_an_object_that_comes_back_reuses_its_entity(self):
        inventory.record_states(self.cluster, [node("n1")], T0)
        inventory.record_absent(self.cluster, "node", [], T0 + timedelta(minutes=1))
        result = inventory.record_states(self.cluster, [node("n1")], T0 + timedelta(minutes=2))
        assert (result.created, result.opened) == (0, 1)
        assert Entity.objects.count() == 1
        assert [ch.field for ch in Change.objects.order_by("time")] == ["created", "deleted", "created"]

    def test_values_round_trip_through_the_bulk_path(self):
        tricky = {"ready": True, "msg": 'tab\there "quoted" \\ back\nslash', "uni": "GPU — H100 µs", "none": None,
                  "nested": {"list": [1, 2.5, None, {"k": "v"}]}}
        inventory.record_states(self.cluster, [Observed(kind="node", name="n1", state=tricky)], T0)
        assert EntityVersion.objects.get().state == tricky
        inventory.record_states(
            self.cluster, [Observed(kind="node", name="n1", state={**tricky, "none": "set"})], T0 + timedelta(1)
        )
        ch = Change.objects.get(field="none")
        assert (ch.old, ch.new) == (None, "set")


def test_diff_states_names_nested_fields():
    assert diff_states({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}, "d": 4}) == [
        ("a.c", 2, 3),
        ("d", None, 4),
    ]


# Random histories: a list of (minute offset, state value or None for "absent") steps.
steps = st.lists(
    st.tuples(st.integers(min_value=1, max_value=30), st.one_of(st.none(), st.integers(0, 3))),
    min_size=1,
    max_size=12,
)


class AsOfPropertyTest(HypothesisTestCase):
    @settings(max_examples=40, deadline=None)
    @given(history=steps, probes=st.lists(st.integers(min_value=-5, max_value=400), min_size=1, max_size=8))
    def test_as_of_agrees_with_brute_force(self, history, probes):
        cluster = Cluster.objects.create(name="prop")
        t = T0
        timeline: list[tuple[datetime, int | None]] = []
        for gap, value in history:
            t = t + timedelta(minutes=gap)
            if value is None:
                inventory.record_absent(cluster, "node", [], t)
            else:
                inventory.record_states(cluster, [node("n", v=value)], t)
            timeline.append((t, value))

        def brute(at: datetime) -> int | None:
            current = None
            for when, value in timeline:
                if when <= at:
                    current = value
            return current

        for p in probes:
            at = T0 + timedelta(minutes=p)
            got = [v.state["v"] for v in inventory.as_of(cluster, "node", at)]
            expected = brute(at)
            assert got == ([] if expected is None else [expected]), (at, timeline)
            # the entity page's reads (hand-written SQL, one step back on the entity index) agree too
            entity, version = queries.entity_at("prop", "node", "n", "", at)
            assert (None if version is None else version.state["v"]) == expected, (at, timeline)
            if entity is None:  # only when no state was ever recorded
                assert all(value is None for _, value in timeline)
                continue
            alone = queries.version_at(entity, at)
            assert (None if alone is None else alone.pk) == (None if version is None else version.pk)

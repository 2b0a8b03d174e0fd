"""States are dated by the objects' own transition times, within the interval since the previous listing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.test import TestCase

from collectors import inventory
from collectors.inventory import Observed
from collectors.mapping.transitions import latest_transition
from collectors.models import Change, Cluster, Entity, EntityVersion

T0 = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_latest_transition_reads_creation_conditions_containers_and_spec_writers():
    pod = {
        "metadata": {
            "creationTimestamp": iso(T0),
            "managedFields": [
                {"manager": "kubectl", "operation": "Update", "time": iso(T0 + timedelta(minutes=1))},
                # the kubelet's status writes tick with heartbeats: never a date
                {"manager": "kubelet", "subresource": "status", "time": iso(T0 + timedelta(hours=5))},
            ],
        },
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": iso(T0 + timedelta(minutes=2)),
                },
                {
                    "type": "Ready",
                    "lastProbeTime": None,
                    "lastTransitionTime": iso(T0 + timedelta(minutes=3)),
                },
            ],
            "containerStatuses": [
                {
                    "state": {"running": {"startedAt": iso(T0 + timedelta(minutes=4))}},
                    "lastState": {"terminated": {"finishedAt": iso(T0 + timedelta(minutes=3, seconds=30))}},
                }
            ],
        },
    }
    assert latest_transition(pod) == T0 + timedelta(minutes=4)
    assert latest_transition({"metadata": {"creationTimestamp": iso(T0)}}, None) == T0
    podgroup = {"status": {"schedulingConditions": [{"lastTransitionTime": iso(T0 + timedelta(minutes=9))}]}}
    assert latest_transition({"metadata": {"creationTimestamp": iso(T0)}}, podgroup) == T0 + timedelta(
        minutes=9
    )


def test_latest_transition_reads_go_nanoseconds_and_offsets():
    assert latest_transition(
        {"metadata": {"creationTimestamp": "2026-11-29T00:04:00.123456789Z"}}
    ) == T0 + timedelta(minutes=4, microseconds=123456)
    assert latest_transition(
        {"metadata": {"creationTimestamp": "2026-11-29T01:04:00+01:00"}}
    ) == T0 + timedelta(minutes=4)


def test_latest_transition_without_times_or_with_garbage_is_none():
    assert latest_transition({}) is None
    assert latest_transition({"metadata": {"creationTimestamp": "yesterday"}}) is None
    assert latest_transition({"metadata": None, "status": "Running"}) is None


def job(name: str, since: datetime | None, **state) -> Observed:
    return Observed(kind="job", name=name, namespace="ns", state={"phase": "Pending", **state}, since=since)


class DatedRecordTest(TestCase):
    def setUp(self):
        self.cluster = Cluster.objects.create(name="c1")

    def test_a_new_object_is_dated_at_its_creation_after_the_previous_listing(self):
        created = T0 + timedelta(minutes=3)
        inventory.record_states(
            self.cluster, [job("j1", created)], T0 + timedelta(minutes=15), listed_before=T0
        )
        v = EntityVersion.objects.get()
        assert v.valid_from == created
        assert Change.objects.get(field="created").time == created
        assert Entity.objects.get().first_seen == created

    def test_a_change_is_dated_at_its_transition_and_closes_the_old_version_then(self):
        inventory.record_states(self.cluster, [job("j1", T0)], T0)
        turned = T0 + timedelta(minutes=7)
        inventory.record_states(
            self.cluster,
            [job("j1", turned, phase="Running")],
            T0 + timedelta(minutes=15),
            listed_before=T0 + timedelta(minutes=5),
        )
        old, new = EntityVersion.objects.order_by("valid_from")
        assert old.valid_to == new.valid_from == turned
        assert Change.objects.get(field="phase").time == turned

    def test_a_time_outside_the_interval_since_the_previous_listing_is_not_used(self):
        at = T0 + timedelta(minutes=15)
        # before the previous listing: the object would have been seen then in this state
        inventory.record_states(self.cluster, [job("old", T0 - timedelta(hours=1))], at, listed_before=T0)
        # after the sweep's own time: a clock ahead of ours
        inventory.record_states(self.cluster, [job("ahead", at + timedelta(minutes=1))], at, listed_before=T0)
        # no previous listing (the first sweep): nothing bounds it
        inventory.record_states(self.cluster, [job("first", T0 + timedelta(minutes=1))], at)
        assert set(EntityVersion.objects.values_list("valid_from", flat=True)) == {at}

    def test_a_change_is_never_dated_before_the_open_version_began(self):
        inventory.record_states(self.cluster, [job("j1", None)], T0 + timedelta(minutes=10))
        inventory.record_states(
            self.cluster,
            [job("j1", T0 + timedelta(minutes=8), phase="Running")],
            T0 + timedelta(minutes=20),
            listed_before=T0 + timedelta(minutes=5),
        )
        old, new = EntityVersion.objects.order_by("valid_from")
        assert old.valid_to == new.valid_from == T0 + timedelta(minutes=20)

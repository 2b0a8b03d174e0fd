"""The fleet snapshot: read once per sweep for large inventories, read again as soon as the inventory moves."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

from collectors.inventory import Observed, record_absent, record_states
from collectors.models import SourceRun
from incidents import snapshot
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import small_world

T = T0 + timedelta(minutes=5)


class SnapshotTests(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        small_world(self.cluster, T0)
        snapshot.forget()
        self.addCleanup(snapshot.forget)  # a rolled-back test database reuses ids: never leak an entry

    def test_it_reads_a_small_inventory_every_time(self) -> None:
        self.assertIsNot(snapshot.fleet_rows(self.cluster, T), snapshot.fleet_rows(self.cluster, T))

    def test_it_shares_a_large_inventory_until_a_sweep_moves_it(self) -> None:
        with mock.patch.object(snapshot, "MIN_CACHED_ROWS", 1):
            first = snapshot.fleet_rows(self.cluster, T)
            self.assertIs(snapshot.fleet_rows(self.cluster, T), first)
            # another t with no change between: the same versions are valid, the same read serves
            self.assertIs(snapshot.fleet_rows(self.cluster, T + timedelta(seconds=1)), first)
            # before the inventory's first change (small_world records it at T0 - 2 h): nothing is valid then
            self.assertIsNot(snapshot.fleet_rows(self.cluster, T0 - timedelta(hours=3)), first)
            again = snapshot.fleet_rows(self.cluster, T)
            # a sweep that moved nothing (an events sweep, an unchanged inventory) keeps the rows
            SourceRun.objects.create(cluster=self.cluster, source="k8s", call="events", time=T, ok=True)
            self.assertIs(snapshot.fleet_rows(self.cluster, T), again)
            # a deletion after T closes a version valid at T: its row's valid_to moves, the read is redone
            queues = {name: until for _, name, _, _, _, until in again["queue"]}
            gone = next(name for name, until in queues.items() if until is None)
            keep = [("", name) for name in queues if name != gone]
            record_absent(self.cluster, "queue", keep, T + timedelta(minutes=1))
            moved = snapshot.fleet_rows(self.cluster, T)
            self.assertIsNot(moved, again)
            self.assertEqual(
                {name: until for _, name, _, _, _, until in moved["queue"]},
                {**queues, gone: T + timedelta(minutes=1)},
            )
            before = snapshot.fleet_rows(self.cluster, T)
            record_states(
                self.cluster, [Observed("queue", "late", {"quota_gpus": 4})], T - timedelta(minutes=1)
            )
            after = snapshot.fleet_rows(self.cluster, T)
        self.assertIsNot(after, before)
        self.assertIn("late", [name for _, name, *_ in after["queue"]])
        self.assertNotIn("late", [name for _, name, *_ in before["queue"]])

    def test_a_shared_read_costs_only_the_three_queries_of_its_key(self) -> None:
        """What the cache saves each diagnosis after the first (bench/snapshot.py: 275 ms of CPU a fleet of
        1,000 nodes and 20,000 pods, against under 1 ms for the key's three aggregates)."""
        with self.assertNumQueries(len(snapshot.KINDS) + 6):  # the key, every kind, jobs, pods, pod extras
            first = snapshot.fleet_rows(self.cluster, T)
        with mock.patch.object(snapshot, "MIN_CACHED_ROWS", 1):
            snapshot.fleet_rows(self.cluster, T)  # large enough now: kept
            with self.assertNumQueries(3):
                shared = snapshot.fleet_rows(self.cluster, T)
        self.assertEqual(shared, first)

    def test_it_keeps_hot_columns_only_for_pods(self) -> None:
        pods = snapshot.fleet_rows(self.cluster, T)["pod"]
        self.assertTrue(pods)
        _, _, _, state, _ = pods[0]
        self.assertEqual(
            set(state),
            {"phase", "node", "job", "queue", "project", "gpus", "started", "created", "priority_class"},
        )

    def test_a_waiting_pods_spec_is_read_as_the_fit_reads_it(self) -> None:
        """The what-if page and the panel weigh a waiting job by its pods' spec (tolerations Kubernetes adds to
        GPU pods, a selector, a share); a running pod's spec is not read."""
        toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        spec = {"tolerations": [toleration], "node_selector": {"nodepool": "h100"}, "gpu_share": {"fraction": 0.5}}
        hot = {"job": "train", "queue": "vision", "project": "vision", "gpus": 0}
        record_states(
            self.cluster,
            [
                Observed("pod", "train-0", {**spec, "phase": "Pending"}, "vision", hot={**hot, "phase": "Pending"}),
                Observed("pod", "run-0", {**spec, "phase": "Running"}, "vision", hot={**hot, "phase": "Running"}),
            ],
            T,
        )
        pods = {name: state for _, name, _, state, _ in snapshot.fleet_rows(self.cluster, T)["pod"]}
        assert pods["train-0"]["tolerations"] == [toleration]
        assert pods["train-0"]["node_selector"] == {"nodepool": "h100"}
        assert pods["train-0"]["gpu_share"] == {"fraction": 0.5}
        assert "tolerations" not in pods["run-0"]

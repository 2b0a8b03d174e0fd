"""Watch-based collection against the simulator over real HTTP: list once, then watch with bookmarks,
relist on 410, nothing lost between the list and the watch, and an unchanged cluster writes nothing.

The proof that the watch recorded the truth is a sweep run afterwards: it lists everything again and
compares, so it must find nothing to write (no version opened, none closed, no entity created)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import orjson
import pytest

from collectors.models import Change, EntityVersion, KubeEvent, SourceRun
from collectors.sources import prometheus
from collectors.sweep import sweep_cluster
from collectors.sweep.events import sweep_events
from collectors.sweep.kept_listings import CachedKube, Kept, keepable
from collectors.sweep.watch import EVENTS, WatchSession
from collectors.sweep.watch_lease import Lease
from tests.collectors.simhelpers import register, served, small_world

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["kai", "kueue"])
def sim(request) -> Iterator:
    world = small_world(request.param)
    with served(world) as server:
        server.advance_to(world.start + timedelta(minutes=25))
        register(server)
        yield server


def clock(sim) -> Callable[[], datetime]:
    """The simulator's time plus the wall time since: every record is later than the one before, so a
    state written at the same moment as an older one (which record_states refuses) cannot hide a difference."""
    t0 = time.monotonic()
    return lambda: sim.world.now + timedelta(seconds=time.monotonic() - t0)


def session(sim, **kw) -> WatchSession:
    opts: dict[str, Any] = {
        "clock": clock(sim),
        "apply_every_s": 0,
        "watch_timeout_s": 5,
        "lease_s": 60,
        "gpu_every_s": 3600,
    }
    opts.update(kw)
    return WatchSession("gpu-prod", **opts)


def rows() -> tuple[int, int]:
    return EntityVersion.objects.count(), Change.objects.count()


def steps_until(s: WatchSession, done: Callable[[], bool], limit_s: float = 15.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        s.step(timeout=0.2)
        if done():
            return
    raise AssertionError(f"not reached in {limit_s} s: {s.stats}")


def behind(s: WatchSession, sim) -> dict[str, tuple[int, int]]:
    """The watched listings whose resourceVersion is older than the simulator's last change of their
    resource (``list queues.scheduling.run.ai/v2`` watches the store's ``queues``): call -> (kept, last)."""
    last: dict[str, int] = {}
    with sim.store.cond:
        for rv, resource, *_rest in sim.store.history:
            last[resource] = rv
    out = {}
    for call, rv in s.kept.rv.items():
        resource = call.removeprefix("list ").split(".", 1)[0].split("/", 1)[0]
        if resource == "events" or resource not in last:
            continue
        kept = int(rv or 0)
        if kept < last[resource]:
            out[call] = (kept, last[resource])
    return out


def settle(s: WatchSession, sim, limit_s: float = 60.0) -> None:
    """Step until every watch has delivered the simulator's last change of its resource and it is applied
    (no wall-clock guess about when a burst is over: the resourceVersions say it)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        s.step(timeout=0.2)
        if s.stats.applies and not s._dirty and not s._relist and not behind(s, sim):
            s.step(timeout=0.2)  # what the last step queued is applied
            if not s._dirty:
                return
    raise AssertionError(f"not settled in {limit_s} s: {s.stats}; behind: {behind(s, sim)}")


def assert_a_sweep_finds_nothing_to_write(s: WatchSession) -> None:
    last = EntityVersion.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    summary = sweep_cluster("gpu-prod", s.clock() + timedelta(seconds=1))
    assert not summary.errors
    opened = [
        (v.entity.kind, v.entity.name, _state_diff(v))
        for v in EntityVersion.objects.filter(pk__gt=last).select_related("entity")
    ]
    assert (summary.created, summary.opened, summary.closed) == (0, 0, 0), (summary.as_dict(), opened)


def _state_diff(v: EntityVersion) -> dict:
    """What the sweep found different from the version the watch recorded before it."""
    before = EntityVersion.objects.filter(entity=v.entity, pk__lt=v.pk).order_by("-pk").first()
    if before is None:
        return {"new": True}
    keys = set(before.state) | set(v.state)
    return {
        k: (before.state.get(k), v.state.get(k))
        for k in sorted(keys)
        if before.state.get(k) != v.state.get(k)
    }


def test_the_watch_records_what_changed_and_a_quiet_cluster_writes_nothing(sim) -> None:
    with session(sim) as s:
        assert s.start()
        first = rows()
        assert first[0] > 0 and s.stats.relists == 1
        for _ in range(5):  # nothing changes: no event, no apply, no row
            s.step(timeout=0.2)
        s.poll_gpus()  # nor from the GPUs: the answers the relist recorded, not even mapped again
        assert rows() == first and s.stats.events == 0 and s.stats.applies == 0, s.stats
        assert s.stats.gpu_polls == 1 and s.stats.gpu_polls_unchanged == 1, s.stats

        before_rv = dict(s.kept.rv)
        sim.advance_to(sim.world.now + timedelta(minutes=40))  # jobs start, finish, a quota changes
        settle(s, sim)
        assert s.stats.events > 0 and rows() != first, s.stats
        assert s.kept.rv["list pods"] != before_rv["list pods"]
        s.poll_gpus()  # new nodes and pods since the last poll: mapped and recorded
        assert s.stats.gpu_polls_unchanged == 1, s.stats
        settled = rows()
        for _ in range(3):
            s.step(timeout=0.2)
        assert rows() == settled, s.stats  # applied once: the same states again write nothing
    assert_a_sweep_finds_nothing_to_write(s)


def test_an_unchanged_gpu_poll_decodes_nothing_and_a_changed_gpu_is_picked_up(sim, monkeypatch) -> None:
    """The poll compares Prometheus' answers undecoded: an unchanged one builds no series, and an Xid, ECC
    errors, a GPU gone or another pod on a GPU, with the cluster's nodes and pods unchanged, are recorded."""
    built: list[int] = []

    class Counted(prometheus.Series):
        def __init__(self, *args, **kw) -> None:
            built.append(1)
            super().__init__(*args, **kw)

    monkeypatch.setattr(prometheus, "Series", Counted)
    world = sim.world
    node = world.nodes[sorted(world.nodes)[0]]
    xid, ecc, gone, moved = (node.gpus[i] for i in range(4))
    with session(sim) as s:
        assert s.start()
        built.clear()
        s.poll_gpus()
        assert s.stats.gpu_polls_unchanged == 1 and not built, (s.stats, len(built))

        with sim.lock:  # only the exporter's series change: no Kubernetes event, no apply
            t = world.now
            world.telemetry.set_xid(node.name, xid.index, t, 48)
            world.telemetry.set_ecc(node.name, ecc.index, t, 3, 2)
            world.telemetry.set_present(node.name, gone.index, t, False)
            world.telemetry.set_activity(node.name, moved.index, t, "vision/someone-else", 0.5, 1000)
        # past the inventory query's 2-minute window: the GPU gone has no sample left in it
        sim.advance_to(t + timedelta(minutes=3))
        assert world.gpu_pod_at(node.name, moved.index) == "vision/someone-else"  # the engine left it
        serial = s._pass_serial
        s.poll_gpus()  # no step: the same kept nodes and pods, only Prometheus' answers differ
        assert s._pass_serial == serial and s.stats.gpu_polls_unchanged == 1 and built, s.stats

        def gpu(uuid: str) -> EntityVersion:
            return EntityVersion.objects.get(kind="gpu", entity__name=uuid, valid_to__isnull=True)

        assert (gpu(xid.uuid).state["xid_last"], gpu(xid.uuid).phase) == (48, "faulty")
        assert (gpu(ecc.uuid).state["ecc_dbe_total"], gpu(ecc.uuid).state["ecc_sbe_total"]) == (2, 3)
        assert (gpu(gone.uuid).state["present"], gpu(gone.uuid).phase) == (False, "missing")
        assert gpu(moved.uuid).state["pod"] == "vision/someone-else"
        built.clear()
        s.poll_gpus()  # the changed answers, once recorded, are what the next poll compares with
        assert s.stats.gpu_polls_unchanged == 2 and not built, s.stats
        settle(s, sim)
        s.poll_gpus()
    assert_a_sweep_finds_nothing_to_write(s)


def test_a_changed_gpu_answer_that_cannot_be_decoded_is_a_failed_call_and_writes_nothing(sim, monkeypatch):
    from collectors.sources import promql
    from collectors.sources.errors import SourceError

    def unreadable(self) -> list:
        raise SourceError("prometheus", f"query {self.promql}", "malformed vector sample: 'x'")

    with session(sim) as s:
        assert s.start()
        first = rows()
        monkeypatch.setattr("collectors.sweep.watch.answers_digest", lambda answers: "another answer")
        monkeypatch.setattr(prometheus.Answer, "series", unreadable)
        summary = s.poll_gpus()
        assert summary.errors == [
            f"prometheus: query {promql.GPU_INVENTORY}: malformed vector sample: 'x'"
        ] and summary.skipped_kinds == ["gpu"]
        failed = SourceRun.objects.get(ok=False)
        assert (failed.call, failed.error) == (
            f"query {promql.GPU_INVENTORY}",
            "malformed vector sample: 'x'",
        )
        assert rows() == first and s._gpu_inputs is None  # the next poll maps whatever it gets
        monkeypatch.undo()
        s.poll_gpus()
        assert s.stats.gpu_polls_unchanged == 0 and rows() == first, s.stats


def test_nothing_is_lost_between_the_list_and_the_watch(sim) -> None:
    """Changes made after the listings answered and before the watches opened arrive through the watch."""

    class Late(WatchSession):
        def _start_streams(self) -> None:
            if self.stats.relists == 1 and not getattr(self, "_moved", False):
                self._moved = True
                sim.advance_to(sim.world.now + timedelta(minutes=40))
            super()._start_streams()

    s = Late("gpu-prod", clock=clock(sim), apply_every_s=0, watch_timeout_s=5, lease_s=60, gpu_every_s=3600)
    with s:
        assert s.start()
        settle(s, sim)
        s.poll_gpus()
    assert_a_sweep_finds_nothing_to_write(s)


def test_events_are_listed_with_the_relist_then_watched_and_stored_once(sim) -> None:
    """The session lists the Events as the events sweep does, then watches them: nothing is listed every
    15 s, and an events sweep afterwards finds nothing the watch did not store."""

    def last_event_rv() -> int:
        with sim.store.cond:
            return max((rv for rv, resource, *_rest in sim.store.history if resource == "events"), default=0)

    with session(sim) as s:
        assert s.start()
        listed = KubeEvent.objects.count()
        assert listed > 0 and s.stats.kube_events_new == listed  # stored by the relist
        assert EVENTS in s.kept.rv and EVENTS not in s.kept.items  # watched, not kept
        assert sweep_events("gpu-prod").events_new == 0  # the relist stored what a sweep would
        sim.advance_to(sim.world.now + timedelta(minutes=40))  # jobs start and finish: new events
        steps_until(s, lambda: int(s.kept.rv[EVENTS] or 0) >= last_event_rv() and not s._events, 30)
        assert s.stats.kube_events > 0 and s.stats.kube_events_new > 0, s.stats
        assert KubeEvent.objects.count() == s.stats.kube_events_new > listed
    assert sweep_events("gpu-prod").events_new == 0


def test_bookmarks_move_the_resource_version_without_writing(sim) -> None:
    sim.store.bookmark_interval_s = 0.3
    with session(sim) as s:
        assert s.start()
        first = rows()
        listed = int(s.kept.rv["list nodes"])
        steps_until(s, lambda: s.stats.bookmarks >= len(s.kept.items))
        assert rows() == first and s.stats.events == 0
        # a bookmark carries the server's latest resourceVersion
        assert int(s.kept.rv["list nodes"]) == sim.store.rv >= listed


def test_a_410_relists_that_listing_and_the_watch_goes_on(sim) -> None:
    with session(sim) as s:
        assert s.start()
        sim.store.max_history = 3  # the next burst of changes pushes every open watch out of the history
        sim.advance_to(sim.world.now + timedelta(minutes=40))
        steps_until(s, lambda: s.stats.gone > 0 and s.stats.applies > 0)
        settle(s, sim)
        assert s.stats.relists >= 2  # the first listing, then the listings that were gone
        assert not [e for e in s.stats.errors if "too old" not in e], s.stats.errors
        s.poll_gpus()
        sim.store.max_history = 100_000
        sim.advance_to(sim.world.now + timedelta(minutes=10))  # and the new watches see what comes next
        steps_until(s, lambda: s.stats.events > 0)
        settle(s, sim)
        s.poll_gpus()
    assert_a_sweep_finds_nothing_to_write(s)
    assert not SourceRun.objects.filter(ok=False).exclude(error__contains="too old").exists()


def test_a_second_session_does_not_watch_a_cluster_that_is_watched(sim) -> None:
    with session(sim) as first:
        assert first.start()
        second = session(sim)
        assert not second.start()
        assert second.run(1.0).errors == ["another worker watches this cluster"]
    third = session(sim)
    try:
        assert third.start()  # released: the next one may
    finally:
        third.stop()


def test_the_kept_listings_answer_in_list_order_and_name_a_missing_api() -> None:
    kept = Kept()
    kept.items["list pods"] = {("b", "x"): keepable({"metadata": {"namespace": "b", "name": "x"}})}
    kept.apply(
        "list pods",
        {"type": "ADDED", "object": {"metadata": {"namespace": "a", "name": "y", "resourceVersion": "7"}}},
    )
    kept.absent.add("list cohorts.kueue.x-k8s.io/v1alpha1")
    cached = CachedKube(kept)
    assert [p["metadata"]["name"] for p in cached.iter_pods()] == ["y", "x"] and kept.rv["list pods"] == "7"
    assert kept.apply(
        "list pods", {"type": "DELETED", "object": {"metadata": {"namespace": "a", "name": "y"}}}
    )
    assert not kept.apply("list pods", {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}})
    assert kept.rv["list pods"] == "9"
    with pytest.raises(Exception) as err:
        cached.list_custom("kueue.x-k8s.io", "v1alpha1", "cohorts")
    assert getattr(err.value, "status", None) == 404
    with pytest.raises(Exception, match="its listing failed"):
        cached.list_nodes()


def test_a_process_local_lease_is_exclusive_until_released(settings) -> None:
    settings.REDIS_URL = ""
    a, b = Lease("c1", 5), Lease("c1", 5)
    assert a.acquire() and not b.acquire() and a.renew()
    a.release()
    assert b.acquire() and not a.renew()
    b.release()


def test_kept_objects_drop_only_what_no_mapper_reads() -> None:
    from collectors import mapping

    pod: dict[str, Any] = {
        "metadata": {
            "namespace": "nlp",
            "name": "p",
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "time": "2026-11-29T00:01:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:containers": {}}},
                },
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "subresource": "status",
                    "time": "2026-11-29T00:02:00Z",
                    "fieldsV1": {"f:status": {}},
                },
            ],
        },
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running"},
    }
    kept: dict[str, Any] = orjson.loads(keepable(pod))
    assert all("fieldsV1" not in e for e in kept["metadata"]["managedFields"])
    assert "fieldsV1" in pod["metadata"]["managedFields"][0]  # the listed object itself is left alone
    assert mapping.map_pod(kept).state == mapping.map_pod(pod).state
    assert (mapping.map_pod(kept).actor, mapping.map_pod(kept).creator) == (
        "kubelet",
        "kube-controller-manager",
    )
